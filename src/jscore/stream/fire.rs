//! Firing due schedules (ADR-51, `schedule.rs`) inside the replicated `Expire { now }`: the
//! leader's expiry task proposes it when the next schedule is due (`next_expiry_at`), and
//! every replica stores the same produced messages at the same sequences, because what a
//! schedule produces is a function of its stored body and the command's `now` (ADR 0023).
//!
//! Each due schedule still stored, in sequence order, produces one message on its target at
//! `now`, stored like a publish of it (limits, rollup, TTL and interest rules; its
//! `Nats-Schedule-Next: purge` removes the schedule, as in nats-server). A schedule whose
//! produced message the stream refuses is removed all the same, so a refusal cannot make it
//! fire on every `Expire`; nats-server would retry it. A sealed stream fires nothing.

use bytes::Bytes;

use super::append::AppendRequest;
use super::schedule::produced_message;
use super::state::StreamState;

/// The stored body of a due schedule, read by the state machine (the state keeps none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleBody {
    pub seq: u64,
    pub headers: Bytes,
    pub payload: Bytes,
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
            if let Some((target, headers)) = produced_message(&body.headers, &subject) {
                let request = AppendRequest {
                    subject: target,
                    headers: Some(Bytes::from(headers.clone())),
                    payload: body.payload.clone(),
                    now_nanos,
                };
                if let Ok(outcome) = self.append(request, has_interest) {
                    if let Some((seq, removed)) = outcome.stored() {
                        fired.removed.extend_from_slice(removed);
                        fired.produced.push(Produced {
                            seq,
                            headers,
                            payload: body.payload.to_vec(),
                        });
                    }
                }
            }
            if self.remove_seq(body.seq).is_some() {
                fired.removed.push(body.seq);
            }
        }
        fired.removed.sort_unstable();
        fired.removed.dedup();
        fired
    }
}
