//! Snapshot files of one group: the file format and [`SnapshotFile`], the handle openraft
//! reads and writes snapshot data through. The group's directory of them is
//! `snapshot_dir.rs`.
//!
//! ## What a snapshot is here
//!
//! A snapshot file is a consistent dump of the group's machine keys in sled at one applied log
//! id, plus the openraft [`SnapshotMeta`]. Since ADR 0014 one is written only to be sent to a
//! follower (the snapshots the log is purged by stay in sled, `state_machine/snapshots.rs`), and deleted
//! by the next in-place snapshot. It is fsynced before openraft hears of it, so it is a durable
//! checkpoint on its own: if sled lost writes in a crash and is behind the snapshot, the group's
//! state is restored from the file on open (see [`state_machine`](super::state_machine)).
//! openraft streams the file to followers in chunks (`snapshot_max_chunk_size`), so a large
//! state never has to fit in memory.
//!
//! ## File format (version 1, little endian)
//!
//! ```text
//! magic    b"JRSNAP01"
//! meta     u32 length ++ raft_codec-encoded SnapshotMeta
//! record*  0x01 ++ u32 key length ++ key ++ u32 value length ++ value   (machine keys, in order)
//! trailer  0x00 ++ u64 record count ++ u32 crc32c of every byte before the crc
//! ```
//!

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

use super::machine::MachineError;
use super::raft_codec;
use super::state_db::{self, SPACE_DATA};
use super::types::{GroupId, SnapshotMeta};

const MAGIC: &[u8; 8] = b"JRSNAP01";
const TAG_RECORD: u8 = 0x01;
const TAG_END: u8 = 0x00;
/// Largest key or value accepted when reading a file (sled's own limits are far below).
const MAX_FIELD: u32 = 1 << 30;
/// Most bytes a field's buffer reserves before its bytes are read.
const FIELD_PREALLOCATION: usize = 64 << 10;

/// The snapshot data handle of [`TypeConfig`](super::TypeConfig): an open snapshot file and its
/// path (so a received snapshot can be renamed into place instead of copied).
#[derive(Debug)]
pub struct SnapshotFile {
    file: tokio::fs::File,
    path: PathBuf,
}

impl SnapshotFile {
    /// Open an existing snapshot file for reading.
    pub async fn open(path: &Path) -> io::Result<SnapshotFile> {
        let file = tokio::fs::File::open(path).await?;
        Ok(SnapshotFile {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Create a new file for writing (and reading back).
    pub async fn create(path: &Path) -> io::Result<SnapshotFile> {
        let file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .await?;
        Ok(SnapshotFile {
            file,
            path: path.to_path_buf(),
        })
    }

    /// A handle on no data, standing for an in-place snapshot where openraft wants a handle
    /// but reads only the metadata: `/dev/null`, so it costs no file (a restart of 1000
    /// groups made and unlinked one each, a sixth of its CPU in ext4's inode allocation).
    /// Installing it fails (no magic).
    pub fn placeholder() -> io::Result<SnapshotFile> {
        let path = Path::new("/dev/null");
        let file = fs::OpenOptions::new().read(true).write(true).open(path)?;
        Ok(SnapshotFile {
            file: tokio::fs::File::from_std(file),
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flush and fsync the file (after receiving all chunks).
    pub async fn sync(&mut self) -> io::Result<()> {
        use tokio::io::AsyncWriteExt;
        self.file.flush().await?;
        self.file.sync_all().await
    }

    pub(crate) fn into_file(self) -> tokio::fs::File {
        self.file
    }
}

impl AsyncRead for SnapshotFile {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.file).poll_read(cx, buf)
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.file).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.file).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.file).poll_shutdown(cx)
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(mut self: Pin<&mut Self>, position: io::SeekFrom) -> io::Result<()> {
        Pin::new(&mut self.file).start_seek(position)
    }

    fn poll_complete(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Pin::new(&mut self.file).poll_complete(cx)
    }
}

/// Writes through to `inner` while computing the crc32c of everything written.
struct CrcWriter<W> {
    inner: W,
    crc: u32,
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Reads from `inner` while computing the crc32c of everything read.
struct CrcReader<R> {
    inner: R,
    crc: u32,
}

impl<R: Read> Read for CrcReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("snapshot {}: {what}", path.display()),
    )
}

/// Dump the machine keys of `group` with `meta` into a new file at `path`, fsynced. Blocking.
///
/// The caller guarantees consistency: nothing may apply to the group while this runs.
#[cfg(test)]
pub(crate) fn write_dump(
    tree: &sled::Tree,
    group: GroupId,
    meta: &SnapshotMeta,
    path: &Path,
) -> io::Result<u64> {
    write_checked_dump(tree, group, meta, path, &|_, _| Ok(None))
}

/// [`write_dump`], with every record passed through `export` first (the machine's
/// [`GroupMachine::stored_value_export`](super::GroupMachine::stored_value_export)): a
/// record failing it fails the dump with [`DamagedRecord`] (as an `InvalidData` I/O error);
/// one it replaces is dumped with the replacement.
pub(crate) fn write_checked_dump(
    tree: &sled::Tree,
    group: GroupId,
    meta: &SnapshotMeta,
    path: &Path,
    export: &super::machine::ExportFn,
) -> io::Result<u64> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    let mut out = CrcWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        crc: 0,
    };
    out.write_all(MAGIC)?;
    let meta_bytes = raft_codec::encode(meta);
    out.write_all(&(meta_bytes.len() as u32).to_le_bytes())?;
    out.write_all(&meta_bytes)?;
    let data_prefix = state_db::prefix(group, SPACE_DATA);
    let mut count = 0u64;
    for item in tree.scan_prefix(data_prefix) {
        let (key, value) = item.map_err(io::Error::other)?;
        let key = &key[data_prefix.len()..];
        let exported = export(key, &value)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, DamagedRecord(error)))?;
        let value = exported.as_deref().unwrap_or(&value);
        out.write_all(&[TAG_RECORD])?;
        out.write_all(&(key.len() as u32).to_le_bytes())?;
        out.write_all(key)?;
        out.write_all(&(value.len() as u32).to_le_bytes())?;
        out.write_all(value)?;
        count += 1;
    }
    out.write_all(&[TAG_END])?;
    out.write_all(&count.to_le_bytes())?;
    let crc = out.crc;
    let mut file = out.inner;
    file.write_all(&crc.to_le_bytes())?;
    let file = file.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(count)
}

