//! Names of streams and consumers, and the subject-set relations (overlap, subset) that
//! config validation needs: two stream subjects may not overlap, a consumer's filters may not
//! overlap each other, and stream subjects may not capture the `$JS.>` API space.
//!
//! (The literal-vs-pattern matcher used for routing lives in `crate::subject`; these two
//! relations compare two *patterns*.)

/// Longest stream or consumer name nats-server accepts (`JSMaxNameLen`).
pub const MAX_NAME_LEN: usize = 255;
/// Longest description (`JSMaxDescriptionLen`).
pub const MAX_DESCRIPTION_LEN: usize = 4 * 1024;
/// Largest total size of metadata keys plus values (`JSMaxMetadataLen`).
pub const MAX_METADATA_LEN: usize = 128 * 1024;

/// Why a stream or consumer name is unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("name is empty")]
    Empty,
    #[error("name is longer than {MAX_NAME_LEN} bytes")]
    TooLong,
    /// `/` or `\`: names become directory names in nats-server's store, so it gives these
    /// their own errors (10127/10128).
    #[error("name contains a path separator")]
    PathSeparator,
    /// `.`, `*`, `>` or whitespace: names become subject tokens.
    #[error("name contains '.', '*', '>' or whitespace")]
    InvalidChar,
}

/// Checks a stream or consumer name: non-empty, at most 255 bytes, no `.`, `*`, `>`, `/`,
/// `\` and no whitespace (the token rules of nats-server's `isValidName` plus its path rules).
pub fn validate_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.contains(['/', '\\']) {
        return Err(NameError::PathSeparator);
    }
    if name
        .chars()
        .any(|c| matches!(c, '.' | '*' | '>') || c.is_whitespace())
    {
        return Err(NameError::InvalidChar);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong);
    }
    Ok(())
}

/// Convenience: `validate_name(name).is_ok()`.
pub fn is_valid_name(name: &str) -> bool {
    validate_name(name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(validate_name("ORDERS"), Ok(()));
        assert_eq!(validate_name("order-processor_1"), Ok(()));
        assert_eq!(validate_name(""), Err(NameError::Empty));
        for bad in ["a.b", "a*", "a>", "a b", "a\tb", "a\nb"] {
            assert_eq!(validate_name(bad), Err(NameError::InvalidChar), "{bad:?}");
        }
        assert_eq!(validate_name("a/b"), Err(NameError::PathSeparator));
        assert_eq!(validate_name("a\\b"), Err(NameError::PathSeparator));
        assert_eq!(validate_name(&"x".repeat(255)), Ok(()));
        assert_eq!(validate_name(&"x".repeat(256)), Err(NameError::TooLong));
    }
}
