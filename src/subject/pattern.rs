//! Subject pattern algebra without a trie: does a pattern match a literal subject (e.g.
//! which of a client's own subscriptions a reply subject reaches), can two patterns match a
//! common subject (stream subjects may not overlap; consumer filters), and is one pattern
//! contained in another (nats-server's `subjectIsSubsetMatch`).

/// True if the literal `subject` is matched by `pattern` (which may contain `*` and `>`).
pub fn pattern_matches(pattern: &[u8], subject: &[u8]) -> bool {
    let mut pattern_tokens = pattern.split(|b| *b == b'.');
    let mut subject_tokens = subject.split(|b| *b == b'.');
    loop {
        match (pattern_tokens.next(), subject_tokens.next()) {
            (Some(b">"), Some(_)) => return true,
            (Some(p), Some(s)) if p == b"*" || p == s => continue,
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// True if some literal subject is matched by both patterns.
pub fn patterns_overlap(first: &str, second: &str) -> bool {
    let mut first_tokens = first.split('.');
    let mut second_tokens = second.split('.');
    loop {
        match (first_tokens.next(), second_tokens.next()) {
            (Some(">"), Some(_)) | (Some(_), Some(">")) => return true,
            (Some(a), Some(b)) if a == "*" || b == "*" || a == b => continue,
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// True if every literal subject matched by `subject` is also matched by `pattern`:
/// `a.b` ⊆ `a.*` ⊆ `a.>`, but `a.*` ⊄ `a.b`.
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
    use super::{is_subset_match, pattern_matches, patterns_overlap};

    #[test]
    fn overlap() {
        assert!(patterns_overlap("a.b", "a.b"));
        assert!(patterns_overlap("a.*", "a.b"));
        assert!(patterns_overlap("a.>", "a.b.c"));
        assert!(patterns_overlap("*.b", "a.*"));
        assert!(patterns_overlap("a.*.c", "a.>"));
        assert!(patterns_overlap(">", "x"));
        assert!(!patterns_overlap("a.>", "a"));
        assert!(!patterns_overlap("a.b", "a.c"));
        assert!(!patterns_overlap("a.*", "a.b.c"));
        assert!(!patterns_overlap("orders.*", "$JS.API.>"));
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

    #[test]
    fn matches_like_the_trie() {
        assert!(pattern_matches(b"_INBOX.abc.*", b"_INBOX.abc.1"));
        assert!(!pattern_matches(b"_INBOX.abc.*", b"_INBOX.abc.1.2"));
        assert!(pattern_matches(b"a.>", b"a.b.c"));
        assert!(!pattern_matches(b"a.>", b"a"));
        assert!(pattern_matches(b"a.b", b"a.b"));
        assert!(!pattern_matches(b"a.b", b"a.c"));
        assert!(!pattern_matches(b"a", b"a.b"));
    }
}
