//! Who a Kafka client is and what it may do: listeners' security protocols, SASL (PLAIN and
//! SCRAM), users' credentials, ACLs, and the slowing down of repeated failed logins.
//!
//! The cluster's users and ACLs are a [`SecurityState`], kept in the controller's metadata and
//! pushed to every broker; changes travel as [`SecurityChange`]s, which the controller applies
//! with [`SecurityState::apply`].

pub mod acl;
pub mod sasl;
pub mod scram;
pub mod throttle;
pub mod tls;

use acl::{Acl, AclFilter};
use scram::{Mechanism, ScramCredential};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Why a login failed or a credential could not be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The user is unknown or the password wrong: deliberately one error.
    #[error("invalid credentials")]
    BadCredentials,
    #[error("malformed SASL message: {0}")]
    Malformed(String),
    #[error("no randomness from the operating system: {0}")]
    Random(String),
}

/// Bytes from the operating system's CSPRNG.
pub fn random_bytes(n: usize) -> Result<Vec<u8>, AuthError> {
    let mut out = vec![0; n];
    getrandom::fill(&mut out).map_err(|e| AuthError::Random(e.to_string()))?;
    Ok(out)
}

/// A password of `bytes` random bytes, as URL-safe base64 text (for generated admin users).
pub fn random_password(bytes: usize) -> Result<String, AuthError> {
    use base64::Engine;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes(bytes)?))
}

/// A listener's security protocol, Kafka's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The protocol of a name, in any letter case (`sasl_ssl`, `SASL_SSL`; `sasl-ssl` too).
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        let name = name.replace('-', "_");
        SecurityProtocol::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(&name))
    }

    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl std::fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The principal of a connection that did not authenticate (PLAINTEXT, or SSL without a
/// client certificate), as Kafka names it.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// The principal of a user name: `User:NAME`.
pub fn user_principal(name: &str) -> String {
    format!("User:{name}")
}

/// The cluster's users and ACLs: part of the controller's metadata, pushed to every broker.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityState {
    /// Each user's SCRAM credentials, by mechanism.
    pub users: BTreeMap<String, BTreeMap<Mechanism, ScramCredential>>,
    pub acls: BTreeSet<Acl>,
}

/// A change to the users or ACLs, validated by the broker's Kafka layer and applied by the
/// controller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SecurityChange {
    /// AlterUserScramCredentials: credentials to set, and to remove.
    AlterScram {
        upserts: Vec<(String, Mechanism, ScramCredential)>,
        deletions: Vec<(String, Mechanism)>,
    },
    CreateAcls(Vec<Acl>),
    /// Each filter removes every ACL it matches.
    DeleteAcls(Vec<AclFilter>),
}

/// What applying a [`SecurityChange`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SecurityAnswer {
    /// Per user of an AlterScram, in request order: applied, or why not (a deletion of a
    /// credential that does not exist). A user's changes apply all or none.
    Scram(Vec<(String, Result<(), String>)>),
    Created,
    /// Per filter, the ACLs it removed.
    Deleted(Vec<Vec<Acl>>),
}

impl SecurityState {
    /// Applies `change`. A user whose deletions name a missing credential keeps all of its
    /// credentials (Kafka's RESOURCE_NOT_FOUND); other users' changes still apply.
    pub fn apply(&mut self, change: SecurityChange) -> SecurityAnswer {
        match change {
            SecurityChange::AlterScram { upserts, deletions } => {
                let mut order: Vec<String> = Vec::new();
                for name in deletions
                    .iter()
                    .map(|(u, _)| u)
                    .chain(upserts.iter().map(|(u, _, _)| u))
                {
                    if !order.contains(name) {
                        order.push(name.clone());
                    }
                }
                let results = order
                    .into_iter()
                    .map(|user| {
                        let result = self.alter_user(&user, &upserts, &deletions);
                        (user, result)
                    })
                    .collect();
                SecurityAnswer::Scram(results)
            }
            SecurityChange::CreateAcls(acls) => {
                self.acls.extend(acls);
                SecurityAnswer::Created
            }
            SecurityChange::DeleteAcls(filters) => {
                let deleted = filters
                    .iter()
                    .map(|filter| {
                        let matched: Vec<Acl> = self
                            .acls
                            .iter()
                            .filter(|acl| filter.matches(acl))
                            .cloned()
                            .collect();
                        for acl in &matched {
                            self.acls.remove(acl);
                        }
                        matched
                    })
                    .collect();
                SecurityAnswer::Deleted(deleted)
            }
        }
    }

