//! Overlap search: is some stored pattern able to match a literal subject that a given
//! pattern also matches (wildcards on both sides)? The meta state asks this of every stream
//! create and update (nats-server err 10065); walking the trie instead of comparing with each
//! stream makes the cost follow the branches the pattern can reach, not the stream count.

use std::sync::Arc;

use super::{Node, SubjectTrie};

impl<V> SubjectTrie<V> {
    /// True if `accept` takes some value stored under a pattern that overlaps `pattern`, with
    /// exactly [`crate::subject::pattern::patterns_overlap`]'s semantics. A literal token follows
    /// one literal branch (plus `*` and `>`); a `*` in `pattern` visits every literal branch of
    /// its level; a trailing `>` stops at the first accepted value below its level.
    pub fn any_overlapping(&self, pattern: &[u8], mut accept: impl FnMut(&Arc<V>) -> bool) -> bool {
        let tokens: Vec<&[u8]> = pattern.split(|b| *b == b'.').collect();
        overlap_node(&self.root, &tokens, &mut accept)
    }
}

fn overlap_node<V>(
    node: &Node<V>,
    tokens: &[&[u8]],
    accept: &mut impl FnMut(&Arc<V>) -> bool,
) -> bool {
    let Some((token, rest)) = tokens.split_first() else {
        // A stored `>` needs one more token, which the pattern does not have.
        return node.exact.iter().any(&mut *accept);
    };
    // A stored `>` here takes `token` and whatever follows it.
    if node.full_wildcard.iter().any(&mut *accept) {
        return true;
    }
    if *token == b">" {
        // The pattern takes one or more tokens: every pattern longer than this level.
        return node
            .star
            .as_deref()
            .is_some_and(|star| any_value(star, accept))
            || node.literals.values().any(|child| any_value(child, accept));
    }
    if let Some(star) = node.star.as_deref() {
        if overlap_node(star, rest, accept) {
            return true;
        }
    }
    if *token == b"*" {
        node.literals
            .values()
            .any(|child| overlap_node(child, rest, accept))
    } else {
        node.literals
            .get(*token)
            .is_some_and(|child| overlap_node(child, rest, accept))
    }
}

/// True if `accept` takes any value at or below `node` (branches are pruned when emptied, so
/// every branch leads to a value).
fn any_value<V>(node: &Node<V>, accept: &mut impl FnMut(&Arc<V>) -> bool) -> bool {
    node.exact.iter().any(&mut *accept)
        || node.full_wildcard.iter().any(&mut *accept)
        || node
            .star
            .as_deref()
            .is_some_and(|star| any_value(star, accept))
        || node.literals.values().any(|child| any_value(child, accept))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::SubjectTrie;
    use crate::subject::pattern::patterns_overlap;
    use crate::subject::random_patterns::Rng;

    fn trie_of(patterns: &[String]) -> SubjectTrie<String> {
        let mut trie = SubjectTrie::default();
        for pattern in patterns {
            trie.insert(pattern.as_bytes(), Arc::new(pattern.clone()));
        }
        trie
    }

    #[test]
    fn finds_exactly_what_pairwise_comparison_finds() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let stored: Vec<String> = (0..rng.below(12)).map(|_| rng.pattern()).collect();
            let trie = trie_of(&stored);
            let query = rng.pattern();
            let expected = stored.iter().any(|s| patterns_overlap(s, &query));
            assert_eq!(
                trie.any_overlapping(query.as_bytes(), |_| true),
                expected,
                "query {query} against {stored:?}"
            );
            // Every overlapping value is offered: refusing all but one still finds that one.
            for wanted in &stored {
                let expected = patterns_overlap(wanted, &query);
                let found = trie.any_overlapping(query.as_bytes(), |v| v.as_str() == wanted);
                assert_eq!(found, expected, "query {query}, wanted {wanted}");
            }
        }
    }

    #[test]
    fn wildcards_on_both_sides() {
        let trie = trie_of(&["orders.*".into(), "a.>".into(), "x.y.z".into()]);
        let overlaps = |p: &str| trie.any_overlapping(p.as_bytes(), |_| true);
        assert!(overlaps("orders.new"));
        assert!(overlaps("*.new"));
        assert!(overlaps("orders.>"));
        assert!(overlaps("a.b.c"));
        assert!(overlaps("*.*.z"));
        assert!(overlaps(">"));
        assert!(!overlaps("orders"));
        assert!(!overlaps("orders.new.x"));
        assert!(!overlaps("a"));
        assert!(!overlaps("x.y"));
        assert!(!overlaps("$JS.API.>"));
    }

    #[test]
    fn a_refused_value_is_not_an_overlap() {
        let trie = trie_of(&["a.b".into()]);
        assert!(!trie.any_overlapping(b"a.*", |_| false));
        assert!(!trie.any_overlapping(b">", |_| false));
    }
}
