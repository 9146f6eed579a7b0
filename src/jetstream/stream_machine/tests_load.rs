//! `StreamMachine` without Raft: random command sequences applied through `GroupMachine::apply`
//! in batches (as openraft hands them over), committed to a temporary sled tree. After
//! every batch a fresh machine loaded from the same keys must hold exactly the state of the
//! running one, and both must match a plain `StreamGroup` fed the same commands.

use bytes::Bytes;

use super::entry::STREAM_COMMAND_V1;
use super::response::decode_response;
use crate::consensus::machine::ApplyPosition;
use crate::consensus::{Command, GroupMachine, MachineError, MachineTxn, MachineView, StateDb};
use crate::jetstream::payload::META_COMMAND_V1;
use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig, DeliverPolicy};
use crate::jsapi::stream_config::{RetentionPolicy, StorageType, StreamConfig};
use crate::jscore::consumer::ConsumerCommand;
use crate::jscore::group::{StreamCommand, StreamGroup, StreamOutcome};
use crate::jscore::stream::{AppendRequest, PurgeRequest};

use super::keys;
use super::{BlockCache, StreamMachine, StreamView};
use crate::jscore::xorshift::XorShift;
use std::sync::Arc;

/// The write-behind queue held by [`Harness::stall_writer`] until this is dropped.
pub(super) struct WriterStall(#[allow(dead_code)] std::sync::mpsc::Sender<()>);

/// A machine over a temporary state db, applying and committing like the state machine
/// (batches through the write-behind queue).
pub(super) struct Harness {
    pub db: StateDb,
    pub view: MachineView,
    pub machine: StreamMachine,
    pub stream: StreamView,
    index: u64,
    _dir: tempfile::TempDir,
}

/// Bytes of the harness's block caches: a few small blocks.
const TINY_CACHE: u64 = 4096;

impl Harness {
    pub fn new(config: StreamConfig) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(dir.path()).unwrap();
        let view = MachineView::new(db.clone(), 9);
        // A cache of a few blocks: reads go to sled, evictions happen.
        let cache = Arc::new(BlockCache::new(TINY_CACHE));
        let (mut machine, stream) = StreamMachine::new(config, cache);
        machine.load(&view).unwrap();
        Harness {
            db,
            view,
            machine,
            stream,
            index: 0,
            _dir: dir,
        }
    }

    /// Applies `commands` as one batch and commits it; returns the decoded responses.
    pub fn apply(
        &mut self,
        commands: &[Command],
    ) -> Vec<Result<StreamOutcome, crate::jsapi::ApiError>> {
        self.index += 1;
        let mut txn = MachineTxn::new(&self.view);
        let responses: Vec<_> = commands
            .iter()
            .enumerate()
            .map(|(position, command)| {
                let at = ApplyPosition {
                    index: self.index,
                    position: position as u32,
                };
                let response = self.machine.apply(at, command, &mut txn).unwrap();
                decode_response(&response).unwrap()
            })
            .collect();
        self.machine.finish(&mut txn).unwrap();
        let writer = self.db.writer();
        let owner = writer.new_owner();
        let (writes, files) = txn.into_parts();
        let ticket = writer.submit_with(owner, writes, files).unwrap();
        self.machine.submitted(ticket);
        responses
    }

    /// Holds the write-behind queue: batches submitted from now on are not written (so what
    /// their apply calls wrote stays pinned) until the returned guard is dropped. At most
    /// `state_writer::MAX_QUEUED` batches may be submitted meanwhile.
    pub fn stall_writer(&self) -> WriterStall {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let (stalled, started) = std::sync::mpsc::channel::<()>();
        let mut files = crate::consensus::state_writer::FileEffects::default();
        files
            .after_written
            .push(crate::consensus::state_writer::AfterWritten(Box::new(
                move || {
                    let _ = stalled.send(());
                    // Returns once the guard drops its sender.
                    let _ = wait.recv();
                },
            )));
        let writer = self.db.writer();
        writer
            .submit_with(writer.new_owner(), Vec::new(), files)
            .unwrap();
        started.recv().unwrap();
        WriterStall(release)
    }

    /// The sled tree, once every applied batch is written (for tests that edit keys directly).
    pub fn tree(&self) -> &sled::Tree {
        self.db.writer().flush_all().unwrap();
        self.db.tree()
    }

    /// A fresh machine loaded from the committed keys (its config argument must not matter).
    pub fn reloaded(&self) -> StreamGroup {
        self.reloaded_view().read(StreamGroup::clone)
    }

    pub fn reloaded_view(&self) -> StreamView {
        let cache = Arc::new(BlockCache::new(TINY_CACHE));
        let (mut machine, view) = StreamMachine::new(StreamConfig::new("OTHER", &["o"]), cache);
        machine.load(&self.view).unwrap();
        view
    }

    pub fn state(&self) -> StreamGroup {
        self.stream.read(StreamGroup::clone)
    }
}

