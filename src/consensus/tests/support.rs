//! Test fixtures: a small counting state machine and temp-dir node storage.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::consensus::group::{Bootstrap, GroupOptions, GroupStart, RaftGroup};
use crate::consensus::machine::{
    ApplyPosition, GroupMachine, MachineError, MachineTxn, MachineView,
};
use crate::consensus::network::NoPeers;
use crate::consensus::node_storage::NodeStorage;
use crate::consensus::pacer::Pacer;
use crate::consensus::types::{Command, GroupId, Response};
use crate::store::log::LogOptions;

/// Command kind of [`Counters`]: payload = counter name.
pub const INCREMENT: u16 = 1;
/// Command kind of [`Counters`]: remove the counter named by the payload.
pub const RESET: u16 = 2;

/// Counters by name in sled (`c/<name>` → u64 big endian); each increment answers the new
/// value. Keeps an in-memory total of all counters, rebuilt by `load`, to check that `load`
/// runs after restarts and snapshot installs.
#[derive(Default)]
pub struct Counters {
    pub total: Arc<AtomicU64>,
}

fn counter_key(name: &[u8]) -> Vec<u8> {
    let mut key = b"c/".to_vec();
    key.extend_from_slice(name);
    key
}

fn decode(value: &[u8]) -> Result<u64, MachineError> {
    let bytes: [u8; 8] = value
        .try_into()
        .map_err(|_| MachineError::Corrupt(format!("counter of {} bytes", value.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

impl GroupMachine for Counters {
    fn load(&mut self, view: &MachineView) -> Result<(), MachineError> {
        let mut total = 0;
        for item in view.scan_prefix(b"c/") {
            let (_, value) = item?;
            total += decode(&value)?;
        }
        self.total.store(total, Ordering::SeqCst);
        Ok(())
    }

    fn apply(
        &mut self,
        _at: ApplyPosition,
        command: &Command,
        txn: &mut MachineTxn<'_>,
    ) -> Result<Response, MachineError> {
        let key = counter_key(&command.payload);
        if command.kind == RESET {
            if let Some(bytes) = txn.get(&key)? {
                self.total.fetch_sub(decode(&bytes)?, Ordering::SeqCst);
                txn.remove(key);
            }
            return Ok(Response::new(Vec::new()));
        }
        if command.kind != INCREMENT {
            return Ok(Response::new(&b"unknown command"[..]));
        }
        let value = match txn.get(&key)? {
            Some(bytes) => decode(&bytes)? + 1,
            None => 1,
        };
        txn.insert(key, value.to_be_bytes().to_vec());
        self.total.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(value.to_be_bytes().to_vec()))
    }
}

pub fn increment(name: &str) -> Command {
    Command::new(INCREMENT, name.as_bytes().to_vec())
}

pub fn reset(name: &str) -> Command {
    Command::new(RESET, name.as_bytes().to_vec())
}

pub fn value_of(response: &Response) -> u64 {
    decode(&response.payload).expect("counter response")
}

/// Read counter `name` of a group from sled.
pub fn stored_counter(view: &MachineView, name: &str) -> Option<u64> {
    view.get(&counter_key(name.as_bytes()))
        .unwrap()
        .map(|v| decode(&v).unwrap())
}

pub fn open_storage(dir: &std::path::Path) -> NodeStorage {
    NodeStorage::open(dir, LogOptions::default())
        .expect("open node storage")
        .0
}

/// The options of the tests' groups.
pub fn test_options() -> GroupOptions {
    GroupOptions::default()
}

pub async fn start_single(
    storage: &NodeStorage,
    group: GroupId,
    machine: Counters,
    options: GroupOptions,
) -> RaftGroup {
    RaftGroup::start(GroupStart {
        group,
        node: 1,
        voters: RaftGroup::single_voter(1, "127.0.0.1:0"),
        storage: storage.clone(),
        transport: Arc::new(NoPeers),
        machine: Box::new(machine),
        bootstrap: Bootstrap::EveryVoter,
        options,
        pacer: Pacer::start(1),
    })
    .await
    .expect("start single-voter group")
}

/// Bytes allocated to the files under `dir` (what `du` counts). A file or directory that
/// goes while it is walked (the compactor's background reclaim removes files) counts 0.
pub fn allocated(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let gone = |error: &std::io::Error| error.kind() == std::io::ErrorKind::NotFound;
    let entries = match std::fs::read_dir(dir) {
        Err(error) if gone(&error) => return 0,
        entries => entries.unwrap(),
    };
    let mut total = 0;
    for entry in entries {
        let entry = entry.unwrap();
        let meta = match entry.metadata() {
            Err(error) if gone(&error) => continue,
            meta => meta.unwrap(),
        };
        if meta.is_dir() {
            total += allocated(&entry.path());
        } else {
            total += meta.blocks() * 512;
        }
    }
    total
}

/// How long the `wait_until` helpers wait for their condition.
const WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);
const WAIT_STEP: std::time::Duration = std::time::Duration::from_millis(50);

/// Waits (up to 30 s, on the runtime) until `done` holds; false if it never did.
pub async fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + WAIT_LIMIT;
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(WAIT_STEP).await;
    }
    done()
}

/// Waits (up to 30 s, blocking the thread) until `done` holds; false if it never did.
pub fn wait_until_blocking(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + WAIT_LIMIT;
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(WAIT_STEP);
    }
    done()
}
