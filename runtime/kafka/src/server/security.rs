//! DescribeAcls, CreateAcls, DeleteAcls, DescribeUserScramCredentials and
//! AlterUserScramCredentials: the cluster's ACLs and users, kept by the controller.
//!
//! Describing takes Describe on the cluster, changing takes Alter on it. The ACL APIs answer
//! SECURITY_DISABLED on a broker without ACLs enabled, as Kafka's do without an authorizer.
//! Users' credentials arrive salted and iterated by the client (the password never travels);
//! describing them shows only mechanisms and iteration counts.

use crate::auth::acl::{
    Acl, AclFilter, Operation, PatternFilter, PatternType, Permission, ResourceType, CLUSTER_NAME,
};
use crate::auth::scram::{Mechanism, ScramCredential, MAX_ITERATIONS, MIN_ITERATIONS};
use crate::auth::{SecurityAnswer, SecurityChange};
use crate::backend::{Backend, BackendError};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, CreateAclsRequest,
    CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, BTreeSet};

/// The filter code that means "any" for resource types, operations and permissions.
const ANY: i8 = 1;
const INVALID_REQUEST: i16 = 42;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const RESOURCE_NOT_FOUND: i16 = 91;
const DUPLICATE_RESOURCE: i16 = 92;
const UNACCEPTABLE_CREDENTIAL: i16 = 93;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// `Ok` if ACLs are enabled and the caller may do `op` on the cluster.
fn acl_admin<B: Backend>(backend: &B, op: Operation) -> Result<(), BackendError> {
    if !backend.authorizer().enabled {
        return Err(BackendError::SecurityDisabled(
            "ACLs are not enabled on this broker (start it with --acls)".into(),
        ));
    }
    backend.authorize(op, ResourceType::Cluster, CLUSTER_NAME)
}

/// A filter's optional code: `ANY` is `None`, a known code `Some`, anything else an error.
fn optional<T>(code: i8, parse: fn(i8) -> Option<T>, what: &str) -> Result<Option<T>, String> {
    if code == ANY {
        return Ok(None);
    }
    parse(code)
        .map(Some)
        .ok_or_else(|| format!("unknown {what} code {code}"))
}

#[allow(clippy::too_many_arguments)]
fn filter(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<AclFilter, String> {
    Ok(AclFilter {
        resource_type: optional(resource_type, ResourceType::from_code, "resource type")?,
        resource_name: name.map(|n| n.as_str().to_owned()),
        pattern: PatternFilter::from_code(pattern)
            .ok_or_else(|| format!("unknown pattern type code {pattern}"))?,
        principal: principal.map(|p| p.as_str().to_owned()),
        host: host.map(|h| h.as_str().to_owned()),
        operation: optional(operation, Operation::from_code, "operation")?,
        permission: optional(permission, Permission::from_code, "permission")?,
    })
}

pub async fn describe_acls<B: Backend>(
    backend: &B,
    request: DescribeAclsRequest,
) -> DescribeAclsResponse {
    let refused = |code: i16, message: String| {
        DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(Some(text(&message)))
    };
    if let Err(e) = acl_admin(backend, Operation::Describe) {
        return refused(e.code(), e.detail());
    }
    let wanted = match filter(
        request.resource_type_filter,
        request.resource_name_filter.as_ref(),
        request.pattern_type_filter,
        request.principal_filter.as_ref(),
        request.host_filter.as_ref(),
        request.operation,
        request.permission_type,
    ) {
        Ok(f) => f,
        Err(why) => return refused(INVALID_REQUEST, why),
    };
    let state = backend.authorizer().state;
    let mut resources: BTreeMap<(ResourceType, &str, PatternType), Vec<AclDescription>> =
        BTreeMap::new();
    for acl in state.acls.iter().filter(|a| wanted.matches(a)) {
        resources
            .entry((acl.resource_type, &acl.resource_name, acl.pattern))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(text(&acl.principal))
                    .with_host(text(&acl.host))
                    .with_operation(acl.operation.code())
                    .with_permission_type(acl.permission.code()),
            );
    }
    DescribeAclsResponse::default().with_resources(
        resources
            .into_iter()
            .map(|((kind, name, pattern), acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(kind.code())
                    .with_resource_name(text(name))
                    .with_pattern_type(pattern.code())
                    .with_acls(acls)
            })
            .collect(),
    )
}

