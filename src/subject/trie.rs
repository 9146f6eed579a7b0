//! The subscription trie: one level per subject token, with separate branches for the `*` and
//! `>` wildcards, so matching a published subject costs O(tokens × wildcard branches), not
//! O(subscriptions).
//!
//! Generic over the value stored (the server stores `Arc<Subscription>`); values are compared
//! by pointer, so the same subscription can be removed without a key.

mod overlap;

use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug)]
struct Node<V> {
    literals: HashMap<Box<[u8]>, Node<V>>,
    star: Option<Box<Node<V>>>,
    /// Subscriptions whose subject ends in `>` at this level.
    full_wildcard: Vec<Arc<V>>,
    /// Subscriptions whose subject ends exactly at this level.
    exact: Vec<Arc<V>>,
}

impl<V> Default for Node<V> {
    fn default() -> Self {
        Node {
            literals: HashMap::new(),
            star: None,
            full_wildcard: Vec::new(),
            exact: Vec::new(),
        }
    }
}

impl<V> Node<V> {
    fn is_empty(&self) -> bool {
        self.literals.is_empty()
            && self.star.is_none()
            && self.full_wildcard.is_empty()
            && self.exact.is_empty()
    }
}

/// One per router (one per node); guarded by the router's lock.
#[derive(Debug)]
pub struct SubjectTrie<V> {
    root: Node<V>,
    len: usize,
}

impl<V> Default for SubjectTrie<V> {
    fn default() -> Self {
        SubjectTrie {
            root: Node::default(),
            len: 0,
        }
    }
}

impl<V> SubjectTrie<V> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `value` under `subject` (which the caller has validated).
    pub fn insert(&mut self, subject: &[u8], value: Arc<V>) {
        let mut node = &mut self.root;
        let mut tokens = subject.split(|b| *b == b'.').peekable();
        while let Some(token) = tokens.next() {
            if token == b">" && tokens.peek().is_none() {
                node.full_wildcard.push(value);
                self.len += 1;
                return;
            }
            node = if token == b"*" {
                node.star.get_or_insert_with(Box::default)
            } else {
                node.literals.entry(token.into()).or_default()
            };
        }
        node.exact.push(value);
        self.len += 1;
    }

    /// Removes this exact value (by pointer) from under `subject`; prunes emptied branches.
    pub fn remove(&mut self, subject: &[u8], value: &Arc<V>) -> bool {
        let tokens: Vec<&[u8]> = subject.split(|b| *b == b'.').collect();
        let removed = remove_from(&mut self.root, &tokens, value);
        if removed {
            self.len -= 1;
        }
        removed
    }

    /// Calls `visit` once for every value whose subscription subject matches the literal
    /// `subject`.
    pub fn for_each_match(&self, subject: &[u8], mut visit: impl FnMut(&Arc<V>)) {
        let tokens: Vec<&[u8]> = subject.split(|b| *b == b'.').collect();
        match_node(&self.root, &tokens, &mut visit);
    }
}

fn match_node<V>(node: &Node<V>, tokens: &[&[u8]], visit: &mut impl FnMut(&Arc<V>)) {
    let Some((token, rest)) = tokens.split_first() else {
        node.exact.iter().for_each(&mut *visit);
        return;
    };
    // `>` needs at least one token, which `token` is.
    node.full_wildcard.iter().for_each(&mut *visit);
    if let Some(star) = &node.star {
        match_node(star, rest, visit);
    }
    if let Some(next) = node.literals.get(*token) {
        match_node(next, rest, visit);
    }
}

fn remove_from<V>(node: &mut Node<V>, tokens: &[&[u8]], value: &Arc<V>) -> bool {
    let Some((token, rest)) = tokens.split_first() else {
        return remove_value(&mut node.exact, value);
    };
    if *token == b">" && rest.is_empty() {
        return remove_value(&mut node.full_wildcard, value);
    }
    if *token == b"*" {
        let Some(star) = node.star.as_deref_mut() else {
            return false;
        };
        let removed = remove_from(star, rest, value);
        if star.is_empty() {
            node.star = None;
        }
        return removed;
    }
    let Some(child) = node.literals.get_mut(*token) else {
        return false;
    };
    let removed = remove_from(child, rest, value);
    if child.is_empty() {
        node.literals.remove(*token);
    }
    removed
}

fn remove_value<V>(values: &mut Vec<Arc<V>>, value: &Arc<V>) -> bool {
    match values.iter().position(|v| Arc::ptr_eq(v, value)) {
        Some(index) => {
            values.swap_remove(index);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(trie: &SubjectTrie<String>, subject: &str) -> Vec<String> {
        let mut found = Vec::new();
        trie.for_each_match(subject.as_bytes(), |v| found.push(v.to_string()));
        found.sort();
        found
    }

    fn trie_with(subjects: &[&str]) -> (SubjectTrie<String>, Vec<Arc<String>>) {
        let mut trie = SubjectTrie::default();
        let values: Vec<_> = subjects.iter().map(|s| Arc::new(s.to_string())).collect();
        for value in &values {
            trie.insert(value.as_bytes(), value.clone());
        }
        (trie, values)
    }

    #[test]
    fn wildcards_match_as_nats_defines_them() {
        let (trie, _) = trie_with(&[
            "foo.bar",
            "foo.*",
            "foo.>",
            "*.bar",
            ">",
            "foo",
            "foo.*.baz",
        ]);
        assert_eq!(
            matches(&trie, "foo.bar"),
            vec!["*.bar", ">", "foo.*", "foo.>", "foo.bar"]
        );
        assert_eq!(matches(&trie, "foo"), vec![">", "foo"]);
        assert_eq!(matches(&trie, "foo.x.baz"), vec![">", "foo.*.baz", "foo.>"]);
        assert_eq!(matches(&trie, "bar"), vec![">"]);
    }

    #[test]
    fn full_wildcard_needs_at_least_one_token() {
        let (trie, _) = trie_with(&["foo.>"]);
        assert!(matches(&trie, "foo").is_empty());
        assert_eq!(matches(&trie, "foo.a.b.c"), vec!["foo.>"]);
    }

    #[test]
    fn remove_by_pointer_and_prune() {
        let (mut trie, values) = trie_with(&["a.b", "a.*", "a.>"]);
        let twin = Arc::new("a.b".to_string());
        trie.insert(b"a.b", twin.clone());
        assert_eq!(trie.len(), 4);
        assert!(trie.remove(b"a.b", &values[0]));
        assert!(!trie.remove(b"a.b", &values[0]));
        assert_eq!(matches(&trie, "a.b"), vec!["a.*", "a.>", "a.b"]);
        assert!(trie.remove(b"a.b", &twin));
        assert!(trie.remove(b"a.*", &values[1]));
        assert!(trie.remove(b"a.>", &values[2]));
        assert!(trie.is_empty());
        assert!(trie.root.is_empty(), "branches are pruned");
    }
}