/// As the front encodes it: appends raw, everything else postcard.
pub(super) fn encode(command: StreamCommand) -> Command {
    super::entry::encode_command(command)
}

fn headers(random: &mut XorShift, last_seq: u64) -> Option<Bytes> {
    let mut block = String::from("NATS/1.0\r\n");
    match random.below(6) {
        0 => return None,
        1 | 2 => block += &format!("Nats-Msg-Id: id-{}\r\n", random.below(12)),
        3 => block += "Nats-Rollup: sub\r\n",
        4 => {
            block += &format!(
                "Nats-Expected-Last-Sequence: {}\r\n",
                last_seq + random.below(2)
            )
        }
        _ => block += "Nats-Rollup: all\r\n",
    }
    Some(Bytes::from(block + "\r\n"))
}

fn consumer_config(
    random: &mut XorShift,
    retention: RetentionPolicy,
    name: &str,
) -> ConsumerConfig {
    let filter = match (retention, name) {
        (RetentionPolicy::WorkQueue, "a") => "s.a",
        (RetentionPolicy::WorkQueue, _) => "s.b",
        _ => ["", "s.a", "s.*"][random.below(3) as usize],
    };
    ConsumerConfig {
        ack_policy: [AckPolicy::Explicit, AckPolicy::All, AckPolicy::None]
            [random.below(3) as usize],
        deliver_policy: [
            DeliverPolicy::All,
            DeliverPolicy::LastPerSubject,
            DeliverPolicy::New,
        ][random.below(3) as usize],
        ack_wait: 5 + random.below(10) as i64,
        max_deliver: [0, 2, 3][random.below(3) as usize],
        max_ack_pending: [0, 4][random.below(2) as usize],
        filter_subject: filter.into(),
        ..Default::default()
    }
}

fn random_command(random: &mut XorShift, group: &StreamGroup, now: i64) -> StreamCommand {
    let stream = group.stream();
    let retention = stream.limits().retention;
    let names = ["a", "b", "c"];
    let name = names[random.below(3) as usize].to_string();
    let seq =
        stream.first_seq() + random.below(stream.last_seq().saturating_sub(stream.first_seq()) + 3);
    let consumer = |command| StreamCommand::Consumer {
        name: name.clone(),
        command,
    };
    match random.below(41) {
        0..=13 => StreamCommand::Append(AppendRequest {
            subject: format!("s.{}", ["a", "b", "c", "d"][random.below(4) as usize]),
            headers: headers(random, stream.last_seq()),
            payload: Bytes::from(vec![b'x'; random.below(20) as usize]),
            now_nanos: now,
        }),
        14 => StreamCommand::Purge(PurgeRequest {
            filter: [None, Some("s.a".to_string())][random.below(2) as usize].clone(),
            seq: [0, seq][random.below(2) as usize],
            keep: 0,
        }),
        15 => StreamCommand::Purge(PurgeRequest {
            filter: None,
            seq: 0,
            keep: random.below(4),
        }),
        16 => StreamCommand::DeleteMsg { seq },
        17 => StreamCommand::Expire { now_nanos: now },
        18 => {
            let mut config = stream.config().clone();
            config.max_msgs = [0, 10, 30][random.below(3) as usize];
            config.max_msgs_per_subject = [0, 3][random.below(2) as usize];
            StreamCommand::UpdateStream {
                config,
                now_nanos: now,
            }
        }
        19..=20 => StreamCommand::UpsertConsumer {
            config: consumer_config(random, retention, &name),
            created_nanos: 1,
            name,
        },
        21 => StreamCommand::DeleteConsumer { name },
        22..=28 => consumer(ConsumerCommand::DeliverNext {
            max_messages: 1 + random.below(4) as usize,
            now_nanos: now,
        }),
        29..=33 => consumer(ConsumerCommand::Ack { stream_seq: seq }),
        34 => consumer(ConsumerCommand::AckAll { stream_seq: seq }),
        35..=36 => consumer(ConsumerCommand::Nak {
            stream_seq: seq,
            delay_nanos: [None, Some(3)][random.below(2) as usize],
            now_nanos: now,
        }),
        37 => consumer(ConsumerCommand::Term { stream_seq: seq }),
        40 => consumer(ConsumerCommand::Reset {
            seq: [0, seq][random.below(2) as usize],
        }),
        _ => consumer(ConsumerCommand::InProgress {
            stream_seq: seq,
            now_nanos: now,
        }),
    }
}

