//! [`Segments`]: a stream group's message blocks, in append-only segment files beside its
//! sled keys (ADR 0022). sled keeps, under each block's `b/<first seq>` key, a [`Locator`]
//! (segment, offset, length) instead of the block.
//!
//! Why not in sled: sled 0.34 splits a leaf only past 16 items and writes any page above a
//! quarter of its 512 KiB segment as a blob file of its own, so leaves of 64 KiB blocks were
//! rewritten whole as ~0.5 MiB blobs on every change: 1.8× nats-server's disk for the same
//! messages, and a stream delete *grew* the blobs (476 → 859 MB for 400 k × 1 KiB) before
//! sled let them go, tens of seconds later (issue 16). A file of blocks written once, and
//! removed once none of its blocks is left, costs its bytes and one `unlink`.
//!
//! Durability follows the keys: the apply writes a block to the active segment (no sync)
//! and stages its locator; the node's state writer `fdatasync`s the segment before it
//! writes the batch holding the locator (`FileEffects::sync_first`), so sled never points
//! at bytes that are not on disk. A segment none of whose blocks is left is removed only
//! after sled's forgetting them is durable (`FileEffects::unlink_after_sync`). Bytes written
//! after the last locator sled holds (a crash between the two) are never read; every load
//! starts a new segment, and removes the segments no locator points into.
//!
//! One per stream group instance, shared by its machine (the only writer) and its message
//! store's readers.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use super::page_buf;
use super::summary::{self, Retired};
use crate::consensus::state_db::dir_names;
use crate::consensus::MachineError;

/// Where a segment stops taking blocks: small enough that limits, purges and acks give
/// disk back in steps of a few MiB, large enough that a 10 GB stream is ~1,300 files.
pub const SEGMENT_BYTES: u64 = 8 << 20;

/// The active segment's summary is written again each time the segment grows by this much,
/// so a load after a crash reads at most this much of it block by block (1000 streams'
/// unsummarized active segments made a restart 4.5 times slower, `bench/HISTORY.md`, stop
/// 43). Each write reads only the blocks the one before did not have.
pub const PARTIAL_SUMMARY_BYTES: u64 = 1 << 20;

/// How long the active segment must have taken no block for [`Segments::summarize_quiet`] to
/// summarize what it has.
pub const QUIET_FOR: Duration = Duration::from_secs(1);

/// The version byte of a `b/` value that is a [`Locator`] (block values are 1 and 2).
pub const LOCATOR_V1: u8 = 3;
const LOCATOR_LEN: usize = 1 + 4 + 8 + 4;

/// Where a block is: `len` bytes at `offset` of segment `segment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Locator {
    pub segment: u32,
    pub offset: u64,
    pub len: u32,
}

impl Locator {
    /// [`LOCATOR_V1`] ++ segment (u32) ++ offset (u64) ++ length (u32), little endian.
    pub fn encode(&self) -> Bytes {
        let mut value = Vec::with_capacity(LOCATOR_LEN);
        value.push(LOCATOR_V1);
        value.extend_from_slice(&self.segment.to_le_bytes());
        value.extend_from_slice(&self.offset.to_le_bytes());
        value.extend_from_slice(&self.len.to_le_bytes());
        Bytes::from(value)
    }

    /// The locator in a `b/` value, `None` if the value is a block itself (layouts before
    /// segments).
    pub fn decode(value: &[u8]) -> Result<Option<Locator>, MachineError> {
        match value.first() {
            Some(&LOCATOR_V1) if value.len() == LOCATOR_LEN => Ok(Some(Locator {
                segment: u32::from_le_bytes(value[1..5].try_into().expect("4 bytes")),
                offset: u64::from_le_bytes(value[5..13].try_into().expect("8 bytes")),
                len: u32::from_le_bytes(value[13..17].try_into().expect("4 bytes")),
            })),
            Some(&LOCATOR_V1) => Err(MachineError::Corrupt(format!(
                "block locator of {} bytes",
                value.len()
            ))),
            _ => Ok(None),
        }
    }
}

