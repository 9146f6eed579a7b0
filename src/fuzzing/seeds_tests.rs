//! The seeds decode as what they claim to be, and the ignored test that writes them into
//! `fuzz/corpus/` (input layouts: each target's doc comment in `fuzz/fuzz_targets/`).

use std::path::Path;

use super::*;
use crate::fuzzing::{snapshot_records, verify_snapshot};
use crate::wire::Decoder;

/// A session as the `nats` CLI and async-nats open it, then core and JetStream traffic.
const CLIENT_TRAFFIC: &[&[u8]] = &[
    b"CONNECT {\"verbose\":false,\"pedantic\":false,\"lang\":\"rust\",\"version\":\"0.42.0\",\
\"protocol\":1,\"echo\":true,\"headers\":true,\"no_responders\":true}\r\nPING\r\n",
    b"SUB _INBOX.abc.* 1\r\nPUB $JS.API.STREAM.INFO.S _INBOX.abc.1 0\r\n\r\nPING\r\n",
    b"HPUB s.a _INBOX.abc.2 36 41\r\nNATS/1.0\r\nNats-Msg-Id: one\r\nA: b\r\n\r\nhello\r\n",
    b"SUB foo q 7\r\nUNSUB 7 10\r\nPUB foo 5\r\nhello\r\nPONG\r\n+OK\r\nINFO {}\r\n",
    b"sub\tfoo  8 \r\npub foo 0\r\n\r\nping\n",
];

