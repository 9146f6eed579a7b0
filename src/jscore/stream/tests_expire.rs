//! Expiry by per-message TTL, `never` and `max_age` together, delete markers, and the TTL
//! index surviving an export and restore.

use bytes::Bytes;

use super::tests_append::config;
use super::*;
use crate::jsapi::stream_config::StreamConfig;

const SEC: i64 = 1_000_000_000;

fn ttl_config() -> StreamConfig {
    let mut config = config(&["s.>"]);
    config.allow_msg_ttl = true;
    config
}

fn publish_ttl(stream: &mut StreamState, subject: &str, ttl: Option<&str>, now: i64) -> u64 {
    let headers = ttl.map(|ttl| Bytes::from(format!("NATS/1.0\r\nNats-TTL: {ttl}\r\n\r\n")));
    let request = AppendRequest {
        subject: subject.into(),
        headers,
        payload: Bytes::from_static(b"v"),
        now_nanos: now,
    };
    stream.append(request, &|_| true).unwrap().seq()
}

#[test]
fn messages_expire_at_their_own_deadline() {
    let mut stream = StreamState::new(ttl_config());
    publish_ttl(&mut stream, "s.a", Some("10s"), 0);
    publish_ttl(&mut stream, "s.b", Some("2"), SEC);
    publish_ttl(&mut stream, "s.c", None, 2 * SEC);
    assert_eq!(stream.next_expiry_at(), Some(3 * SEC));
    assert!(stream.expire(3 * SEC - 1).removed.is_empty());
    assert_eq!(stream.expire(3 * SEC).removed, vec![2]);
    assert_eq!(stream.next_expiry_at(), Some(10 * SEC));
    assert_eq!(stream.expire(60 * SEC).removed, vec![1]);
    assert_eq!(stream.next_expiry_at(), None);
    assert!(stream.contains(3));
}

#[test]
fn never_is_exempt_from_max_age_and_a_ttl_is_not() {
    let mut config = ttl_config();
    config.max_age = 10 * SEC;
    let mut stream = StreamState::new(config);
    publish_ttl(&mut stream, "s.a", Some("never"), 0);
    publish_ttl(&mut stream, "s.b", Some("1h"), SEC);
    publish_ttl(&mut stream, "s.c", None, 2 * SEC);
    // The oldest message max_age applies to is seq 2.
    assert_eq!(stream.next_expiry_at(), Some(11 * SEC));
    assert_eq!(stream.expire(12 * SEC).removed, vec![2, 3]);
    assert_eq!(stream.next_expiry_at(), Some(3601 * SEC));
    assert!(stream.expire(i64::MAX / 2).removed.is_empty());
    assert!(stream.contains(1));
    assert_eq!(stream.next_expiry_at(), None);
}

#[test]
fn a_message_removed_early_leaves_a_harmless_entry() {
    let mut stream = StreamState::new(ttl_config());
    publish_ttl(&mut stream, "s.a", Some("5"), 0);
    stream.delete_msg(1).unwrap();
    assert_eq!(stream.next_expiry_at(), Some(5 * SEC));
    assert!(stream.expire(5 * SEC).removed.is_empty());
    assert_eq!(stream.next_expiry_at(), None);
}

#[test]
fn the_last_message_of_a_subject_leaves_a_marker_that_expires_alone() {
    let mut config = ttl_config();
    config.subject_delete_marker_ttl = 60 * SEC;
    config.allow_rollup_hdrs = true;
    let mut stream = StreamState::new(config);
    publish_ttl(&mut stream, "s.a", Some("60"), 0);
    publish_ttl(&mut stream, "s.b", Some("60"), 0);
    publish_ttl(&mut stream, "s.b", None, SEC);
    let expired = stream.expire(60 * SEC);
    assert_eq!(expired.removed, vec![1, 2]);
    // Only s.a was emptied.
    assert_eq!(expired.markers, vec![4]);
    let marker = stream.get(4).unwrap();
    assert_eq!((marker.subject, marker.ts_nanos), ("s.a", 60 * SEC));
    let headers = stream.marker_headers().unwrap();
    assert_eq!(
        marker.stored_size,
        stored_size(stream.limits().storage, 3, headers.len(), 0)
    );
    assert_eq!(stream.next_expiry_at(), Some(120 * SEC));
    let expired = stream.expire(120 * SEC);
    assert_eq!(
        expired,
        Expired {
            removed: vec![4],
            markers: vec![]
        }
    );
    assert_eq!(stream.message_count(), 1);
}

