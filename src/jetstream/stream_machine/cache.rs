//! [`BlockCache`]: the node's cache of decoded message blocks, shared by every stream group
//! on the node, with a byte budget (`--js_cache_bytes`, `jetstream { cache_bytes }`; default
//! [`DEFAULT_CACHE_BYTES`]). Message bodies are not kept by the stream state (`jscore` keeps
//! 16 bytes of metadata per message); a reader of a body finds its block here or reads it
//! from sled and puts it here (`bodies.rs`).
//!
//! Eviction is CLOCK (second chance): a block read since the hand last passed it survives
//! one more turn. Blocks are immutable once written (a block key is never rewritten, only
//! deleted), so an entry is never stale; a deleted block's entry is dropped by its stream
//! (`forget`), and a reloaded stream uses a new key space (its epoch), leaving the old
//! entries to age out.
//!
//! One per node. Its lock is the innermost of the stream locks: nothing is locked while it
//! is held.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::block::Block;

/// Budget when none is configured: 32 MiB. Sized to issue 16's node budget of 256 MB with
/// 1000 R3 streams (measured after reading 1 GiB through them: their groups ~75 MB, the logs
/// up to their budget (then 32 MiB, 16 since), sled's cache, the cache's blocks at their
/// length rounded to pages, `page_buf.rs`): with 64 MiB a node ended at 241–259 MB. 48 → 32
/// MiB since stop 49: the node a read of 10 GB over 1000 R3 streams goes through peaked at
/// 257–263 MB while the client's 16 pulls of 4 MB were in flight (`bench/HISTORY.md`).
pub const DEFAULT_CACHE_BYTES: u64 = 32 << 20;

/// A block of one loaded stream instance: (epoch, first sequence).
pub type BlockKey = (u64, u64);

/// The numbers `/jsz` and `/varz` report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheStats {
    /// The budget.
    pub max_bytes: u64,
    /// Bytes of the blocks held now.
    pub bytes: u64,
    pub blocks: u64,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

#[derive(Debug)]
pub struct BlockCache {
    budget: u64,
    inner: Mutex<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<BlockKey, Entry>,
    /// The clock: keys in insertion order; a key whose entry went is skipped when reached.
    ring: VecDeque<BlockKey>,
    bytes: u64,
}

#[derive(Debug)]
struct Entry {
    block: Arc<Block>,
    referenced: bool,
}

