//! Seeded damage to a stopped node's store files, for the corruption tests: bit flips at
//! random offsets, or a truncation at a random length. The seed is printed so a failure can be
//! replayed (`JETRAFT_FAULT_SEED=<seed>`).

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Which of a node's store files to damage.
#[derive(Clone, Copy, Debug)]
pub enum Files {
    /// The write-ahead log's segments (`log/*.wal`).
    Wal,
    /// sled's files (`state/`: `db`, `conf`, `blobs/*`, `snap.*`).
    Sled,
    /// The stored message blocks: in their segment files, or through sled for blocks kept
    /// there ([`flip_in_message_blocks`]).
    Blocks,
}

/// How to damage them.
#[derive(Clone, Copy, Debug)]
pub enum Damage {
    /// Flip this many single bits at random offsets (spread over the files by size).
    Flips(usize),
    /// Cut one file at a random length.
    Truncate,
}

/// The seed of this run: `JETRAFT_FAULT_SEED` when set, else a fresh one; printed either way.
pub fn seed(test: &str) -> u64 {
    let seed = match std::env::var("JETRAFT_FAULT_SEED") {
        Ok(text) => text.parse().expect("JETRAFT_FAULT_SEED is a u64"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    };
    eprintln!("{test}: JETRAFT_FAULT_SEED={seed}");
    seed
}

/// A small deterministic generator (splitmix64): the same seed damages the same bytes.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (`bound` > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// The non-empty files of `kind` under the store directory `store`, sorted.
pub fn files(store: &Path, kind: Files) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let root = match kind {
        Files::Wal => store.join("log"),
        Files::Sled | Files::Blocks => store.join("state"),
    };
    collect(&root, &mut out);
    out.retain(|(path, len)| {
        *len > 0
            && match kind {
                Files::Wal => path.extension().is_some_and(|e| e == "wal"),
                Files::Sled | Files::Blocks => true,
            }
    });
    out.sort();
    out
}

fn collect(dir: &Path, out: &mut Vec<(PathBuf, u64)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            collect(&path, out);
        } else {
            out.push((path, meta.len()));
        }
    }
}

/// Damages the `kind` files of the (stopped) node whose store is `store`; returns what was
/// done, one line per change, for the test's output.
pub fn damage(store: &Path, kind: Files, how: Damage, rng: &mut Rng) -> Vec<String> {
    if let (Files::Blocks, Damage::Flips(count)) = (kind, how) {
        return flip_in_message_blocks(store, count, rng);
    }
    let files = files(store, kind);
    assert!(!files.is_empty(), "no {kind:?} files under {store:?}");
    let total: u64 = files.iter().map(|(_, len)| len).sum();
    let mut done = Vec::new();
    match how {
        Damage::Flips(count) => {
            for _ in 0..count {
                let mut at = rng.below(total);
                let (path, _) = files
                    .iter()
                    .find(|(_, len)| {
                        if at < *len {
                            true
                        } else {
                            at -= len;
                            false
                        }
                    })
                    .expect("offset inside a file");
                let bit = rng.below(8) as u8;
                flip(path, at, bit);
                done.push(format!("flipped bit {bit} at {at} of {}", path.display()));
            }
        }
        Damage::Truncate => {
            let (path, len) = &files[rng.below(files.len() as u64) as usize];
            let cut = rng.below(*len);
            OpenOptions::new()
                .write(true)
                .open(path)
                .unwrap()
                .set_len(cut)
                .unwrap();
            done.push(format!("cut {} from {len} to {cut} bytes", path.display()));
        }
    }
    done
}

fn flip(path: &Path, offset: u64, bit: u8) {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8];
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.read_exact(&mut byte).unwrap();
    byte[0] ^= 1 << bit;
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(&byte).unwrap();
    file.sync_all().unwrap();
}

/// Opens a stopped node's sled database with the I/O buffer size it was made with: sled
/// refuses any other (`consensus/state_db.rs`: 128 KiB for new databases, sled's default
/// 512 KiB for older ones).
fn open_state_db(path: &Path) -> sled::Db {
    [128 << 10, 512 << 10]
        .into_iter()
        .find_map(|segment_size| {
            sled::Config::new()
                .path(path)
                .segment_size(segment_size)
                .open()
                .ok()
        })
        .expect("the stopped node's sled opens")
}

/// Flips `count` single bits at seeded offsets inside the stored message blocks (`b/` values)
/// of every stream group of the (stopped) node whose store is `store`, writing them back
/// through sled: sled's own record checksums then hold, so only jetraft's block checksum
/// (ADR 0018) can tell. Returns what was done, one line per change.
pub fn flip_in_message_blocks(store: &Path, count: usize, rng: &mut Rng) -> Vec<String> {
    /// The sled tree of every group's keys, and where a key's group prefix ends
    /// (`consensus/state_db.rs`: group id u64, space u8, then the machine's key).
    const GROUPS_TREE: &str = "raft-groups";
    const PREFIX_LEN: usize = 9;
    let db = open_state_db(&store.join("state"));
    let tree = db.open_tree(GROUPS_TREE).unwrap();
    let blocks: Vec<sled::IVec> = tree
        .iter()
        .keys()
        .map(Result::unwrap)
        .filter(|key| key.len() > PREFIX_LEN && key[PREFIX_LEN..].starts_with(b"b/"))
        .collect();
    assert!(!blocks.is_empty(), "no message block under {store:?}");
    let mut done = Vec::new();
    for _ in 0..count {
        let key = &blocks[rng.below(blocks.len() as u64) as usize];
        let mut value = tree.get(key).unwrap().unwrap().to_vec();
        let bit = rng.below(8) as u8;
        if let Some((segment, offset, len)) = locator(&value) {
            // `stream_machine/segments.rs`: the block is in a segment file of its group.
            let group = u64::from_be_bytes(key[..8].try_into().unwrap());
            let path = store
                .join("state/files")
                .join(format!("{group:016x}"))
                .join(format!("{segment:08x}.seg"));
            let at = offset + rng.below(len);
            flip(&path, at, bit);
            done.push(format!("flipped bit {bit} at {at} of {}", path.display()));
            continue;
        }
        let at = rng.below(value.len() as u64) as usize;
        value[at] ^= 1 << bit;
        tree.insert(key, value).unwrap();
        done.push(format!("flipped bit {bit} at {at} of block key {key:?}"));
    }
    db.flush().unwrap();
    done
}

/// The (segment, offset, length) of a `b/` value that locates its block in a segment file
/// (`stream_machine/segments.rs`: version 3, u32, u64, u32, little endian).
fn locator(value: &[u8]) -> Option<(u32, u64, u64)> {
    if value.len() != 17 || value[0] != 3 {
        return None;
    }
    let segment = u32::from_le_bytes(value[1..5].try_into().unwrap());
    let offset = u64::from_le_bytes(value[5..13].try_into().unwrap());
    let len = u32::from_le_bytes(value[13..17].try_into().unwrap());
    Some((segment, offset, u64::from(len)))
}
