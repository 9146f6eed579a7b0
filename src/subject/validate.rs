//! Subject validation as nats-server applies it.
//!
//! A subject is one or more non-empty tokens separated by `.`, with no whitespace. In a
//! subscription, `*` (one token) and `>` (one or more trailing tokens) are wildcards when they
//! are a whole token; `>` only as the last token. `foo*` is an ordinary literal token.

/// Valid as a subscription subject (wildcards allowed).
pub fn is_valid_subject(subject: &[u8]) -> bool {
    if subject.is_empty() {
        return false;
    }
    let mut tokens = subject.split(|b| *b == b'.').peekable();
    while let Some(token) = tokens.next() {
        if token.is_empty() || token.iter().any(|b| b.is_ascii_whitespace()) {
            return false;
        }
        if token == b">" && tokens.peek().is_some() {
            return false;
        }
    }
    true
}

/// Valid and free of wildcards: what may be published to.
pub fn is_valid_literal_subject(subject: &[u8]) -> bool {
    is_valid_subject(subject)
        && subject
            .split(|b| *b == b'.')
            .all(|token| token != b"*" && token != b">")
}

/// Valid as a queue group name: non-empty, no whitespace.
pub fn is_valid_queue(queue: &[u8]) -> bool {
    !queue.is_empty() && !queue.iter().any(|b| b.is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_subjects() {
        for s in [
            "foo",
            "foo.bar",
            "foo.*",
            "*",
            ">",
            "foo.>",
            "*.bar.>",
            "foo*",
            "f>o",
            "$JS.API.INFO",
        ] {
            assert!(is_valid_subject(s.as_bytes()), "{s}");
        }
    }

    #[test]
    fn invalid_subjects() {
        for s in [
            "",
            ".",
            "foo.",
            ".foo",
            "foo..bar",
            "foo.>.bar",
            ">.foo",
            "foo bar",
            "foo\tbar",
        ] {
            assert!(!is_valid_subject(s.as_bytes()), "{s:?}");
        }
    }

    #[test]
    fn literal_subjects_have_no_wildcard_tokens() {
        assert!(is_valid_literal_subject(b"foo.bar"));
        assert!(is_valid_literal_subject(b"foo*.b>"));
        assert!(!is_valid_literal_subject(b"foo.*"));
        assert!(!is_valid_literal_subject(b">"));
    }
}
