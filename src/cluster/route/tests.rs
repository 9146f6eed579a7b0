//! Unit tests of the route: link queueing, batching, bounds, frames.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::link::*;
use super::*;

fn msg(subject: &'static str) -> Message {
    Message::new(
        Bytes::from_static(subject.as_bytes()),
        Bytes::from_static(b"x"),
    )
}

fn interest(subject: &'static str, queue: Option<&'static str>) -> Interest {
    Interest {
        subject: Bytes::from_static(subject.as_bytes()),
        queue: queue.map(|q| Bytes::from_static(q.as_bytes())),
    }
}

fn kinds(batch: &proto::RouteBatch) -> Vec<String> {
    batch
        .frames
        .iter()
        .map(|frame| match frame.frame.as_ref().unwrap() {
            Frame::Open(open) => format!("open {}", open.node_id),
            Frame::Subscribe(i) => format!("sub {} {}", i.subject, i.queue),
            Frame::Unsubscribe(i) => format!("unsub {} {}", i.subject, i.queue),
            Frame::Message(m) => format!("msg {}", String::from_utf8_lossy(&m.subject)),
        })
        .collect()
}

#[test]
fn nothing_is_queued_while_the_route_is_down() {
    let link = PeerLink::new(2);
    assert!(!link.forward(&msg("a"), &[], None).delivered);
    link.push_interest(&interest("a", None), true);
    assert!(link.take_batch().is_none());
}

#[test]
fn a_stream_starts_with_open_and_the_snapshot_then_changes_in_order() {
    let link = PeerLink::new(2);
    link.push_interest(&interest("stale", None), true);
    let snapshot = [interest("a", None), interest("b", Some("q"))];
    link.open(1, &mut snapshot.iter());
    let forwarded = link.forward(&msg("a"), &[], None);
    assert!(forwarded.delivered);
    assert!(!forwarded.wake, "the queue already held the snapshot");
    link.push_interest(&interest("a", None), false);
    let batch = link.take_batch().unwrap();
    assert_eq!(
        kinds(&batch),
        ["open 1", "sub a ", "sub b q", "msg a", "unsub a "]
    );
    assert!(link.take_batch().is_none());
    // An empty queue asks the publisher to wake the writer.
    assert!(link.forward(&msg("b"), &[], None).wake);
}

#[test]
fn messages_past_the_bound_are_dropped_but_interest_is_not() {
    let link = PeerLink::new(2);
    link.open(1, &mut std::iter::empty());
    let big = Message::new(
        Bytes::from_static(b"big"),
        Bytes::from(vec![0u8; MAX_QUEUED_BYTES / 2]),
    );
    assert!(link.forward(&big, &[], None).delivered);
    // Dropped, but still "delivered": the peer has interest, its route is just backed up.
    assert!(link.forward(&big, &[], None).delivered);
    assert_eq!(link.dropped.load(Ordering::Relaxed), 1);
    link.push_interest(&interest("x", None), true);
    let mut seen = Vec::new();
    while let Some(batch) = link.take_batch() {
        seen.extend(kinds(&batch));
    }
    assert_eq!(seen, ["open 1", "msg big", "sub x "]);
    assert_eq!(link.queue.lock().bytes, 0);
}

#[test]
fn batches_are_bounded() {
    let link = PeerLink::new(2);
    link.open(1, &mut std::iter::empty());
    let chunk = Message::new(
        Bytes::from_static(b"c"),
        Bytes::from(vec![0u8; BATCH_BYTES / 4]),
    );
    for _ in 0..10 {
        link.forward(&chunk, &[], None);
    }
    let first = link.take_batch().unwrap();
    assert!(first.frames.len() < 11, "{}", first.frames.len());
    let mut total = first.frames.len();
    while let Some(batch) = link.take_batch() {
        total += batch.frames.len();
    }
    assert_eq!(total, 11);
}

#[test]
fn forwarded_frames_carry_reply_headers_and_queues() {
    let link = PeerLink::new(2);
    link.open(1, &mut std::iter::empty());
    let message = msg("s")
        .with_reply(Some(Bytes::from_static(b"r")))
        .with_headers(Some(Bytes::from_static(b"NATS/1.0\r\n\r\n")));
    link.forward(&message, &[Bytes::from_static(b"q")], None);
    let inbox = Bytes::from_static(b"_INBOX.x");
    link.forward(&message, &[], Some(&inbox));
    let batch = link.take_batch().unwrap();
    let Some(Frame::Message(routed)) = batch.frames[1].frame.clone() else {
        panic!("not a message");
    };
    let Some(Frame::Message(delivery)) = batch.frames[2].frame.clone() else {
        panic!("not a message");
    };
    assert!(!routed.has_route, "matched by its own subject");
    assert!(delivery.has_route && &delivery.route[..] == b"_INBOX.x");
    assert_eq!(&delivery.subject[..], b"s");
    assert!(routed.has_reply && routed.has_headers);
    assert_eq!(&routed.reply[..], b"r");
    assert_eq!(&routed.headers[..], b"NATS/1.0\r\n\r\n");
    assert_eq!(routed.queues.len(), 1);
    assert_eq!(&routed.queues[0][..], b"q");
}

#[test]
fn remote_interest_is_a_receiver_only_while_its_route_is_up() {
    use crate::server::router::Matches;
    let link = Arc::new(PeerLink::new(2));
    let sub = Arc::new(Subscription::new(
        Subscriber::Remote(link.clone()),
        Bytes::from_static(b"a"),
        None,
        Bytes::from_static(b"route"),
    ));
    let matches = Matches {
        plain: vec![sub],
        queue_groups: Vec::new(),
    };
    assert!(!matches.is_empty());
    assert!(
        !matches.has_receiver(),
        "interest known, route back not open"
    );
    link.open(1, &mut std::iter::empty());
    assert!(matches.has_receiver());
    link.close();
    assert!(!matches.has_receiver());
}
