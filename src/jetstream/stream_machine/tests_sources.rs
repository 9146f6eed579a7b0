//! Mirrored and sourced copies through the machine: the origin positions are applied as the
//! chain rule says (`jscore::sourcing`), written under `o/` and restored by `load`.

use bytes::Bytes;

use super::tests_load::{encode, Harness};
use crate::jsapi::stream_config::{DiscardPolicy, StreamConfig};
use crate::jscore::group::{StreamCommand, StreamOutcome};
use crate::jscore::sourcing::{SourceKind, SourcedMessage};
use crate::jscore::stream::AppendOutcome;

fn copy(kind: SourceKind, origin_seq: u64, expected_position: u64) -> StreamCommand {
    StreamCommand::Sourced(SourcedMessage {
        source: "ORIGIN".into(),
        kind,
        origin_seq,
        expected_position,
        subject: format!("s.{origin_seq}"),
        headers: None,
        payload: Bytes::from(format!("m{origin_seq}")),
        ts_nanos: origin_seq as i64 * 1000,
    })
}

fn mirror_config() -> StreamConfig {
    let mut config = StreamConfig::new("MIR", &[]);
    config.subjects.clear();
    config
}

#[test]
fn a_mirror_keeps_the_origin_sequences_and_its_position_survives_a_reload() {
    let mut harness = Harness::new(mirror_config());
    let outcomes = harness.apply(&[
        encode(copy(SourceKind::Mirror, 2, 0)),
        encode(copy(SourceKind::Mirror, 5, 2)),
        // Replayed by a deposed leader: skipped, nothing changes.
        encode(copy(SourceKind::Mirror, 5, 2)),
        // Not continuing the chain (position is 5, not 3).
        encode(copy(SourceKind::Mirror, 6, 3)),
    ]);
    assert!(matches!(
        outcomes[0],
        Ok(StreamOutcome::Appended(AppendOutcome::Stored {
            seq: 2,
            ..
        }))
    ));
    assert!(matches!(
        outcomes[1],
        Ok(StreamOutcome::Appended(AppendOutcome::Stored {
            seq: 5,
            ..
        }))
    ));
    assert_eq!(
        outcomes[2],
        Ok(StreamOutcome::SourceSkipped { position: 5 })
    );
    assert_eq!(
        outcomes[3],
        Ok(StreamOutcome::SourceSkipped { position: 5 })
    );
    let state = harness.state();
    assert_eq!(state.stream().first_seq(), 2);
    assert_eq!(state.stream().last_seq(), 5);
    assert_eq!(state.stream().message_count(), 2);
    assert_eq!(state.source_positions().get("ORIGIN"), 5);
    assert_eq!(harness.keys_under(b"o/"), vec![b"o/ORIGIN".to_vec()]);
    harness.check_reload("mirrored copies");
}

#[test]
fn a_refused_copy_stops_the_chain_until_it_is_retried() {
    let mut config = StreamConfig::new("SRC", &["own.*"]);
    config.max_msgs = 2;
    config.discard = DiscardPolicy::New;
    let mut harness = Harness::new(config);
    let outcomes = harness.apply(&[
        encode(copy(SourceKind::Source, 10, 0)),
        encode(copy(SourceKind::Source, 11, 10)),
        // Full: refused, and the copy after it no longer continues the chain.
        encode(copy(SourceKind::Source, 12, 11)),
        encode(copy(SourceKind::Source, 13, 12)),
    ]);
    assert!(matches!(
        outcomes[1],
        Ok(StreamOutcome::Appended(AppendOutcome::Stored {
            seq: 2,
            ..
        }))
    ));
    assert!(outcomes[2].is_err(), "{:?}", outcomes[2]);
    assert_eq!(
        outcomes[3],
        Ok(StreamOutcome::SourceSkipped { position: 11 })
    );
    assert_eq!(harness.state().source_positions().get("ORIGIN"), 11);
    harness.check_reload("a refused copy");
    // Room again: the retry continues from 11.
    harness.apply(&[encode(StreamCommand::DeleteMsg { seq: 1 })]);
    let outcomes = harness.apply(&[encode(copy(SourceKind::Source, 12, 11))]);
    assert!(matches!(
        outcomes[0],
        Ok(StreamOutcome::Appended(AppendOutcome::Stored {
            seq: 3,
            ..
        }))
    ));
    assert_eq!(harness.state().source_positions().get("ORIGIN"), 12);
    harness.check_reload("the retried copy");
}