pub async fn create_acls<B: Backend>(
    backend: &B,
    request: CreateAclsRequest,
) -> CreateAclsResponse {
    let answer = |code: i16, message: Option<String>| {
        AclCreationResult::default()
            .with_error_code(code)
            .with_error_message(message.map(|m| text(&m)))
    };
    if let Err(e) = acl_admin(backend, Operation::Alter) {
        let results = request
            .creations
            .iter()
            .map(|_| answer(e.code(), Some(e.detail())))
            .collect();
        return CreateAclsResponse::default().with_results(results);
    }
    let parsed: Vec<Result<Acl, String>> = request
        .creations
        .iter()
        .map(|c| {
            let acl = Acl {
                resource_type: ResourceType::from_code(c.resource_type)
                    .ok_or_else(|| format!("unknown resource type code {}", c.resource_type))?,
                resource_name: c.resource_name.as_str().to_owned(),
                pattern: PatternType::from_code(c.resource_pattern_type).ok_or_else(|| {
                    format!(
                        "pattern type code {}: an ACL is literal (3) or prefixed (4)",
                        c.resource_pattern_type
                    )
                })?,
                principal: c.principal.as_str().to_owned(),
                host: c.host.as_str().to_owned(),
                operation: Operation::from_code(c.operation).ok_or_else(|| {
                    format!(
                        "operation code {}: one of {}",
                        c.operation,
                        Operation::names()
                    )
                })?,
                permission: Permission::from_code(c.permission_type).ok_or_else(|| {
                    format!(
                        "permission code {}: deny (2) or allow (3)",
                        c.permission_type
                    )
                })?,
            };
            acl.validate().map(|()| acl)
        })
        .collect();
    let valid: Vec<Acl> = parsed.iter().filter_map(|p| p.clone().ok()).collect();
    let outcome = if valid.is_empty() {
        Ok(SecurityAnswer::Created)
    } else {
        backend
            .alter_security(SecurityChange::CreateAcls(valid))
            .await
    };
    let results = parsed
        .into_iter()
        .map(|p| match (p, &outcome) {
            (Err(why), _) => answer(INVALID_REQUEST, Some(why)),
            (Ok(_), Ok(_)) => answer(0, None),
            (Ok(_), Err(e)) => answer(e.code(), Some(e.detail())),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

pub async fn delete_acls<B: Backend>(
    backend: &B,
    request: DeleteAclsRequest,
) -> DeleteAclsResponse {
    let answer = |code: i16, message: String| {
        DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(Some(text(&message)))
    };
    if let Err(e) = acl_admin(backend, Operation::Alter) {
        let results = request
            .filters
            .iter()
            .map(|_| answer(e.code(), e.detail()))
            .collect();
        return DeleteAclsResponse::default().with_filter_results(results);
    }
    let parsed: Vec<Result<AclFilter, String>> = request
        .filters
        .iter()
        .map(|f| {
            filter(
                f.resource_type_filter,
                f.resource_name_filter.as_ref(),
                f.pattern_type_filter,
                f.principal_filter.as_ref(),
                f.host_filter.as_ref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclFilter> = parsed.iter().filter_map(|p| p.clone().ok()).collect();
    let outcome = match backend
        .alter_security(SecurityChange::DeleteAcls(valid))
        .await
    {
        Ok(SecurityAnswer::Deleted(deleted)) => Ok(deleted),
        Ok(other) => Err(BackendError::Internal(format!(
            "unexpected answer to DeleteAcls: {other:?}"
        ))),
        Err(e) => Err(e),
    };
    let mut deleted = outcome
        .as_ref()
        .ok()
        .cloned()
        .unwrap_or_default()
        .into_iter();
    let results = parsed
        .into_iter()
        .map(|p| match (p, &outcome) {
            (Err(why), _) => answer(INVALID_REQUEST, why),
            (Ok(_), Err(e)) => answer(e.code(), e.detail()),
            (Ok(_), Ok(_)) => DeleteAclsFilterResult::default().with_matching_acls(
                deleted
                    .next()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|acl| {
                        DeleteAclsMatchingAcl::default()
                            .with_resource_type(acl.resource_type.code())
                            .with_resource_name(text(&acl.resource_name))
                            .with_pattern_type(acl.pattern.code())
                            .with_principal(text(&acl.principal))
                            .with_host(text(&acl.host))
                            .with_operation(acl.operation.code())
                            .with_permission_type(acl.permission.code())
                    })
                    .collect(),
            ),
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}

pub async fn describe_user_scram_credentials<B: Backend>(
    backend: &B,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let answer = DescribeUserScramCredentialsResponse::default();
    if let Err(e) = backend.authorize(Operation::Describe, ResourceType::Cluster, CLUSTER_NAME) {
        return answer
            .with_error_code(e.code())
            .with_error_message(Some(text(&e.detail())));
    }
    let state = backend.authorizer().state;
    let described = |user: &str| {
        let result = DescribeUserScramCredentialsResult::default().with_user(text(user));
        match state.users.get(user) {
            Some(credentials) => result.with_credential_infos(
                credentials
                    .iter()
                    .map(|(m, c)| {
                        CredentialInfo::default()
                            .with_mechanism(m.code())
                            .with_iterations(i32::try_from(c.iterations).unwrap_or(i32::MAX))
                    })
                    .collect(),
            ),
            None => result
                .with_error_code(RESOURCE_NOT_FOUND)
                .with_error_message(Some(text(&format!("user {user} has no credentials")))),
        }
    };
    // Null or empty asks for every user, as in Kafka.
    let results = match request.users.filter(|u| !u.is_empty()) {
        None => state.users.keys().map(|u| described(u)).collect(),
        Some(users) => {
            let mut seen = BTreeSet::new();
            let duplicates: BTreeSet<&str> = users
                .iter()
                .map(|u| u.name.as_str())
                .filter(|u| !seen.insert(*u))
                .collect();
            let mut answered = BTreeSet::new();
            users
                .iter()
                .map(|u| u.name.as_str())
                .filter(|u| answered.insert(*u))
                .map(|u| {
                    if duplicates.contains(u) {
                        DescribeUserScramCredentialsResult::default()
                            .with_user(text(u))
                            .with_error_code(DUPLICATE_RESOURCE)
                            .with_error_message(Some(text("user named more than once")))
                    } else {
                        described(u)
                    }
                })
                .collect()
        }
    };
    answer.with_results(results)
}

/// Why one user's part of an AlterUserScramCredentials request is refused before it reaches
/// the controller.
fn check_user(user: &str, changes: &[(Mechanism, Upsert<'_>)]) -> Result<(), (i16, String)> {
    if user.is_empty() {
        return Err((UNACCEPTABLE_CREDENTIAL, "the user name is empty".into()));
    }
    let mut mechanisms = BTreeSet::new();
    for (mechanism, upsert) in changes {
        if !mechanisms.insert(*mechanism) {
            return Err((
                DUPLICATE_RESOURCE,
                format!("{} is changed twice for {user}", mechanism.name()),
            ));
        }
        if let Some((iterations, salt, salted)) = upsert {
            if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(iterations) {
                return Err((
                    UNACCEPTABLE_CREDENTIAL,
                    format!(
                        "{iterations} iterations: between {MIN_ITERATIONS} and {MAX_ITERATIONS}"
                    ),
                ));
            }
            let hash_len = match mechanism {
                Mechanism::Sha256 => 32,
                Mechanism::Sha512 => 64,
            };
            if salt.is_empty() || salted.len() != hash_len {
                return Err((
                    UNACCEPTABLE_CREDENTIAL,
                    format!(
                        "a {} credential needs a salt and a {hash_len}-byte salted password",
                        mechanism.name()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// One credential to set (iterations, salt, salted password), or `None` to delete.
type Upsert<'a> = Option<(u32, &'a [u8], &'a [u8])>;
/// Each user's changes, in request order, or why they are refused.
type UserChanges<'a> = Vec<(&'a str, Result<Vec<(Mechanism, Upsert<'a>)>, (i16, String)>)>;

/// Adds one change to its user's; an unknown mechanism refuses the user.
fn add_change<'a>(users: &mut UserChanges<'a>, user: &'a str, code: i8, upsert: Upsert<'a>) {
    let index = match users.iter().position(|(u, _)| *u == user) {
        Some(i) => i,
        None => {
            users.push((user, Ok(Vec::new())));
            users.len() - 1
        }
    };
    let entry = &mut users[index].1;
    match (Mechanism::from_code(code), entry) {
        (Some(m), Ok(changes)) => changes.push((m, upsert)),
        (None, entry @ Ok(_)) => {
            *entry = Err((
                UNSUPPORTED_SASL_MECHANISM,
                format!("unknown SCRAM mechanism code {code}: 1 (SHA-256) or 2 (SHA-512)"),
            ))
        }
        (_, Err(_)) => {}
    }
}

pub async fn alter_user_scram_credentials<B: Backend>(
    backend: &B,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let mut users: UserChanges = Vec::new();
    for d in &request.deletions {
        add_change(&mut users, d.name.as_str(), d.mechanism, None);
    }
    for u in &request.upsertions {
        let iterations = u32::try_from(u.iterations).unwrap_or(0);
        let upsert = Some((iterations, &u.salt[..], &u.salted_password[..]));
        add_change(&mut users, u.name.as_str(), u.mechanism, upsert);
    }
    let checked: UserChanges = users
        .into_iter()
        .map(|(user, changes)| {
            let changes = changes.and_then(|c| check_user(user, &c).map(|()| c));
            (user, changes)
        })
        .collect();
    let mut upserts = Vec::new();
    let mut deletions = Vec::new();
    for (user, changes) in &checked {
        for (m, upsert) in changes.iter().flatten() {
            match upsert {
                None => deletions.push((user.to_string(), *m)),
                Some((iterations, salt, salted)) => upserts.push((
                    user.to_string(),
                    *m,
                    ScramCredential::from_salted_password(*m, salted, salt.to_vec(), *iterations),
                )),
            }
        }
    }
    let outcome = if upserts.is_empty() && deletions.is_empty() {
        Ok(BTreeMap::new())
    } else {
        match backend
            .alter_security(SecurityChange::AlterScram { upserts, deletions })
            .await
        {
            Ok(SecurityAnswer::Scram(results)) => Ok(results.into_iter().collect()),
            Ok(other) => Err(BackendError::Internal(format!(
                "unexpected answer to AlterUserScramCredentials: {other:?}"
            ))),
            Err(e) => Err(e),
        }
    };
    let results = checked
        .into_iter()
        .map(|(user, changes)| {
            let result = AlterUserScramCredentialsResult::default().with_user(text(user));
            let refusal = match (changes, &outcome) {
                (Err(refusal), _) => Some(refusal),
                (Ok(_), Err(e)) => Some((e.code(), e.detail())),
                (Ok(_), Ok(results)) => match results.get(user) {
                    Some(Err(why)) => Some((RESOURCE_NOT_FOUND, why.clone())),
                    _ => None,
                },
            };
            match refusal {
                Some((code, message)) => result
                    .with_error_code(code)
                    .with_error_message(Some(text(&message))),
                None => result,
            }
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}