#[derive(Debug)]
pub struct Segments {
    dir: PathBuf,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The segment taking new blocks and its length; `None` until the first block after a
    /// load or a seal.
    active: Option<(u32, Arc<File>, u64)>,
    /// The id the next new segment takes.
    next: u32,
    /// The segment read last (loads and consumers read in order).
    last_read: Option<(u32, Arc<File>)>,
    /// Where the active segment's blocks are (offset, length): what its summary covers
    /// (`summary.rs`), written once it is full and every [`PARTIAL_SUMMARY_BYTES`] before.
    extents: Vec<(u64, u32)>,
    /// The active segment's length when its summary was last queued.
    summarized: u64,
    /// When a block was last written (appended or extended).
    last_write: Option<Instant>,
    /// Segments whose summary may not be written yet, with what tells the summary worker
    /// they were retired (`summary::Retired`); pruned as the worker drops its end.
    summarizing: Vec<(u32, Weak<Retired>)>,
}

impl Segments {
    /// The segments in `dir` (created on the first block, or by [`Segments::prepare`]). New
    /// blocks go to a new segment numbered after every file there.
    pub fn open(dir: PathBuf) -> io::Result<Segments> {
        let next = existing(&dir)?.last().map_or(1, |last| last + 1);
        Ok(Segments {
            dir,
            inner: Mutex::new(Inner {
                active: None,
                next,
                last_read: None,
                extents: Vec::new(),
                summarized: 0,
                last_write: None,
                summarizing: Vec::new(),
            }),
        })
    }

    /// The segments no locator points into (`referenced`): written after the last batch
    /// sled holds, left by a crash before their removal, or replaced by an installed
    /// snapshot; with their summaries, summaries left without a segment and summaries a
    /// crash cut short (`*.sum.tmp`). They go once
    /// the keys that no longer point into them are durable
    /// (`MachineView::unlink_after_sync`): until then sled might still come back with them.
    pub fn unreferenced(&self, referenced: &BTreeSet<u32>) -> io::Result<Vec<PathBuf>> {
        let active = self.inner.lock().active.as_ref().map(|(id, _, _)| *id);
        let torn = dir_names(&self.dir)?
            .into_iter()
            .filter(|name| name.ends_with(".sum.tmp"))
            .map(|name| self.dir.join(name));
        Ok(existing(&self.dir)?
            .into_iter()
            .filter(|id| !referenced.contains(id) && Some(*id) != active)
            .flat_map(|id| self.paths(id))
            .chain(torn)
            .collect())
    }

    pub fn path(&self, segment: u32) -> PathBuf {
        self.dir.join(format!("{segment:08x}.seg"))
    }

    /// Where the summary of `segment` is (`summary.rs`).
    /// The ids of the segments on disk (a `.seg` or a `.sum`), in order.
    pub fn on_disk(&self) -> io::Result<Vec<u32>> {
        existing(&self.dir)
    }

    pub fn summary_path(&self, segment: u32) -> PathBuf {
        self.dir.join(format!("{segment:08x}.sum"))
    }

    /// A segment's files, to remove: its summary first, so that a crash in between never
    /// leaves a summary without its segment.
    fn paths(&self, segment: u32) -> [PathBuf; 2] {
        [self.summary_path(segment), self.path(segment)]
    }

    /// The segment taking new blocks, if one is open.
    pub fn active(&self) -> Option<u32> {
        self.inner.lock().active.as_ref().map(|(id, _, _)| *id)
    }

