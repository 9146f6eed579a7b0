//! How a consumer's delivery task delivers: look at what the replicated state would hand
//! out next (`peek`, without changing anything), propose `DeliverNext` (or, for a consumer
//! delivered without Raft, record it in the leader's copy, ADR 0034) for as many messages
//! as the demand allows — the front pull request's batch (one at a time under a byte
//! budget), or a push window — and send what the applied command returned, each message
//! with its stored subject and `$JS.ACK…` reply. The loop and timers are in `task.rs`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::outbox;
use super::priority::{wrong_pin, PIN_ID_HEADER};
use super::push::PushState;
use super::task::{ConsumerTask, Gone, Next, MAX_PULL_BATCH, RETRY_AFTER, SWEEP_EVERY};
use crate::jetstream::advisories;
use crate::jetstream::now_nanos;
use crate::jsapi::advisory::{Advisory, MaxDeliveries};
use crate::jsapi::{AckPolicy, ErrorKind, RetentionPolicy};
use crate::jscore::consumer::{ConsumerCommand, ConsumerOutcome, ConsumerState, Delivery};
use crate::jscore::group::{StreamCommand, StreamOutcome};
use crate::jscore::stream::{StoredMsg, StreamState};
use crate::server::message::Message;

/// A recorded delivery, with its message when it was read before the delivery removed it
/// (`prefetch`).
type Recorded = (Delivery, Option<StoredMsg>);

impl ConsumerTask {
    pub(super) async fn deliver_pull(&mut self) -> Result<(), Gone> {
        loop {
            if self.retry_at.is_some_and(|at| at > Instant::now()) {
                return Ok(());
            }
            let Some((index, pin_wanted)) = self.select_request() else {
                return Ok(());
            };
            let front = self.waiting.get(index).expect("selected from the queue");
            let reply = front.reply.clone();
            let (ends_when_dry, limited) = (front.ends_when_dry(), front.bytes_left.is_some());
            let (batch_left, pending_bytes) = (front.batch_left, front.pending_bytes());
            let now = now_nanos();
            let max = match self.peek(now) {
                Next::Gone => return Err(Gone),
                Next::Nothing if ends_when_dry => {
                    self.waiting.remove(index);
                    self.outbox.status(&reply, outbox::no_messages());
                    continue;
                }
                Next::Nothing if self.stale_redelivery(now) => 1,
                Next::Nothing => return Ok(()),
                Next::Ready { size } if limited && pending_bytes < size => {
                    self.waiting.remove(index);
                    let status = outbox::message_too_big(batch_left, pending_bytes);
                    self.outbox.status(&reply, status);
                    continue;
                }
                Next::Ready { .. } if limited => 1,
                Next::Ready { .. } => batch_left.clamp(1, MAX_PULL_BATCH) as usize,
            };
            if pin_wanted {
                if let Some(pin) =
                    self.priority
                        .pin_request(&mut self.waiting, index, Instant::now())
                {
                    self.pinned(&pin);
                }
            }
            let mut messages = self.deliver_next(max, now).await?;
            if messages.is_empty() {
                return Ok(());
            }
            if let Some(pin_id) = self.priority.pin_id() {
                for msg in &mut messages {
                    let headers =
                        outbox::append_header(msg.headers.as_deref(), PIN_ID_HEADER, pin_id);
                    msg.headers = Some(headers);
                }
            }
            // Only this task changes the queue, and `deliver_next` does not: the request is
            // still at `index`.
            let Some(front) = self.waiting.get_mut(index) else {
                return Ok(());
            };
            let delivered_at = Instant::now();
            for msg in &messages {
                front.record_delivery(outbox::charged_size(msg), delivered_at);
            }
            // nats-server tells a byte-budget request whose batch filled first what was left.
            let completed = (front.batch_left <= 0 && front.pending_bytes() > 0)
                .then(|| outbox::batch_completed(front.pending_bytes()));
            if front.is_done() {
                self.waiting.remove(index);
            }
            self.outbox.deliver(&reply, &messages).await;
            if let Some(status) = completed {
                self.outbox.status(&reply, status);
            }
        }
    }

    /// The waiting request to serve next (the oldest, unless a priority policy says
    /// otherwise; `priority.rs`), after dropping those nobody listens to and telling those
    /// holding a wrong pin.
    /// Also says whether the request must be pinned before it is served.
    fn select_request(&mut self) -> Option<(usize, bool)> {
        let (pending, ack_pending) = match self.priority.needs_counts() {
            true => self
                .read_consumer(|stream, consumer| {
                    (consumer.num_pending(stream), consumer.num_ack_pending())
                })
                .unwrap_or((0, 0)),
            false => (0, 0),
        };
        let outbox = &self.outbox;
        let selection = self
            .priority
            .select(&mut self.waiting, pending, ack_pending, |reply| {
                outbox.has_interest(reply)
            });
        for request in &selection.wrong_pin {
            self.outbox.status(&request.reply, wrong_pin(request));
        }
        selection.serve.map(|index| (index, selection.pin_wanted))
    }