fn run(seed: u64, retention: RetentionPolicy) {
    let mut random = XorShift(seed);
    let mut config = StreamConfig::new("S", &["s.>"]);
    config.storage = StorageType::Memory;
    config.retention = retention;
    config.max_msgs = 30;
    config.max_age = 400;
    config.duplicate_window = 40;
    config.allow_rollup_hdrs = true;
    let mut harness = Harness::new(config.clone());
    let mut model = StreamGroup::new(config);
    let mut now = 1_000i64;
    for step in 0..300 {
        let mut batch = Vec::new();
        // Mostly a few commands per apply call; every fifth call a big one, so blocks hold
        // many messages and deletes land inside them.
        let size = match step % 5 {
            0 => 1 + random.below(24),
            _ => 1 + random.below(4),
        };
        for _ in 0..size {
            now += random.below(6) as i64;
            // Generated against the model, which runs ahead of the machine within a batch.
            let command = random_command(&mut random, &model, now);
            let expected = model.apply(command.clone());
            batch.push((encode(command), expected));
        }
        let commands: Vec<Command> = batch.iter().map(|(command, _)| command.clone()).collect();
        let responses = harness.apply(&commands);
        for ((_, expected), response) in batch.iter().zip(responses) {
            assert_eq!(&response, expected, "seed {seed} step {step}");
        }
        let state = harness.state();
        assert_eq!(
            state, model,
            "seed {seed} step {step}: machine follows the model"
        );
        assert_eq!(
            harness.reloaded(),
            state,
            "seed {seed} step {step}: load restores it"
        );
    }
}

#[test]
fn load_restores_exactly_what_apply_built() {
    for seed in 1..=6u64 {
        for retention in [
            RetentionPolicy::Limits,
            RetentionPolicy::Interest,
            RetentionPolicy::WorkQueue,
        ] {
            run(seed * 7919, retention);
        }
    }
}

pub(super) fn append_cmd(subject: &str, now_nanos: i64) -> Command {
    encode(StreamCommand::Append(AppendRequest {
        subject: subject.into(),
        headers: None,
        payload: Bytes::from(format!("payload at {now_nanos}")),
        now_nanos,
    }))
}

impl Harness {
    /// The group's sled keys under `prefix` (the machine's own key space).
    pub fn keys_under(&self, prefix: &[u8]) -> Vec<Vec<u8>> {
        self.view
            .scan_prefix(prefix)
            .map(|item| item.unwrap().0)
            .collect()
    }

    pub fn check_reload(&self, what: &str) {
        let reloaded = self.reloaded_view();
        let state = self.state();
        assert_eq!(
            reloaded.read(StreamGroup::clone),
            state,
            "{what}: load restores it"
        );
        // Every message's body, as served now (pinned blocks, the cache, sled) and as a
        // reloaded machine reads it from sled.
        let seqs: Vec<u64> = state.stream().seqs().collect();
        let served = self.stream.messages(&seqs);
        assert!(
            served.iter().all(Option::is_some),
            "{what}: every body is served"
        );
        assert_eq!(served, reloaded.messages(&seqs), "{what}: bodies in sled");
    }
}

