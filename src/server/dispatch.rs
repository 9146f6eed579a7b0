//! Delivering a routed message to its matches: each plain subscription a copy, each queue
//! group one member. Used by client read loops and by the server's own publishers alike.
//!
//! A `Dispatch` collects the client writers that need waking, so a read loop wakes each
//! writer once per read rather than once per message.

use std::sync::Arc;

use rand::Rng;

use super::client::ClientHandle;
use super::message::Message;
use super::router::{Matches, Router};
use super::stats::ServerStats;
use super::subscription::{Claim, Subscriber, Subscription};

#[derive(Debug, Default)]
pub struct Dispatch {
    to_wake: Vec<Arc<ClientHandle>>,
    /// Receivers with more than half their outbound limit queued.
    backed_up: Vec<Arc<ClientHandle>>,
    /// Deliveries since the last `wake_all`, added to the node's counters there (one atomic
    /// update per batch instead of two per message).
    out_msgs: u64,
    out_bytes: u64,
}

impl Dispatch {
    /// Delivers `msg` to `matches`, skipping subscriptions of client `skip_client` (a
    /// publisher with echo off). Returns whether anyone received it.
    pub fn route(
        &mut self,
        router: &Router,
        matches: &Matches,
        msg: &Message,
        skip_client: Option<u64>,
    ) -> bool {
        let mut delivered = false;
        for sub in &matches.plain {
            delivered |= self.deliver(router, sub, msg, skip_client);
        }
        for group in &matches.queue_groups {
            // Start at a random member; move on past members that cannot take it.
            let start = rand::rng().random_range(0..group.len());
            let mut members = group.iter().cycle().skip(start).take(group.len());
            delivered |= members.any(|sub| self.deliver(router, sub, msg, skip_client));
        }
        delivered
    }

    /// Delivers to one subscription; false if it could not take the message.
    pub fn deliver(
        &mut self,
        router: &Router,
        sub: &Arc<Subscription>,
        msg: &Message,
        skip_client: Option<u64>,
    ) -> bool {
        if skip_client.is_some() && sub.client_id() == skip_client {
            return false;
        }
        let claim = sub.claim();
        if claim == Claim::Skip {
            return false;
        }
        let taken = match &sub.subscriber {
            Subscriber::Client(client) => {
                let queued = client.queue_delivery(&sub.sid, &msg.as_delivery());
                if queued.queued {
                    self.out_msgs += 1;
                    self.out_bytes += msg.size() as u64;
                }
                if queued.wake {
                    self.to_wake.push(client.clone());
                }
                if queued.backed_up && !self.backed_up.iter().any(|c| Arc::ptr_eq(c, client)) {
                    self.backed_up.push(client.clone());
                }
                true
            }
            Subscriber::Internal(handler) => handler.receive(msg),
        };
        if claim == Claim::DeliverLast {
            router.unsubscribe(sub);
        }
        taken
    }

    /// Wakes every writer that received messages since the last call, and counts them.
    pub fn wake_all(&mut self, stats: &ServerStats) {
        for client in self.to_wake.drain(..) {
            client.wake();
        }
        if self.out_msgs > 0 {
            ServerStats::add(&stats.out_msgs, self.out_msgs);
            ServerStats::add(&stats.out_bytes, self.out_bytes);
            self.out_msgs = 0;
            self.out_bytes = 0;
        }
    }

    /// Pauses (bounded by `limit` in total) while receivers are backed up, giving their
    /// writers time to drain. A receiver that stays backed up is not waited for again: it
    /// will either catch up or cross `max_pending` and be cut off as a slow consumer.
    pub async fn pause_for_backed_up(&mut self, limit: std::time::Duration) {
        if self.backed_up.is_empty() {
            return;
        }
        let deadline = tokio::time::Instant::now() + limit;
        for client in self.backed_up.drain(..) {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            client.wait_drained(left).await;
        }
    }
}
