//! [`Entries`]: one group's unpurged entries in memory (`memtable.rs`), counting the payload
//! bytes they hold into a node-wide [`Resident`] count as they come and go, so that the
//! consensus layer can see how much memory every group's log holds together and purge the
//! biggest ones when that grows too large (`consensus/compactor.rs`). One group's log is kept
//! small by its own growth; a thousand groups each a little behind added up to 78 MB of
//! entries while they were all written at once (heaptrack, 1000 streams; issue 16).

use std::collections::vec_deque;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

/// Payload bytes of every group's entries in memory, together. Cheap to clone; every clone
/// reads the same count.
#[derive(Clone, Debug, Default)]
pub struct Resident(Arc<AtomicU64>);

impl Resident {
    pub fn bytes(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self, bytes: u64) {
        self.0.fetch_add(bytes, Ordering::Relaxed);
    }

    fn sub(&self, bytes: u64) {
        self.0.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// A group's entries, oldest first, with their payload bytes; dropping it takes them off the
/// node's count.
#[derive(Debug)]
pub(crate) struct Entries {
    items: VecDeque<Bytes>,
    bytes: u64,
    resident: Resident,
}

impl Entries {
    pub fn new(resident: Resident) -> Entries {
        Entries {
            items: VecDeque::new(),
            bytes: 0,
            resident,
        }
    }

    /// Payload bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn iter(&self) -> vec_deque::Iter<'_, Bytes> {
        self.items.iter()
    }

    pub fn range(&self, range: Range<usize>) -> vec_deque::Iter<'_, Bytes> {
        self.items.range(range)
    }

    fn counted(&mut self, payload: &Bytes) {
        self.bytes += payload.len() as u64;
        self.resident.add(payload.len() as u64);
    }

    fn uncounted(&mut self, payloads: &[Bytes]) {
        let bytes: u64 = payloads.iter().map(|payload| payload.len() as u64).sum();
        self.bytes -= bytes;
        self.resident.sub(bytes);
    }

    pub fn push_back(&mut self, payload: Bytes) {
        self.counted(&payload);
        self.items.push_back(payload);
    }

    pub fn push_front(&mut self, payload: Bytes) {
        self.counted(&payload);
        self.items.push_front(payload);
    }

    /// Appends `payloads` in order.
    pub fn extend(&mut self, payloads: Vec<Bytes>) {
        for payload in payloads {
            self.push_back(payload);
        }
    }

    pub fn pop_back(&mut self) -> Option<Bytes> {
        let payload = self.items.pop_back()?;
        self.uncounted(std::slice::from_ref(&payload));
        Some(payload)
    }

    /// Removes and returns the first `count` entries.
    pub fn drain_front(&mut self, count: usize) -> Vec<Bytes> {
        let removed: Vec<Bytes> = self.items.drain(..count).collect();
        self.uncounted(&removed);
        removed
    }

    /// Removes and returns the entries from position `keep` on.
    pub fn drain_from(&mut self, keep: usize) -> Vec<Bytes> {
        let removed: Vec<Bytes> = self.items.drain(keep..).collect();
        self.uncounted(&removed);
        removed
    }

    pub fn clear(&mut self) {
        let removed: Vec<Bytes> = self.items.drain(..).collect();
        self.uncounted(&removed);
    }
}

impl Drop for Entries {
    fn drop(&mut self) {
        self.resident.sub(self.bytes);
    }
}

impl<'a> IntoIterator for &'a Entries {
    type Item = &'a Bytes;
    type IntoIter = vec_deque::Iter<'a, Bytes>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(len: usize) -> Bytes {
        Bytes::from(vec![7u8; len])
    }

    #[test]
    fn the_node_count_follows_every_change_and_every_drop() {
        let resident = Resident::default();
        let mut a = Entries::new(resident.clone());
        let mut b = Entries::new(resident.clone());
        a.push_back(payload(10));
        a.push_back(payload(20));
        a.push_front(payload(5));
        b.extend(vec![payload(100), payload(200)]);
        assert_eq!((a.bytes(), b.bytes(), resident.bytes()), (35, 300, 335));
        assert_eq!(a.drain_front(1).len(), 1);
        assert_eq!(a.bytes(), 30);
        assert_eq!(a.pop_back().map(|p| p.len()), Some(20));
        assert_eq!(b.drain_from(1).len(), 1);
        assert_eq!((a.bytes(), b.bytes(), resident.bytes()), (10, 100, 110));
        a.clear();
        assert_eq!((a.len(), a.bytes(), resident.bytes()), (0, 0, 100));
        drop(b);
        assert_eq!(resident.bytes(), 0);
        drop(a);
        assert_eq!(resident.bytes(), 0);
    }
}
