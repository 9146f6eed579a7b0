//! Stream state written by earlier layouts and record versions still loads: layout 1's
//! per-message and per-pending keys (moved into blocks and chunks as they are next written),
//! consumer config records from before the creation time was kept, and a layout tag jetraft
//! does not know (refused as corrupt state). Over the `tests_load` harness.

use super::keys;
use super::tests_load::{append_cmd, encode, Harness};
use super::StreamMachine;
use crate::consensus::{Command, GroupMachine, MachineError};
use crate::jetstream::payload;
use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig};
use crate::jsapi::stream_config::StreamConfig;
use crate::jscore::consumer::ConsumerCommand;
use crate::jscore::group::StreamCommand;

#[test]
fn layout_1_message_keys_still_load_and_go_when_deleted() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    harness.apply(&[append_cmd("s.a", 1), append_cmd("s.b", 2)]);
    // Rewrite the stream as layout 1 wrote it: `m/` keys instead of the block.
    let mut batch = sled::Batch::default();
    let full = |key: &[u8]| {
        crate::consensus::state_db::key(9, crate::consensus::state_db::SPACE_DATA, key)
    };
    for seq in [1, 2] {
        let msg = keys::StoredMsgV1::from(&harness.stream.message(seq).unwrap());
        batch.insert(full(&keys::message(seq)), keys::encode(&msg).as_ref());
    }
    batch.remove(full(&keys::block(1)));
    batch.insert(full(keys::LAYOUT), &[keys::LAYOUT_V1][..]);
    harness.tree().apply_batch(batch).unwrap();
    harness.check_reload("layout 1");

    let (machine, stream) =
        StreamMachine::new(StreamConfig::new("S", &["s.>"]), Default::default());
    harness.machine = machine;
    harness.stream = stream;
    harness.machine.load(&harness.view).unwrap();
    harness.apply(&[
        encode(StreamCommand::DeleteMsg { seq: 1 }),
        append_cmd("s.c", 3),
    ]);
    assert_eq!(
        harness.keys_under(keys::MESSAGE_PREFIX),
        vec![keys::message(2)]
    );
    assert_eq!(harness.keys_under(keys::BLOCK_PREFIX), vec![keys::block(3)]);
    assert_eq!(
        harness.view.get(keys::LAYOUT).unwrap().unwrap().as_ref(),
        [keys::LAYOUT_V4]
    );
    // Bodies come from the `m/` key and from the new block.
    let old = harness.stream.message(2).unwrap();
    assert_eq!((old.subject.as_str(), old.ts_nanos), ("s.b", 2));
    assert_eq!(harness.stream.message(3).unwrap().subject, "s.c");
    assert!(harness.stream.message(1).is_none());
    harness.check_reload("layout 1 keys beside layout 2 blocks");
}