    /// Appends `block` (a `b/` block value) to the active segment, opening a new one when
    /// there is none or it is full. Returns its locator and the file to sync before the
    /// locator is written.
    pub fn append(&self, block: &[u8]) -> io::Result<(Locator, Arc<File>)> {
        let mut inner = self.inner.lock();
        if inner
            .active
            .as_ref()
            .is_none_or(|(_, _, len)| *len >= SEGMENT_BYTES)
        {
            if let Some((full, _, _)) = inner.active.take() {
                let blocks = std::mem::take(&mut inner.extents);
                self.summarize(&mut inner, full, blocks);
            }
            self.start_segment(&mut inner)?;
        }
        let (id, file, len) = inner.active.as_mut().expect("opened above");
        file.write_all_at(block, *len)?;
        let locator = Locator {
            segment: *id,
            offset: *len,
            len: u32::try_from(block.len()).map_err(io::Error::other)?,
        };
        *len += block.len() as u64;
        let (grown_to, file) = (*len, file.clone());
        inner.extents.push((locator.offset, locator.len));
        inner.last_write = Some(Instant::now());
        if grown_to >= inner.summarized + PARTIAL_SUMMARY_BYTES {
            inner.summarized = grown_to;
            let blocks = inner.extents.clone();
            self.summarize(&mut inner, locator.segment, blocks);
        }
        Ok((locator, file))
    }

    /// Queues the summary of the active segment's blocks so far, if it has blocks its last
    /// summary lacks and took none for [`QUIET_FOR`]: called when the group compacts, so
    /// that a group left alone (it settles 5–10 s after its last apply) leaves a restart
    /// nothing to read block by block, while a busy one is summarized every
    /// [`PARTIAL_SUMMARY_BYTES`] as before. Returns whether it queued one.
    pub fn summarize_quiet(&self) -> bool {
        self.summarize_quiet_at(Instant::now())
    }

    /// [`summarize_quiet`](Self::summarize_quiet) as of `now`.
    pub(super) fn summarize_quiet_at(&self, now: Instant) -> bool {
        let mut inner = self.inner.lock();
        let quiet = inner
            .last_write
            .is_some_and(|at| now.saturating_duration_since(at) >= QUIET_FOR);
        let Some((id, _, len)) = inner.active.as_ref() else {
            return false;
        };
        let (id, len) = (*id, *len);
        if !quiet || len <= inner.summarized {
            return false;
        }
        inner.summarized = len;
        let blocks = inner.extents.clone();
        self.summarize(&mut inner, id, blocks);
        true
    }

    /// Queues the summary of `segment`'s `blocks` (all of a full segment's, or the active
    /// one's so far), which its retirement cancels.
    fn summarize(&self, inner: &mut Inner, segment: u32, blocks: Vec<(u64, u32)>) {
        let retired = Arc::new(Retired::default());
        inner
            .summarizing
            .retain(|(_, retired)| retired.strong_count() > 0);
        inner.summarizing.push((segment, Arc::downgrade(&retired)));
        summary::queue(
            self.path(segment),
            self.summary_path(segment),
            blocks,
            retired,
        );
    }

    /// Appends `frame` right after the block at `block`, extending it, if that block is the
    /// last thing written to the active segment and the segment is not full; returns the
    /// block's new locator and the file to sync before it is written, or `None` (the caller
    /// starts a block of its own). The block's bytes are never moved: a reader of the old
    /// locator reads the same bytes as before.
    pub fn extend(&self, block: Locator, frame: &[u8]) -> io::Result<Option<(Locator, Arc<File>)>> {
        let mut inner = self.inner.lock();
        let Inner {
            active,
            extents,
            last_write,
            ..
        } = &mut *inner;
        let Some((id, file, len)) = active.as_mut() else {
            return Ok(None);
        };
        let last = extents.last_mut();
        let contiguous = *id == block.segment
            && *len == block.offset + u64::from(block.len)
            && last.as_ref() == Some(&&mut (block.offset, block.len));
        if !contiguous || *len >= SEGMENT_BYTES {
            return Ok(None);
        }
        let added = u32::try_from(frame.len()).map_err(io::Error::other)?;
        let grown = block
            .len
            .checked_add(added)
            .ok_or_else(|| io::Error::other("block too long"))?;
        file.write_all_at(frame, *len)?;
        *len += u64::from(added);
        if let Some(last) = last {
            last.1 = grown;
        }
        *last_write = Some(Instant::now());
        Ok(Some((
            Locator {
                len: grown,
                ..block
            },
            file.clone(),
        )))
    }

