//! Kafka's rule for topic names, shared by every request that names a topic and by the
//! controller, so that an illegal name is refused alike everywhere (INVALID_TOPIC_EXCEPTION).

use crate::backend::BackendError;

/// Kafka's longest legal topic name.
pub const MAX_TOPIC_NAME: usize = 249;

/// Kafka's topic naming rule: 1 to 249 of `[a-zA-Z0-9._-]`, and not `.` or `..`.
pub fn check_topic(name: &str) -> Result<(), BackendError> {
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_TOPIC_NAME || name == "." || name == ".." {
        return Err(BackendError::InvalidTopic(format!(
            "topic name must be 1 to {MAX_TOPIC_NAME} characters, not . or .."
        )));
    }
    if !name.chars().all(legal) {
        return Err(BackendError::InvalidTopic(format!(
            "topic name {name:?} may hold only ASCII letters, digits, '.', '_' and '-'"
        )));
    }
    Ok(())
}

/// A topic clients may write to or delete: any but the internal `__consumer_offsets`, which only
/// group coordinators write (Kafka refuses both alike).
pub fn check_not_internal(name: &str, doing: &str) -> Result<(), BackendError> {
    if name == crate::offsets_topic::OFFSETS_TOPIC {
        return Err(BackendError::InvalidTopic(format!(
            "{name} is internal: clients cannot {doing} it"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_topic_names() {
        for good in ["orders", "a.b_c-9", &"x".repeat(249)] {
            assert_eq!(check_topic(good), Ok(()), "{good}");
        }
        for bad in ["", ".", "..", "a/b", "ü", "with space", &"x".repeat(250)] {
            assert_eq!(check_topic(bad).map_err(|e| e.code()), Err(17), "{bad:?}");
        }
        assert_eq!(check_not_internal("orders", "write to"), Ok(()));
        let refused = check_not_internal("__consumer_offsets", "delete").map_err(|e| e.code());
        assert_eq!(refused, Err(17));
    }
}