#[test]
fn blocks_settle_deletes_purges_and_expiry() {
    let mut config = StreamConfig::new("S", &["s.>"]);
    config.max_age = 1_000;
    let mut harness = Harness::new(config);
    // Three apply calls of 40 messages: three blocks, one key each. Each block ends just
    // past 64 KiB, so the next call starts a block instead of extending it (`extend.rs`).
    for call in 0..3 {
        let commands: Vec<Command> = (0..40)
            .map(|i| {
                encode(StreamCommand::Append(AppendRequest {
                    subject: ["s.a", "s.b"][i % 2].into(),
                    headers: None,
                    payload: Bytes::from(vec![b'x'; 1640]),
                    now_nanos: call * 100 + i as i64,
                }))
            })
            .collect();
        harness.apply(&commands);
    }
    assert_eq!(harness.keys_under(keys::BLOCK_PREFIX).len(), 3);
    assert!(harness.keys_under(keys::MESSAGE_PREFIX).is_empty());
    harness.check_reload("three blocks");

    // Deletes inside the first block: tombstones; the first message moves the first
    // sequence, so it needs none.
    harness.apply(&[
        encode(StreamCommand::DeleteMsg { seq: 1 }),
        encode(StreamCommand::DeleteMsg { seq: 5 }),
        encode(StreamCommand::DeleteMsg { seq: 7 }),
    ]);
    assert_eq!(
        harness.keys_under(keys::TOMBSTONE_PREFIX),
        vec![keys::tombstone(5), keys::tombstone(7)]
    );
    harness.check_reload("deletes inside a block");

    // Deleting the rest of the first block drops it and its tombstones.
    let rest: Vec<Command> = (2..=40)
        .filter(|seq| *seq != 5 && *seq != 7)
        .map(|seq| encode(StreamCommand::DeleteMsg { seq }))
        .collect();
    harness.apply(&rest);
    assert_eq!(harness.keys_under(keys::BLOCK_PREFIX).len(), 2);
    assert!(harness.keys_under(keys::TOMBSTONE_PREFIX).is_empty());
    harness.check_reload("an emptied block");

    // A filtered purge leaves holes in both remaining blocks.
    harness.apply(&[encode(StreamCommand::Purge(PurgeRequest {
        filter: Some("s.a".into()),
        seq: 0,
        keep: 0,
    }))]);
    assert!(!harness.keys_under(keys::TOMBSTONE_PREFIX).is_empty());
    harness.check_reload("a filtered purge");

    // Stored and removed by the same call (a delete right after the append) never
    // reaches a block.
    harness.apply(&[
        append_cmd("s.c", 300),
        encode(StreamCommand::DeleteMsg { seq: 121 }),
        append_cmd("s.c", 301),
    ]);
    assert_eq!(harness.keys_under(keys::BLOCK_PREFIX).len(), 3);
    harness.check_reload("stored and removed in one call");

    // Expiry takes the two older blocks; keep-purge then empties the stream.
    harness.apply(&[encode(StreamCommand::Expire { now_nanos: 1_250 })]);
    assert_eq!(
        harness.keys_under(keys::BLOCK_PREFIX),
        vec![keys::block(122)]
    );
    assert!(harness.keys_under(keys::TOMBSTONE_PREFIX).is_empty());
    harness.check_reload("expiry");
    harness.apply(&[encode(StreamCommand::Purge(PurgeRequest {
        filter: None,
        seq: 0,
        keep: 0,
    }))]);
    assert!(harness.keys_under(keys::BLOCK_PREFIX).is_empty());
    assert!(harness.keys_under(keys::TOMBSTONE_PREFIX).is_empty());
    harness.check_reload("purge");
    assert_eq!(harness.state().stream().last_seq(), 122);
}

