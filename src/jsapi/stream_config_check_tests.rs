//! Tests of stream defaults and validation (kept apart so `stream_config_check` stays
//! readable).

use super::error::ApiError;
use super::stream_config::{DiscardPolicy, RetentionPolicy, StorageType, StreamConfig};
use super::stream_config_check::DEFAULT_DUPLICATE_WINDOW;

const SECOND: i64 = 1_000_000_000;
use super::stream_config::StreamSource;

fn err_of(cfg: StreamConfig) -> ApiError {
    cfg.checked().expect_err("config should be refused")
}

#[test]
fn defaults_match_nats_server() {
    let cfg = StreamConfig::new("ORDERS", &[]).checked().unwrap();
    assert_eq!(cfg.subjects, vec!["ORDERS"]);
    assert_eq!(cfg.num_replicas, 1);
    assert_eq!(
        (
            cfg.max_msgs,
            cfg.max_bytes,
            cfg.max_msgs_per_subject,
            cfg.max_consumers
        ),
        (-1, -1, -1, -1)
    );
    assert_eq!(cfg.max_msg_size, -1);
    assert_eq!(cfg.duplicate_window, DEFAULT_DUPLICATE_WINDOW);
    assert_eq!(cfg.retention, RetentionPolicy::Limits);
    assert_eq!(cfg.storage, StorageType::File);
    assert_eq!(cfg.discard, DiscardPolicy::Old);
}

#[test]
fn duplicate_window_follows_smaller_max_age() {
    let mut cfg = StreamConfig::new("S", &["s.>"]);
    cfg.max_age = 30 * SECOND;
    let cfg = cfg.checked().unwrap();
    assert_eq!(cfg.duplicate_window, 30 * SECOND);
    let mut big = StreamConfig::new("S", &["s.>"]);
    big.max_age = 3600 * SECOND;
    assert_eq!(
        big.checked().unwrap().duplicate_window,
        DEFAULT_DUPLICATE_WINDOW
    );
    let mut limits = StreamConfig::new("S", &["s"]);
    limits.max_msgs = -7;
    assert_eq!(limits.checked().unwrap().max_msgs, -1);
}

#[test]
fn normalizing_twice_changes_nothing() {
    let once = StreamConfig::new("S", &["a", "b.*"]).checked().unwrap();
    assert_eq!(once.clone().checked().unwrap(), once);
}

#[test]
fn bad_names_and_replicas() {
    for name in ["", "a.b", "a*", "a>", "a b", "a/b", "a\\b"] {
        let err = err_of(StreamConfig::new(name, &["x"]));
        assert_eq!(err.err_code, 10052, "{name:?}");
    }
    assert!(err_of(StreamConfig::new("x".repeat(256), &["x"]))
        .description
        .contains("too long"));
    let mut cfg = StreamConfig::new("S", &["x"]);
    cfg.num_replicas = -1;
    assert_eq!(err_of(cfg).err_code, 10133);
    let mut cfg = StreamConfig::new("S", &["x"]);
    cfg.num_replicas = 6;
    assert_eq!(err_of(cfg).description, "maximum replicas is 5");
}

#[test]
fn age_and_window_checks() {
    let mut cfg = StreamConfig::new("S", &["x"]);
    cfg.max_age = -1;
    assert_eq!(err_of(cfg).description, "max age can not be negative");
    let mut cfg = StreamConfig::new("S", &["x"]);
    cfg.max_age = 50_000_000;
    assert_eq!(err_of(cfg).description, "max age needs to be >= 100ms");
    let mut cfg = StreamConfig::new("S", &["x"]);
    cfg.max_age = 10 * SECOND;
    cfg.duplicate_window = 20 * SECOND;
    assert_eq!(
        err_of(cfg).description,
        "duplicates window can not be larger then max age"
    );
    let mut cfg = StreamConfig::new("S", &["x"]);
    cfg.duplicate_window = 1_000;
    assert_eq!(
        err_of(cfg).description,
        "duplicates window needs to be >= 100ms"
    );
    let mut cfg = StreamConfig::new("S", &["x"]);
    cfg.deny_purge = true;
    cfg.allow_rollup_hdrs = true;
    assert_eq!(
        err_of(cfg).description,
        "roll-ups require the purge permission"
    );
}

