//! [`read_block_at`]: reads a message block from its segment file into memory that goes back
//! to the kernel the moment the last reader drops it: a block of at least [`MAPPED_FROM`]
//! bytes gets an anonymous mapping of its own ([`PageBuf`]), a smaller one a `Vec`.
//!
//! Why: the node's block cache (`cache.rs`) holds blocks read from disk up to its byte
//! budget and drops them in CLOCK order. Allocated by mimalloc (the allocator then, ADR 0012), a MB of cached blocks cost
//! ~1.45 MB of RSS after a read of 1000 R3 streams, and stayed: blocks of many sizes near
//! 64 KiB spread over its size classes, and a page of them goes back only once every slot
//! in it is free, which evictions in CLOCK order rarely leave. A mapping costs its length
//! rounded up to 4 KiB pages and nothing once unmapped: the same read left 82–86 MB on each
//! node instead of 90–93 (`bench/HISTORY.md`, issue 16). A mapping per block read costs two
//! system calls more than a read.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::ptr::NonNull;

use bytes::Bytes;

/// Blocks from this length up are read into a mapping of their own; below it the rounding
/// to whole pages would cost more than a size class does.
pub const MAPPED_FROM: usize = 16 << 10;

/// `len` bytes of `file` from `offset`, as one [`Bytes`].
pub fn read_block_at(file: &File, offset: u64, len: usize) -> io::Result<Bytes> {
    if len < MAPPED_FROM {
        let mut block = vec![0u8; len];
        file.read_exact_at(&mut block, offset)?;
        return Ok(Bytes::from(block));
    }
    let mut block = PageBuf::new(len)?;
    file.read_exact_at(block.as_mut_slice(), offset)?;
    Ok(Bytes::from_owner(block))
}

/// Zeroed bytes in an anonymous private mapping of their own, unmapped on drop. The kernel
/// rounds the mapping, and its unmapping, up to whole pages.
struct PageBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// The mapping is owned by the buffer alone, and only read through `&self` once built.
unsafe impl Send for PageBuf {}
unsafe impl Sync for PageBuf {}

impl PageBuf {
    fn new(len: usize) -> io::Result<PageBuf> {
        assert!(len > 0, "an empty buffer needs no mapping");
        // SAFETY: a fresh anonymous mapping, no address asked for, no file: touches no
        // memory of ours. MAP_POPULATE fills its pages in one go instead of a fault per page
        // during the read.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(PageBuf { ptr, len })
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes of a live, writable mapping owned by `self`, zeroed
        // by the kernel; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl AsRef<[u8]> for PageBuf {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: as in `as_mut_slice`; shared references only read.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once: no slice of it outlives `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn small_and_large_blocks_read_back_exactly_and_slices_outlive_the_whole() {
        let mut file = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&data).unwrap();
        for (offset, len) in [
            (0, 1),
            (7, MAPPED_FROM - 1),
            (3, MAPPED_FROM),
            (1000, 150_001),
        ] {
            let block = read_block_at(&file, offset as u64, len).unwrap();
            assert_eq!(
                block.as_ref(),
                &data[offset..offset + len],
                "{offset}+{len}"
            );
            // A body handed to a reader is a slice of the block; it keeps the mapping alive.
            let tail = block.slice(len / 2..);
            drop(block);
            assert_eq!(tail.as_ref(), &data[offset + len / 2..offset + len]);
        }
    }

    #[test]
    fn a_read_past_the_end_fails_and_unmaps() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[1u8; 100]).unwrap();
        let error = read_block_at(&file, 50, MAPPED_FROM).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }
}
