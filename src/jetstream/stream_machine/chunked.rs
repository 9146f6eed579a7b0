//! [`ChunkedMap`]: an ordered map from a block's first sequence to what a stream keeps of the
//! block, in sorted chunks of up to [`CHUNK`] entries rather than one B-tree node per handful
//! of them.
//!
//! Why: a stream holds one entry per `b/` block in two maps (the machine's `BlockInfo`s and
//! the message store's slots), about 17,000 blocks per GiB of 1 KiB messages. Blocks are
//! written in ascending order, and a `BTreeMap` filled in ascending order leaves its leaves a
//! little over half full: heaptrack put the two maps at 28 MB for 8 M messages, about 100 bytes
//! an entry for 40 to 56 bytes of key and value. Chunks filled in order are full, so an entry
//! costs its key and value and the outer map one node per [`CHUNK`] entries (issue 16).
//!
//! Inserting past the last entry (the common case) appends to the last chunk, or starts a new
//! one when it is full; any other insert goes into its chunk, which splits in two when full.
//! A removal shrinks its chunk's allocation once it is mostly empty, so a map whose blocks
//! went (a purge, a work queue's acks, a KV bucket's old revisions) does not keep their room.

use std::collections::BTreeMap;

/// Most entries in one chunk: small enough that an insert or removal in the middle moves
/// little (at most a few kilobytes), large enough that the outer map is a small fraction.
pub const CHUNK: usize = 128;

/// See the module docs. Keys are `u64`; iteration is in ascending key order.
#[derive(Debug, Clone)]
pub struct ChunkedMap<V> {
    /// Chunks by their first key; every chunk is non-empty and sorted, and the chunks' key
    /// ranges are disjoint and ordered like their first keys.
    chunks: BTreeMap<u64, Vec<(u64, V)>>,
    len: usize,
}

impl<V> Default for ChunkedMap<V> {
    fn default() -> Self {
        ChunkedMap {
            chunks: BTreeMap::new(),
            len: 0,
        }
    }
}