#[test]
fn an_ack_touches_a_constant_number_of_keys() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    for i in 0..200 {
        harness.apply(&[encode(StreamCommand::Append(AppendRequest {
            subject: "s.a".into(),
            headers: None,
            payload: Bytes::from(format!("m{i}")),
            now_nanos: i,
        }))]);
    }
    let config = ConsumerConfig {
        ack_policy: AckPolicy::Explicit,
        max_ack_pending: -1,
        ..Default::default()
    };
    harness.apply(&[encode(StreamCommand::UpsertConsumer {
        name: "d".into(),
        config,
        created_nanos: 1,
    })]);
    let consumer = |command| {
        encode(StreamCommand::Consumer {
            name: "d".into(),
            command,
        })
    };
    harness.apply(&[consumer(ConsumerCommand::DeliverNext {
        max_messages: 200,
        now_nanos: 300,
    })]);
    let mut txn = MachineTxn::new(&harness.view);
    let at = ApplyPosition {
        index: 1_000,
        position: 0,
    };
    harness
        .machine
        .apply(
            at,
            &consumer(ConsumerCommand::Ack { stream_seq: 1 }),
            &mut txn,
        )
        .unwrap();
    harness.machine.finish(&mut txn).unwrap();
    // The pending entry's chunk and the consumer's state record; nothing else.
    assert_eq!(txn.len(), 2);
}

/// A reader that sees a message in the state (a `STREAM.INFO` count, a `MSG.GET` lookup) may
/// come between the apply that stored it and the call's `finish`, which writes its block: its
/// body must be there already.
#[test]
fn a_message_is_readable_as_soon_as_the_state_holds_it() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    harness.apply(&[append_cmd("s.a", 1)]);
    let mut txn = MachineTxn::new(&harness.view);
    for (position, now) in [2, 3].into_iter().enumerate() {
        let at = ApplyPosition {
            index: 2,
            position: position as u32,
        };
        let command = append_cmd("s.b", now);
        harness.machine.apply(at, &command, &mut txn).unwrap();
    }
    let count = harness.stream.read(|group| group.stream().message_count());
    assert_eq!(count, 3);
    let read = |harness: &Harness| {
        let one = harness.stream.message(2).map(|msg| msg.payload);
        let all = harness.stream.messages(&[1, 2, 3]);
        let all: Vec<_> = all.into_iter().map(|m| m.map(|m| m.payload)).collect();
        (one, all)
    };
    let expected = (
        Some(Bytes::from("payload at 2")),
        vec![
            Some(Bytes::from("payload at 1")),
            Some(Bytes::from("payload at 2")),
            Some(Bytes::from("payload at 3")),
        ],
    );
    assert_eq!(read(&harness), expected, "before the call's finish");
    harness.machine.finish(&mut txn).unwrap();
    assert_eq!(read(&harness), expected, "after it");
}

#[test]
fn unknown_or_undecodable_commands_are_corrupt_state() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    let mut txn = MachineTxn::new(&harness.view);
    let at = ApplyPosition {
        index: 1,
        position: 0,
    };
    for command in [
        Command::new(META_COMMAND_V1, Bytes::new()),
        Command::new(STREAM_COMMAND_V1, Bytes::from_static(&[200, 1])),
    ] {
        let result = harness.machine.apply(at, &command, &mut txn);
        assert!(
            matches!(result, Err(MachineError::UndecodableCommand { .. })),
            "{result:?}"
        );
    }
}

/// By hand: `cargo test --release --lib apply_cost -- --ignored --nocapture`. Times applying
/// appends (256 per batch, 128-byte payloads) to a stream machine over sled, without Raft.
#[test]
#[ignore]
fn apply_cost() {
    let mut harness = Harness::new(StreamConfig::new("BENCH", &["bench.>"]));
    let batches: u64 = std::env::var("APPLY_COST_BATCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let started = std::time::Instant::now();
    for batch in 0..batches {
        let commands: Vec<Command> = (0..256)
            .map(|i| {
                encode(StreamCommand::Append(
                    crate::jscore::stream::AppendRequest {
                        subject: "bench.js".into(),
                        headers: None,
                        payload: Bytes::from(vec![b'x'; 128]),
                        now_nanos: (batch * 256 + i) as i64,
                    },
                ))
            })
            .collect();
        harness.apply(&commands);
    }
    let elapsed = started.elapsed();
    let msgs = batches * 256;
    println!(
        "{msgs} appends in {elapsed:?}: {:.0} msgs/s, {:.2} us/msg",
        msgs as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / msgs as f64
    );
}
