//! JetStream advisories: the events nats-server publishes under `$JS.EVENT.ADVISORY.` when
//! streams and consumers are created, changed or deleted, and when a consumer gives up on a
//! message (`max_deliver` reached), a client terminates one (`+TERM`) or naks one (`-NAK`);
//! and the ack metric a consumer with `sample_freq` publishes under `$JS.EVENT.METRIC.`.
//! Pure: the subject and the JSON body of each; publishing them is the front's business.
//!
//! Bodies follow nats-server's `jetstream_events.go` (the jsm.go schemas the `nats` CLI
//! validates against): a typed event (`type`, `id`, `timestamp`) and the event's fields.
//! Advisories are optional for clients; dead-letter handling is their main use (a
//! `max_deliver` or `terminated` advisory names the stream sequence to fetch and park).

use serde::Serialize;

use super::time::Timestamp;

/// Every advisory subject starts with this.
pub const PREFIX: &str = "$JS.EVENT.ADVISORY.";
/// The subject of a sampled ack, before `<stream>.<consumer>`.
pub const ACK_METRIC_PREFIX: &str = "$JS.EVENT.METRIC.CONSUMER.ACK.";

/// The `type` of each body (jsm.go's schema names).
const STREAM_ACTION_TYPE: &str = "io.nats.jetstream.advisory.v1.stream_action";
const CONSUMER_ACTION_TYPE: &str = "io.nats.jetstream.advisory.v1.consumer_action";
const MAX_DELIVER_TYPE: &str = "io.nats.jetstream.advisory.v1.max_deliver";
const NAK_TYPE: &str = "io.nats.jetstream.advisory.v1.nak";
const TERMINATED_TYPE: &str = "io.nats.jetstream.advisory.v1.terminated";
const PAUSE_TYPE: &str = "io.nats.jetstream.advisory.v1.consumer_pause";
const PINNED_TYPE: &str = "io.nats.jetstream.advisory.v1.consumer_group_pinned";
const UNPINNED_TYPE: &str = "io.nats.jetstream.advisory.v1.consumer_group_unpinned";
const ACK_METRIC_TYPE: &str = "io.nats.jetstream.metric.v1.consumer_ack";
/// The account every advisory of jetraft's one account names where nats-server names one.
const ACCOUNT: &str = "$G";

/// What happened to a stream or consumer (nats-server's `ActionAdvisoryType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Delete,
    Modify,
}

impl Action {
    fn subject_word(self) -> &'static str {
        match self {
            Action::Create => "CREATED",
            Action::Delete => "DELETED",
            Action::Modify => "UPDATED",
        }
    }
}

/// A stream created, changed or deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StreamAction {
    pub stream: String,
    pub action: Action,
}

/// A consumer created or deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsumerAction {
    pub stream: String,
    pub consumer: String,
    pub action: Action,
}

/// A message that ran out of deliveries (`max_deliver`); `deliveries` is how many it had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MaxDeliveries {
    pub stream: String,
    pub consumer: String,
    pub stream_seq: u64,
    pub deliveries: u64,
}

/// One delivery a client `-NAK`ed or `+TERM`inated (the fields of its ack subject).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveryEvent {
    pub stream: String,
    pub consumer: String,
    pub consumer_seq: u64,
    pub stream_seq: u64,
    pub deliveries: u64,
    /// `+TERM <reason>` only; absent when empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A sampled ack (`sample_freq`): `ack_time` is nanoseconds from the message's last
/// delivery to its ack; `consumer_seq` and `deliveries` are the acked delivery's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AckMetric {
    pub stream: String,
    pub consumer: String,
    pub consumer_seq: u64,
    pub stream_seq: u64,
    pub ack_time: i64,
    pub deliveries: u64,
}

/// A consumer paused, resumed, or whose pause ended (`paused` is judged when it is sent;
/// `pause_until` is Go's zero time when the pause was lifted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PauseEvent {
    pub stream: String,
    pub consumer: String,
    pub paused: bool,
    pub pause_until: Timestamp,
}

/// A priority group of a `pinned_client` consumer pinned a client (`pinned_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinnedEvent {
    pub account: &'static str,
    pub stream: String,
    pub consumer: String,
    pub group: String,
    pub pinned_id: String,
}

