//! Sealed metadata chunks kept out of memory (ADR 0033).
//!
//! A stream's [`MetaMap`](super::meta_map::MetaMap) keeps in memory its open tail and the
//! few sealed chunks touched last ([`RESIDENT_CHUNKS`]); every other sealed chunk is encoded
//! (`meta_chunk/codec.rs`) and appended to a [`MetaSpill`], a file of the stream's own on a
//! node, leaving in memory only where it went and how many messages it holds. Reading such a
//! chunk reads it back; changing it (a removal, an insert out of order) brings it back into
//! memory, and the space it had becomes garbage, which a compaction drops once it outweighs
//! what is still live. So a stream's metadata in memory no longer grows with its message
//! count: 10 M messages over 1000 streams kept ~50 MB of sealed chunks in memory before.
//!
//! The spill is a cache of state the node rebuilds at every start (from the message store's
//! summaries and blocks), never replicated nor read across a restart; which chunks are out
//! of memory is not observable through the map. A spill that cannot be written or read back
//! whole is fatal to the process (the restart rebuilds the metadata and starts a new spill),
//! as a failing write-ahead log is.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;

use parking_lot::Mutex;

use super::meta_chunk::Chunk;

/// Sealed chunks a stream keeps in memory beside its open tail: the ones touched last, so a
/// stream's appends (which seal the chunk before) and its removals at the head (a work queue,
/// a limit) work in memory. 2 chunks of 256 messages are ~3 KB a stream at ~5 bytes a
/// message.
pub const RESIDENT_CHUNKS: usize = 2;

/// Sealed chunks a restore keeps in memory (`Restoring`): it inserts in the order of the
/// segments, where compaction (ADR 0029) put old sequences after new ones, so a chunk it
/// sent away may be wanted again soon; the restored state then keeps `RESIDENT_CHUNKS`.
/// 256 chunks of 256 messages: the 64 Ki sequences that 64 chunks of 1024 covered before.
pub const RESTORE_RESIDENT_CHUNKS: usize = 256;

/// Garbage below this is never compacted away: a spill this small costs nothing to keep.
const COMPACT_FLOOR: u64 = 1 << 20;

/// Where a stream's metadata chunks go while out of memory: bytes appended and read back by
/// position. Implemented by the stream machine with a file beside the stream's segments.
pub trait MetaSpill: Send + Sync {
    /// Appends `bytes`, returning where they start. They may wait in memory for a
    /// [`flush`](Self::flush) (a bounded few), and read back from there meanwhile.
    fn append(&self, bytes: &[u8]) -> io::Result<u64>;
    /// Writes out whatever appends wait in memory.
    fn flush(&self) -> io::Result<()>;
    /// The `len` bytes at `at`.
    fn read(&self, at: u64, len: u32) -> io::Result<Vec<u8>>;
    /// Keeps only the ranges `live`, rewritten one after another in the order given,
    /// returning where each now starts.
    fn compact(&self, live: &[(u64, u32)]) -> io::Result<Vec<u64>>;
    /// Drops everything appended.
    fn clear(&self) -> io::Result<()>;
}

/// A chunk out of memory: where its bytes are, and what the map needs of it without
/// reading it back (its live count, for `len` and `count_after`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Away {
    pub at: u64,
    pub len: u32,
    pub live: u16,
}

/// A map's spill and its bookkeeping: which of its chunks in memory were touched last, and
/// the bytes in the spill still live and gone to garbage.
pub(super) struct Spill {
    file: Arc<dyn MetaSpill>,
    keep: usize,
    /// Chunk numbers of the sealed chunks in memory, least recently touched first; the map
    /// sends the front ones away beyond `keep`; a chunk it empties is forgotten.
    recent: VecDeque<u64>,
    live_bytes: u64,
    garbage: u64,
    /// Whether sends leave their bytes waiting in the file's memory ([`batch`](Self::batch)).
    batched: bool,
    /// The chunk read back last, by where it is: a reader walking an old stretch message by
    /// message (a consumer from sequence 1 gets each message's metadata on its own) reads
    /// and decodes each chunk once, not once a message. Positions are never reused until a
    /// compaction or a clear, which empty it.
    last_read: Mutex<Option<(u64, Arc<Chunk>)>>,
}

impl Spill {
    /// A spill over `file`, emptied first (whatever it held was another life's).
    pub fn new(file: Arc<dyn MetaSpill>, keep: usize) -> Spill {
        file.clear()
            .unwrap_or_else(|error| fatal("clearing", error));
        Spill {
            file,
            keep,
            recent: VecDeque::new(),
            live_bytes: 0,
            garbage: 0,
            batched: false,
            last_read: Mutex::new(None),
        }
    }

    /// From now on, keeps `keep` sealed chunks in memory.
    pub fn keep(&mut self, keep: usize) {
        self.keep = keep;
    }

    /// While `on`, a chunk sent out may wait in the file's memory with the ones after it and
    /// go out with them (a restore sends thousands in a row: a write each was a tenth of a
    /// 10 GiB stream's load); turned off, whatever waits goes out, and from then on every
    /// send is written at once (a stream sends one now and then: nothing waits in memory).
    pub fn batch(&mut self, on: bool) {
        self.batched = on;
        if !on {
            self.file
                .flush()
                .unwrap_or_else(|error| fatal("writing", error));
        }
    }

    /// Notes that chunk `key` (in memory) was touched now.
    pub fn touch(&mut self, key: u64) {
        if self.recent.back() == Some(&key) {
            return;
        }
        if let Some(at) = self.recent.iter().position(|k| *k == key) {
            self.recent.remove(at);
        }
        self.recent.push_back(key);
    }