#[test]
fn layout_1_pending_keys_still_load_and_move_into_chunks() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    let consumer = |command| {
        encode(StreamCommand::Consumer {
            name: "d".into(),
            command,
        })
    };
    let mut commands: Vec<Command> = (0..6).map(|i| append_cmd("s.a", i)).collect();
    commands.push(encode(StreamCommand::UpsertConsumer {
        name: "d".into(),
        config: ConsumerConfig {
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        },
        created_nanos: 7,
    }));
    commands.push(consumer(ConsumerCommand::DeliverNext {
        max_messages: 4,
        now_nanos: 10,
    }));
    harness.apply(&commands);
    assert_eq!(
        harness
            .keys_under(&keys::consumer_prefix("d"))
            .iter()
            .filter(|key| matches!(
                keys::parse_consumer_key(key),
                Ok(keys::ConsumerKey::PendingChunk(..))
            ))
            .count(),
        1,
        "one chunk key for the four deliveries"
    );
    // Rewrite the chunk as layout 1 wrote it: one `p` key per entry.
    let state = harness.state();
    let pending = state.consumer("d").unwrap().pending();
    let full = |key: &[u8]| {
        crate::consensus::state_db::key(9, crate::consensus::state_db::SPACE_DATA, key)
    };
    let mut batch = sled::Batch::default();
    for (seq, entry) in pending.iter() {
        let value = keys::encode(&keys::PendingV1::from(entry));
        batch.insert(full(&keys::pending("d", seq)), value.as_ref());
    }
    batch.remove(full(&keys::pending_chunk("d", 0)));
    harness.tree().apply_batch(batch).unwrap();
    harness.check_reload("layout 1 pending keys");

    let (machine, stream) =
        StreamMachine::new(StreamConfig::new("S", &["s.>"]), Default::default());
    harness.machine = machine;
    harness.stream = stream;
    harness.machine.load(&harness.view).unwrap();
    harness.apply(&[consumer(ConsumerCommand::Ack { stream_seq: 2 })]);
    let pending_keys: Vec<Vec<u8>> = harness
        .keys_under(&keys::consumer_prefix("d"))
        .into_iter()
        .filter(|key| {
            matches!(
                keys::parse_consumer_key(key),
                Ok(keys::ConsumerKey::Pending(..))
            )
        })
        .collect();
    assert!(
        pending_keys.is_empty(),
        "the chunk took over the layout-1 keys"
    );
    assert!(harness
        .view
        .get(&keys::pending_chunk("d", 0))
        .unwrap()
        .is_some());
    harness.check_reload("layout 1 pending keys moved into a chunk");
    harness.apply(&[encode(StreamCommand::DeleteConsumer { name: "d".into() })]);
    assert!(harness.keys_under(&keys::consumer_prefix("d")).is_empty());
    harness.check_reload("consumer deleted");
}

#[test]
fn keys_without_a_known_layout_do_not_load() {
    let harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    let key = crate::consensus::state_db::key(9, crate::consensus::state_db::SPACE_DATA, b"v");
    harness.tree().insert(key, &[9u8][..]).unwrap();
    let (mut machine, _) = StreamMachine::new(StreamConfig::new("S", &["s.>"]), Default::default());
    assert!(matches!(
        machine.load(&harness.view),
        Err(MachineError::Corrupt(_))
    ));
}

#[test]
fn consumer_config_records_without_a_creation_time_still_load_in_either_layout() {
    // A config record as written before the creation time was kept: the config's JSON
    // alone. It loads with `created` 0, in layout 2 (blocks, chunks) and layout 1 alike.
    #[derive(serde::Serialize)]
    struct ConfigOnly {
        config: payload::JsonValue<ConsumerConfig>,
    }
    for layout in [keys::LAYOUT_V2, keys::LAYOUT_V1] {
        let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
        let config = ConsumerConfig {
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        };
        harness.apply(&[
            append_cmd("s.a", 1),
            encode(StreamCommand::UpsertConsumer {
                name: "d".into(),
                config: config.clone(),
                created_nanos: 42,
            }),
        ]);
        assert_eq!(
            harness.reloaded().consumer("d").unwrap().created_nanos(),
            42
        );
        let full = |key: &[u8]| {
            crate::consensus::state_db::key(9, crate::consensus::state_db::SPACE_DATA, key)
        };
        let old = keys::encode(&ConfigOnly {
            config: payload::JsonValue(config),
        });
        let mut batch = sled::Batch::default();
        batch.insert(full(&keys::consumer_config("d")), old.as_ref());
        batch.insert(full(keys::LAYOUT), &[layout][..]);
        harness.tree().apply_batch(batch).unwrap();
        let reloaded = harness.reloaded();
        let consumer = reloaded.consumer("d").unwrap();
        assert_eq!(consumer.created_nanos(), 0, "layout {layout}");
        assert_eq!(consumer.config().ack_policy, AckPolicy::Explicit);
        assert_eq!(reloaded.stream().last_seq(), 1, "layout {layout}");
    }
}