    pub(super) async fn deliver_push(&mut self) -> Result<(), Gone> {
        let Some(subject) = self.push.as_ref().map(|p| p.deliver_subject.clone()) else {
            return Ok(());
        };
        if let Some(added) = self.subscriptions_added.as_mut() {
            // Seen before looking: a subscription added from here on wakes the task.
            added.borrow_and_update();
        }
        let bound = self.outbox.has_interest(&subject);
        self.activity.push_bound.store(bound, Ordering::Relaxed);
        if !bound {
            return Ok(());
        }
        self.activity.touch(now_nanos());
        loop {
            let window = self.push.as_ref().map_or(0, PushState::window);
            if window == 0 || self.retry_at.is_some_and(|at| at > Instant::now()) {
                return Ok(());
            }
            let now = now_nanos();
            let max = match self.peek(now) {
                Next::Gone => return Err(Gone),
                Next::Nothing if self.stale_redelivery(now) => 1,
                Next::Nothing => return Ok(()),
                Next::Ready { .. } => window,
            };
            let messages = self.deliver_next(max, now).await?;
            if messages.is_empty() {
                return Ok(());
            }
            let bytes: i64 = messages.iter().map(outbox::charged_size).sum();
            self.outbox.deliver(&subject, &messages).await;
            let push = self.push.as_mut().expect("push consumer");
            let window_used =
                push.record_delivery(messages.len() as u64, bytes as u64, Instant::now());
            let wanted = window_used || self.at_ack_pending_limit();
            self.request_flow_control_if(wanted);
        }
    }

    /// Records up to `max` deliveries (in the leader's copy, or by proposing `DeliverNext`)
    /// and builds the messages they delivered.
    pub(super) async fn deliver_next(
        &mut self,
        max: usize,
        now: i64,
    ) -> Result<Vec<Message>, Gone> {
        let deliveries = match self.deliver_locally(max, now) {
            Some(local) => local?,
            None => self.deliver_replicated(max, now).await?,
        };
        if !deliveries.is_empty() {
            self.activity
                .last_delivered_nanos
                .store(now, Ordering::Relaxed);
            self.activity.touch(now);
        }
        let (stream, name) = (self.stream.name(), self.name.as_str());
        let headers_only = self.config.headers_only;
        let seqs: Vec<u64> = deliveries.iter().map(|(d, _)| d.stream_seq).collect();
        let stored = self.stream.view().messages(&seqs);
        Ok(deliveries
            .into_iter()
            .zip(stored)
            .filter_map(|((delivery, prefetched), stored)| {
                let stored = stored.or(prefetched)?;
                let ack = outbox::ack_subject(stream, name, &delivery, stored.ts_nanos);
                Some(outbox::delivered_message(&stored, ack, headers_only))
            })
            .collect())
    }

    /// Deliveries recorded in the leader's own copy of a consumer that delivers without
    /// Raft (ADR 0034); `None` when this consumer's deliveries are replicated.
    fn deliver_locally(&self, max: usize, now: i64) -> Option<Result<Vec<Recorded>, Gone>> {
        self.stream.view().read(|group| {
            let Some(replicated) = group.consumer(&self.name) else {
                return Some(Err(Gone));
            };
            let deliveries = self
                .activity
                .local
                .deliver(replicated, group.stream(), max, now)?;
            Some(Ok(deliveries.into_iter().map(|d| (d, None)).collect()))
        })
    }

    /// Proposes `DeliverNext` and returns what it delivered, each with the message read
    /// before the proposal if its delivery removes it (`prefetch`).
    async fn deliver_replicated(&mut self, max: usize, now: i64) -> Result<Vec<Recorded>, Gone> {
        let mut prefetched = self.prefetch(max, now);
        let exhausting = self.stream.view().read(|group| {
            group
                .consumer(&self.name)
                .map(|consumer| consumer.due_exhausted(now))
                .unwrap_or_default()
        });
        let command = StreamCommand::Consumer {
            name: self.name.clone(),
            command: ConsumerCommand::DeliverNext {
                max_messages: max,
                now_nanos: now,
            },
        };
        let deliveries = match self.stream.propose_one(command).await {
            Ok(StreamOutcome::Consumer {
                outcome: ConsumerOutcome::Delivered(deliveries),
                ..
            }) => deliveries,
            Ok(other) => {
                tracing::error!(consumer = %self.name, "unexpected deliver outcome {other:?}");
                return Ok(Vec::new());
            }
            Err(error) if error.is(ErrorKind::ConsumerNotFound) => return Err(Gone),
            Err(error) => {
                tracing::warn!(consumer = %self.name, "delivery proposal failed: {error}");
                self.retry_at = Some(Instant::now() + RETRY_AFTER);
                return Ok(Vec::new());
            }
        };
        if !exhausting.is_empty() {
            self.advise_exhausted(exhausting);
        }
        Ok(deliveries
            .into_iter()
            .map(|d| {
                let prefetched = prefetched.remove(&d.stream_seq);
                (d, prefetched)
            })
            .collect())
    }

