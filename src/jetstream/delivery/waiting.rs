//! The waiting pull requests of one pull consumer: a FIFO bounded by `max_waiting`, each
//! request with what it still wants (messages, bytes), when it expires and when its next
//! idle heartbeat is due. Pure bookkeeping over `tokio::time::Instant`; the consumer's
//! delivery task (`task.rs`) owns the queue and does the sending.
//!
//! Leader-only and never replicated: a new leader starts with an empty queue and clients
//! re-pull (nats-server answers `409 Leadership Change`; see DESIGN.md "Pull").

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::jsapi::PullRequest;

/// One queued `CONSUMER.MSG.NEXT` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingRequest {
    /// Where its messages and statuses go (the client's inbox).
    pub reply: Bytes,
    /// Messages it still wants.
    pub batch_left: i64,
    /// Bytes it still allows; `None` when it set no `max_bytes`.
    pub bytes_left: Option<i64>,
    pub no_wait: bool,
    pub expires_at: Option<Instant>,
    pub heartbeat: Option<Duration>,
    pub next_heartbeat: Option<Instant>,
    /// Messages delivered to it so far.
    pub delivered: u64,
    /// Its priority-group fields (`group`, `id`, `min_pending`, `min_ack_pending`,
    /// `priority`); see `priority.rs`. `pin_id` becomes the pin when it is given one.
    pub group: String,
    pub pin_id: String,
    pub min_pending: i64,
    pub min_ack_pending: i64,
    pub priority: i64,
}

impl WaitingRequest {
    pub fn new(reply: Bytes, request: &PullRequest, now: Instant) -> Self {
        let nanos = |n: i64| (n > 0).then(|| Duration::from_nanos(n as u64));
        let heartbeat = nanos(request.idle_heartbeat);
        WaitingRequest {
            reply,
            batch_left: request.batch.max(1),
            bytes_left: (request.max_bytes > 0).then_some(request.max_bytes),
            no_wait: request.no_wait,
            expires_at: nanos(request.expires).map(|d| now + d),
            heartbeat,
            next_heartbeat: heartbeat.map(|d| now + d),
            delivered: 0,
            group: request.group.clone(),
            pin_id: request.id.clone(),
            min_pending: request.min_pending,
            min_ack_pending: request.min_ack_pending,
            priority: request.priority,
        }
    }

    /// True if a message charged `size` bytes fits what the request still allows.
    pub fn fits(&self, size: i64) -> bool {
        self.bytes_left.is_none_or(|left| size <= left)
    }

    /// Counts one delivered message; the heartbeat clock restarts.
    pub fn record_delivery(&mut self, size: i64, now: Instant) {
        self.batch_left -= 1;
        self.delivered += 1;
        if let Some(left) = &mut self.bytes_left {
            *left -= size;
        }
        self.next_heartbeat = self.heartbeat.map(|d| now + d);
    }

    /// Filled: its batch is delivered or its byte budget is used up.
    pub fn is_done(&self) -> bool {
        self.batch_left <= 0 || self.bytes_left.is_some_and(|left| left <= 0)
    }

    /// The `Nats-Pending-Bytes` value of its final status (0 without a byte budget).
    pub fn pending_bytes(&self) -> i64 {
        self.bytes_left.unwrap_or(0)
    }

    /// A `no_wait` request ends (404) as soon as the consumer runs dry — unless it also set
    /// `expires` and got nothing yet: then it waits like any other request.
    pub fn ends_when_dry(&self) -> bool {
        self.no_wait && (self.delivered > 0 || self.expires_at.is_none())
    }

    fn is_expired(&self, now: Instant) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

/// The FIFO of waiting requests (one per pull consumer, owned by its delivery task).
#[derive(Debug)]
pub struct WaitingQueue {
    requests: VecDeque<WaitingRequest>,
    max: usize,
}

impl WaitingQueue {
    /// `max_waiting` from the consumer config (512 by default; at least 1).
    pub fn new(max_waiting: i64) -> Self {
        WaitingQueue {
            requests: VecDeque::new(),
            max: max_waiting.max(1) as usize,
        }
    }

