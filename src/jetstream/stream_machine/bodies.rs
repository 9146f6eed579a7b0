//! [`MessageStore`]: where the front reads a stream message's headers and payload. The
//! stream state (`jscore`) keeps only each message's metadata; bodies live in the group's
//! `b/` blocks in sled, read through the node's [`BlockCache`].
//!
//! Four places, looked up in this order:
//! - **applied bodies**: a message the current apply call stored is not in a block until the
//!   call's `finish`; the machine hands its body over (`applied`) under the stream view's
//!   write lock, in the same critical section that adds its metadata to the state, so a
//!   reader that finds the metadata finds the body too (a `STREAM.INFO` that counts a
//!   message and a `MSG.GET` of it right after must agree);
//! - **pinned blocks**: a block the machine wrote in an apply call is kept here until the
//!   write-behind queue has put its batch in sled (its [`WriteTicket`] is written), since a
//!   reader must not wait for that queue; then it moves to the cache. Blocks of a memory
//!   stream stay pinned (a memory stream keeps its messages in memory by definition;
//!   `max_bytes` bounds them) until their last message goes.
//! - **the cache**, by (epoch, first sequence of the block);
//! - **sled**, read without waiting for the queue (the block is known written), then cached.
//!
//! Layout-1 `m/` keys (one key per message) are read from sled directly.
//!
//! One per stream group instance, shared by its machine (the only writer: `stored`,
//! `submitted`, `removed`, `reset`) and its `StreamView` readers. Lock order: the stream
//! view, then this store's lock, then the cache's; a reader holds no view lock when it
//! reads sled on the delivery path (`StreamView::message`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use super::block::{Block, Body};
use super::cache::{BlockCache, BlockKey};
use super::chunked::ChunkedMap;
use super::keys;
use super::segments::{Locator, Segments};
use crate::consensus::{MachineError, MachineView, WriteTicket};
use crate::jsapi::stream_config::StorageType;

/// A fresh key space in the cache for every load of every stream.
static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
pub struct MessageStore {
    storage: StorageType,
    cache: Arc<BlockCache>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Set by the machine's `load`; `None` before (nothing to read yet).
    view: Option<MachineView>,
    epoch: u64,
    /// Every `b/` block by first sequence.
    blocks: ChunkedMap<Slot>,
    /// First sequences of pinned blocks, in the order they were written.
    pinned: VecDeque<u64>,
    /// The group's segment files, where `b/` locators point (set by `reset`).
    segments: Option<Arc<Segments>>,
    /// Bodies stored by the current apply call, not yet in a block, by ascending sequence:
    /// `finish` writes them as blocks, then lets them go (`flushed`).
    applied: Vec<(u64, Body)>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("epoch", &self.epoch)
            .field("blocks", &self.blocks.len())
            .field("pinned", &self.pinned.len())
            .field("applied", &self.applied.len())
            .finish()
    }
}

#[derive(Debug)]
struct Slot {
    last_seq: u64,
    /// Boxed: most slots are not pinned, and an entry of every block of the stream is kept.
    pin: Option<Box<Pin>>,
    /// A frame that extends block `b/<joins>` (`extend.rs`): a slot of its own while pinned,
    /// then part of that block (its `last_seq` grows to the frame's; its cached copy takes
    /// the frame if a reader follows it, else goes).
    joins: Option<u64>,
}

#[derive(Debug)]
struct Pin {
    block: Arc<Block>,
    /// The write-behind batch holding the block; `None` until the machine is told.
    ticket: Option<WriteTicket>,
}

/// Pinned bytes and blocks (`/jsz`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PinnedStats {
    pub blocks: u64,
    pub bytes: u64,
}

