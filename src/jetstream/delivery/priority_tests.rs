//! Tests of `priority.rs`: request checks, pin assignment, overflow thresholds.

use super::*;

fn config(policy: PriorityPolicy) -> ConsumerConfig {
    ConsumerConfig {
        durable_name: "C".into(),
        priority_policy: policy,
        priority_groups: vec!["jobs".into()],
        priority_timeout: 1_000_000_000,
        ..ConsumerConfig::default()
    }
}

fn pull(json: &str) -> PullRequest {
    PullRequest::parse(json.as_bytes()).unwrap()
}

fn status(result: Result<(), Bytes>) -> String {
    String::from_utf8(result.unwrap_err().to_vec()).unwrap()
}

fn queue(requests: &[(&'static str, &str)], now: Instant) -> WaitingQueue {
    let mut queue = WaitingQueue::new(16);
    for (reply, json) in requests {
        let request = WaitingRequest::new(Bytes::from_static(reply.as_bytes()), &pull(json), now);
        queue.push(request).unwrap();
    }
    queue
}

#[test]
fn requests_are_checked_as_nats_server_checks_them() {
    let none = ConsumerConfig::default();
    let overflow = config(PriorityPolicy::Overflow);
    let pinned = config(PriorityPolicy::PinnedClient);
    assert!(check_request(&none, &pull(r#"{"batch":1}"#)).is_ok());
    assert!(status(check_request(&none, &pull(r#"{"min_pending":1}"#)))
        .contains("400 Bad Request - Not a Overflow Priority consumer"));
    assert!(status(check_request(
        &overflow,
        &pull(r#"{"id":"x","group":"jobs"}"#)
    ))
    .contains("400 Bad Request - Not a Pinned Client Priority consumer"));
    assert!(status(check_request(
        &overflow,
        &pull(r#"{"group":"jobs","priority":10}"#)
    ))
    .contains("400 Bad Request - Priority must be between 0 and 9"));
    assert!(status(check_request(&pinned, &pull(r#"{"batch":1}"#)))
        .contains("400 Bad Request - Priority Group missing"));
    assert!(
        status(check_request(&pinned, &pull(r#"{"group":"other"}"#)))
            .contains("400 Bad Request - Invalid Priority Group")
    );
    assert!(check_request(&overflow, &pull(r#"{"group":"jobs","min_pending":5}"#)).is_ok());
}

#[test]
fn the_first_request_without_a_pin_gets_it_and_only_it_is_served() {
    let now = Instant::now();
    let mut state = PriorityState::new(&config(PriorityPolicy::PinnedClient));
    let mut waiting = queue(
        &[("a", r#"{"group":"jobs"}"#), ("b", r#"{"group":"jobs"}"#)],
        now,
    );
    let selection = state.select(&mut waiting, 5, 0, |_| true);
    assert_eq!((selection.serve, selection.pin_wanted), (Some(0), true));
    assert_eq!(state.pin_id(), None, "pinned only when delivering");
    let pin = state.pin_request(&mut waiting, 0, now).expect("pinned");
    assert_eq!(state.pin_id(), Some(pin.id.as_str()));
    assert_eq!(waiting.get(0).unwrap().pin_id, pin.id);
    // With `a` gone, `b` (no pin id) waits.
    waiting.remove(0);
    let selection = state.select(&mut waiting, 5, 0, |_| true);
    assert_eq!((selection.serve, selection.pin_wanted), (None, false));
    // A request with another pin is refused at once, one with the pin is admitted.
    let stale = WaitingRequest::new(
        Bytes::from_static(b"c"),
        &pull(r#"{"group":"jobs","id":"old"}"#),
        now,
    );
    assert!(
        String::from_utf8(state.admit(&stale, now).unwrap_err().to_vec())
            .unwrap()
            .starts_with("NATS/1.0 423 Nats-Pin-Id mismatch")
    );
    let body = format!(r#"{{"group":"jobs","id":"{}"}}"#, pin.id);
    let again = WaitingRequest::new(Bytes::from_static(b"a"), &pull(&body), now);
    let later = now + Duration::from_millis(500);
    state.admit(&again, later).unwrap();
    waiting.push(again).unwrap();
    assert_eq!(state.select(&mut waiting, 5, 0, |_| true).serve, Some(1));
    // The pin lapses a timeout after the pinned client's last pull.
    assert_eq!(state.lapse(later + Duration::from_millis(999)), None);
    assert_eq!(
        state.lapse(later + Duration::from_secs(1)).map(|p| p.id),
        Some(pin.id)
    );
    assert_eq!(state.pin_id(), None);
}

#[test]
fn a_queued_request_with_a_stale_pin_is_told() {
    let now = Instant::now();
    let mut state = PriorityState::new(&config(PriorityPolicy::PinnedClient));
    let mut waiting = queue(
        &[
            ("old", r#"{"group":"jobs","id":"gone","batch":3}"#),
            ("new", r#"{"group":"jobs"}"#),
        ],
        now,
    );
    let selection = state.select(&mut waiting, 5, 0, |_| true);
    assert_eq!(selection.wrong_pin.len(), 1);
    let status = wrong_pin(&selection.wrong_pin[0]);
    assert_eq!(
        &status[..],
        b"NATS/1.0 423 Nats-Wrong-Pin-Id\r\nNats-Pending-Messages: 3\r\nNats-Pending-Bytes: 0\r\n\r\n"
    );
    assert_eq!((selection.serve, selection.pin_wanted), (Some(0), true));
    state.pin_request(&mut waiting, 0, now);
    let pinned = config(PriorityPolicy::PinnedClient);
    let info = group_states(&pinned, state.current_pin());
    assert_eq!(info[0].pinned_client_id, state.pin_id().unwrap());
    assert_eq!(info[0].group, "jobs");
    assert!(state.unpin().is_some());
    let info = group_states(&pinned, state.current_pin());
    assert_eq!(
        (info[0].pinned_client_id.as_str(), info[0].pinned_ts),
        ("", Some(Timestamp::ZERO))
    );
    assert!(group_states(&ConsumerConfig::default(), None).is_empty());
}

#[test]
fn overflow_serves_a_thresholded_request_only_past_its_threshold() {
    let now = Instant::now();
    let mut state = PriorityState::new(&config(PriorityPolicy::Overflow));
    let mut waiting = queue(
        &[
            ("backup", r#"{"group":"jobs","min_pending":10}"#),
            ("acks", r#"{"group":"jobs","min_ack_pending":3}"#),
        ],
        now,
    );
    assert_eq!(state.select(&mut waiting, 9, 2, |_| true).serve, None);
    assert_eq!(state.select(&mut waiting, 10, 0, |_| true).serve, Some(0));
    assert_eq!(state.select(&mut waiting, 1, 3, |_| true).serve, Some(1));
    // Requests nobody listens to are dropped on the way.
    assert_eq!(
        state.select(&mut waiting, 10, 3, |r| r != "backup").serve,
        Some(0)
    );
    assert_eq!(waiting.len(), 1);
}

#[test]
fn prioritized_requests_queue_by_priority() {
    let now = Instant::now();
    let mut waiting = WaitingQueue::new(16);
    for (reply, body) in [
        ("low", r#"{"group":"jobs","priority":5}"#),
        ("high", r#"{"group":"jobs","priority":0}"#),
        ("low2", r#"{"group":"jobs","priority":5}"#),
        ("mid", r#"{"group":"jobs","priority":2}"#),
    ] {
        let request = WaitingRequest::new(Bytes::from_static(reply.as_bytes()), &pull(body), now);
        waiting.push_prioritized(request).unwrap();
    }
    let order: Vec<Bytes> = waiting.drain().into_iter().map(|r| r.reply).collect();
    assert_eq!(order, ["high", "mid", "low", "low2"]);
}

#[test]
fn an_update_keeps_the_pin_only_for_the_same_policy_and_group() {
    let now = Instant::now();
    let pinned = config(PriorityPolicy::PinnedClient);
    let mut state = PriorityState::new(&pinned);
    let mut waiting = queue(&[("a", r#"{"group":"jobs"}"#)], now);
    let selection = state.select(&mut waiting, 1, 0, |_| true);
    assert!(selection.pin_wanted);
    state.pin_request(&mut waiting, 0, now);
    assert_eq!(state.update(&pinned), None);
    assert!(state.pin_id().is_some());
    assert!(state.update(&config(PriorityPolicy::Overflow)).is_some());
    assert_eq!(state.pin_id(), None);
}