    /// Opens the segment that takes the first block now, if none is open: a new stream's
    /// replicas call this when the group starts, so that its first message does not wait for
    /// a directory and a file to be created and synced (about 1.7 ms of a PubAck here).
    pub fn prepare(&self) -> io::Result<()> {
        let mut inner = self.inner.lock();
        if inner.active.is_none() {
            self.start_segment(&mut inner)?;
        }
        Ok(())
    }

    /// Creates the next segment file (and the group's directory the first time) and makes it
    /// the active one. Both names must survive a crash as surely as the locators pointing
    /// into the file: the directories holding them are synced.
    fn start_segment(&self, inner: &mut Inner) -> io::Result<()> {
        if !self.dir.is_dir() {
            std::fs::create_dir_all(&self.dir)?;
            if let Some(parent) = self.dir.parent() {
                File::open(parent)?.sync_all()?;
            }
        }
        let id = inner.next;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(self.path(id))?;
        File::open(&self.dir)?.sync_all()?;
        inner.next = id + 1;
        inner.active = Some((id, Arc::new(file), 0));
        inner.summarized = 0;
        Ok(())
    }

    /// No block is left in `segment`: it takes no more, and its paths (summary, segment)
    /// are returned for the caller to remove once sled forgot its blocks durably.
    pub fn retire(&self, segment: u32) -> [PathBuf; 2] {
        let mut inner = self.inner.lock();
        if inner
            .active
            .as_ref()
            .is_some_and(|(id, _, _)| *id == segment)
        {
            inner.active = None;
            inner.extents.clear();
        }
        if inner
            .last_read
            .as_ref()
            .is_some_and(|(id, _)| *id == segment)
        {
            inner.last_read = None;
        }
        // Every summary of it still queued: the active segment's partial ones too.
        inner.summarizing.retain(|(id, retired)| {
            if *id == segment {
                if let Some(retired) = retired.upgrade() {
                    retired.set();
                }
            }
            *id != segment
        });
        self.paths(segment)
    }

    /// The length of segment `segment`'s file (missing: damage, as for a read).
    pub fn file_len(&self, segment: u32) -> io::Result<u64> {
        Ok(std::fs::metadata(self.path(segment))?.len())
    }

    /// The block `locator` points at. A segment missing or shorter than the locator says
    /// is an error of kind `NotFound` / `UnexpectedEof` (damage, `MachineError::Files`).
    pub fn read(&self, locator: Locator) -> io::Result<Bytes> {
        let file = self.file(locator.segment)?;
        page_buf::read_block_at(&file, locator.offset, locator.len as usize)
    }

    fn file(&self, segment: u32) -> io::Result<Arc<File>> {
        let mut inner = self.inner.lock();
        if let Some((id, file, _)) = &inner.active {
            if *id == segment {
                return Ok(file.clone());
            }
        }
        if let Some((id, file)) = &inner.last_read {
            if *id == segment {
                return Ok(file.clone());
            }
        }
        let file = Arc::new(File::open(self.path(segment))?);
        inner.last_read = Some((segment, file.clone()));
        Ok(file)
    }
}