impl<V> ChunkedMap<V> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
    }

    /// The first key of the chunk that holds `key` or would: the last chunk starting at or
    /// below it, else the first chunk.
    fn chunk_of(&self, key: u64) -> Option<u64> {
        self.chunks
            .range(..=key)
            .next_back()
            .or_else(|| self.chunks.iter().next())
            .map(|(first, _)| *first)
    }

    /// Inserts `value` at `key`; returns the value it replaced, if any.
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        let Some(first) = self.chunk_of(key) else {
            self.chunks.insert(key, vec![(key, value)]);
            self.len += 1;
            return None;
        };
        let is_last = self
            .chunks
            .last_key_value()
            .is_some_and(|(last, _)| *last == first);
        let chunk = self.chunks.get_mut(&first).expect("chunk_of names a chunk");
        let at = match chunk.binary_search_by_key(&key, |(k, _)| *k) {
            Ok(at) => return Some(std::mem::replace(&mut chunk[at].1, value)),
            Err(at) => at,
        };
        self.len += 1;
        if chunk.len() < CHUNK {
            chunk.insert(at, (key, value));
            if at == 0 {
                // A key below every chunk's: the first chunk now starts at it.
                let chunk = self.chunks.remove(&first).expect("just used");
                self.chunks.insert(key, chunk);
            }
            return None;
        }
        if is_last && at == chunk.len() {
            // Past the last entry of a full last chunk: a new chunk (the ascending case).
            self.chunks.insert(key, vec![(key, value)]);
            return None;
        }
        // A full chunk: split it in two, then insert into the half the key belongs to.
        let upper = chunk.split_off(CHUNK / 2);
        let upper_first = upper[0].0;
        if key < upper_first {
            chunk.insert(at, (key, value));
            if at == 0 {
                let chunk = self.chunks.remove(&first).expect("just used");
                self.chunks.insert(key, chunk);
            }
            self.chunks.insert(upper_first, upper);
        } else {
            let mut upper = upper;
            upper.insert(at - CHUNK / 2, (key, value));
            self.chunks.insert(upper[0].0, upper);
        }
        None
    }

    /// Removes `key`; returns its value, if it was there.
    pub fn remove(&mut self, key: u64) -> Option<V> {
        let (&first, chunk) = self.chunks.range_mut(..=key).next_back()?;
        let at = chunk.binary_search_by_key(&key, |(k, _)| *k).ok()?;
        let (_, value) = chunk.remove(at);
        self.len -= 1;
        if chunk.is_empty() {
            self.chunks.remove(&first);
        } else {
            if chunk.len() * 4 <= chunk.capacity() && chunk.capacity() > 8 {
                chunk.shrink_to_fit();
            }
            if at == 0 {
                let chunk = self.chunks.remove(&first).expect("just used");
                self.chunks.insert(chunk[0].0, chunk);
            }
        }
        Some(value)
    }

    pub fn get(&self, key: u64) -> Option<&V> {
        let (_, chunk) = self.chunks.range(..=key).next_back()?;
        let at = chunk.binary_search_by_key(&key, |(k, _)| *k).ok()?;
        Some(&chunk[at].1)
    }

    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        let (_, chunk) = self.chunks.range_mut(..=key).next_back()?;
        let at = chunk.binary_search_by_key(&key, |(k, _)| *k).ok()?;
        Some(&mut chunk[at].1)
    }

    /// The entry with the greatest key at or below `key`.
    pub fn at_or_below(&self, key: u64) -> Option<(u64, &V)> {
        let (_, chunk) = self.chunks.range(..=key).next_back()?;
        let at = chunk.partition_point(|(k, _)| *k <= key);
        chunk[..at].last().map(|(k, v)| (*k, v))
    }

    /// The entry with the greatest key at or below `key`, its value mutable.
    pub fn at_or_below_mut(&mut self, key: u64) -> Option<(u64, &mut V)> {
        let (_, chunk) = self.chunks.range_mut(..=key).next_back()?;
        let at = chunk.partition_point(|(k, _)| *k <= key);
        chunk[..at].last_mut().map(|(k, v)| (*k, v))
    }

    /// The entry with the greatest key.
    pub fn last(&self) -> Option<(u64, &V)> {
        let (_, chunk) = self.chunks.last_key_value()?;
        chunk.last().map(|(k, v)| (*k, v))
    }

    /// Every entry, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.chunks
            .values()
            .flat_map(|chunk| chunk.iter().map(|(k, v)| (*k, v)))
    }

    /// Every value, in ascending key order.
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.iter().map(|(_, v)| v)
    }

    /// The entries with keys at or above `key`, ascending.
    pub fn iter_from(&self, key: u64) -> impl Iterator<Item = (u64, &V)> + '_ {
        let start = self.chunk_of(key).unwrap_or(u64::MAX);
        self.chunks
            .range(start..)
            .flat_map(|(_, chunk)| chunk.iter().map(|(k, v)| (*k, v)))
            .skip_while(move |(k, _)| *k < key)
    }
}