    /// The max-deliveries advisory for each message this delivery retired (the candidates were
    /// read before it was proposed; an ack that came first keeps a message out).
    fn advise_exhausted(&self, candidates: Vec<(u64, u64)>) {
        let retired: Vec<(u64, u64)> = self.stream.view().read(|group| {
            let Some(consumer) = group.consumer(&self.name) else {
                return Vec::new();
            };
            candidates
                .into_iter()
                .filter(|(seq, _)| consumer.is_exhausted(*seq))
                .collect()
        });
        for (stream_seq, deliveries) in retired {
            let advisory = Advisory::MaxDeliveries(MaxDeliveries {
                stream: self.stream.name().to_owned(),
                consumer: self.name.clone(),
                stream_seq,
                deliveries,
            });
            advisories::publish(self.outbox.shared(), &advisory);
        }
    }

    /// An ack-none consumer on an interest or work-queue stream: the messages it is about
    /// to be handed are removed by the same apply (delivery is its ack), so read them first.
    pub(super) fn prefetch(&self, max: usize, now: i64) -> HashMap<u64, StoredMsg> {
        if self.config.ack_policy != AckPolicy::None {
            return HashMap::new();
        }
        let view = self.stream.view();
        let seqs: Vec<u64> = view.read(|group| {
            let stream = group.stream();
            if stream.config().retention == RetentionPolicy::Limits {
                return Vec::new();
            }
            let Some(consumer) = group.consumer(&self.name) else {
                return Vec::new();
            };
            let mut rehearsal = consumer.clone();
            rehearsal
                .deliver_next(stream, max, now)
                .into_iter()
                .map(|d| d.stream_seq)
                .collect()
        });
        let messages = view.messages(&seqs);
        seqs.into_iter()
            .zip(messages)
            .filter_map(|(seq, msg)| Some((seq, msg?)))
            .collect()
    }

    pub(super) fn peek(&self, now: i64) -> Next {
        let view = self.stream.view();
        let next = self.read_consumer(|stream, consumer| consumer.next_to_deliver(stream, now));
        let delivery = match next {
            None => return Next::Gone,
            Some(None) => return Next::Nothing,
            Some(Some(delivery)) => delivery,
        };
        // The body is read without the stream's lock (the delivery that follows finds its
        // block in the cache).
        let Some(stored) = view.message(delivery.stream_seq) else {
            return Next::Nothing;
        };
        let ack = outbox::ack_subject(self.stream.name(), &self.name, &delivery, stored.ts_nanos);
        let msg = outbox::delivered_message(&stored, ack, self.config.headers_only);
        Next::Ready {
            size: outbox::charged_size(&msg),
        }
    }

    /// A due redelivery that cannot go out (its message is gone or out of deliveries) is
    /// retired by a `DeliverNext`; at most once per sweep, so it cannot spin.
    pub(super) fn stale_redelivery(&mut self, now: i64) -> bool {
        let due = self.redelivery_at().is_some_and(|at| at <= now);
        if !due || self.stale_check_at.is_some_and(|at| at > Instant::now()) {
            return false;
        }
        self.stale_check_at = Some(Instant::now() + SWEEP_EVERY);
        true
    }

    pub(super) fn redelivery_at(&self) -> Option<i64> {
        self.read_consumer(|_, consumer| consumer.next_redelivery_at())
            .flatten()
    }

    /// Runs `f` on the stream and the consumer as its leader sees it (its own copy, for one
    /// that delivers without Raft); `None` if the consumer is gone.
    pub(super) fn read_consumer<R>(
        &self,
        f: impl FnOnce(&StreamState, &ConsumerState) -> R,
    ) -> Option<R> {
        self.stream.view().read(|group| {
            let replicated = group.consumer(&self.name)?;
            let stream = group.stream();
            Some(
                self.activity
                    .local
                    .read(replicated, stream, |consumer| f(stream, consumer)),
            )
        })
    }
}