/// JetStream API bodies by the target's selector byte (see `fuzz_targets/jsapi_requests.rs`).
const API_BODIES: &[(u8, &str)] = &[
    (
        0,
        r#"{"name":"S","subjects":["s.>"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":3,"duplicate_window":120000000000,"compression":"none","allow_direct":true,"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{}}"#,
    ),
    (
        0,
        r#"{"name":"KV_b","subjects":["$KV.b.>"],"max_msgs_per_subject":5,"discard":"new","allow_rollup_hdrs":true,"deny_delete":true,"allow_direct":true,"allow_msg_ttl":true,"metadata":{"_nats.req.level":"1"}}"#,
    ),
    (
        1,
        r#"{"stream_name":"S","config":{"durable_name":"d","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"filter_subject":"s.a","replay_policy":"instant","max_ack_pending":1000,"max_waiting":512,"backoff":[1000000000,2000000000]},"action":"create"}"#,
    ),
    (
        1,
        r#"{"stream_name":"S","config":{"deliver_subject":"push.d","deliver_policy":"by_start_sequence","opt_start_seq":3,"ack_policy":"none","idle_heartbeat":5000000000,"flow_control":true,"filter_subjects":["s.a","s.b"]}}"#,
    ),
    (
        2,
        r#"{"deleted_details":true,"subjects_filter":"s.>","offset":0}"#,
    ),
    (3, r#"{"filter":"s.a","keep":1}"#),
    (4, r#"{"offset":0,"subject":"s.*"}"#),
    (5, r#"{"seq":3,"no_erase":true}"#),
    (6, r#"{"last_by_subj":"s.a"}"#),
    (7, r#"{"offset":256}"#),
    (
        8,
        r#"{"batch":10,"expires":5000000000,"max_bytes":1024,"idle_heartbeat":1000000000}"#,
    ),
    (9, r#"{"placement":{"cluster":"c","tags":["a"]}}"#),
    (10, r#"{"peer":"n2"}"#),
    (11, r#"{"pause_until":"2026-01-01T00:00:00Z"}"#),
    (12, "$JS.API.CONSUMER.CREATE.S.d.s.a"),
    (12, "$JS.ACK.S.d.1.3.1.1700000000000000000.4"),
    (12, "$JS.API.STREAM.MSG.DELETE.S"),
];

fn with_selector(selector: u8, body: &[u8]) -> Vec<u8> {
    let mut input = vec![selector];
    input.extend_from_slice(body);
    input
}

fn wal_input(segments: &[Vec<u8>]) -> Vec<u8> {
    let mut input = Vec::new();
    frame(&mut input, &[0]);
    for segment in segments {
        frame(&mut input, segment);
    }
    input
}

fn stream_state_input(keys: &[(Vec<u8>, Vec<u8>)], commands: &[Command]) -> Vec<u8> {
    let mut input = Vec::new();
    for (key, value) in keys {
        frame(&mut input, key);
        frame(&mut input, value);
    }
    frame(&mut input, &[]);
    for command in commands {
        let mut part = command.kind.to_le_bytes().to_vec();
        part.extend_from_slice(&command.payload);
        frame(&mut input, &part);
    }
    input
}

/// Every seed, by target.
fn seed_corpus(scratch: &Path) -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let fixture = StreamStateFixture::open(&scratch.join("sled")).unwrap();
    let state = fixture.sample_state(scratch).unwrap();
    let segments = wal_segments(&scratch.join("wal")).unwrap();
    let all_traffic: Vec<u8> = CLIENT_TRAFFIC.concat();
    let mut wire: Vec<Vec<u8>> = CLIENT_TRAFFIC.iter().map(|t| with_selector(0, t)).collect();
    // Two split points (u16 LE each) inside the whole session.
    wire.push([&[2u8, 5, 0, 77, 0][..], &all_traffic].concat());
    let commands = encoded_stream_commands();
    vec![
        ("wire_decoder", wire),
        (
            "jsapi_requests",
            API_BODIES
                .iter()
                .map(|(selector, body)| with_selector(*selector, body.as_bytes()))
                .collect(),
        ),
        (
            "wal_recovery",
            vec![
                wal_input(&segments),
                wal_input(&segments[segments.len() - 1..]),
            ],
        ),
        (
            "segment_summary",
            crate::jetstream::stream_machine::summary_fuzz::sample_files()
                .iter()
                .map(|file| with_selector(2, file))
                .collect(),
        ),
        ("snapshot", vec![with_selector(0, &state.snapshot)]),
        (
            "stream_state",
            vec![
                stream_state_input(&state.keys, &commands[..2]),
                stream_state_input(&[], &commands),
            ],
        ),
        (
            "cluster_messages",
            vec![
                with_selector(0, &append_entries_rpc()),
                with_selector(1, &vote_rpc()),
                with_selector(3, &proposal()),
                // 4: a stream command, 5: an append (their kinds' selectors).
                with_selector(5, &commands[1].payload),
                with_selector(4, &commands[5].payload),
            ],
        ),
    ]
}

#[test]
fn seeds_are_what_they_claim() {
    let scratch = tempfile::tempdir().unwrap();
    let fixture = StreamStateFixture::open(&scratch.path().join("sled")).unwrap();
    let state = fixture.sample_state(scratch.path()).unwrap();
    assert!(state.keys.len() > 5, "{} keys", state.keys.len());
    verify_snapshot(&state.snapshot).unwrap();
    let (_, records) = snapshot_records(&state.snapshot).unwrap();
    assert_eq!(records, state.keys);
    let responses = fixture
        .load_and_apply(&records, &encoded_stream_commands()[1..3])
        .unwrap();
    assert_eq!(responses.len(), 2);

    let segments = wal_segments(&scratch.path().join("wal")).unwrap();
    assert!(segments.len() > 1, "{} segments", segments.len());

    let mut decoder = Decoder::new(4096, 1 << 20);
    let mut buf = bytes::BytesMut::from(&CLIENT_TRAFFIC.concat()[..]);
    let mut ops = 0;
    while decoder.decode(&mut buf).unwrap().is_some() {
        ops += 1;
    }
    assert_eq!(
        (ops, buf.len()),
        (15, 0),
        "every operation decoded, nothing left"
    );

    let input = stream_state_input(&state.keys, &[]);
    assert_eq!(frames(&input).len(), state.keys.len() * 2 + 1);

    let summaries = crate::jetstream::stream_machine::summary_fuzz::sample_files();
    assert_eq!(summaries.len(), 2, "a version-2 file and a version-1 one");
    for file in summaries {
        let blocks = crate::jetstream::stream_machine::summary_fuzz::read(file).unwrap();
        let counts: Vec<_> = blocks
            .iter()
            .map(|(at, msgs)| (*at, msgs.as_ref().map(Vec::len)))
            .collect();
        assert_eq!(counts, [((0, 100), Some(4)), ((100, 60), Some(2))]);
    }
}

/// Rewrites `fuzz/corpus/<target>/seed-<n>`; run by hand after a format change.
#[test]
#[ignore = "writes into the source tree; run by hand to refresh the fuzz seeds"]
fn write_seed_corpus() {
    let scratch = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    for (target, seeds) in seed_corpus(scratch.path()) {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (n, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{n}")), seed).unwrap();
        }
    }
}