    fn alter_user(
        &mut self,
        user: &str,
        upserts: &[(String, Mechanism, ScramCredential)],
        deletions: &[(String, Mechanism)],
    ) -> Result<(), String> {
        let mut credentials = self.users.get(user).cloned().unwrap_or_default();
        for (_, mechanism) in deletions.iter().filter(|(u, _)| u == user) {
            if credentials.remove(mechanism).is_none() {
                return Err(format!(
                    "user {user} has no {} credential",
                    mechanism.name()
                ));
            }
        }
        for (_, mechanism, credential) in upserts.iter().filter(|(u, _, _)| u == user) {
            credentials.insert(*mechanism, credential.clone());
        }
        if credentials.is_empty() {
            self.users.remove(user);
        } else {
            self.users.insert(user.to_owned(), credentials);
        }
        Ok(())
    }

    /// The state without credentials: what is shown to anyone but a broker.
    pub fn without_credentials(&self) -> SecurityState {
        SecurityState {
            users: BTreeMap::new(),
            acls: self.acls.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::acl::{Operation, PatternFilter, PatternType, Permission, ResourceType};
    use super::*;

    fn credential() -> ScramCredential {
        ScramCredential::from_password(Mechanism::Sha256, "pw", scram::MIN_ITERATIONS)
            .expect("credential")
    }

    #[test]
    fn users_change_all_or_nothing_and_acls_are_deleted_by_filter() {
        let mut state = SecurityState::default();
        let answer = state.apply(SecurityChange::AlterScram {
            upserts: vec![
                ("alice".into(), Mechanism::Sha256, credential()),
                ("bob".into(), Mechanism::Sha512, credential()),
            ],
            deletions: vec![],
        });
        assert_eq!(
            answer,
            SecurityAnswer::Scram(vec![("alice".into(), Ok(())), ("bob".into(), Ok(()))])
        );
        // Deleting a credential bob lacks refuses bob's whole change, not alice's.
        let answer = state.apply(SecurityChange::AlterScram {
            upserts: vec![("bob".into(), Mechanism::Sha256, credential())],
            deletions: vec![
                ("bob".into(), Mechanism::Sha256),
                ("alice".into(), Mechanism::Sha256),
            ],
        });
        let SecurityAnswer::Scram(results) = answer else {
            panic!("scram answer");
        };
        assert!(results[0].1.is_err() && results[1].1.is_ok(), "{results:?}");
        assert_eq!(state.users.keys().collect::<Vec<_>>(), ["bob"]);
        assert_eq!(state.users["bob"].len(), 1);

        let acl = |name: &str, op| Acl {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern: PatternType::Literal,
            principal: "User:bob".into(),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        };
        state.apply(SecurityChange::CreateAcls(vec![
            acl("orders", Operation::Read),
            acl("orders", Operation::Write),
            acl("payments", Operation::Read),
        ]));
        let filter = AclFilter {
            resource_name: Some("orders".into()),
            pattern: PatternFilter::Literal,
            ..AclFilter::any()
        };
        let SecurityAnswer::Deleted(deleted) =
            state.apply(SecurityChange::DeleteAcls(vec![filter]))
        else {
            panic!("deleted answer");
        };
        assert_eq!(deleted[0].len(), 2);
        assert_eq!(state.acls.len(), 1);
        assert!(state.without_credentials().users.is_empty());
    }

    #[test]
    fn protocol_names_parse_in_any_case() {
        assert_eq!(
            SecurityProtocol::from_name("sasl-ssl"),
            Some(SecurityProtocol::SaslSsl)
        );
        assert_eq!(
            SecurityProtocol::from_name("PLAINTEXT"),
            Some(SecurityProtocol::Plaintext)
        );
        assert_eq!(SecurityProtocol::from_name("tls"), None);
        assert!(SecurityProtocol::SaslSsl.tls() && SecurityProtocol::SaslSsl.sasl());
    }
}