    /// Forgets chunk `key`: it left the map (emptied), so it no longer counts toward `keep`.
    pub fn forget(&mut self, key: u64) {
        if let Some(at) = self.recent.iter().rposition(|k| *k == key) {
            self.recent.remove(at);
        }
    }

    /// The chunk touched least recently, if more than `keep` are in memory.
    pub fn next_to_send(&mut self) -> Option<u64> {
        (self.recent.len() > self.keep)
            .then(|| self.recent.pop_front())
            .flatten()
    }

    /// Writes `chunk` (sealed) out.
    pub fn send(&mut self, chunk: &Chunk) -> Away {
        let bytes = chunk.encode();
        let at = self
            .file
            .append(&bytes)
            .and_then(|at| match self.batched {
                true => Ok(at),
                false => self.file.flush().map(|()| at),
            })
            .unwrap_or_else(|error| fatal("writing", error));
        self.live_bytes += bytes.len() as u64;
        Away {
            at,
            len: bytes.len() as u32,
            live: chunk.live() as u16,
        }
    }

    /// Reads the chunk at `away` back, leaving it where it is.
    /// Readers of the same stream wait for each other's read (the next one usually wants
    /// the same chunk).
    pub fn load(&self, away: Away) -> Arc<Chunk> {
        let mut last_read = self.last_read.lock();
        if let Some((at, chunk)) = &*last_read {
            if *at == away.at {
                return chunk.clone();
            }
        }
        let bytes = self
            .file
            .read(away.at, away.len)
            .unwrap_or_else(|error| fatal("reading", error));
        let chunk =
            Chunk::decode(&bytes).unwrap_or_else(|error| fatal("reading", io::Error::other(error)));
        let chunk = Arc::new(chunk);
        *last_read = Some((away.at, chunk.clone()));
        chunk
    }

    /// Reads the chunk at `away` back to keep it in memory: its bytes are garbage now.
    pub fn take(&mut self, away: Away) -> Chunk {
        let chunk = self.load(away);
        *self.last_read.get_mut() = None;
        self.live_bytes -= u64::from(away.len);
        self.garbage += u64::from(away.len);
        Arc::unwrap_or_clone(chunk)
    }

    /// Whether the garbage outweighs what is live (and is worth a rewrite).
    pub fn wants_compaction(&self) -> bool {
        self.garbage >= COMPACT_FLOOR && self.garbage > self.live_bytes
    }

    /// Rewrites the spill with only `live` (every chunk still away), returning where each
    /// now starts.
    pub fn compact(&mut self, live: &[(u64, u32)]) -> Vec<u64> {
        let starts = self
            .file
            .compact(live)
            .unwrap_or_else(|error| fatal("compacting", error));
        *self.last_read.get_mut() = None;
        self.garbage = 0;
        starts
    }

    /// Forgets every chunk: the map was cleared.
    pub fn clear(&mut self) {
        self.file
            .clear()
            .unwrap_or_else(|error| fatal("clearing", error));
        self.recent.clear();
        *self.last_read.get_mut() = None;
        self.live_bytes = 0;
        self.garbage = 0;
    }

    /// Bytes in the spill: live, garbage (for tests and the bench's accounting).
    #[cfg(test)]
    pub fn bytes(&self) -> (u64, u64) {
        (self.live_bytes, self.garbage)
    }
}

fn fatal(doing: &str, error: io::Error) -> ! {
    panic!("{doing} a stream's metadata spill failed ({error}): the restart rebuilds it")
}

/// A spill in a vector, for tests: it counts the appends waiting for a flush, and the
/// flushes that had some.
#[cfg(test)]
#[derive(Default)]
pub(super) struct VecSpill(std::sync::Mutex<Vec<u8>>, std::sync::Mutex<(usize, usize)>);

#[cfg(test)]
impl VecSpill {
    /// Appends waiting, flushes that wrote some.
    pub fn waits_and_writes(&self) -> (usize, usize) {
        *self.1.lock().expect("unpoisoned")
    }
}

#[cfg(test)]
impl MetaSpill for VecSpill {
    fn append(&self, bytes: &[u8]) -> io::Result<u64> {
        let mut data = self.0.lock().expect("unpoisoned");
        let at = data.len() as u64;
        data.extend_from_slice(bytes);
        self.1.lock().expect("unpoisoned").0 += 1;
        Ok(at)
    }

    fn flush(&self) -> io::Result<()> {
        let mut counts = self.1.lock().expect("unpoisoned");
        if counts.0 > 0 {
            *counts = (0, counts.1 + 1);
        }
        Ok(())
    }

    fn read(&self, at: u64, len: u32) -> io::Result<Vec<u8>> {
        let data = self.0.lock().expect("unpoisoned");
        let range = at as usize..at as usize + len as usize;
        data.get(range)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))
    }

    fn compact(&self, live: &[(u64, u32)]) -> io::Result<Vec<u64>> {
        let mut data = self.0.lock().expect("unpoisoned");
        let mut kept = Vec::new();
        let mut starts = Vec::with_capacity(live.len());
        for (at, len) in live {
            starts.push(kept.len() as u64);
            kept.extend_from_slice(&data[*at as usize..(*at + u64::from(*len)) as usize]);
        }
        *data = kept;
        Ok(starts)
    }

    fn clear(&self) -> io::Result<()> {
        self.0.lock().expect("unpoisoned").clear();
        Ok(())
    }
}