impl BlockCache {
    pub fn new(budget: u64) -> BlockCache {
        BlockCache {
            budget,
            inner: Mutex::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// The block under `key`, counting a hit or a miss.
    pub fn get(&self, key: BlockKey) -> Option<Arc<Block>> {
        let mut inner = self.inner.lock();
        match inner.entries.get_mut(&key) {
            Some(entry) => {
                entry.referenced = true;
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(entry.block.clone())
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Keeps `block` under `key`, evicting others to stay within the budget (a block larger
    /// than the whole budget is not kept).
    pub fn insert(&self, key: BlockKey, block: Arc<Block>) {
        let size = block.cost();
        if size > self.budget {
            return;
        }
        let mut inner = self.inner.lock();
        let entry = Entry {
            block,
            referenced: false,
        };
        match inner.entries.insert(key, entry) {
            Some(old) => inner.bytes -= old.block.cost(),
            None => inner.ring.push_back(key),
        }
        inner.bytes += size;
        self.evict_over_budget(&mut inner, key);
    }

    /// Evicts blocks (the hand gives a referenced one a second chance; `keep` none) until
    /// the cache is within its budget.
    fn evict_over_budget(&self, inner: &mut Inner, keep: BlockKey) {
        while inner.bytes > self.budget {
            let Some(candidate) = inner.ring.pop_front() else {
                break;
            };
            let Some(entry) = inner.entries.get_mut(&candidate) else {
                continue;
            };
            if entry.referenced && candidate != keep {
                entry.referenced = false;
                inner.ring.push_back(candidate);
                continue;
            }
            if let Some(gone) = inner.entries.remove(&candidate) {
                inner.bytes -= gone.block.cost();
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Keys of forgotten entries stay in the ring until the hand reaches them; do not let
        // them pile up in a cache that never fills.
        if inner.ring.len() > 2 * inner.entries.len() + 1024 {
            let Inner { entries, ring, .. } = inner;
            ring.retain(|key| entries.contains_key(key));
        }
    }

    /// Replaces block `key`, if it is cached and was read since it was cached or last
    /// replaced (a reader is following it), by what `change` makes of it; otherwise, or if
    /// `change` makes nothing, it goes. In place: the entry keeps its place in the ring.
    /// Keeping only what is read keeps the many blocks that writers alone grow (one client
    /// publishing to 1000 streams) from filling the cache.
    pub fn replace_if_read(&self, key: BlockKey, change: impl FnOnce(&Block) -> Option<Block>) {
        let mut inner = self.inner.lock();
        let Some(entry) = inner.entries.get_mut(&key) else {
            return;
        };
        let before = entry.block.cost();
        let changed = match entry.referenced {
            true => change(&entry.block),
            false => None,
        };
        match changed {
            Some(block) => {
                let block = Arc::new(block);
                let after = block.cost();
                entry.block = block;
                entry.referenced = false;
                inner.bytes = inner.bytes - before + after;
                self.evict_over_budget(&mut inner, key);
            }
            None => {
                inner.entries.remove(&key);
                inner.bytes -= before;
            }
        }
    }

    /// Drops the block under `key` (it was deleted from sled).
    pub fn forget(&self, key: BlockKey) {
        let mut inner = self.inner.lock();
        if let Some(gone) = inner.entries.remove(&key) {
            inner.bytes -= gone.block.cost();
        }
    }

    pub fn stats(&self) -> CacheStats {
        let inner = self.inner.lock();
        CacheStats {
            max_bytes: self.budget,
            bytes: inner.bytes,
            blocks: inner.entries.len() as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }
}

impl Default for BlockCache {
    fn default() -> Self {
        BlockCache::new(DEFAULT_CACHE_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::stream_machine::keys;

    fn block(first: u64, payload: usize) -> Arc<Block> {
        let body = vec![7u8; payload];
        let msg = keys::BlockMsg {
            seq: first,
            subject: "s",
            headers: None,
            payload: &body,
            ts_nanos: 0,
        };
        Arc::new(Block::decode(keys::encode_block([msg])).unwrap())
    }

    #[test]
    fn a_block_read_since_is_replaced_in_place_and_one_not_read_goes() {
        let cache = BlockCache::new(1 << 20);
        cache.insert((0, 1), block(1, 100));
        // Not read since it was cached: it goes.
        cache.replace_if_read((0, 1), |_| unreachable!("not read"));
        assert_eq!((cache.stats().bytes, cache.stats().blocks), (0, 0));

        cache.insert((0, 1), block(1, 100));
        assert!(cache.get((0, 1)).is_some());
        let ring = cache.inner.lock().ring.len();
        cache.replace_if_read((0, 1), |cached| cached.joined(&block(2, 300)));
        let joined = cache.get((0, 1)).unwrap();
        assert_eq!(joined.seqs().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(cache.stats().bytes, joined.cost());
        assert_eq!(cache.stats().blocks, 1);
        assert_eq!(
            cache.inner.lock().ring.len(),
            ring,
            "no second place in the ring"
        );
        // Read again, grown past the budget: the others go first.
        let small = BlockCache::new(block(1, 100).cost() + block(5, 100).cost());
        small.insert((0, 5), block(5, 100));
        small.insert((0, 1), block(1, 100));
        assert!(small.get((0, 1)).is_some());
        small.replace_if_read((0, 1), |cached| cached.joined(&block(2, 100)));
        assert!(small.get((0, 5)).is_none(), "evicted");
        assert!(small.get((0, 1)).is_some());
        assert!(small.stats().bytes <= small.stats().max_bytes);
        // Not cached: nothing to change. A change to nothing removes it.
        cache.replace_if_read((0, 9), |_| unreachable!("not cached"));
        assert!(cache.get((0, 1)).is_some());
        cache.replace_if_read((0, 1), |_| None);
        assert_eq!((cache.stats().bytes, cache.stats().blocks), (0, 0));
    }

    #[test]
    fn stays_within_its_budget_and_gives_recently_read_blocks_a_second_chance() {
        let one = block(1, 1000).cost();
        let cache = BlockCache::new(3 * one);
        for first in 1..=3 {
            cache.insert((0, first), block(first, 1000));
        }
        assert!(cache.get((0, 1)).is_some(), "read: referenced");
        cache.insert((0, 4), block(4, 1000));
        let stats = cache.stats();
        assert!(stats.bytes <= 3 * one);
        assert_eq!(stats.blocks, 3);
        assert!(cache.get((0, 1)).is_some(), "the referenced block survived");
        assert!(
            cache.get((0, 2)).is_none(),
            "the oldest unreferenced block went"
        );
        assert!(cache.get((0, 4)).is_some());
        cache.forget((0, 4));
        assert!(cache.get((0, 4)).is_none());
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.evictions), (3, 2, 1));
        assert_eq!(stats.bytes, 2 * one);
        // Larger than the whole budget: not kept.
        cache.insert((0, 9), block(9, 10 * 1000));
        assert!(cache.get((0, 9)).is_none());
    }
}
