//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them (KIP-84): the
//! credential a server stores, the server's two steps, and the client's.
//!
//! The cryptography is RustCrypto's (`sha2`, `hmac`, `pbkdf2`); this module only composes it as
//! the RFC says (SaltedPassword = Hi(password, salt, i), ClientKey = HMAC(SaltedPassword,
//! "Client Key"), StoredKey = H(ClientKey), ServerKey = HMAC(SaltedPassword, "Server Key")) and
//! parses the messages. A server stores salt, iterations, StoredKey and ServerKey: enough to
//! check a client's proof and to prove itself, never the password nor anything that logs in.

use super::AuthError;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{EagerHash, Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// Kafka's bounds on iterations (AlterUserScramCredentials refuses others).
pub const MIN_ITERATIONS: u32 = 4096;
pub const MAX_ITERATIONS: u32 = 16384;
/// What `isr user add` uses unless told otherwise.
pub const DEFAULT_ITERATIONS: u32 = 8192;
/// Bytes of random salt for a new credential, and of a server's nonce.
const SALT_BYTES: usize = 24;
const NONCE_BYTES: usize = 24;

/// A SCRAM mechanism Kafka knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Mechanism {
    Sha256,
    Sha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha512];

    /// The SASL name: `SCRAM-SHA-256`, `SCRAM-SHA-512`.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha256 => "SCRAM-SHA-256",
            Mechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism of a SASL name (any letter case).
    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// Kafka's ScramMechanism code (DescribeUserScramCredentials, AlterUserScramCredentials).
    pub fn code(self) -> i8 {
        match self {
            Mechanism::Sha256 => 1,
            Mechanism::Sha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.code() == code)
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => hmac::<Sha256>(key, data),
            Mechanism::Sha512 => hmac::<Sha512>(key, data),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
            Mechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// Hi(password, salt, iterations): PBKDF2 with this mechanism's HMAC, one hash long.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => {
                let mut out = vec![0; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            Mechanism::Sha512 => {
                let mut out = vec![0; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }

    fn client_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac(salted_password, b"Client Key")
    }
}

fn hmac<D: EagerHash>(key: &[u8], data: &[u8]) -> Vec<u8>
where
    Hmac<D>: KeyInit + Mac,
{
    // HMAC takes keys of any length (longer ones are hashed), so this cannot fail.
    let mut mac = <Hmac<D> as KeyInit>::new_from_slice(key).expect("HMAC accepts any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// What a server keeps of a user's password for one mechanism.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

/// Never prints the keys: metadata is logged at debug level.
impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// The credential of a salted password (what AlterUserScramCredentials carries: the client
    /// salts and iterates, so the password never reaches the broker).
    pub fn from_salted_password(
        mechanism: Mechanism,
        salted_password: &[u8],
        salt: Vec<u8>,
        iterations: u32,
    ) -> ScramCredential {
        let client_key = mechanism.client_key(salted_password);
        ScramCredential {
            salt,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// A new credential for `password` with a random salt.
    pub fn from_password(
        mechanism: Mechanism,
        password: &str,
        iterations: u32,
    ) -> Result<ScramCredential, AuthError> {
        let salt = super::random_bytes(SALT_BYTES)?;
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        Ok(ScramCredential::from_salted_password(
            mechanism, &salted, salt, iterations,
        ))
    }

    /// Whether `password` is the one this credential was made from (SASL/PLAIN logins are
    /// checked against the SCRAM credential: isr stores nothing else). Constant time in the
    /// comparison.
    pub fn verify_password(&self, mechanism: Mechanism, password: &str) -> bool {
        let salted = mechanism.salted_password(password.as_bytes(), &self.salt, self.iterations);
        let stored = mechanism.hash(&mechanism.client_key(&salted));
        bool::from(stored.ct_eq(&self.stored_key))
    }
}

/// The server between its first message and the client's final one.
pub struct ServerFirst {
    mechanism: Mechanism,
    user: String,
    /// `None` for a user without a credential for this mechanism: the exchange goes on with a
    /// made-up salt and fails at the proof, so that a client cannot tell unknown users from
    /// wrong passwords.
    credential: Option<ScramCredential>,
    gs2_header: String,
    nonce: String,
    client_first_bare: String,
    server_first: String,
}

/// Answers a client-first message: `server-first`, and the state for the final step.
/// `credential_of` looks the user up; `decoy_salt` makes the salt shown for an unknown user
/// (stable per user, so probing twice reveals nothing either).
pub fn server_first(
    mechanism: Mechanism,
    client_first: &[u8],
    credential_of: impl FnOnce(&str) -> Option<ScramCredential>,
    decoy_salt: impl FnOnce(&str) -> Vec<u8>,
) -> Result<(ServerFirst, Vec<u8>), AuthError> {
    let nonce = B64.encode(super::random_bytes(NONCE_BYTES)?);
    server_first_with_nonce(mechanism, client_first, credential_of, decoy_salt, &nonce)
}

fn server_first_with_nonce(
    mechanism: Mechanism,
    client_first: &[u8],
    credential_of: impl FnOnce(&str) -> Option<ScramCredential>,
    decoy_salt: impl FnOnce(&str) -> Vec<u8>,
    server_nonce: &str,
) -> Result<(ServerFirst, Vec<u8>), AuthError> {
    let text = std::str::from_utf8(client_first)
        .map_err(|_| AuthError::Malformed("client-first message is not UTF-8".into()))?;
    let (gs2_header, bare) = split_gs2_header(text)?;
    let mut fields = bare.split(',');
    let user = match fields.next() {
        Some(f) if f.starts_with("m=") => {
            return Err(AuthError::Malformed(
                "mandatory SCRAM extensions are not supported".into(),
            ))
        }
        Some(f) => decode_name(attribute(f, 'n')?)?,
        None => return Err(AuthError::Malformed("no user name".into())),
    };
    let client_nonce = attribute(fields.next().unwrap_or(""), 'r')?;
    if client_nonce.is_empty()
        || !client_nonce
            .chars()
            .all(|c| c.is_ascii_graphic() && c != ',')
    {
        return Err(AuthError::Malformed("invalid client nonce".into()));
    }
    // Extensions (Kafka's tokenauth among them) are ignored: delegation tokens do not exist here.
    if let Some(authzid) = gs2_header
        .split(',')
        .nth(1)
        .and_then(|a| a.strip_prefix("a="))
    {
        if decode_name(authzid)? != user {
            return Err(AuthError::Malformed(
                "the authorization id differs from the user name".into(),
            ));
        }
    }
    let credential = credential_of(&user);
    let (salt, iterations) = match &credential {
        Some(c) => (c.salt.clone(), c.iterations),
        None => (decoy_salt(&user), DEFAULT_ITERATIONS),
    };
    let nonce = format!("{client_nonce}{server_nonce}");
    let server_first = format!("r={nonce},s={},i={iterations}", B64.encode(salt));
    let message = server_first.clone().into_bytes();
    Ok((
        ServerFirst {
            mechanism,
            user,
            credential,
            gs2_header: gs2_header.to_owned(),
            nonce,
            client_first_bare: bare.to_owned(),
            server_first,
        },
        message,
    ))
}

impl ServerFirst {
    /// The user the client claims to be (not yet proven).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Checks the client's proof: the authenticated user and `server-final`, or
    /// [`AuthError::BadCredentials`].
    pub fn finish(self, client_final: &[u8]) -> Result<(String, Vec<u8>), AuthError> {
        let text = std::str::from_utf8(client_final)
            .map_err(|_| AuthError::Malformed("client-final message is not UTF-8".into()))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or_else(|| AuthError::Malformed("client-final message without proof".into()))?;
        let mut fields = without_proof.split(',');
        let binding = B64
            .decode(attribute(fields.next().unwrap_or(""), 'c')?)
            .map_err(|_| AuthError::Malformed("channel binding is not base64".into()))?;
        if binding != self.gs2_header.as_bytes() {
            return Err(AuthError::Malformed(
                "channel binding differs from the first message".into(),
            ));
        }
        // The RFC echoes the server's nonce exactly; librdkafka sends the client nonce and then
        // the server's whole nonce (which starts with the client's again). Kafka accepts any
        // nonce that ends with its own, and so does this: the proof is computed over the nonce
        // as sent, which still carries the server's fresh part, so no replay gets through.
        if !attribute(fields.next().unwrap_or(""), 'r')?.ends_with(&self.nonce) {
            return Err(AuthError::Malformed(
                "nonce differs from the server's".into(),
            ));
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| AuthError::Malformed("proof is not base64".into()))?;
        let Some(credential) = self.credential else {
            return Err(AuthError::BadCredentials);
        };
        let m = self.mechanism;
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, self.server_first
        );
        let signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(AuthError::BadCredentials);
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        if !bool::from(m.hash(&client_key).ct_eq(&credential.stored_key)) {
            return Err(AuthError::BadCredentials);
        }
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        let server_final = format!("v={}", B64.encode(server_signature));
        Ok((self.user, server_final.into_bytes()))
    }
}

/// The client's side of one exchange.
pub struct ScramClient {
    mechanism: Mechanism,
    password: String,
    nonce: String,
    client_first_bare: String,
}

/// What the client expects the server to prove in `server-final`.
pub struct ScramClientFinal {
    mechanism: Mechanism,
    server_signature: Vec<u8>,
}

impl ScramClient {
    /// Starts an exchange: the client and its `client-first` message.
    pub fn start(
        mechanism: Mechanism,
        user: &str,
        password: &str,
    ) -> Result<(ScramClient, Vec<u8>), AuthError> {
        let nonce = B64.encode(super::random_bytes(NONCE_BYTES)?);
        Ok(ScramClient::start_with_nonce(
            mechanism, user, password, &nonce,
        ))
    }

    fn start_with_nonce(
        mechanism: Mechanism,
        user: &str,
        password: &str,
        nonce: &str,
    ) -> (ScramClient, Vec<u8>) {
        let client_first_bare = format!("n={},r={nonce}", encode_name(user));
        let message = format!("n,,{client_first_bare}").into_bytes();
        (
            ScramClient {
                mechanism,
                password: password.to_owned(),
                nonce: nonce.to_owned(),
                client_first_bare,
            },
            message,
        )
    }

    /// Answers `server-first` with `client-final`. Refuses a server that does not extend our
    /// nonce or asks for fewer than [`MIN_ITERATIONS`] (a downgrade that makes an intercepted
    /// exchange cheap to attack).
    pub fn respond(self, server_first: &[u8]) -> Result<(ScramClientFinal, Vec<u8>), AuthError> {
        let text = std::str::from_utf8(server_first)
            .map_err(|_| AuthError::Malformed("server-first message is not UTF-8".into()))?;
        let mut fields = text.split(',');
        let nonce = attribute(fields.next().unwrap_or(""), 'r')?;
        let salt = B64
            .decode(attribute(fields.next().unwrap_or(""), 's')?)
            .map_err(|_| AuthError::Malformed("salt is not base64".into()))?;
        let iterations: u32 = attribute(fields.next().unwrap_or(""), 'i')?
            .parse()
            .map_err(|_| AuthError::Malformed("iteration count is not a number".into()))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(AuthError::Malformed(
                "the server's nonce does not extend ours".into(),
            ));
        }
        if iterations < MIN_ITERATIONS {
            return Err(AuthError::Malformed(format!(
                "the server asks for {iterations} iterations, fewer than {MIN_ITERATIONS}"
            )));
        }
        let m = self.mechanism;
        let salted = m.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = m.client_key(&salted);
        let without_proof = format!("c={},r={nonce}", B64.encode("n,,"));
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = m.hmac(&m.hash(&client_key), auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = m.hmac(&salted, b"Server Key");
        let message = format!("{without_proof},p={}", B64.encode(proof));
        Ok((
            ScramClientFinal {
                mechanism: m,
                server_signature: m.hmac(&server_key, auth_message.as_bytes()),
            },
            message.into_bytes(),
        ))
    }
}

impl ScramClientFinal {
    /// Checks the server's proof that it knows the credential (a server that does not could
    /// only pretend to be the broker).
    pub fn verify(self, server_final: &[u8]) -> Result<(), AuthError> {
        let text = std::str::from_utf8(server_final)
            .map_err(|_| AuthError::Malformed("server-final message is not UTF-8".into()))?;
        if let Some(error) = text.strip_prefix("e=") {
            return Err(AuthError::Malformed(format!("the server says {error}")));
        }
        let signature = B64
            .decode(attribute(text, 'v')?)
            .map_err(|_| AuthError::Malformed("server signature is not base64".into()))?;
        if bool::from(signature.ct_eq(&self.server_signature)) {
            Ok(())
        } else {
            Err(AuthError::Malformed(format!(
                "the server's {} signature is wrong: it does not hold this user's credential",
                self.mechanism.name()
            )))
        }
    }
}

/// Splits `gs2-header` (`n,,` or `y,,` or with `a=authzid`) from `client-first-bare`. Channel
/// binding (`p=`) is refused: Kafka clients never ask for it.
fn split_gs2_header(text: &str) -> Result<(&str, &str), AuthError> {
    let malformed = || AuthError::Malformed("invalid GS2 header".into());
    let flag_end = text.find(',').ok_or_else(malformed)?;
    match &text[..flag_end] {
        "n" | "y" => {}
        f if f.starts_with("p=") => {
            return Err(AuthError::Malformed(
                "channel binding is not supported".into(),
            ))
        }
        _ => return Err(malformed()),
    }
    let authzid_end = text[flag_end + 1..].find(',').ok_or_else(malformed)? + flag_end + 1;
    let authzid = &text[flag_end + 1..authzid_end];
    if !authzid.is_empty() && !authzid.starts_with("a=") {
        return Err(malformed());
    }
    Ok((&text[..=authzid_end], &text[authzid_end + 1..]))
}

/// The value of `key=value`, or a clear error naming the attribute expected.
fn attribute(field: &str, key: char) -> Result<&str, AuthError> {
    field
        .strip_prefix(key)
        .and_then(|rest| rest.strip_prefix('='))
        .ok_or_else(|| AuthError::Malformed(format!("expected the {key}= attribute")))
}

/// A SCRAM `saslname`: `,` and `=` are written `=2C` and `=3D`.
fn encode_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

fn decode_name(name: &str) -> Result<String, AuthError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(AuthError::Malformed("invalid escape in user name".into())),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(AuthError::Malformed("empty user name".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677, section 3: the SCRAM-SHA-256 example exchange, byte for byte.
    #[test]
    fn rfc7677_example_exchange() {
        let client_nonce = "rOprNGfwEbeRWgbNEkqO";
        let (client, first) =
            ScramClient::start_with_nonce(Mechanism::Sha256, "user", "pencil", client_nonce);
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
        let salted = Mechanism::Sha256.salted_password(b"pencil", &salt, 4096);
        let credential =
            ScramCredential::from_salted_password(Mechanism::Sha256, &salted, salt, 4096);
        let (server, server_first) = server_first_with_nonce(
            Mechanism::Sha256,
            &first,
            |user| (user == "user").then(|| credential.clone()),
            |_| Vec::new(),
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        )
        .expect("server-first");
        assert_eq!(
            server_first,
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let (expect, client_final) = client.respond(&server_first).expect("client-final");
        assert_eq!(
            client_final,
            &b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
               p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="[..]
        );
        let (user, server_final) = server.finish(&client_final).expect("authenticated");
        assert_eq!(user, "user");
        assert_eq!(
            server_final,
            b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        expect
            .verify(&server_final)
            .expect("the server proves itself");
        assert!(credential.verify_password(Mechanism::Sha256, "pencil"));
        assert!(!credential.verify_password(Mechanism::Sha256, "pencils"));
    }

    fn exchange(
        mechanism: Mechanism,
        stored: &ScramCredential,
        user: &str,
        password: &str,
    ) -> Result<String, AuthError> {
        let (client, first) = ScramClient::start(mechanism, user, password)?;
        let (server, server_first) = server_first(
            mechanism,
            &first,
            |u| (u == "alice,=x").then(|| stored.clone()),
            |u| u.as_bytes().to_vec(),
        )?;
        let (expect, client_final) = client.respond(&server_first)?;
        let (user, server_final) = server.finish(&client_final)?;
        expect.verify(&server_final)?;
        Ok(user)
    }

    #[test]
    fn sha512_logs_in_with_the_password_only() {
        let m = Mechanism::Sha512;
        let stored = ScramCredential::from_password(m, "s3cret", MIN_ITERATIONS).expect("cred");
        assert_eq!(stored.stored_key.len(), 64);
        assert_eq!(
            exchange(m, &stored, "alice,=x", "s3cret").expect("login"),
            "alice,=x",
            "names with , and = survive the escaping"
        );
        assert!(matches!(
            exchange(m, &stored, "alice,=x", "s3cret!"),
            Err(AuthError::BadCredentials)
        ));
        assert!(matches!(
            exchange(m, &stored, "mallory", "s3cret"),
            Err(AuthError::BadCredentials)
        ));
        let other = ScramCredential::from_password(m, "s3cret", MIN_ITERATIONS).expect("cred");
        assert_ne!(
            other.salt, stored.salt,
            "every credential gets its own salt"
        );
        assert_ne!(other.stored_key, stored.stored_key);
    }

    #[test]
    fn malformed_messages_are_refused_with_a_reason() {
        let any = |_: &str| None;
        let decoy = |_: &str| vec![1, 2, 3];
        for bad in [
            &b""[..],
            b"n,,",
            b"x,,n=a,r=b",
            b"p=tls-unique,,n=a,r=b",
            b"n,,m=ext,n=a,r=b",
            b"n,,n=a=ZZ,r=b",
            b"n,,n=,r=b",
            b"n,,n=a",
            b"n,a=b,n=a,r=x",
            b"\xff,,n=a,r=b",
        ] {
            assert!(
                matches!(
                    server_first(Mechanism::Sha256, bad, any, decoy),
                    Err(AuthError::Malformed(_))
                ),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let (server, _) =
            server_first(Mechanism::Sha256, b"n,,n=a,r=abc", any, decoy).expect("first");
        assert!(matches!(
            server.finish(b"c=biws,r=abc,p=AAAA"),
            Err(AuthError::Malformed(_))
        ));
        let (client, _) = ScramClient::start(Mechanism::Sha256, "a", "b").expect("start");
        assert!(matches!(
            client.respond(b"r=other,s=AAAA,i=4096"),
            Err(AuthError::Malformed(_))
        ));
    }

    #[test]
    fn a_client_refuses_few_iterations() {
        let (client, first) = ScramClient::start_with_nonce(Mechanism::Sha256, "a", "b", "nonce");
        assert_eq!(first, b"n,,n=a,r=nonce");
        let err = client
            .respond(b"r=nonceMORE,s=AAAA,i=1")
            .err()
            .expect("refused");
        assert!(err.to_string().contains("iterations"), "{err}");
    }
}
