//! `SeqMap`: values keyed by stream sequence, ordered — what a `BTreeMap<u64, V>` does for a
//! stream's messages, laid out for how streams use it.
//!
//! A stream appends at the end and mostly removes from the front (limits, acks on a work
//! queue, expiry), so its sequences are dense: a deque indexed by `seq - base` finds, inserts
//! and removes in O(1) without the per-node cache misses of a tree (measured: the message
//! map's inserts and lookups were about a tenth of a node's CPU while publishing). Holes
//! (interior deletes, skipped sequences) cost a slot each, so when they outnumber the values
//! — a KV bucket whose old keys stay while their neighbours are overwritten, an interest
//! stream that skipped ahead — the map turns into a `BTreeMap`, and back once it is dense
//! again. Either way it answers the same; which layout it uses is not observable.
//!
//! Not replicated by itself: it is part of `StreamState`, whose contents are.

use std::collections::{btree_map, vec_deque, BTreeMap, VecDeque};
use std::iter::Enumerate;
use std::ops::{Bound, RangeBounds};

/// Holes a dense map may have beyond one per value before it turns sparse.
const SLACK: u64 = 64;

#[derive(Clone)]
pub struct SeqMap<V> {
    repr: Repr<V>,
}

#[derive(Clone)]
enum Repr<V> {
    /// `slots[i]` holds sequence `base + i`; when not empty, the first and the last slot are
    /// occupied. `len` counts the occupied slots.
    Dense {
        base: u64,
        slots: VecDeque<Option<V>>,
        len: usize,
    },
    Sparse(BTreeMap<u64, V>),
}

/// Whether `len` values spread over `span` sequences are worth a slot per sequence.
fn fits_dense(span: u64, len: u64) -> bool {
    span <= 2 * len + SLACK
}

/// Whether a sparse map has become dense enough to turn back (below `fits_dense`, so a map
/// at the boundary does not convert back and forth).
fn worth_dense(span: u64, len: u64) -> bool {
    span <= len + len / 2 + SLACK / 2
}

impl<V> Default for SeqMap<V> {
    fn default() -> Self {
        SeqMap {
            repr: Repr::Dense {
                base: 0,
                slots: VecDeque::new(),
                len: 0,
            },
        }
    }
}

impl<V> SeqMap<V> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Dense { len, .. } => *len,
            Repr::Sparse(map) => map.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, seq: u64) -> Option<&V> {
        match &self.repr {
            Repr::Dense { base, slots, .. } => {
                let index = usize::try_from(seq.checked_sub(*base)?).ok()?;
                slots.get(index)?.as_ref()
            }
            Repr::Sparse(map) => map.get(&seq),
        }
    }

    pub fn contains(&self, seq: u64) -> bool {
        self.get(seq).is_some()
    }

    pub fn first(&self) -> Option<(u64, &V)> {
        match &self.repr {
            Repr::Dense { base, slots, .. } => Some((*base, slots.front()?.as_ref()?)),
            Repr::Sparse(map) => map.first_key_value().map(|(seq, v)| (*seq, v)),
        }
    }

    pub fn last(&self) -> Option<(u64, &V)> {
        match &self.repr {
            Repr::Dense { base, slots, .. } => {
                let last = slots.back()?.as_ref()?;
                Some((*base + slots.len() as u64 - 1, last))
            }
            Repr::Sparse(map) => map.last_key_value().map(|(seq, v)| (*seq, v)),
        }
    }

    /// Stores `value` at `seq`, returning what was there.
    pub fn insert(&mut self, seq: u64, value: V) -> Option<V> {
        let (first, last) = match (self.first(), self.last()) {
            (Some((first, _)), Some((last, _))) => (first, last),
            _ => (seq, seq),
        };
        let span = last.max(seq) - first.min(seq) + 1;
        let new_len = self.len() as u64 + 1;
        match &mut self.repr {
            Repr::Dense { base, slots, len } if fits_dense(span, new_len) => {
                if slots.is_empty() {
                    *base = seq;
                }
                if seq < *base {
                    for _ in seq + 1..*base {
                        slots.push_front(None);
                    }
                    slots.push_front(Some(value));
                    *base = seq;
                    *len += 1;
                    return None;
                }
                let index = (seq - *base) as usize;
                if index >= slots.len() {
                    slots.resize_with(index, || None);
                    slots.push_back(Some(value));
                    *len += 1;
                    return None;
                }
                let previous = slots[index].replace(value);
                if previous.is_none() {
                    *len += 1;
                }
                previous
            }
            Repr::Dense { .. } => {
                self.make_sparse();
                self.insert(seq, value)
            }
            Repr::Sparse(map) => {
                let previous = map.insert(seq, value);
                if worth_dense(span, new_len) {
                    self.make_dense();
                }
                previous
            }
        }
    }

    pub fn remove(&mut self, seq: u64) -> Option<V> {
        let removed = match &mut self.repr {
            Repr::Dense { base, slots, len } => {
                let index = usize::try_from(seq.checked_sub(*base)?).ok()?;
                let removed = slots.get_mut(index)?.take()?;
                *len -= 1;
                while matches!(slots.front(), Some(None)) {
                    slots.pop_front();
                    *base += 1;
                }
                while matches!(slots.back(), Some(None)) {
                    slots.pop_back();
                }
                if slots.capacity() > 4 * slots.len() + 1024 {
                    slots.shrink_to(2 * slots.len());
                }
                if !fits_dense(slots.len() as u64, *len as u64) {
                    self.make_sparse();
                }
                removed
            }
            Repr::Sparse(map) => {
                let removed = map.remove(&seq)?;
                let span = match (map.first_key_value(), map.last_key_value()) {
                    (Some((first, _)), Some((last, _))) => last - first + 1,
                    _ => 0,
                };
                if worth_dense(span, map.len() as u64) {
                    self.make_dense();
                }
                removed
            }
        };
        Some(removed)
    }

    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Values with sequences in `range`, ascending.
    pub fn range(&self, range: impl RangeBounds<u64>) -> Iter<'_, V> {
        let from = match range.start_bound() {
            Bound::Included(seq) => *seq,
            Bound::Excluded(seq) => seq.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let to = match range.end_bound() {
            Bound::Included(seq) => Some(*seq),
            Bound::Excluded(0) => None,
            Bound::Excluded(seq) => Some(seq - 1),
            Bound::Unbounded => Some(u64::MAX),
        };
        let inner = match (&self.repr, to) {
            (Repr::Dense { base, slots, .. }, Some(to)) if from <= to && !slots.is_empty() => {
                let last = *base + slots.len() as u64 - 1;
                let (from, to) = (from.max(*base), to.min(last));
                let window = if from <= to {
                    slots.range((from - *base) as usize..=(to - *base) as usize)
                } else {
                    slots.range(0..0)
                };
                Inner::Dense {
                    base: from,
                    slots: window.enumerate(),
                }
            }
            (Repr::Sparse(map), Some(to)) if from <= to => Inner::Sparse(map.range(from..=to)),
            _ => Inner::Empty,
        };
        Iter { inner }
    }

    pub fn iter(&self) -> Iter<'_, V> {
        self.range(..)
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = u64> + '_ {
        self.iter().map(|(seq, _)| seq)
    }

    /// Number of values with a sequence greater than `after`: O(1) without holes, otherwise
    /// a walk over the shorter side of `after` (this runs on every delivery, so a walk over
    /// the whole remainder would make consuming a long stream quadratic).
    pub fn count_after(&self, after: u64) -> u64 {
        let (Some((first, _)), Some((last, _))) = (self.first(), self.last()) else {
            return 0;
        };
        count_after_in(
            self.len() as u64,
            first,
            last,
            after,
            || self.range(..=after).count() as u64,
            || self.range(after.saturating_add(1)..).count() as u64,
        )
    }

    /// Slots a dense map holds (values and holes); `None` when sparse.
    #[cfg(test)]
    pub(super) fn dense_slots(&self) -> Option<usize> {
        match &self.repr {
            Repr::Dense { slots, .. } => Some(slots.len()),
            Repr::Sparse(_) => None,
        }
    }

    fn make_sparse(&mut self) {
        let sparse = Repr::Sparse(BTreeMap::new());
        match std::mem::replace(&mut self.repr, sparse) {
            Repr::Dense { base, slots, .. } => {
                let map = slots
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, slot)| slot.map(|value| (base + i as u64, value)))
                    .collect();
                self.repr = Repr::Sparse(map);
            }
            sparse => self.repr = sparse,
        }
    }

    fn make_dense(&mut self) {
        match std::mem::take(self).repr {
            Repr::Sparse(map) => {
                let (Some(&first), Some(&last)) = (map.keys().next(), map.keys().next_back())
                else {
                    return;
                };
                let len = map.len();
                let mut slots = VecDeque::with_capacity((last - first + 1) as usize);
                for (seq, value) in map {
                    slots.resize_with((seq - first) as usize, || None);
                    slots.push_back(Some(value));
                }
                self.repr = Repr::Dense {
                    base: first,
                    slots,
                    len,
                };
            }
            dense => self.repr = dense,
        }
    }
}

