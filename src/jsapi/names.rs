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

/// True if some literal subject is matched by both patterns (nats-server `SubjectsCollide`).
/// `a.*` and `a.b` collide; `a.>` and `a` do not (`>` needs at least one token).
pub fn subjects_collide(a: &str, b: &str) -> bool {
    let mut left = a.split('.');
    let mut right = b.split('.');
    loop {
        match (left.next(), right.next()) {
            (None, None) => return true,
            (Some(">"), Some(_)) | (Some(_), Some(">")) => return true,
            (Some(l), Some(r)) if l == "*" || r == "*" || l == r => continue,
            _ => return false,
        }
    }
}

/// True if every literal subject matched by `subject` is also matched by `pattern`
/// (nats-server `subjectIsSubsetMatch`): `a.b` ⊆ `a.*` ⊆ `a.>`, but `a.*` ⊄ `a.b`.
pub fn is_subset_match(subject: &str, pattern: &str) -> bool {
    let mut inner = subject.split('.');
    let mut outer = pattern.split('.');
    loop {
        match (inner.next(), outer.next()) {
            (None, None) => return true,
            (Some(_), Some(">")) => return true,
            (Some(">"), Some(_)) => return false,
            (Some(_), Some("*")) => continue,
            (Some(i), Some(o)) if i == o && i != "*" => continue,
            _ => return false,
        }
    }
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

    #[test]
    fn collide() {
        assert!(subjects_collide("a.b", "a.b"));
        assert!(subjects_collide("a.*", "a.b"));
        assert!(subjects_collide("a.>", "a.b.c"));
        assert!(subjects_collide("*.b", "a.*"));
        assert!(subjects_collide(">", "x"));
        assert!(!subjects_collide("a.>", "a"));
        assert!(!subjects_collide("a.b", "a.c"));
        assert!(!subjects_collide("a.*", "a.b.c"));
        assert!(!subjects_collide("orders.*", "$JS.API.>"));
    }

    #[test]
    fn subset() {
        assert!(is_subset_match("a.b", "a.b"));
        assert!(is_subset_match("a.b", "a.*"));
        assert!(is_subset_match("a.*", "a.*"));
        assert!(is_subset_match("a.*", "a.>"));
        assert!(is_subset_match("a.b.c", "a.>"));
        assert!(is_subset_match("$JS.API.INFO", "$JS.>"));
        assert!(!is_subset_match("a.*", "a.b"));
        assert!(!is_subset_match("a.>", "a.*"));
        assert!(!is_subset_match("a", "a.>"));
        assert!(!is_subset_match(">", "$JS.>"));
    }
}