    pub fn set_max(&mut self, max_waiting: i64) {
        self.max = max_waiting.max(1) as usize;
    }

    pub fn len(&self) -> usize {
        self.requests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Queues a request; gives it back when `max_waiting` requests are already waiting
    /// (the caller answers `409 Exceeded MaxWaiting`).
    pub fn push(&mut self, request: WaitingRequest) -> Result<(), Box<WaitingRequest>> {
        if self.is_full() {
            return Err(Box::new(request));
        }
        self.requests.push_back(request);
        Ok(())
    }

    /// Queues a request behind every request of the same or a lower `priority` value and
    /// before those of a higher one (`prioritized` consumers: 0 is served first).
    pub fn push_prioritized(&mut self, request: WaitingRequest) -> Result<(), Box<WaitingRequest>> {
        if self.is_full() {
            return Err(Box::new(request));
        }
        let at = self
            .requests
            .iter()
            .position(|queued| queued.priority > request.priority)
            .unwrap_or(self.requests.len());
        self.requests.insert(at, request);
        Ok(())
    }

    pub fn get(&self, index: usize) -> Option<&WaitingRequest> {
        self.requests.get(index)
    }

    pub fn get_mut(&mut self, index: usize) -> Option<&mut WaitingRequest> {
        self.requests.get_mut(index)
    }

    pub fn remove(&mut self, index: usize) -> Option<WaitingRequest> {
        self.requests.remove(index)
    }

    pub fn is_full(&self) -> bool {
        self.requests.len() >= self.max
    }

    /// Messages the waiting requests still want, together.
    pub fn batch_pending(&self) -> u64 {
        self.requests
            .iter()
            .map(|request| request.batch_left.max(0) as u64)
            .sum()
    }

    pub fn front_mut(&mut self) -> Option<&mut WaitingRequest> {
        self.requests.front_mut()
    }

    pub fn pop_front(&mut self) -> Option<WaitingRequest> {
        self.requests.pop_front()
    }

    /// Removes and returns the requests whose `expires` has passed (they get a 408).
    pub fn take_expired(&mut self, now: Instant) -> Vec<WaitingRequest> {
        self.take_where(|request| request.is_expired(now))
    }

    /// Removes requests whose reply subject nobody listens to any more (dropped silently,
    /// as nats-server does when the client unsubscribed or went away).
    pub fn drop_uninterested(&mut self, mut has_interest: impl FnMut(&Bytes) -> bool) -> usize {
        self.take_where(|request| !has_interest(&request.reply))
            .len()
    }

    /// Reply subjects owed an idle heartbeat at `now`; their heartbeat clocks restart.
    pub fn heartbeats_due(&mut self, now: Instant) -> Vec<Bytes> {
        let mut due = Vec::new();
        for request in &mut self.requests {
            if let (Some(at), Some(every)) = (request.next_heartbeat, request.heartbeat) {
                if at <= now {
                    due.push(request.reply.clone());
                    request.next_heartbeat = Some(now + every);
                }
            }
        }
        due
    }

    /// The earliest expiry or heartbeat among the waiting requests.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.requests
            .iter()
            .flat_map(|request| [request.expires_at, request.next_heartbeat])
            .flatten()
            .min()
    }

    /// Empties the queue (consumer deleted, stream gone, shutdown).
    pub fn drain(&mut self) -> Vec<WaitingRequest> {
        self.requests.drain(..).collect()
    }