#[test]
fn subject_checks() {
    assert_eq!(
        err_of(StreamConfig::new("S", &["a..b"])).description,
        "invalid subject"
    );
    assert_eq!(
        err_of(StreamConfig::new("S", &["a", "a"])).description,
        "duplicate subjects detected"
    );
    assert_eq!(
        err_of(StreamConfig::new("S", &["a.*", "a.b"])).description,
        "subject \"a.*\" overlaps with \"a.b\""
    );
    assert!(err_of(StreamConfig::new("S", &["$JS.API.>"]))
        .description
        .contains("jetstream api"));
    assert!(err_of(StreamConfig::new("S", &[">"]))
        .description
        .contains("no-ack"));
    assert!(StreamConfig::new("S", &["$JS.EVENT.>"]).checked().is_ok());
    let mut cfg = StreamConfig::new("S", &["$JS.API.>"]);
    cfg.no_ack = true;
    assert!(cfg.checked().is_ok());
}

#[test]
fn discard_new_per_subject_needs_discard_new() {
    let mut cfg = StreamConfig::new("S", &["x.*"]);
    cfg.discard_new_per_subject = true;
    assert!(err_of(cfg.clone())
        .description
        .contains("requires discard new"));
    cfg.discard = DiscardPolicy::New;
    assert!(err_of(cfg.clone())
        .description
        .contains("max msgs per subject"));
    cfg.max_msgs_per_subject = 1;
    assert!(cfg.checked().is_ok());
}

#[test]
fn mirrors() {
    let mut cfg = StreamConfig::new("M", &["x"]);
    cfg.mirror = Some(StreamSource {
        name: "ORIGIN".into(),
        ..StreamSource::default()
    });
    assert_eq!(err_of(cfg.clone()).err_code, 10034);
    cfg.subjects.clear();
    let cfg = cfg.checked().unwrap();
    assert!(cfg.subjects.is_empty(), "mirrors get no default subject");
    assert_eq!(
        cfg.duplicate_window, 0,
        "mirrors get no default dedup window"
    );
    let mut bad = cfg.clone();
    bad.mirror.as_mut().unwrap().name = "a.b".into();
    assert_eq!(err_of(bad).err_code, 10142);
}

/// One transform's filter inside another's, in one mirror or one source: nats-server's
/// 10152 / 10147 (nats-py's suite: two transforms of `>`).
#[test]
fn overlapping_origin_filters_are_refused() {
    use super::stream_config::SubjectTransform;
    let transforms = |sources: &[&str]| -> Vec<SubjectTransform> {
        sources
            .iter()
            .map(|src| SubjectTransform {
                src: src.to_string(),
                dest: String::new(),
            })
            .collect()
    };
    let sourcing = |sources: &[&str]| {
        let mut cfg = StreamConfig::new("S", &["own"]);
        cfg.sources = vec![StreamSource {
            name: "ORIGIN".into(),
            subject_transforms: transforms(sources),
            ..StreamSource::default()
        }];
        cfg
    };
    assert!(sourcing(&["a.>", "b.>"]).checked().is_ok());
    assert_eq!(err_of(sourcing(&[">", ">"])).err_code, 10147);
    assert_eq!(err_of(sourcing(&["a.>", "a.b"])).err_code, 10147);
    let mut mirror = StreamConfig::new("M", &[]);
    mirror.mirror = Some(StreamSource {
        name: "ORIGIN".into(),
        subject_transforms: transforms(&["a.*", "a.b"]),
        ..StreamSource::default()
    });
    assert_eq!(err_of(mirror).err_code, 10152);
}

#[test]
fn create_only_rules() {
    let mut cfg = StreamConfig::new("S", &["x"]).checked().unwrap();
    assert!(cfg.validate_create().is_ok());
    cfg.sealed = true;
    assert_eq!(cfg.validate_create().unwrap_err().err_code, 10052);
    cfg.sealed = false;
    cfg.mirror_direct = true;
    assert!(cfg.validate_create().is_err());
}

#[test]
fn update_rules() {
    let old = StreamConfig::new("S", &["x"]).checked().unwrap();
    let mut new = old.clone();
    new.subjects = vec!["y".into()];
    assert!(new.validate_update(&old).is_ok());
    let mut new = old.clone();
    new.storage = StorageType::Memory;
    assert!(new
        .validate_update(&old)
        .unwrap_err()
        .description
        .contains("storage type"));
    let mut new = old.clone();
    new.retention = RetentionPolicy::WorkQueue;
    assert!(new.validate_update(&old).is_err());
    let mut new = old.clone();
    new.retention = RetentionPolicy::Interest;
    assert!(new.validate_update(&old).is_ok());
    let mut sealed_old = old.clone();
    sealed_old.sealed = true;
    assert!(old
        .validate_update(&sealed_old)
        .unwrap_err()
        .description
        .contains("unseal"));
}