/// How many of `len` ordered keys from `first` to `last` are greater than `after`, given
/// how to count either side of it by walking.
fn count_after_in(
    len: u64,
    first: u64,
    last: u64,
    after: u64,
    count_up_to: impl FnOnce() -> u64,
    count_beyond: impl FnOnce() -> u64,
) -> u64 {
    if len == 0 || after >= last {
        return 0;
    }
    if after < first {
        return len;
    }
    if last - first + 1 == len {
        return last - after;
    }
    if after - first < last - after {
        len - count_up_to()
    } else {
        count_beyond()
    }
}

/// Ascending (and, from the back, descending) `(seq, &value)` pairs of a [`SeqMap`].
pub struct Iter<'a, V> {
    inner: Inner<'a, V>,
}

enum Inner<'a, V> {
    Empty,
    /// `base` is the sequence of the window's first slot.
    Dense {
        base: u64,
        slots: Enumerate<vec_deque::Iter<'a, Option<V>>>,
    },
    Sparse(btree_map::Range<'a, u64, V>),
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (u64, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::Empty => None,
            Inner::Dense { base, slots } => {
                slots.find_map(|(i, slot)| slot.as_ref().map(|value| (*base + i as u64, value)))
            }
            Inner::Sparse(range) => range.next().map(|(seq, value)| (*seq, value)),
        }
    }
}

impl<V> DoubleEndedIterator for Iter<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::Empty => None,
            Inner::Dense { base, slots } => loop {
                let (i, slot) = slots.next_back()?;
                if let Some(value) = slot {
                    return Some((*base + i as u64, value));
                }
            },
            Inner::Sparse(range) => range.next_back().map(|(seq, value)| (*seq, value)),
        }
    }
}

impl<V> FromIterator<(u64, V)> for SeqMap<V> {
    fn from_iter<I: IntoIterator<Item = (u64, V)>>(iter: I) -> Self {
        let mut map = SeqMap::default();
        for (seq, value) in iter {
            map.insert(seq, value);
        }
        map
    }
}

/// Equal when they hold the same values at the same sequences, whatever their layout.
impl<V: PartialEq> PartialEq for SeqMap<V> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<V: Eq> Eq for SeqMap<V> {}

impl<V: std::fmt::Debug> std::fmt::Debug for SeqMap<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}
