//! [`OutQueue`]: the bytes queued for one client, in chunks of about [`CHUNK`] bytes, and the
//! [`Batch`] its writer takes and writes with one vectored write per up to 64 chunks, letting
//! each chunk go the moment it is written.
//!
//! Why chunks: one growing buffer doubled its capacity past what was queued, and the copy
//! the writer was still sending kept the previous allocation alive beside the new one: a
//! node that relayed a read of 1000 streams to one client (16 pulls of 4 MB in flight) ran
//! ~55 MB above the nodes that did not (`bench/HISTORY.md`, issue 16). Chunks cost what is
//! queued plus one chunk's spare room, and give memory back as the socket takes it.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};

/// A chunk is closed once it holds this many bytes, or when the next append does not fit.
pub const CHUNK: usize = 64 << 10;

#[derive(Debug, Default)]
pub struct OutQueue {
    /// Closed chunks, oldest first.
    full: VecDeque<Bytes>,
    /// Bytes in `full`.
    full_len: usize,
    /// The chunk appended to.
    tail: BytesMut,
}

impl OutQueue {
    /// Bytes queued.
    pub fn len(&self) -> usize {
        self.full_len + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends with `write`, which writes at most `most` bytes: they go at the end of the
    /// open chunk if they fit in its room, else in a new chunk of at least [`CHUNK`] bytes.
    pub fn append(&mut self, most: usize, write: impl FnOnce(&mut BytesMut)) {
        if self.tail.capacity() - self.tail.len() < most {
            self.close_tail();
            self.tail = BytesMut::with_capacity(most.max(CHUNK));
        }
        write(&mut self.tail);
        if self.tail.len() >= CHUNK {
            self.close_tail();
        }
    }

    /// Everything queued, for the writer; the queue is left empty.
    pub fn take(&mut self) -> Batch {
        self.close_tail();
        Batch {
            chunks: std::mem::take(&mut self.full),
            remaining: std::mem::take(&mut self.full_len),
        }
    }

    /// Moves the open chunk's bytes (if any) to the closed ones; its spare room, shared with
    /// them, stays for the next appends.
    fn close_tail(&mut self) {
        if !self.tail.is_empty() {
            let chunk = self.tail.split().freeze();
            self.full_len += chunk.len();
            self.full.push_back(chunk);
        }
    }
}

/// Chunks taken from an [`OutQueue`], read as one [`Buf`]: each chunk is dropped once read.
#[derive(Debug, Default)]
pub struct Batch {
    chunks: VecDeque<Bytes>,
    /// Bytes in `chunks`.
    remaining: usize,
}

impl Buf for Batch {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.chunks.front().map_or(&[], |chunk| chunk.as_ref())
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advanced past the end of a batch");
        self.remaining -= cnt;
        while cnt > 0 {
            let front = self
                .chunks
                .front_mut()
                .expect("`remaining` counts the chunks' bytes");
            if cnt < front.len() {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.chunks.pop_front();
        }
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut filled = 0;
        for (slot, chunk) in dst.iter_mut().zip(&self.chunks) {
            *slot = IoSlice::new(chunk);
            filled += 1;
        }
        filled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append_bytes(queue: &mut OutQueue, bytes: &[u8]) {
        queue.append(bytes.len(), |out| out.extend_from_slice(bytes));
    }

    fn read_all(mut batch: Batch) -> Vec<u8> {
        let mut out = Vec::new();
        while batch.has_remaining() {
            let chunk = batch.chunk().to_vec();
            batch.advance(chunk.len());
            out.extend(chunk);
        }
        out
    }

    #[test]
    fn what_is_appended_is_taken_in_order_and_the_queue_is_left_empty() {
        let mut queue = OutQueue::default();
        let mut expected = Vec::new();
        for i in 0..5000u32 {
            let message = vec![(i % 251) as u8; (i as usize * 37) % 9000 + 1];
            append_bytes(&mut queue, &message);
            expected.extend_from_slice(&message);
            assert_eq!(queue.len(), expected.len());
        }
        let batch = queue.take();
        assert!(queue.is_empty());
        assert_eq!(batch.remaining(), expected.len());
        assert_eq!(read_all(batch), expected);
        append_bytes(&mut queue, b"after");
        assert_eq!(read_all(queue.take()), b"after");
    }

    #[test]
    fn chunks_stay_near_their_size_and_a_big_append_gets_one_of_its_own() {
        let mut queue = OutQueue::default();
        for _ in 0..100 {
            append_bytes(&mut queue, &[7u8; 3000]);
        }
        append_bytes(&mut queue, &[9u8; 3 * CHUNK]);
        let batch = queue.take();
        let sizes: Vec<usize> = batch.chunks.iter().map(Bytes::len).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 300_000 + 3 * CHUNK);
        // 3000-byte appends fill a chunk up to CHUNK at most (22 of them: 66,000 > CHUNK
        // does not fit), and the big one is alone.
        assert!(
            sizes[..sizes.len() - 2].iter().all(|&s| s == 21 * 3000),
            "{sizes:?}"
        );
        assert_eq!(*sizes.last().unwrap(), 3 * CHUNK);
    }

    #[test]
    fn a_partial_write_leaves_the_rest_and_drops_what_was_written() {
        let mut queue = OutQueue::default();
        let message: Vec<u8> = (0..200 * 1024u32).map(|i| (i % 253) as u8).collect();
        // 1024-byte appends fill chunks of exactly CHUNK bytes.
        for piece in message.chunks(1024) {
            append_bytes(&mut queue, piece);
        }
        let mut batch = queue.take();
        let before = batch.chunks.len();
        batch.advance(CHUNK + 10);
        assert_eq!(batch.chunks.len(), before - 1);
        assert_eq!(batch.remaining(), message.len() - CHUNK - 10);
        let mut slices = [IoSlice::new(&[]); 2];
        assert_eq!(batch.chunks_vectored(&mut slices), 2);
        assert_eq!(&slices[0][..], &message[CHUNK + 10..2 * CHUNK]);
        assert_eq!(read_all(batch), &message[CHUNK + 10..]);
    }
}
