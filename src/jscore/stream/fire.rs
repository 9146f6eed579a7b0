//! Firing due schedules (ADR-51, `schedule.rs`) inside the replicated `Expire { now }`: the
//! leader's expiry task proposes it when the next schedule is due (`next_expiry_at`), and
//! every replica stores the same produced messages at the same sequences, because what a
//! schedule produces is a function of its stored body and the command's `now` (ADR 0023).
//!
//! Each due schedule still stored, in sequence order, produces one message on its target at
//! `now`, stored like a publish of it (limits, rollup, TTL and interest rules); with a
//! `Nats-Schedule-Source`, the body and headers are that subject's last message's. A one-shot
//! schedule's message carries `Nats-Schedule-Next: purge`, which removes the schedule, as in
//! nats-server; a schedule whose produced message the stream refuses is removed all the
//! same, so a refusal cannot make it fire on every `Expire` (nats-server would retry it). A
//! repeating schedule stays: its message carries its next time, at which it is due again,
//! and the stream's schedule clock moves to `now` (ADR 0025). Late by any amount (a stopped
//! cluster), it fires once and then keeps to its times. A sealed stream fires nothing.

use bytes::Bytes;

use super::append::AppendRequest;
use super::schedule::{produced_message, schedule_source};
use super::state::StreamState;

/// The stored body of a due schedule, read by the state machine (the state keeps none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleBody {
    pub seq: u64,
    pub headers: Bytes,
    pub payload: Bytes,
    /// The headers and payload of the last message of its `Nats-Schedule-Source` subject
    /// ([`StreamState::schedule_source_seq`]), which fires instead of its own body.
    pub source: Option<(Bytes, Bytes)>,
}

/// A message a schedule produced: its sequence and body, for the state machine to store.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Produced {
    pub seq: u64,
    pub headers: Vec<u8>,
    pub payload: Vec<u8>,
}

/// What firing did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fired {
    /// Removed sequences: the schedules, and what the produced messages' limits or rollups
    /// removed.
    pub removed: Vec<u64>,
    pub produced: Vec<Produced>,
}

impl StreamState {
    /// The schedules due at `now_nanos`, whose bodies the caller reads for
    /// [`fire_schedules`](Self::fire_schedules). None on a stream without schedules (a
    /// copy of another stream's schedule is an ordinary message there) or a sealed one.
    pub fn due_schedules(&self, now_nanos: i64) -> Vec<u64> {
        if !self.config.allow_msg_schedules || self.config.sealed {
            return Vec::new();
        }
        self.schedules.due(now_nanos)
    }

    /// The message a due schedule with header block `headers` fires instead of its own body:
    /// the last one on its `Nats-Schedule-Source` subject, if that has one (nats-server
    /// 2.15.1 falls back to the schedule's body otherwise). Read before any fires, as
    /// nats-server gathers every due message before storing them.
    pub fn schedule_source_seq(&self, headers: &[u8]) -> Option<u64> {
        self.last_seq_for_subject(schedule_source(headers)?)
    }

    /// Fires the due schedules among `bodies` (module docs).
    pub fn fire_schedules(
        &mut self,
        now_nanos: i64,
        bodies: Vec<ScheduleBody>,
        has_interest: &dyn Fn(&str) -> bool,
    ) -> Fired {
        let mut fired = Fired::default();
        for body in bodies {
            let Some(subject) = self
                .get(body.seq)
                .filter(|_| self.schedules.contains(body.seq))
                .map(|msg| msg.subject.to_string())
            else {
                continue;
            };
            // The clock never goes back (a new leader's `now` may be behind the last one's),
            // so the next time is the first after the clock, as a reload computes it.
            self.schedule_clock = self.schedule_clock.max(now_nanos);
            let repeat = self.schedules.repeat(body.seq);
            let next = repeat
                .as_ref()
                .and_then(|repeat| repeat.next_after(self.schedule_clock));
            if repeat.is_some() && next.is_none() {
                // No time left in five years: no longer scheduled, as in nats-server.
                self.schedules.reschedule(body.seq, None);
                continue;
            }
            let (source_headers, payload) = match &body.source {
                Some((headers, payload)) => (Some(&headers[..]), payload.clone()),
                None => (None, body.payload.clone()),
            };
            let next_text = repeat
                .as_ref()
                .zip(next)
                .map(|(r, next)| r.format_next(next));
            let produced = produced_message(
                &body.headers,
                &subject,
                next_text.as_deref(),
                source_headers,
            );
            if let Some((target, headers)) = produced {
                let request = AppendRequest {
                    subject: target,
                    headers: Some(Bytes::from(headers.clone())),
                    payload: payload.clone(),
                    now_nanos,
                };
                if let Ok(outcome) = self.append(request, has_interest) {
                    if let Some((seq, removed)) = outcome.stored() {
                        fired.removed.extend_from_slice(removed);
                        fired.produced.push(Produced {
                            seq,
                            headers,
                            payload: payload.to_vec(),
                        });
                    }
                }
            }
            if next.is_some() {
                // Still stored unless its own produced message removed it (a limit).
                self.schedules.reschedule(body.seq, next);
            } else if self.remove_seq(body.seq).is_some() {
                fired.removed.push(body.seq);
            }
        }
        fired.removed.sort_unstable();
        fired.removed.dedup();
        fired
    }
}