impl MessageStore {
    pub fn new(storage: StorageType, cache: Arc<BlockCache>) -> MessageStore {
        MessageStore {
            storage,
            cache,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Why this group's stored state was found damaged here, if it was (a body read failed
    /// its check): the API answers 10194 naming it rather than "no message".
    pub fn damage(&self) -> Option<String> {
        self.inner
            .lock()
            .view
            .as_ref()
            .and_then(MachineView::damage)
    }

    /// When the node stops: lets go of the state store (readers that outlive the stop find no
    /// body), so the store closes with the groups and a node restarted in the same process can
    /// open it again.
    pub fn close(&self) {
        let mut inner = self.inner.lock();
        inner.view = None;
        inner.segments = None;
        inner.blocks.clear();
        inner.pinned.clear();
        inner.applied.clear();
    }

    /// After `load`: the group's keys are `view`'s, its blocks these (first, last sequence)
    /// in sled or in `segments`.
    pub fn reset(
        &self,
        view: MachineView,
        blocks: impl IntoIterator<Item = (u64, u64)>,
        segments: Arc<Segments>,
    ) {
        let mut inner = self.inner.lock();
        inner.view = Some(view);
        inner.segments = Some(segments);
        inner.epoch = NEXT_EPOCH.fetch_add(1, Ordering::Relaxed);
        inner.blocks = blocks
            .into_iter()
            .map(|(first, last_seq)| {
                let slot = Slot {
                    last_seq,
                    pin: None,
                    joins: None,
                };
                (first, slot)
            })
            .collect();
        inner.pinned.clear();
        inner.applied.clear();
    }

    /// Message `seq`, just stored by the apply call under way, has `body` (the machine calls
    /// this while it holds the stream view's write lock).
    pub fn applied(&self, seq: u64, body: Body) {
        self.inner.lock().applied.push((seq, body));
    }

    /// The first sequence the apply call under way stored, if any.
    pub fn first_applied(&self) -> Option<u64> {
        self.inner.lock().applied.first().map(|(seq, _)| *seq)
    }

    /// The bodies the apply call under way stored, ascending (shared, not copied).
    pub fn applied_bodies(&self) -> Vec<(u64, Body)> {
        self.inner.lock().applied.clone()
    }

    /// `finish` wrote the applied bodies as blocks (`stored`): readers find them there now.
    pub fn flushed(&self) {
        self.inner.lock().applied.clear();
    }

    /// A block the machine is writing now (`b/<first>`), pinned until its batch is written.
    pub fn stored(&self, first: u64, last_seq: u64, block: Block) {
        self.pin(first, last_seq, block, None);
    }

    /// The machine is writing `frame` (messages `frame_first..=last_seq`) right after block
    /// `b/<block>` in its segment, extending it (`extend.rs`). Until the batch with the longer
    /// locator is written, readers find the frame's messages in this pinned frame; then the
    /// block's range grows over them and they are read with it.
    pub fn extended(&self, block: u64, frame_first: u64, last_seq: u64, frame: Block) {
        self.pin(frame_first, last_seq, frame, Some(block));
    }

    /// Pins `block` (messages `first..=last_seq`; a frame joining block `joins`) as a slot
    /// of its own until its batch is written.
    fn pin(&self, first: u64, last_seq: u64, block: Block, joins: Option<u64>) {
        let mut inner = self.inner.lock();
        let pin = Box::new(Pin {
            block: Arc::new(block),
            ticket: None,
        });
        let slot = Slot {
            last_seq,
            pin: Some(pin),
            joins,
        };
        inner.blocks.insert(first, slot);
        // A memory stream's blocks are never released: no need to queue them.
        if self.storage == StorageType::File {
            inner.pinned.push_back(first);
        }
    }

    /// The blocks stored since the last call went into write-behind batch `ticket`. If that
    /// batch is written already, they go to the cache now: the call the batch runs once
    /// written (`StreamMachine::finish`) may have come before this one.
    pub fn submitted(&self, ticket: WriteTicket) {
        let mut inner = self.inner.lock();
        let Inner { blocks, pinned, .. } = &mut *inner;
        for first in pinned.iter().rev() {
            match blocks.get_mut(*first).and_then(|slot| slot.pin.as_mut()) {
                Some(pin) if pin.ticket.is_none() => pin.ticket = Some(ticket),
                Some(_) => break,
                None => {}
            }
        }
        let written = inner.view.as_ref().map(MachineView::written);
        drop(inner);
        if written.is_some_and(|written| written >= ticket) {
            self.release_written();
        }
    }

    /// Whether blocks wait here for their batch to be written (file streams only).
    pub fn has_pinned(&self) -> bool {
        !self.inner.lock().pinned.is_empty()
    }

    /// Unpins the blocks sled now holds, handing them to the cache (file streams).
    pub fn release_written(&self) {
        if self.storage == StorageType::Memory {
            return;
        }
        let mut inner = self.inner.lock();
        let Some(written) = inner.view.as_ref().map(MachineView::written) else {
            return;
        };
        let Inner {
            epoch,
            blocks,
            pinned,
            ..
        } = &mut *inner;
        while let Some(&first) = pinned.front() {
            let Some(slot) = blocks.get_mut(first) else {
                pinned.pop_front();
                continue;
            };
            match slot.pin.as_deref() {
                Some(Pin {
                    ticket: Some(ticket),
                    ..
                }) if *ticket <= written => {}
                Some(_) => break,
                None => {
                    pinned.pop_front();
                    continue;
                }
            }
            pinned.pop_front();
            if let Some(joins) = slot.joins {
                // The frame joins its block: the block's range grows, and so does its cached
                // copy if a reader follows it (which then finds the frame's messages there
                // instead of reading the block again); an unread copy goes.
                let (last_seq, frame) = (slot.last_seq, slot.pin.take());
                blocks.remove(first);
                if let Some(block) = blocks.get_mut(joins) {
                    block.last_seq = block.last_seq.max(last_seq);
                }
                self.cache.replace_if_read((*epoch, joins), |cached| {
                    frame.and_then(|frame| cached.joined(&frame.block))
                });
            } else if let Some(pin) = slot.pin.take() {
                self.cache.insert((*epoch, first), pin.block);
            }
        }
    }

    /// Block `b/<first>` is deleted (its last message went), with the frames extending it.
    pub fn removed(&self, first: u64) {
        let mut inner = self.inner.lock();
        if inner.blocks.remove(first).is_some() {
            self.cache.forget((inner.epoch, first));
        }
        let frames: Vec<u64> = inner
            .blocks
            .iter_from(first)
            .take_while(|(_, slot)| slot.joins == Some(first))
            .map(|(frame, _)| frame)
            .collect();
        for frame in frames {
            inner.blocks.remove(frame);
        }
    }

    /// Block `b/<first>` (messages up to `last`) was rewritten by compaction into blocks
    /// `stored` just before (one of them at `first` itself if `replaced`): the old block goes,
    /// with the frames extending it, in one step, so a reader finds each message in the old
    /// blocks or the new ones.
    pub fn rewritten(&self, first: u64, last: u64, replaced: bool) {
        let mut inner = self.inner.lock();
        let epoch = inner.epoch;
        if !replaced {
            inner.blocks.remove(first);
        }
        self.cache.forget((epoch, first));
        // The new blocks (no `joins`) may sit between the frames.
        let frames: Vec<u64> = inner
            .blocks
            .iter_from(first.saturating_add(1))
            .take_while(|(frame, _)| *frame <= last)
            .filter(|(_, slot)| slot.joins == Some(first))
            .map(|(frame, _)| frame)
            .collect();
        for frame in frames {
            inner.blocks.remove(frame);
        }
    }

    /// The body of message `seq`, or `None` if no block holds it (removed meanwhile). A
    /// failed read is logged, reported as damage if it is (`failed_read`), and answers
    /// `None`: a body failing its check is never served.
    pub fn body(&self, seq: u64) -> Option<Body> {
        match self.locate(seq)? {
            Found::Block { block, .. } => block.body(seq),
            Found::Single(body) => Some(body),
        }
    }

    /// The bodies of `seqs` (ascending is fastest: a block is looked up once for a run of
    /// its messages).
    pub fn bodies(&self, seqs: impl IntoIterator<Item = u64>) -> Vec<Option<Body>> {
        let mut current: Option<(u64, u64, Arc<Block>)> = None;
        seqs.into_iter()
            .map(|seq| {
                if let Some((first, last, block)) = &current {
                    if (*first..=*last).contains(&seq) {
                        return block.body(seq);
                    }
                }
                match self.locate(seq)? {
                    Found::Block { first, last, block } => {
                        let body = block.body(seq);
                        current = Some((first, last, block));
                        body
                    }
                    Found::Single(body) => Some(body),
                }
            })
            .collect()
    }

    /// Block `b/<first>` as the store has it (pinned, cached or read), `None` if there is
    /// no such block or it cannot be read (reported, as any failed read).
    pub fn block(&self, first: u64) -> Option<Arc<Block>> {
        match self.locate(first)? {
            Found::Block {
                first: at, block, ..
            } if at == first => Some(block),
            _ => None,
        }
    }

    fn locate(&self, seq: u64) -> Option<Found> {
        match self.try_locate(seq) {
            Located::Found(found) => Some(found),
            Located::Absent => None,
            // Compaction moved the block between the lookup and the read: once more.
            Located::Moved(_) => match self.try_locate(seq) {
                Located::Found(found) => Some(found),
                Located::Absent | Located::Moved(None) => None,
                Located::Moved(Some((view, error))) => {
                    failed_read(&view, seq, &error);
                    None
                }
            },
        }
    }

    fn try_locate(&self, seq: u64) -> Located {
        let (key, last, view, segments) = {
            let inner = self.inner.lock();
            if let Ok(index) = inner.applied.binary_search_by_key(&seq, |(s, _)| *s) {
                return Located::Found(Found::Single(inner.applied[index].1.clone()));
            }
            let (Some(view), Some(segments)) = (inner.view.clone(), inner.segments.clone()) else {
                return Located::Absent;
            };
            match inner.blocks.at_or_below(seq) {
                Some((first, slot)) if seq <= slot.last_seq => {
                    if let Some(pin) = &slot.pin {
                        return Located::Found(Found::Block {
                            first,
                            last: slot.last_seq,
                            block: pin.block.clone(),
                        });
                    }
                    ((inner.epoch, first), slot.last_seq, view, segments)
                }
                _ => {
                    return legacy_body(&view, seq)
                        .map_or(Located::Absent, |body| Located::Found(Found::Single(body)))
                }
            }
        };
        let block = match self.cache.get(key) {
            Some(block) => block,
            None => {
                let read = read_block(&view, &segments, key);
                if !matches!(read, Ok(Some(_))) && self.moved(key) {
                    return Located::Moved(read.err().map(|error| (view, error)));
                }
                let block = match read {
                    Ok(Some(block)) => Arc::new(block),
                    Ok(None) => return Located::Absent,
                    Err(error) => {
                        failed_read(&view, seq, &error);
                        return Located::Absent;
                    }
                };
                self.cache_if_current(key, &block);
                block
            }
        };
        Located::Found(Found::Block {
            first: key.1,
            last,
            block,
        })
    }

    /// Caches `block`, just read as `key`, unless the index moved on meanwhile: a frame
    /// that joined the block since (`release_written`) would be missing from it.
    fn cache_if_current(&self, (epoch, first): BlockKey, block: &Arc<Block>) {
        let inner = self.inner.lock();
        let current = inner.epoch == epoch
            && inner
                .blocks
                .get(first)
                .is_some_and(|slot| slot.pin.is_none() && Some(slot.last_seq) == block.last_seq());
        if current {
            self.cache.insert((epoch, first), block.clone());
        }
    }

    /// Whether block `key` is no longer where the index had it (a new epoch, removed or
    /// replaced since).
    fn moved(&self, (epoch, first): BlockKey) -> bool {
        let inner = self.inner.lock();
        inner.epoch != epoch
            || inner
                .blocks
                .get(first)
                .is_none_or(|slot| slot.pin.is_some())
    }

    /// Whether the stream's messages must survive a restart (a memory stream's need not:
    /// its segments are not synced).
    pub fn durable(&self) -> bool {
        self.storage == StorageType::File
    }

    /// The group's segment files (after `load`).
    pub fn segments(&self) -> Option<Arc<Segments>> {
        self.inner.lock().segments.clone()
    }

    /// The block `locator` points at, read from its segment.
    pub fn read_located(&self, locator: Locator) -> Result<Bytes, MachineError> {
        let segments = self
            .segments()
            .ok_or_else(|| MachineError::Corrupt("stream read before its load".into()))?;
        Ok(segments.read(locator)?)
    }

    pub fn pinned(&self) -> PinnedStats {
        let inner = self.inner.lock();
        let mut stats = PinnedStats::default();
        for pin in inner.blocks.values().filter_map(|slot| slot.pin.as_ref()) {
            stats.blocks += 1;
            stats.bytes += pin.block.cost();
        }
        stats
    }
}

enum Located {
    Found(Found),
    Absent,
    /// The block read was moved or removed meanwhile; the read's error, if it failed.
    Moved(Option<(MachineView, MachineError)>),
}

enum Found {
    Block {
        first: u64,
        last: u64,
        block: Arc<Block>,
    },
    /// A body of its own: applied, not yet in a block, or in a layout-1 `m/` key.
    Single(Body),
}

/// Block `b/<first>` from sled, or from the segment its locator there names (checked to be
/// the block the key names: a locator pointing elsewhere is damage, not another block).
fn read_block(
    view: &MachineView,
    segments: &Segments,
    (_, first): BlockKey,
) -> Result<Option<Block>, MachineError> {
    let Some(value) = view.get_written(&keys::block(first))? else {
        return Ok(None);
    };
    let Some(locator) = Locator::decode(&value)? else {
        return Block::decode(value).map(Some);
    };
    let block = Block::decode(segments.read(locator)?)?;
    if block.first_seq() != Some(first) {
        return Err(MachineError::Corrupt(format!(
            "segment {} at {} holds no block {first}",
            locator.segment, locator.offset
        )));
    }
    Ok(Some(block))
}

/// A message of layout 1 (`m/<seq>`).
fn legacy_body(view: &MachineView, seq: u64) -> Option<Body> {
    let read = view
        .get_written(&keys::message(seq))
        .and_then(|value| value.map(|v| keys::decode("message", &v)).transpose());
    match read {
        Ok(msg) => msg.map(|msg: keys::StoredMsgV1| Body {
            headers: msg.headers,
            payload: msg.payload,
        }),
        Err(error) => {
            failed_read(view, seq, &error);
            None
        }
    }
}

/// A body that could not be read is not served (never altered bytes): the reader answers
/// without it, and damage (a block failing its checksum, a panic inside sled) is reported
/// for the group, whose replica the supervisor then sets aside and rebuilds, or whose stream
/// it takes offline (ADR 0018).
fn failed_read(view: &MachineView, seq: u64, error: &MachineError) {
    tracing::error!(group = view.group(), seq, %error, "reading a message body");
    if error.is_damage() {
        view.report_damage(format!("reading message {seq}: {error}"));
    }
}