/// The segment ids in `dir` with a segment or a summary file, ascending (none if it does
/// not exist). A summary's id counts so that no new segment takes it.
fn existing(dir: &Path) -> io::Result<Vec<u32>> {
    let mut ids: Vec<u32> = dir_names(dir)?
        .iter()
        .filter_map(|name| name.strip_suffix(".seg").or(name.strip_suffix(".sum")))
        .filter_map(|hex| u32::from_str_radix(hex, 16).ok())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_read_back_and_segments_roll_when_full() {
        let dir = tempfile::tempdir().unwrap();
        let segments = Segments::open(dir.path().join("g")).unwrap();
        let big = vec![7u8; (SEGMENT_BYTES / 2) as usize];
        let (a, _) = segments.append(b"first").unwrap();
        let (b, _) = segments.append(&big).unwrap();
        let (c, _) = segments.append(&big).unwrap();
        let (d, _) = segments.append(b"next segment").unwrap();
        assert_eq!((a.segment, b.segment, c.segment), (1, 1, 1));
        assert_eq!(
            d,
            Locator {
                segment: 2,
                offset: 0,
                len: 12
            }
        );
        assert_eq!(segments.read(a).unwrap().as_ref(), b"first");
        assert_eq!(segments.read(c).unwrap().len(), big.len());
        assert_eq!(segments.read(d).unwrap().as_ref(), b"next segment");
        assert_eq!(Locator::decode(&d.encode()).unwrap(), Some(d));
        assert_eq!(Locator::decode(&[2, 0, 0]).unwrap(), None);
        assert!(Locator::decode(&[LOCATOR_V1, 0]).is_err());
    }

    #[test]
    fn a_reopened_store_starts_a_new_segment_and_drops_unreferenced_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g");
        let segments = Segments::open(path.clone()).unwrap();
        let (kept, _) = segments.append(b"kept").unwrap();
        segments.retire(kept.segment);
        let (orphan, _) = segments.append(b"orphan").unwrap();
        assert_eq!(orphan.segment, 2);
        drop(segments);

        let segments = Segments::open(path.clone()).unwrap();
        let unreferenced = segments
            .unreferenced(&BTreeSet::from([kept.segment]))
            .unwrap();
        assert_eq!(unreferenced, segments.paths(2).to_vec());
        std::fs::remove_file(segments.path(2)).unwrap();
        assert_eq!(segments.read(kept).unwrap().as_ref(), b"kept");
        let error = segments.read(orphan).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        let (fresh, _) = segments.append(b"fresh").unwrap();
        assert_eq!(
            fresh.segment, 3,
            "numbered after every segment seen at open"
        );
    }

    #[test]
    fn summaries_without_their_segment_or_cut_short_are_unreferenced_and_keep_their_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g");
        let segments = Segments::open(path.clone()).unwrap();
        let (kept, _) = segments.append(b"kept").unwrap();
        drop(segments);
        std::fs::write(path.join("00000007.sum"), b"left behind").unwrap();
        std::fs::write(path.join("00000001.sum.tmp"), b"torn").unwrap();

        let segments = Segments::open(path.clone()).unwrap();
        let mut unreferenced = segments
            .unreferenced(&BTreeSet::from([kept.segment]))
            .unwrap();
        unreferenced.sort();
        let mut expected = vec![
            path.join("00000001.sum.tmp"),
            segments.summary_path(7),
            segments.path(7),
        ];
        expected.sort();
        assert_eq!(unreferenced, expected);
        let (fresh, _) = segments.append(b"fresh").unwrap();
        assert_eq!(fresh.segment, 8, "no segment takes a summary's id");
    }

    #[test]
    fn a_prepared_segment_takes_the_first_block_and_an_unused_one_goes_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("files").join("g");
        let segments = Segments::open(path.clone()).unwrap();
        assert!(!path.exists(), "nothing is created by open");
        segments.prepare().unwrap();
        assert_eq!(segments.active(), Some(1));
        assert!(
            segments.path(1).is_file(),
            "the directory and the file are made"
        );
        segments.prepare().unwrap();
        let (first, _) = segments.append(b"first").unwrap();
        assert_eq!((first.segment, first.offset), (1, 0), "no second segment");
        assert_eq!(existing(&path).unwrap(), vec![1]);

        let empty = path.with_file_name("empty");
        Segments::open(empty.clone()).unwrap().prepare().unwrap();
        let reopened = Segments::open(empty).unwrap();
        assert_eq!(
            reopened.unreferenced(&BTreeSet::new()).unwrap(),
            reopened.paths(1).to_vec()
        );
    }

    #[test]
    fn a_short_segment_reads_as_unexpected_eof() {
        let dir = tempfile::tempdir().unwrap();
        let segments = Segments::open(dir.path().join("g")).unwrap();
        let (locator, _) = segments.append(b"0123456789").unwrap();
        let cut = Locator {
            len: locator.len + 1,
            ..locator
        };
        assert_eq!(
            segments.read(cut).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }
}