/// A priority group lost its pin: `reason` is `"admin"` (UNPIN request) or `"timeout"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnpinnedEvent {
    pub account: &'static str,
    pub stream: String,
    pub consumer: String,
    pub group: String,
    pub reason: &'static str,
}

/// One advisory: where it goes and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advisory {
    Stream(StreamAction),
    Consumer(ConsumerAction),
    MaxDeliveries(MaxDeliveries),
    Nak(DeliveryEvent),
    Terminated(DeliveryEvent),
    Pause(PauseEvent),
    Pinned(PinnedEvent),
    Unpinned(UnpinnedEvent),
    AckMetric(AckMetric),
}

#[derive(Serialize)]
struct Typed<'a, T: Serialize> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    timestamp: Timestamp,
    #[serde(flatten)]
    body: &'a T,
}

fn typed<T: Serialize>(kind: &'static str, id: &str, timestamp: Timestamp, body: &T) -> Vec<u8> {
    let event = Typed {
        kind,
        id,
        timestamp,
        body,
    };
    serde_json::to_vec(&event).expect("advisories serialize")
}

impl Advisory {
    pub fn stream(stream: &str, action: Action) -> Advisory {
        Advisory::Stream(StreamAction {
            stream: stream.to_owned(),
            action,
        })
    }

    pub fn consumer(stream: &str, consumer: &str, action: Action) -> Advisory {
        Advisory::Consumer(ConsumerAction {
            stream: stream.to_owned(),
            consumer: consumer.to_owned(),
            action,
        })
    }

    pub fn pause(stream: &str, consumer: &str, pause_until: Timestamp, paused: bool) -> Advisory {
        Advisory::Pause(PauseEvent {
            stream: stream.to_owned(),
            consumer: consumer.to_owned(),
            paused,
            pause_until,
        })
    }

    pub fn pinned(stream: &str, consumer: &str, group: &str, pinned_id: &str) -> Advisory {
        Advisory::Pinned(PinnedEvent {
            account: ACCOUNT,
            stream: stream.to_owned(),
            consumer: consumer.to_owned(),
            group: group.to_owned(),
            pinned_id: pinned_id.to_owned(),
        })
    }

    pub fn unpinned(stream: &str, consumer: &str, group: &str, reason: &'static str) -> Advisory {
        Advisory::Unpinned(UnpinnedEvent {
            account: ACCOUNT,
            stream: stream.to_owned(),
            consumer: consumer.to_owned(),
            group: group.to_owned(),
            reason,
        })
    }

    /// What deleting `stream` advises, in nats-server's order (`stream.stop`): the deletion of
    /// each of its `consumers` first (`consumer.stopWithFlags`, one advisory per consumer),
    /// then the stream's own. A purge advises nothing.
    pub fn stream_deletion(stream: &str, consumers: &[String]) -> Vec<Advisory> {
        consumers
            .iter()
            .map(|consumer| Advisory::consumer(stream, consumer, Action::Delete))
            .chain(std::iter::once(Advisory::stream(stream, Action::Delete)))
            .collect()
    }

    /// The subject nats-server publishes it on.
    pub fn subject(&self) -> String {
        let (what, stream, consumer) = match self {
            Advisory::Stream(e) => {
                return format!("{PREFIX}STREAM.{}.{}", e.action.subject_word(), e.stream)
            }
            Advisory::Consumer(e) => (e.action.subject_word(), &e.stream, &e.consumer),
            Advisory::MaxDeliveries(e) => ("MAX_DELIVERIES", &e.stream, &e.consumer),
            Advisory::Nak(e) => ("MSG_NAKED", &e.stream, &e.consumer),
            Advisory::Terminated(e) => ("MSG_TERMINATED", &e.stream, &e.consumer),
            Advisory::Pause(e) => ("PAUSE", &e.stream, &e.consumer),
            Advisory::Pinned(e) => ("PINNED", &e.stream, &e.consumer),
            Advisory::Unpinned(e) => ("UNPINNED", &e.stream, &e.consumer),
            Advisory::AckMetric(e) => {
                return format!("{ACK_METRIC_PREFIX}{}.{}", e.stream, e.consumer)
            }
        };
        format!("{PREFIX}CONSUMER.{what}.{stream}.{consumer}")
    }