impl<V> FromIterator<(u64, V)> for ChunkedMap<V> {
    /// Entries in ascending key order fill whole chunks; any other order works too.
    fn from_iter<I: IntoIterator<Item = (u64, V)>>(entries: I) -> Self {
        let mut map = ChunkedMap::new();
        for (key, value) in entries {
            map.insert(key, value);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the chunks' invariants and that the map holds exactly `model`.
    fn agrees(map: &ChunkedMap<u64>, model: &BTreeMap<u64, u64>) {
        assert_eq!(map.len(), model.len());
        let mut previous: Option<u64> = None;
        for (first, chunk) in &map.chunks {
            assert!(!chunk.is_empty() && chunk.len() <= CHUNK);
            assert_eq!(chunk[0].0, *first, "a chunk is keyed by its first entry");
            for (k, _) in chunk {
                assert!(previous.is_none_or(|p| p < *k), "keys ascend across chunks");
                previous = Some(*k);
            }
        }
        let listed: Vec<(u64, u64)> = map.iter().map(|(k, v)| (k, *v)).collect();
        let expected: Vec<(u64, u64)> = model.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(listed, expected);
    }

    #[test]
    fn ascending_inserts_fill_whole_chunks() {
        let map: ChunkedMap<u64> = (1..=10 * CHUNK as u64).map(|k| (k, k)).collect();
        assert_eq!(map.chunks.len(), 10);
        assert!(map.chunks.values().all(|chunk| chunk.len() == CHUNK));
    }

    #[test]
    fn lookups_find_the_entry_at_or_below() {
        let map: ChunkedMap<u64> = (0..1000u64).map(|k| (k * 10, k)).collect();
        assert_eq!(map.get(500), Some(&50));
        assert_eq!(map.get(505), None);
        assert_eq!(map.at_or_below(505), Some((500, &50)));
        assert_eq!(map.at_or_below(9_999_999), Some((9990, &999)));
        assert_eq!(map.last(), Some((9990, &999)));
        let empty: ChunkedMap<u64> = ChunkedMap::new();
        assert_eq!(empty.at_or_below(5), None);
        let above: ChunkedMap<u64> = [(100, 1)].into_iter().collect();
        assert_eq!(above.at_or_below(99), None);
        let from: Vec<u64> = map.iter_from(1275).map(|(k, _)| k).take(3).collect();
        assert_eq!(from, vec![1280, 1290, 1300]);
        assert_eq!(map.iter_from(10_000).count(), 0);
        assert_eq!(map.iter_from(0).count(), 1000);
    }

    #[test]
    fn removals_give_back_room_and_rekey_chunks() {
        let mut map: ChunkedMap<u64> = (0..4 * CHUNK as u64).map(|k| (k, k)).collect();
        let mut model: BTreeMap<u64, u64> = (0..4 * CHUNK as u64).map(|k| (k, k)).collect();
        for k in 0..(CHUNK as u64 * 3 + CHUNK as u64 / 2) {
            if k % 7 != 0 {
                assert_eq!(map.remove(k), model.remove(&k));
            }
        }
        agrees(&map, &model);
        for chunk in map.chunks.values() {
            assert!(chunk.capacity() <= 8 || chunk.len() * 4 > chunk.capacity());
        }
        assert_eq!(map.remove(1), None, "already gone");
    }

    /// Random inserts and removals, mostly ascending as blocks are, against a `BTreeMap`.
    #[test]
    fn behaves_as_an_ordered_map() {
        let mut rng = crate::jscore::xorshift::XorShift(0x9e37_79b9_7f4a_7c15);
        let mut next = move || rng.next();
        let mut map = ChunkedMap::new();
        let mut model = BTreeMap::new();
        let mut top = 0u64;
        for round in 0..20_000u64 {
            let r = next();
            match r % 10 {
                0..=5 => {
                    top += 1 + r % 3;
                    assert_eq!(map.insert(top, round), model.insert(top, round));
                }
                6 | 7 => {
                    let key = next() % (top + 2);
                    assert_eq!(map.insert(key, round), model.insert(key, round));
                }
                _ => {
                    let key = next() % (top + 2);
                    assert_eq!(map.remove(key), model.remove(&key));
                }
            }
            let probe = next() % (top + 2);
            assert_eq!(
                map.at_or_below(probe),
                model.range(..=probe).next_back().map(|(k, v)| (*k, v))
            );
            assert_eq!(map.get(probe), model.get(&probe));
            if let Some((_, value)) = map.at_or_below_mut(probe) {
                *value += 1;
                *model.range_mut(..=probe).next_back().unwrap().1 += 1;
            }
            if round % 997 == 0 {
                agrees(&map, &model);
                let from: Vec<u64> = map.iter_from(probe).map(|(k, _)| k).collect();
                let expected: Vec<u64> = model.range(probe..).map(|(k, _)| *k).collect();
                assert_eq!(from, expected);
            }
        }
        agrees(&map, &model);
    }
}