/// A record that failed its machine's check while being dumped.
#[derive(Debug, thiserror::Error)]
#[error("damaged record: {0}")]
pub struct DamagedRecord(pub MachineError);

fn read_u32(reader: &mut impl Read) -> io::Result<u32> {
    let mut buf = [0u8; 4];
    reader.read_exact(&mut buf)?;
    Ok(u32::from_le_bytes(buf))
}

fn read_field(reader: &mut impl Read, path: &Path) -> io::Result<Vec<u8>> {
    let len = read_u32(reader)?;
    if len > MAX_FIELD {
        return Err(corrupt(path, format!("field of {len} bytes")));
    }
    // The buffer grows with the bytes that really arrive: a damaged length field must not
    // allocate up to `MAX_FIELD` before the short read is noticed.
    let mut buf = Vec::with_capacity((len as usize).min(FIELD_PREALLOCATION));
    reader.by_ref().take(u64::from(len)).read_to_end(&mut buf)?;
    if buf.len() != len as usize {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("snapshot {}: field cut short", path.display()),
        ));
    }
    Ok(buf)
}

fn read_header(reader: &mut impl Read, path: &Path) -> io::Result<SnapshotMeta> {
    let mut magic = [0u8; 8];
    reader.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(corrupt(path, "bad magic"));
    }
    let meta = read_field(reader, path)?;
    raft_codec::decode(&meta).map_err(|e| corrupt(path, e))
}

/// Read only the metadata of a snapshot file. Blocking.
pub(crate) fn read_meta(path: &Path) -> io::Result<SnapshotMeta> {
    read_header(&mut BufReader::new(File::open(path)?), path)
}

/// Read a whole snapshot file and check its CRC. Blocking. Returns the metadata.
///
/// Call before [`read_records`] so that a damaged file never half-replaces a state.
pub(crate) fn verify(path: &Path) -> io::Result<SnapshotMeta> {
    scan(path, |_, _| Ok(()))
}

/// Hand every record of a snapshot file to `record`, in order. Blocking. The CRC is checked at
/// the end only: [`verify`] first.
pub(crate) fn read_records(
    path: &Path,
    record: impl FnMut(Vec<u8>, Vec<u8>) -> io::Result<()>,
) -> io::Result<SnapshotMeta> {
    scan(path, record)
}

/// [`verify`] over a snapshot held in memory (the fuzz targets' entry; `source` names it in
/// errors).
pub(crate) fn verify_bytes(bytes: &[u8], source: &Path) -> io::Result<SnapshotMeta> {
    scan_reader(bytes, source, |_, _| Ok(()))
}

/// [`read_records`] over a snapshot held in memory.
pub(crate) fn read_records_from_bytes(
    bytes: &[u8],
    source: &Path,
    record: impl FnMut(Vec<u8>, Vec<u8>) -> io::Result<()>,
) -> io::Result<SnapshotMeta> {
    scan_reader(bytes, source, record)
}