    /// The JSON body, stamped with `id` (unique per event) and `timestamp`.
    pub fn to_json(&self, id: &str, timestamp: Timestamp) -> Vec<u8> {
        match self {
            Advisory::Stream(e) => typed(STREAM_ACTION_TYPE, id, timestamp, e),
            Advisory::Consumer(e) => typed(CONSUMER_ACTION_TYPE, id, timestamp, e),
            Advisory::MaxDeliveries(e) => typed(MAX_DELIVER_TYPE, id, timestamp, e),
            Advisory::Nak(e) => typed(NAK_TYPE, id, timestamp, e),
            Advisory::Terminated(e) => typed(TERMINATED_TYPE, id, timestamp, e),
            Advisory::Pause(e) => typed(PAUSE_TYPE, id, timestamp, e),
            Advisory::Pinned(e) => typed(PINNED_TYPE, id, timestamp, e),
            Advisory::Unpinned(e) => typed(UNPINNED_TYPE, id, timestamp, e),
            Advisory::AckMetric(e) => typed(ACK_METRIC_TYPE, id, timestamp, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(advisory: &Advisory) -> serde_json::Value {
        let at = Timestamp::parse("2026-11-30T16:00:00.5Z").unwrap();
        serde_json::from_slice(&advisory.to_json("ID1", at)).unwrap()
    }

    #[test]
    fn stream_and_consumer_actions() {
        let created = Advisory::stream("ORDERS", Action::Create);
        assert_eq!(
            created.subject(),
            "$JS.EVENT.ADVISORY.STREAM.CREATED.ORDERS"
        );
        assert_eq!(
            json(&created),
            serde_json::json!({
                "type": "io.nats.jetstream.advisory.v1.stream_action",
                "id": "ID1",
                "timestamp": "2026-11-30T16:00:00.5Z",
                "stream": "ORDERS",
                "action": "create"
            })
        );
        let modified = Advisory::stream("ORDERS", Action::Modify);
        assert_eq!(
            modified.subject(),
            "$JS.EVENT.ADVISORY.STREAM.UPDATED.ORDERS"
        );
        assert_eq!(json(&modified)["action"], "modify");
        let deleted = Advisory::consumer("ORDERS", "proc", Action::Delete);
        assert_eq!(
            deleted.subject(),
            "$JS.EVENT.ADVISORY.CONSUMER.DELETED.ORDERS.proc"
        );
        assert_eq!(
            json(&deleted),
            serde_json::json!({
                "type": "io.nats.jetstream.advisory.v1.consumer_action",
                "id": "ID1",
                "timestamp": "2026-11-30T16:00:00.5Z",
                "stream": "ORDERS",
                "consumer": "proc",
                "action": "delete"
            })
        );
    }

    #[test]
    fn stream_deletion_advises_its_consumers_first() {
        let subjects = |consumers: &[String]| -> Vec<String> {
            Advisory::stream_deletion("S", consumers)
                .iter()
                .map(Advisory::subject)
                .collect()
        };
        assert_eq!(subjects(&[]), ["$JS.EVENT.ADVISORY.STREAM.DELETED.S"]);
        assert_eq!(
            subjects(&["a".into(), "b".into()]),
            [
                "$JS.EVENT.ADVISORY.CONSUMER.DELETED.S.a",
                "$JS.EVENT.ADVISORY.CONSUMER.DELETED.S.b",
                "$JS.EVENT.ADVISORY.STREAM.DELETED.S",
            ]
        );
        let advisories = Advisory::stream_deletion("S", &["a".into()]);
        assert_eq!(advisories[0], Advisory::consumer("S", "a", Action::Delete));
        assert_eq!(json(&advisories[0])["action"], "delete");
    }

    #[test]
    fn delivery_advisories() {
        let max = Advisory::MaxDeliveries(MaxDeliveries {
            stream: "S".into(),
            consumer: "C".into(),
            stream_seq: 7,
            deliveries: 3,
        });
        assert_eq!(
            max.subject(),
            "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.C"
        );
        assert_eq!(
            json(&max),
            serde_json::json!({
                "type": "io.nats.jetstream.advisory.v1.max_deliver",
                "id": "ID1",
                "timestamp": "2026-11-30T16:00:00.5Z",
                "stream": "S",
                "consumer": "C",
                "stream_seq": 7,
                "deliveries": 3
            })
        );
        let event = DeliveryEvent {
            stream: "S".into(),
            consumer: "C".into(),
            consumer_seq: 9,
            stream_seq: 7,
            deliveries: 2,
            reason: None,
        };
        let nak = Advisory::Nak(event.clone());
        assert_eq!(nak.subject(), "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.C");
        let body = json(&nak);
        assert_eq!(body["type"], "io.nats.jetstream.advisory.v1.nak");
        assert_eq!(
            (
                &body["consumer_seq"],
                &body["stream_seq"],
                &body["deliveries"]
            ),
            (
                &serde_json::json!(9),
                &serde_json::json!(7),
                &serde_json::json!(2)
            )
        );
        assert!(body.get("reason").is_none());
        let term = |reason: Option<&str>| {
            Advisory::Terminated(DeliveryEvent {
                reason: reason.map(str::to_owned),
                ..event.clone()
            })
        };
        assert_eq!(
            term(None).subject(),
            "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.S.C"
        );
        assert_eq!(json(&term(Some("bad input")))["reason"], "bad input");
        assert_eq!(
            json(&term(None))["type"],
            "io.nats.jetstream.advisory.v1.terminated"
        );
    }

    #[test]
    fn pause_and_pin_advisories() {
        let until = Timestamp::parse("2030-01-01T00:00:00Z").unwrap();
        let pause = Advisory::pause("S", "C", until, true);
        assert_eq!(pause.subject(), "$JS.EVENT.ADVISORY.CONSUMER.PAUSE.S.C");
        assert_eq!(
            json(&pause),
            serde_json::json!({
                "type": "io.nats.jetstream.advisory.v1.consumer_pause",
                "id": "ID1",
                "timestamp": "2026-11-30T16:00:00.5Z",
                "stream": "S",
                "consumer": "C",
                "paused": true,
                "pause_until": "2030-01-01T00:00:00Z"
            })
        );
        let resumed = Advisory::pause("S", "C", Timestamp::ZERO, false);
        assert_eq!(json(&resumed)["pause_until"], "0001-01-01T00:00:00Z");
        let pinned = Advisory::pinned("S", "C", "jobs", "PIN");
        assert_eq!(pinned.subject(), "$JS.EVENT.ADVISORY.CONSUMER.PINNED.S.C");
        let body = json(&pinned);
        assert_eq!(
            body["type"],
            "io.nats.jetstream.advisory.v1.consumer_group_pinned"
        );
        assert_eq!(
            (&body["group"], &body["pinned_id"]),
            (&serde_json::json!("jobs"), &serde_json::json!("PIN"))
        );
        let unpinned = Advisory::unpinned("S", "C", "jobs", "admin");
        assert_eq!(
            unpinned.subject(),
            "$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.S.C"
        );
        let body = json(&unpinned);
        assert_eq!(
            body["type"],
            "io.nats.jetstream.advisory.v1.consumer_group_unpinned"
        );
        assert_eq!(body["reason"], "admin");
        assert_eq!(body["account"], "$G");
    }

    #[test]
    fn a_sampled_ack_is_a_metric() {
        let metric = Advisory::AckMetric(AckMetric {
            stream: "S".into(),
            consumer: "C".into(),
            consumer_seq: 4,
            stream_seq: 9,
            ack_time: 1_500_000,
            deliveries: 2,
        });
        assert_eq!(metric.subject(), "$JS.EVENT.METRIC.CONSUMER.ACK.S.C");
        assert_eq!(
            json(&metric),
            serde_json::json!({
                "type": "io.nats.jetstream.metric.v1.consumer_ack",
                "id": "ID1",
                "timestamp": "2026-11-30T16:00:00.5Z",
                "stream": "S",
                "consumer": "C",
                "consumer_seq": 4,
                "stream_seq": 9,
                "ack_time": 1_500_000,
                "deliveries": 2
            })
        );
    }
}
