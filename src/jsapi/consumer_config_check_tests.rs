//! Tests of consumer defaults and validation (kept apart so `consumer_config_check` stays
//! readable).

use super::consumer_config::{AckPolicy, ConsumerConfig, DeliverPolicy, PriorityPolicy};
use super::consumer_config_check::*;
use super::stream_config::{RetentionPolicy, StreamConfig};
use super::time::Timestamp;

fn stream() -> StreamConfig {
    StreamConfig::new("ORDERS", &["orders.*"])
        .checked()
        .unwrap()
}

fn pull(durable: &str, ack: AckPolicy) -> ConsumerConfig {
    ConsumerConfig {
        durable_name: durable.into(),
        ack_policy: ack,
        ..ConsumerConfig::default()
    }
}

fn err_code(cfg: ConsumerConfig, stream: &StreamConfig) -> u16 {
    cfg.checked(stream)
        .expect_err("config should be refused")
        .err_code
}

#[test]
fn pull_explicit_defaults_match_natscli_expectations() {
    let cfg = pull("order-processor", AckPolicy::Explicit)
        .checked(&stream())
        .unwrap();
    assert_eq!(cfg.ack_wait, DEFAULT_ACK_WAIT);
    assert_eq!(cfg.max_ack_pending, 1000);
    assert_eq!(cfg.max_waiting, 512);
    assert_eq!(cfg.max_deliver, -1);
    assert_eq!(cfg.inactive_threshold, 0, "durables do not expire");
    assert_eq!(cfg.deliver_policy, DeliverPolicy::All);
}

#[test]
fn ack_none_and_ephemeral_defaults() {
    let cfg = pull("", AckPolicy::None).checked(&stream()).unwrap();
    assert_eq!(cfg.ack_wait, 0);
    assert_eq!(cfg.max_ack_pending, 0);
    assert_eq!(cfg.inactive_threshold, DEFAULT_EPHEMERAL_INACTIVE_THRESHOLD);
    let mut push = pull("", AckPolicy::None);
    push.deliver_subject = "deliver.here".into();
    let push = push.checked(&stream()).unwrap();
    assert_eq!(push.max_waiting, 0, "push consumers have no pull queue");
}

#[test]
fn backoff_sets_ack_wait_and_needs_max_deliver() {
    let mut cfg = pull("d", AckPolicy::Explicit);
    cfg.backoff = vec![SECOND_NS, 5 * SECOND_NS];
    cfg.max_deliver = 5;
    let cfg = cfg.checked(&stream()).unwrap();
    assert_eq!(cfg.ack_wait, SECOND_NS);
    let mut bad = pull("d", AckPolicy::Explicit);
    bad.backoff = vec![SECOND_NS, 2 * SECOND_NS, 3 * SECOND_NS];
    bad.max_deliver = 2;
    assert_eq!(err_code(bad, &stream()), 10116);
}

const SECOND_NS: i64 = 1_000_000_000;

#[test]
fn stream_consumer_limits_are_inherited() {
    let mut stream = stream();
    stream.consumer_limits.max_ack_pending = 50;
    stream.consumer_limits.inactive_threshold = 60 * SECOND_NS;
    let cfg = pull("d", AckPolicy::Explicit).checked(&stream).unwrap();
    assert_eq!(cfg.max_ack_pending, 50);
    assert_eq!(cfg.inactive_threshold, 60 * SECOND_NS);
}

#[test]
fn names() {
    let mut cfg = pull("a.b", AckPolicy::Explicit);
    assert_eq!(err_code(cfg.clone(), &stream()), 10052);
    cfg.durable_name = "good".into();
    cfg.name = "other".into();
    assert_eq!(err_code(cfg, &stream()), 10132);
    let long = pull(&"x".repeat(300), AckPolicy::Explicit);
    assert_eq!(err_code(long, &stream()), 10102);
}

#[test]
fn pull_and_push_mode_rules() {
    let mut hb = pull("d", AckPolicy::Explicit);
    hb.idle_heartbeat = SECOND_NS;
    assert_eq!(err_code(hb, &stream()), 10088);
    let mut fc = pull("d", AckPolicy::Explicit);
    fc.flow_control = true;
    assert_eq!(err_code(fc, &stream()), 10089);
    let mut wild = pull("d", AckPolicy::Explicit);
    wild.deliver_subject = "out.*".into();
    assert_eq!(err_code(wild, &stream()), 10079);
    let mut waiting = pull("d", AckPolicy::Explicit);
    waiting.deliver_subject = "out".into();
    waiting.max_waiting = 5;
    assert_eq!(err_code(waiting, &stream()), 10080);
    let mut cycle = pull("d", AckPolicy::Explicit);
    cycle.deliver_subject = "orders.new".into();
    assert_eq!(err_code(cycle, &stream()), 10081);
    let mut small = pull("d", AckPolicy::Explicit);
    small.deliver_subject = "out".into();
    small.idle_heartbeat = 10 * 1_000_000;
    assert_eq!(err_code(small, &stream()), 10083);
    let mut fc_no_hb = pull("d", AckPolicy::Explicit);
    fc_no_hb.deliver_subject = "out".into();
    fc_no_hb.flow_control = true;
    assert_eq!(err_code(fc_no_hb, &stream()), 10108);
}