    fn take_where(
        &mut self,
        mut matches: impl FnMut(&WaitingRequest) -> bool,
    ) -> Vec<WaitingRequest> {
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(self.requests.len());
        for request in self.requests.drain(..) {
            if matches(&request) {
                taken.push(request);
            } else {
                kept.push_back(request);
            }
        }
        self.requests = kept;
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pull(json: &str) -> PullRequest {
        PullRequest::parse(json.as_bytes()).unwrap()
    }

    fn request(reply: &'static str, json: &str, now: Instant) -> WaitingRequest {
        WaitingRequest::new(Bytes::from_static(reply.as_bytes()), &pull(json), now)
    }

    #[test]
    fn max_waiting_bounds_the_queue() {
        let now = Instant::now();
        let mut queue = WaitingQueue::new(2);
        assert!(queue.push(request("a", "1", now)).is_ok());
        assert!(queue.push(request("b", "1", now)).is_ok());
        let refused = queue.push(request("c", "1", now)).unwrap_err();
        assert_eq!(&refused.reply[..], b"c");
        assert_eq!(queue.len(), 2);
        assert_eq!(&queue.pop_front().unwrap().reply[..], b"a");
    }

    #[test]
    fn batches_and_byte_budgets() {
        let now = Instant::now();
        let mut batch = request("a", r#"{"batch":2}"#, now);
        assert!(batch.fits(1 << 40));
        batch.record_delivery(10, now);
        assert!(!batch.is_done());
        batch.record_delivery(10, now);
        assert!(batch.is_done());
        assert_eq!(batch.pending_bytes(), 0);

        let mut bytes = request("b", r#"{"batch":10,"max_bytes":100}"#, now);
        assert!(bytes.fits(100) && !bytes.fits(101));
        bytes.record_delivery(60, now);
        assert_eq!((bytes.batch_left, bytes.pending_bytes()), (9, 40));
        assert!(!bytes.fits(41));
        bytes.record_delivery(40, now);
        assert!(bytes.is_done(), "budget used up exactly");
    }

    #[test]
    fn no_wait_ends_when_dry_unless_still_waiting_for_a_first_message() {
        let now = Instant::now();
        assert!(request("a", r#"{"batch":5,"no_wait":true}"#, now).ends_when_dry());
        let mut with_expiry = request(
            "b",
            r#"{"batch":5,"no_wait":true,"expires":1000000000}"#,
            now,
        );
        assert!(!with_expiry.ends_when_dry());
        with_expiry.record_delivery(1, now);
        assert!(with_expiry.ends_when_dry());
        assert!(!request("c", r#"{"batch":5,"expires":1000000000}"#, now).ends_when_dry());
    }

    #[test]
    fn expiry_heartbeats_and_deadlines() {
        let now = Instant::now();
        let second = Duration::from_secs(1);
        let mut queue = WaitingQueue::new(512);
        queue
            .push(request("a", r#"{"batch":1,"expires":5000000000}"#, now))
            .unwrap();
        queue
            .push(request(
                "b",
                r#"{"batch":1,"expires":30000000000,"idle_heartbeat":2000000000}"#,
                now,
            ))
            .unwrap();
        queue.push(request("c", "1", now)).unwrap();
        assert_eq!(queue.next_deadline(), Some(now + 2 * second));
        assert!(queue.heartbeats_due(now + second).is_empty());
        let due = queue.heartbeats_due(now + 2 * second);
        assert_eq!(due, vec![Bytes::from_static(b"b")]);
        assert_eq!(queue.next_deadline(), Some(now + 4 * second));
        assert!(queue.take_expired(now + 4 * second).is_empty());
        let expired = queue.take_expired(now + 5 * second);
        assert_eq!(expired.len(), 1);
        assert_eq!(&expired[0].reply[..], b"a");
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.next_deadline(), Some(now + 4 * second));
    }

    #[test]
    fn uninterested_requests_are_dropped_in_order() {
        let now = Instant::now();
        let mut queue = WaitingQueue::new(512);
        for reply in ["a", "b", "c"] {
            queue.push(request(reply, "1", now)).unwrap();
        }
        assert_eq!(queue.drop_uninterested(|reply| &reply[..] != b"b"), 1);
        let left: Vec<_> = queue.drain().into_iter().map(|r| r.reply).collect();
        assert_eq!(
            left,
            vec![Bytes::from_static(b"a"), Bytes::from_static(b"c")]
        );
        assert!(queue.is_empty());
    }
}
