//! A match cache in front of the subscription trie.
//!
//! Publishers tend to reuse a few subjects, so each connection's read loop keeps the match
//! results it computed, keyed by subject. The router bumps a generation number on every
//! subscribe and unsubscribe; a cache that sees a new generation starts over, so a cached
//! result is never stale. One per connection: no lock on the hot path.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use bytes::Bytes;

#[derive(Debug)]
pub struct MatchCache<R> {
    entries: HashMap<Bytes, Arc<R>>,
    generation: u64,
    capacity: usize,
    /// Hashes of recently missed subjects (direct-mapped): a subject is cached on its second
    /// miss only. Subjects used once — every ack reply `$JS.ACK.<…>.<seq>.…`, every inbox
    /// token — would otherwise churn the map (insert, then a full clear at capacity) for
    /// nothing.
    seen: Box<[u64; SEEN_SLOTS]>,
}

/// Slots of the recently-missed table.
const SEEN_SLOTS: usize = 256;

impl<R> MatchCache<R> {
    pub fn new(capacity: usize) -> Self {
        MatchCache {
            entries: HashMap::new(),
            generation: 0,
            capacity,
            seen: Box::new([0; SEEN_SLOTS]),
        }
    }

    /// The cached result for `subject` at `generation`, computing (and caching) it if absent.
    pub fn get_or_compute(
        &mut self,
        generation: u64,
        subject: &Bytes,
        compute: impl FnOnce() -> R,
    ) -> Arc<R> {
        if generation != self.generation {
            self.entries.clear();
            self.generation = generation;
        }
        if let Some(hit) = self.entries.get(subject) {
            return hit.clone();
        }
        let hash = self.entries.hasher().hash_one(subject) | 1;
        let slot = &mut self.seen[hash as usize % SEEN_SLOTS];
        if *slot != hash {
            *slot = hash;
            return Arc::new(compute());
        }
        if self.entries.len() >= self.capacity {
            // Bounded memory; a cheap reset beats LRU bookkeeping on the hot path.
            self.entries.clear();
        }
        let result = Arc::new(compute());
        self.entries.insert(subject.clone(), result.clone());
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_until_the_generation_changes() {
        let mut cache = MatchCache::new(8);
        let subject = Bytes::from_static(b"a");
        let mut computed = 0;
        for _ in 0..4 {
            cache.get_or_compute(1, &subject, || {
                computed += 1;
                computed
            });
        }
        assert_eq!(computed, 2, "cached on its second miss");
        let result = cache.get_or_compute(2, &subject, || {
            computed += 1;
            computed
        });
        assert_eq!(*result, 3);
    }

    #[test]
    fn stays_within_capacity() {
        let mut cache = MatchCache::new(2);
        for i in 0..10u8 {
            for _ in 0..2 {
                cache.get_or_compute(0, &Bytes::from(vec![i]), || i);
            }
            assert!(cache.entries.len() <= 2);
        }
    }
}