#[test]
fn a_mirror_is_promoted_by_removing_it_and_its_origin_never_changes() {
    let mut mirror = StreamConfig::new("M", &[]);
    mirror.subjects.clear();
    mirror.mirror = Some(StreamSource {
        name: "ORIGIN".into(),
        ..StreamSource::default()
    });
    let mirror = mirror.checked().unwrap();
    let promoted = StreamConfig::new("M", &["m.>"]).checked().unwrap();
    assert!(promoted.validate_update(&mirror).is_ok());
    let mut moved = mirror.clone();
    moved.mirror.as_mut().unwrap().name = "OTHER".into();
    assert_eq!(moved.validate_update(&mirror).unwrap_err().err_code, 10055);
    // An ordinary stream does not become a mirror.
    assert_eq!(
        mirror.validate_update(&promoted).unwrap_err().err_code,
        10055
    );
}

#[test]
fn message_ttls_are_switched_on_by_an_update_not_off() {
    let plain = StreamConfig::new("S", &["s.>"]).checked().unwrap();
    let mut ttl = plain.clone();
    ttl.allow_msg_ttl = true;
    assert!(ttl.validate_update(&plain).is_ok());
    let err = plain.validate_update(&ttl).unwrap_err();
    assert_eq!(
        (err.err_code, err.description.as_str()),
        (10052, "message TTL status can not be disabled")
    );
}

#[test]
fn overlap_between_streams() {
    let a = StreamConfig::new("A", &["orders.*"]);
    let b = StreamConfig::new("B", &["orders.new"]);
    let c = StreamConfig::new("C", &["billing.>"]);
    assert!(a.subjects_overlap(&b));
    assert!(!a.subjects_overlap(&c));
}

#[test]
fn counter_streams_as_nats_server_checks_them() {
    let mut cfg = StreamConfig::new("C", &["c.>"]);
    cfg.allow_msg_counter = true;
    let counter = cfg.clone().checked().unwrap().refuse_unsupported().unwrap();
    assert!(counter.allow_msg_counter);
    for (change, text) in [
        (
            (|c: &mut StreamConfig| c.discard = DiscardPolicy::New) as fn(&mut StreamConfig),
            "counter stream cannot use discard new",
        ),
        (
            |c| c.allow_msg_ttl = true,
            "counter stream cannot use message TTLs",
        ),
        (
            |c| c.retention = RetentionPolicy::Interest,
            "counter stream can only use limits retention",
        ),
    ] {
        let mut bad = cfg.clone();
        change(&mut bad);
        let err = err_of(bad);
        assert_eq!((err.err_code, err.description.as_str()), (10052, text));
    }
    let mut mirror = StreamConfig::new("M", &[]);
    mirror.mirror = Some(StreamSource {
        name: "C".into(),
        ..StreamSource::default()
    });
    mirror.allow_msg_counter = true;
    let err = err_of(mirror);
    assert_eq!(
        (err.err_code, err.description.as_str()),
        (10173, "stream mirrors can not also calculate counters")
    );
    // Neither switched on nor off by an update.
    let plain = StreamConfig::new("C", &["c.>"]).checked().unwrap();
    for (new, old) in [(&counter, &plain), (&plain, &counter)] {
        let err = new.validate_update(old).unwrap_err();
        assert_eq!(
            err.description,
            "stream configuration update can not change message counter setting"
        );
    }
}

#[test]
fn schedule_streams_as_nats_server_checks_them() {
    let mut cfg = StreamConfig::new("S", &["s.>"]);
    cfg.allow_msg_schedules = true;
    cfg.deny_purge = true;
    let schedules = cfg.clone().checked().unwrap().refuse_unsupported().unwrap();
    // Schedules need rollups and purges (nats-server 2.15.1 stores them so).
    assert!(schedules.allow_msg_schedules && schedules.allow_rollup_hdrs);
    assert!(!schedules.deny_purge);
    let mut discard_new = cfg.clone();
    discard_new.discard = DiscardPolicy::New;
    let err = err_of(discard_new);
    assert_eq!(
        (err.err_code, err.description.as_str()),
        (10052, "message scheduling cannot use discard new")
    );
    let mut mirror = StreamConfig::new("M", &[]);
    mirror.mirror = Some(StreamSource {
        name: "S".into(),
        ..StreamSource::default()
    });
    mirror.allow_msg_schedules = true;
    let err = err_of(mirror);
    assert_eq!((err.code, err.err_code), (400, 10186));
    let mut sourcing = cfg.clone();
    sourcing.sources = vec![StreamSource {
        name: "O".into(),
        ..StreamSource::default()
    }];
    let err = err_of(sourcing);
    assert_eq!(
        (err.err_code, err.description.as_str()),
        (10187, "stream source can not also schedule messages")
    );
    // Switched on by an update, not off.
    let plain = StreamConfig::new("S", &["s.>"]).checked().unwrap();
    assert!(schedules.validate_update(&plain).is_ok());
    let err = plain.validate_update(&schedules).unwrap_err();
    assert_eq!(err.description, "message schedules can not be disabled");
}
