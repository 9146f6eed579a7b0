//! Leader-local delivery (`local.rs`): which consumers deliver from a copy, and how a copy
//! follows the replicated state without giving up its own position.

use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig};
use crate::jsapi::stream_config::RetentionPolicy;
use crate::jscore::stream::PurgeRequest;

use super::tests_deliver::{publish, seqs, stream_with};
use super::*;

fn ordered() -> ConsumerConfig {
    ConsumerConfig {
        ack_policy: AckPolicy::None,
        mem_storage: true,
        num_replicas: 1,
        ..Default::default()
    }
}

#[test]
fn only_ack_none_memory_consumers_on_limits_streams_deliver_locally() {
    let stream = stream_with(&["s.a"]);
    assert!(ConsumerState::new(ordered(), &stream).delivers_locally(&stream));

    let explicit = ConsumerConfig {
        ack_policy: AckPolicy::Explicit,
        ..ordered()
    };
    assert!(!ConsumerState::new(explicit, &stream).delivers_locally(&stream));
    let on_file = ConsumerConfig {
        mem_storage: false,
        ..ordered()
    };
    assert!(!ConsumerState::new(on_file, &stream).delivers_locally(&stream));

    // Under interest retention a delivery to an ack-none consumer is its acknowledgement: it
    // removes messages, on every replica alike, so it must be replicated.
    let mut interest = stream_with(&["s.a"]);
    let mut config = interest.config().clone();
    config.retention = RetentionPolicy::Interest;
    interest.update_config(config, 10);
    assert!(!ConsumerState::new(ordered(), &interest).delivers_locally(&interest));
}

#[test]
fn a_copy_delivers_on_while_the_replicated_state_stays() {
    let stream = stream_with(&["s.a", "s.b", "s.c", "s.d"]);
    let replicated = ConsumerState::new(ordered(), &stream);
    let mut copy = replicated.clone();
    assert_eq!(seqs(&copy.deliver_next(&stream, 2, 0)), vec![1, 2]);
    copy.follow(&replicated, &stream);
    assert_eq!(seqs(&copy.deliver_next(&stream, 5, 0)), vec![3, 4]);
    assert_eq!(copy.delivered().consumer_seq, 4);
    assert_eq!(copy.progress(&stream).num_pending, 0);
    assert_eq!(replicated.delivered().consumer_seq, 0);
    assert_eq!(replicated.progress(&stream).num_pending, 4);
}

#[test]
fn a_copy_takes_a_new_config_and_keeps_its_position() {
    let stream = stream_with(&["s.a", "s.b", "s.a", "s.b"]);
    let mut replicated = ConsumerState::new(ordered(), &stream);
    let mut copy = replicated.clone();
    assert_eq!(seqs(&copy.deliver_next(&stream, 1, 0)), vec![1]);

    let mut narrowed = ordered();
    narrowed.filter_subject = "s.b".into();
    replicated.update_config(narrowed.clone());
    copy.follow(&replicated, &stream);
    assert_eq!(copy.config(), &narrowed);
    assert_eq!(seqs(&copy.deliver_next(&stream, 5, 0)), vec![2, 4]);
    assert_eq!(copy.delivered().consumer_seq, 3);
}

#[test]
fn a_copy_follows_a_purge_past_its_position() {
    let mut stream = stream_with(&["s.a", "s.a", "s.a"]);
    let replicated = ConsumerState::new(ordered(), &stream);
    let mut copy = replicated.clone();
    assert_eq!(seqs(&copy.deliver_next(&stream, 1, 0)), vec![1]);
    stream
        .purge(&PurgeRequest {
            seq: 3,
            ..Default::default()
        })
        .unwrap();
    publish(&mut stream, "s.a", 10);
    copy.follow(&replicated, &stream);
    assert_eq!(copy.delivered().stream_seq, 2);
    assert_eq!(copy.progress(&stream).num_pending, 2);
    assert_eq!(seqs(&copy.deliver_next(&stream, 5, 0)), vec![3, 4]);
    assert_eq!(copy.delivered().consumer_seq, 3);
}