fn scan(
    path: &Path,
    record: impl FnMut(Vec<u8>, Vec<u8>) -> io::Result<()>,
) -> io::Result<SnapshotMeta> {
    let file = BufReader::with_capacity(1 << 20, File::open(path)?);
    scan_reader(file, path, record)
}

fn scan_reader(
    source: impl Read,
    path: &Path,
    mut record: impl FnMut(Vec<u8>, Vec<u8>) -> io::Result<()>,
) -> io::Result<SnapshotMeta> {
    let mut reader = CrcReader {
        inner: source,
        crc: 0,
    };
    let meta = read_header(&mut reader, path)?;
    let mut count = 0u64;
    loop {
        let mut tag = [0u8; 1];
        reader.read_exact(&mut tag)?;
        match tag[0] {
            TAG_RECORD => {
                let key = read_field(&mut reader, path)?;
                let value = read_field(&mut reader, path)?;
                record(key, value)?;
                count += 1;
            }
            TAG_END => break,
            other => return Err(corrupt(path, format!("unknown record tag {other}"))),
        }
    }
    let mut buf = [0u8; 8];
    reader.read_exact(&mut buf)?;
    if u64::from_le_bytes(buf) != count {
        return Err(corrupt(path, "record count mismatch"));
    }
    let expected = reader.crc;
    let mut reader = reader.inner;
    let crc = read_u32(&mut reader)?;
    if crc != expected {
        return Err(corrupt(path, "crc mismatch"));
    }
    Ok(meta)
}

/// A snapshot's meta at `index` (tests).
#[cfg(test)]
pub(crate) fn test_meta(index: u64) -> SnapshotMeta {
    use crate::consensus::types::{LogId, StoredMembership};
    SnapshotMeta {
        last_log_id: Some(LogId::new(openraft::CommittedLeaderId::new(1, 1), index)),
        last_membership: StoredMembership::default(),
        snapshot_id: format!("s-{index}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_meta as meta;

    #[tokio::test]
    async fn a_placeholder_holds_nothing_and_takes_no_write() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut placeholder = SnapshotFile::placeholder().unwrap();
        placeholder.write_all(b"JRSNAP01").await.unwrap();
        let mut read = Vec::new();
        placeholder.read_to_end(&mut read).await.unwrap();
        assert!(read.is_empty(), "{read:?}");
        assert!(verify(placeholder.path()).is_err(), "cannot be installed");
    }

    #[test]
    fn dump_round_trips_and_detects_damage() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().temporary(true).open().unwrap();
        let tree = db.open_tree("t").unwrap();
        for i in 0u32..100 {
            tree.insert(
                state_db::key(5, SPACE_DATA, &i.to_be_bytes()),
                vec![i as u8; 10],
            )
            .unwrap();
        }
        // Another group's keys are not part of the dump.
        tree.insert(state_db::key(6, SPACE_DATA, b"x"), &b"y"[..])
            .unwrap();
        let path = dir.path().join("a.snap");
        assert_eq!(write_dump(&tree, 5, &meta(9), &path).unwrap(), 100);
        assert_eq!(read_meta(&path).unwrap(), meta(9));
        assert_eq!(verify(&path).unwrap(), meta(9));
        let mut seen = Vec::new();
        read_records(&path, |k, v| {
            seen.push((k, v));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen.len(), 100);
        assert_eq!(seen[3], (3u32.to_be_bytes().to_vec(), vec![3u8; 10]));

        let mut bytes = fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        fs::write(&path, &bytes).unwrap();
        assert!(verify(&path).is_err(), "a flipped bit is detected");
    }

    /// Found reading `fuzz/fuzz_targets/snapshot.rs`'s inputs: a damaged field length made
    /// the reader allocate up to `MAX_FIELD` (1 GiB) before it found the file too short. Now
    /// the buffer grows with the bytes that exist, and the short field is an error.
    #[test]
    fn a_field_longer_than_the_file_is_an_error_without_its_allocation() {
        let meta_bytes = raft_codec::encode(&meta(1));
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&(meta_bytes.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&meta_bytes);
        bytes.push(TAG_RECORD);
        bytes.extend_from_slice(&MAX_FIELD.to_le_bytes());
        bytes.extend_from_slice(b"only a few bytes");
        let error = verify_bytes(&bytes, Path::new("damaged")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "{error}");
        let length_at = bytes.len() - 20;
        bytes[length_at..length_at + 4].copy_from_slice(&(MAX_FIELD + 1).to_le_bytes());
        let error = verify_bytes(&bytes, Path::new("damaged")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
    }
}
