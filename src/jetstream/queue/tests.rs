use std::time::Duration;

use super::*;

const WAIT: Duration = Duration::from_secs(5);

#[test]
fn push_past_the_limit_is_refused() {
    let (sender, _receiver) = bounded::<u32>(3);
    for i in 0..3 {
        assert_eq!(sender.push(i).unwrap(), i as usize + 1);
    }
    match sender.push(99) {
        Err(PushError::Full(99)) => {}
        other => panic!("expected Full(99), got {other:?}"),
    }
    assert_eq!(sender.pending(), 3);
}

#[test]
fn taken_items_count_until_released() {
    let (sender, mut receiver) = bounded::<u32>(2);
    sender.push(1).unwrap();
    sender.push(2).unwrap();
    let taken = receiver.try_recv_many(10).expect("two waiting");
    assert_eq!(&*taken, &[1, 2]);
    // Nothing waits, but both are still being worked on.
    assert!(matches!(sender.push(3), Err(PushError::Full(3))));
    assert_eq!(taken.into_items(), vec![1, 2]);
    assert_eq!(sender.pending(), 0);
    assert_eq!(sender.push(3).unwrap(), 1);
}

#[test]
fn recv_many_takes_at_most_max() {
    let (sender, mut receiver) = bounded::<u32>(10);
    for i in 0..5 {
        sender.push(i).unwrap();
    }
    let first = receiver.try_recv_many(3).unwrap();
    assert_eq!(&*first, &[0, 1, 2]);
    let rest = receiver.try_recv_many(3).unwrap();
    assert_eq!(&*rest, &[3, 4]);
    assert!(receiver.try_recv_many(3).is_none());
}

#[test]
fn drain_drops_waiting_items_only() {
    let (sender, mut receiver) = bounded::<u32>(4);
    sender.push(1).unwrap();
    let taken = receiver.try_recv_many(1).unwrap();
    sender.push(2).unwrap();
    sender.push(3).unwrap();
    assert_eq!(sender.drain(), 2);
    assert_eq!(sender.pending(), 1, "the taken item still counts");
    drop(taken);
    assert_eq!(sender.pending(), 0);
    assert!(receiver.try_recv_many(1).is_none());
}

#[tokio::test]
async fn recv_wakes_on_push() {
    let (sender, mut receiver) = bounded::<u32>(4);
    let waiter = tokio::spawn(async move { receiver.recv_many(4).await.map(Taken::into_items) });
    // The receiver may or may not be waiting yet; either way it must see the item.
    sender.push(7).unwrap();
    let got = tokio::time::timeout(WAIT, waiter).await.unwrap().unwrap();
    assert_eq!(got, Some(vec![7]));
}

#[tokio::test]
async fn dropping_the_sender_closes_after_what_waits() {
    let (sender, mut receiver) = bounded::<u32>(4);
    sender.push(1).unwrap();
    drop(sender);
    let first = tokio::time::timeout(WAIT, receiver.recv_many(4))
        .await
        .unwrap();
    assert_eq!(first.map(Taken::into_items), Some(vec![1]));
    let end = tokio::time::timeout(WAIT, receiver.recv_many(4))
        .await
        .unwrap();
    assert!(end.is_none());
}

#[test]
fn dropping_the_receiver_refuses_pushes() {
    let (sender, receiver) = bounded::<u32>(4);
    drop(receiver);
    assert!(sender.is_closed());
    assert!(matches!(sender.push(1), Err(PushError::Closed(1))));
}

#[test]
fn dropped_counts_and_rate_limits_warnings() {
    let dropped = Dropped::default();
    assert!(dropped.record(3), "the first drop warns");
    assert!(!dropped.record(2), "another within a second does not");
    assert_eq!(dropped.total(), 5);
}
