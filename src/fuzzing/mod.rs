//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz; see the README's "Fuzzing"):
//! the few decoders that are crate-private, reached without widening their modules' APIs.
//! Not part of jetraft's API; nothing in the broker calls this module.
//!
//! The parsers that are public already (the client protocol's `wire::Decoder`, the JSON of
//! `jsapi`, `consensus::raft_codec`, `jetstream::payload`, the generated `cluster::proto`)
//! are fuzzed through their own paths. What is here:
//!
//! - [`verify_snapshot`] / [`snapshot_records`]: the snapshot reader of
//!   `consensus::snapshot`, over bytes in memory instead of a file.
//! - [`StreamStateFixture`]: a stream group's sled keys loaded by its `StreamMachine` (what a
//!   restart or an installed snapshot does), then committed commands applied to what loaded.
//! - [`targets`]: each fuzz target's body, `run(input)`; `fuzz/fuzz_targets/` are one-line
//!   wrappers, and `corpus_tests.rs` replays the committed corpus (`fuzz/corpus/`) through
//!   them in every `cargo test`, so a fixed finding stays fixed without libFuzzer.
//! - [`seeds`]: real inputs for the fuzz targets' seed corpora, made by the code itself.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::consensus::machine::ApplyPosition;
use crate::consensus::state_db::{self, SPACE_DATA};
use crate::consensus::types::SnapshotMeta;
use crate::consensus::{
    snapshot, Command, GroupMachine, MachineError, MachineTxn, MachineView, Response, StateDb,
};
use crate::jetstream::stream_machine::StreamMachine;
use crate::jsapi::stream_config::StreamConfig;

/// What errors of an in-memory snapshot name as its file.
const IN_MEMORY: &str = "<fuzz input>";

/// Checks a whole snapshot (magic, metadata, records, count and CRC), as a follower does
/// before it installs one.
pub fn verify_snapshot(bytes: &[u8]) -> io::Result<SnapshotMeta> {
    snapshot::verify_bytes(bytes, Path::new(IN_MEMORY))
}

/// Machine keys and their values, in key order (a snapshot's records, a group's sled keys).
pub type Records = Vec<(Vec<u8>, Vec<u8>)>;

/// The records of a snapshot, in order (the CRC is checked at the end only: verify first).
pub fn snapshot_records(bytes: &[u8]) -> io::Result<(SnapshotMeta, Records)> {
    let mut records = Vec::new();
    let meta = snapshot::read_records_from_bytes(bytes, Path::new(IN_MEMORY), |key, value| {
        records.push((key, value));
        Ok(())
    })?;
    Ok((meta, records))
}

/// One sled database holding one stream group's keys, reused by every run of a fuzz target
/// (opening sled costs far more than a run).
pub struct StreamStateFixture {
    db: StateDb,
}

/// The group whose keys the fixture writes.
const FIXTURE_GROUP: u64 = 1;

impl StreamStateFixture {
    /// Opens (or creates) the database in `dir`.
    pub fn open(dir: &Path) -> Result<StreamStateFixture, MachineError> {
        Ok(StreamStateFixture {
            db: StateDb::open(dir)?,
        })
    }

    /// The process's one fixture, opened on first use in a [`scratch_dir`].
    pub fn shared() -> &'static StreamStateFixture {
        static FIXTURE: OnceLock<StreamStateFixture> = OnceLock::new();
        FIXTURE.get_or_init(|| {
            StreamStateFixture::open(&scratch_dir("stream-state"))
                .expect("sled opens a scratch database")
        })
    }

    /// Replaces the group's keys by `records` (machine keys, as a snapshot carries them),
    /// loads a `StreamMachine` from them and, if that worked, applies `commands` to it (each
    /// a command of one Raft entry), as consensus does after a restart or an installed
    /// snapshot. Returns each command's response, or the first error.
    pub fn load_and_apply(
        &self,
        records: &[(Vec<u8>, Vec<u8>)],
        commands: &[Command],
    ) -> Result<Vec<Response>, MachineError> {
        self.replace_keys(records)?;
        let view = MachineView::new(self.db.clone(), FIXTURE_GROUP);
        let (mut machine, _view) = StreamMachine::new(StreamConfig::default(), Default::default());
        machine.load(&view)?;
        let mut responses = Vec::with_capacity(commands.len());
        let mut txn = MachineTxn::new(&view);
        for (index, command) in (1u64..).zip(commands) {
            let at = ApplyPosition { index, position: 0 };
            responses.push(machine.apply(at, command, &mut txn)?);
        }
        machine.finish(&mut txn)?;
        Ok(responses)
    }

    fn replace_keys(&self, records: &[(Vec<u8>, Vec<u8>)]) -> Result<(), MachineError> {
        let tree = self.db.tree();
        let mut batch = sled::Batch::default();
        for item in tree.scan_prefix(state_db::group_prefix(FIXTURE_GROUP)) {
            let (key, _) = item?;
            batch.remove(key);
        }
        for (key, value) in records {
            batch.insert(
                state_db::key(FIXTURE_GROUP, SPACE_DATA, key),
                value.as_slice(),
            );
        }
        tree.apply_batch(batch)?;
        Ok(())
    }
}

/// A scratch directory of this process for one kind of a fuzz target's files,
/// `<temp dir>/jetraft-fuzz-<pid>/<what>` (`fuzz/smoke.sh` points `TMPDIR` at a directory it
/// removes; the corpus replay test removes its own).
pub(crate) fn scratch_dir(what: &str) -> PathBuf {
    scratch_root().join(what)
}

fn scratch_root() -> PathBuf {
    std::env::temp_dir().join(format!("jetraft-fuzz-{}", std::process::id()))
}

#[cfg(test)]
mod corpus_tests;
pub mod seeds;
pub mod targets;
