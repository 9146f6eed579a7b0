//! Subjects: token validation (`validate`), the wildcard subscription trie (`trie`), the
//! per-reader match cache in front of it (`cache`) and matching without a trie (`pattern`:
//! match, overlap, subset). Pure data structures, no I/O.

pub mod cache;
pub mod pattern;
#[cfg(test)]
pub mod random_patterns;
pub mod transform;
pub mod trie;
pub mod validate;

pub use trie::SubjectTrie;
pub use validate::{is_valid_literal_subject, is_valid_subject};