#[test]
fn a_purge_tombstone_ageing_out_leaves_no_marker() {
    let mut config = ttl_config();
    config.subject_delete_marker_ttl = 60 * SEC;
    config.max_age = 10 * SEC;
    let mut stream = StreamState::new(config);
    let purge = AppendRequest {
        subject: "s.k".into(),
        headers: Some(Bytes::from_static(
            b"NATS/1.0\r\nKV-Operation: PURGE\r\n\r\n",
        )),
        payload: Bytes::new(),
        now_nanos: 0,
    };
    stream.append(purge, &|_| true).unwrap();
    assert_eq!(
        stream.expire(10 * SEC),
        Expired {
            removed: vec![1],
            markers: vec![]
        }
    );
}

#[test]
fn without_allow_msg_ttl_copies_keep_their_ttl_header_only() {
    let mut stream = StreamState::new(config(&["s.>"]));
    let copy = StoredMsg {
        subject: "s.a".into(),
        headers: Some(Bytes::from_static(b"NATS/1.0\r\nNats-TTL: 1\r\n\r\n")),
        payload: Bytes::new(),
        ts_nanos: 0,
    };
    stream.store_sourced(copy).unwrap();
    assert_eq!(stream.next_expiry_at(), None);
    assert!(stream.expire(i64::MAX / 2).removed.is_empty());
}

#[test]
fn restore_rebuilds_the_index_from_the_headers() {
    let mut stream = StreamState::new(ttl_config());
    let ttls = [Some("5"), Some("never"), None, Some("3")];
    let mut stored = Vec::new();
    for (index, ttl) in ttls.iter().enumerate() {
        let seq = publish_ttl(&mut stream, "s.a", *ttl, index as i64);
        let headers = ttl.map(|ttl| format!("NATS/1.0\r\nNats-TTL: {ttl}\r\n\r\n"));
        stored.push((seq, headers));
    }
    let mut restoring = StreamState::restoring();
    for (seq, headers) in &stored {
        let info = stream.get(*seq).unwrap();
        restoring.push(*seq, info, headers.as_deref().map(str::as_bytes));
    }
    let restored =
        StreamState::restore_from(stream.config().clone(), stream.scalars(), restoring, []);
    assert_eq!(restored, stream);
    assert_eq!(restored.next_expiry_at(), stream.next_expiry_at());
    let mut reloaded = restored.clone();
    assert_eq!(reloaded.expire(6 * SEC), stream.expire(6 * SEC));
}

#[test]
fn a_marker_stream_keeps_a_message_at_least_the_marker_ttl() {
    let mut config = ttl_config();
    config.subject_delete_marker_ttl = 5 * SEC;
    config.allow_rollup_hdrs = true;
    let mut stream = StreamState::new(config.clone());
    publish_ttl(&mut stream, "s.a", Some("1"), 0);
    assert_eq!(stream.next_expiry_at(), Some(SEC));
    assert!(stream.expire(SEC).removed.is_empty());
    assert_eq!(stream.next_expiry_at(), Some(5 * SEC));
    // A replica that reloaded knows only the own deadline: same verdicts, same state.
    let mut restoring = StreamState::restoring();
    let headers = b"NATS/1.0\r\nNats-TTL: 1\r\n\r\n";
    restoring.push(1, stream.get(1).unwrap(), Some(headers));
    let mut reloaded = StreamState::restore_from(config.clone(), stream.scalars(), restoring, []);
    assert_eq!(reloaded, stream);
    assert!(reloaded.expire(2 * SEC).removed.is_empty());
    assert_eq!(stream.expire(5 * SEC), reloaded.expire(5 * SEC));
    assert!(!stream.contains(1));
    // With one message per subject there is no raise.
    config.max_msgs_per_subject = 1;
    let mut single = StreamState::new(config);
    publish_ttl(&mut single, "s.a", Some("1"), 0);
    assert_eq!(single.expire(SEC).removed, vec![1]);
}
