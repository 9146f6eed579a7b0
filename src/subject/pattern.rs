//! Matching one subscription pattern against one literal subject, for the rare places that
//! need it without a trie (e.g. finding which of a client's own subscriptions a reply
//! subject would reach).

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

#[cfg(test)]
mod tests {
    use super::pattern_matches;

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