#[test]
fn filters() {
    let mut both = pull("d", AckPolicy::Explicit);
    both.filter_subject = "orders.a".into();
    both.filter_subjects = vec!["orders.b".into()];
    assert_eq!(err_code(both, &stream()), 10136);
    let mut overlap = pull("d", AckPolicy::Explicit);
    overlap.filter_subjects = vec!["orders.*".into(), "orders.a".into()];
    assert_eq!(err_code(overlap, &stream()), 10138);
    let mut empty = pull("d", AckPolicy::Explicit);
    empty.filter_subjects = vec![String::new()];
    assert_eq!(err_code(empty, &stream()), 10139);
    let mut fine = pull("d", AckPolicy::Explicit);
    fine.filter_subjects = vec!["orders.a".into(), "orders.b".into()];
    assert!(fine.checked(&stream()).is_ok());
}

#[test]
fn deliver_policy_combinations() {
    let mut cfg = pull("d", AckPolicy::Explicit);
    cfg.opt_start_seq = 5;
    let err = cfg.clone().checked(&stream()).unwrap_err();
    assert_eq!(err.err_code, 10094);
    assert_eq!(
        err.description,
        "consumer delivery policy is deliver all, but optional start sequence is also set"
    );
    cfg.deliver_policy = DeliverPolicy::ByStartSequence;
    assert!(cfg.clone().checked(&stream()).is_ok());
    cfg.opt_start_seq = 0;
    assert_eq!(err_code(cfg.clone(), &stream()), 10094);
    cfg.deliver_policy = DeliverPolicy::ByStartTime;
    cfg.opt_start_time = Some(Timestamp::from_unix_nanos(1));
    assert!(cfg.clone().checked(&stream()).is_ok());
    cfg.deliver_policy = DeliverPolicy::LastPerSubject;
    cfg.opt_start_time = None;
    assert_eq!(err_code(cfg.clone(), &stream()), 10094);
    cfg.filter_subject = "orders.x".into();
    assert!(cfg.checked(&stream()).is_ok());
}

#[test]
fn workqueue_rules() {
    let mut wq = StreamConfig::new("WQ", &["jobs.>"]);
    wq.retention = RetentionPolicy::WorkQueue;
    let wq = wq.checked().unwrap();
    assert_eq!(err_code(pull("d", AckPolicy::None), &wq), 10084);
    assert_eq!(err_code(pull("d", AckPolicy::All), &wq), 10098);
    let mut last = pull("d", AckPolicy::Explicit);
    last.deliver_policy = DeliverPolicy::Last;
    assert_eq!(err_code(last, &wq), 10101);
    assert!(pull("d", AckPolicy::Explicit).checked(&wq).is_ok());
    let mut replicas = pull("d", AckPolicy::Explicit);
    replicas.num_replicas = 3;
    assert_eq!(err_code(replicas, &wq), 10126);
}

#[test]
fn priority_groups() {
    let mut cfg = pull("d", AckPolicy::Explicit);
    cfg.priority_policy = PriorityPolicy::PinnedClient;
    assert_eq!(err_code(cfg.clone(), &stream()), 10159);
    cfg.priority_groups = vec!["jobs".into()];
    let ok = cfg.clone().checked(&stream()).unwrap();
    assert_eq!(ok.priority_timeout, DEFAULT_PRIORITY_TIMEOUT);
    cfg.priority_groups = vec!["bad group".into()];
    assert_eq!(err_code(cfg, &stream()), 10162);
    let mut none = pull("d", AckPolicy::Explicit);
    none.priority_groups = vec!["jobs".into()];
    assert_eq!(err_code(none, &stream()), 10196);
}

#[test]
fn update_rules() {
    let old = pull("d", AckPolicy::Explicit).checked(&stream()).unwrap();
    let mut new = old.clone();
    new.max_ack_pending = 10;
    new.description = "changed".into();
    assert!(new.validate_update(&old).is_ok());
    let mut new = old.clone();
    new.ack_policy = AckPolicy::All;
    let err = new.validate_update(&old).unwrap_err();
    assert_eq!(
        (err.err_code, err.description.as_str()),
        (10012, "ack policy can not be updated")
    );
    let mut new = old.clone();
    new.deliver_subject = "push".into();
    assert_eq!(
        new.validate_update(&old).unwrap_err().description,
        "can not update pull consumer to push based"
    );
    let mut new = old.clone();
    new.max_waiting = 1;
    assert_eq!(
        new.validate_update(&old).unwrap_err().description,
        "max waiting can not be updated"
    );
}

#[test]
fn flow_control_ack_policy() {
    let fc_pull = pull("d", AckPolicy::FlowControl);
    assert_eq!(err_code(fc_pull, &stream()), 10218);
    let mut push = pull("d", AckPolicy::FlowControl);
    push.deliver_subject = "out".into();
    push.max_ack_pending = -1;
    assert_eq!(err_code(push.clone(), &stream()), 10220);
    push.max_ack_pending = 100;
    let ok = push.checked(&stream()).unwrap();
    assert!(ok.flow_control);
    assert_eq!(ok.idle_heartbeat, 1_000_000_000);
}
