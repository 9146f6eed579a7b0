//! JetStream advisories: the events nats-server publishes under `$JS.EVENT.ADVISORY.` when
//! streams and consumers are created, changed or deleted, and when a consumer gives up on a
//! message (`max_deliver` reached), a client terminates one (`+TERM`) or naks one (`-NAK`).
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

/// One advisory: where it goes and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advisory {
    Stream {
        stream: String,
        action: Action,
    },
    Consumer {
        stream: String,
        consumer: String,
        action: Action,
    },
    /// The message ran out of deliveries (`max_deliver`); `deliveries` is how many it had.
    MaxDeliveries {
        stream: String,
        consumer: String,
        stream_seq: u64,
        deliveries: u64,
    },
    /// A client `-NAK`ed the message.
    Nak {
        stream: String,
        consumer: String,
        consumer_seq: u64,
        stream_seq: u64,
        deliveries: u64,
    },
    /// A client `+TERM`inated the message, with an optional reason.
    Terminated {
        stream: String,
        consumer: String,
        consumer_seq: u64,
        stream_seq: u64,
        deliveries: u64,
        reason: Option<String>,
    },
}

#[derive(Serialize)]
struct Typed<'a, T: Serialize> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    timestamp: Timestamp,
    #[serde(flatten)]
    body: T,
}

#[derive(Serialize)]
struct StreamAction<'a> {
    stream: &'a str,
    action: Action,
}

#[derive(Serialize)]
struct ConsumerAction<'a> {
    stream: &'a str,
    consumer: &'a str,
    action: Action,
}

#[derive(Serialize)]
struct MaxDeliver<'a> {
    stream: &'a str,
    consumer: &'a str,
    stream_seq: u64,
    deliveries: u64,
}

#[derive(Serialize)]
struct Delivery<'a> {
    stream: &'a str,
    consumer: &'a str,
    consumer_seq: u64,
    stream_seq: u64,
    deliveries: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

impl Advisory {
    /// The subject nats-server publishes it on.
    pub fn subject(&self) -> String {
        match self {
            Advisory::Stream { stream, action } => {
                format!("{PREFIX}STREAM.{}.{stream}", action.subject_word())
            }
            Advisory::Consumer {
                stream,
                consumer,
                action,
            } => format!(
                "{PREFIX}CONSUMER.{}.{stream}.{consumer}",
                action.subject_word()
            ),
            Advisory::MaxDeliveries {
                stream, consumer, ..
            } => format!("{PREFIX}CONSUMER.MAX_DELIVERIES.{stream}.{consumer}"),
            Advisory::Nak {
                stream, consumer, ..
            } => format!("{PREFIX}CONSUMER.MSG_NAKED.{stream}.{consumer}"),
            Advisory::Terminated {
                stream, consumer, ..
            } => format!("{PREFIX}CONSUMER.MSG_TERMINATED.{stream}.{consumer}"),
        }
    }

    /// The JSON body, stamped with `id` (unique per event) and `timestamp`.
    pub fn to_json(&self, id: &str, timestamp: Timestamp) -> Vec<u8> {
        fn typed<T: Serialize>(
            kind: &'static str,
            id: &str,
            timestamp: Timestamp,
            body: T,
        ) -> Vec<u8> {
            let event = Typed {
                kind,
                id,
                timestamp,
                body,
            };
            serde_json::to_vec(&event).expect("advisories serialize")
        }
        match self {
            Advisory::Stream { stream, action } => typed(
                "io.nats.jetstream.advisory.v1.stream_action",
                id,
                timestamp,
                StreamAction {
                    stream,
                    action: *action,
                },
            ),
            Advisory::Consumer {
                stream,
                consumer,
                action,
            } => typed(
                "io.nats.jetstream.advisory.v1.consumer_action",
                id,
                timestamp,
                ConsumerAction {
                    stream,
                    consumer,
                    action: *action,
                },
            ),
            Advisory::MaxDeliveries {
                stream,
                consumer,
                stream_seq,
                deliveries,
            } => typed(
                "io.nats.jetstream.advisory.v1.max_deliver",
                id,
                timestamp,
                MaxDeliver {
                    stream,
                    consumer,
                    stream_seq: *stream_seq,
                    deliveries: *deliveries,
                },
            ),
            Advisory::Nak {
                stream,
                consumer,
                consumer_seq,
                stream_seq,
                deliveries,
            } => typed(
                "io.nats.jetstream.advisory.v1.nak",
                id,
                timestamp,
                Delivery {
                    stream,
                    consumer,
                    consumer_seq: *consumer_seq,
                    stream_seq: *stream_seq,
                    deliveries: *deliveries,
                    reason: None,
                },
            ),
            Advisory::Terminated {
                stream,
                consumer,
                consumer_seq,
                stream_seq,
                deliveries,
                reason,
            } => typed(
                "io.nats.jetstream.advisory.v1.terminated",
                id,
                timestamp,
                Delivery {
                    stream,
                    consumer,
                    consumer_seq: *consumer_seq,
                    stream_seq: *stream_seq,
                    deliveries: *deliveries,
                    reason: reason.as_deref().filter(|reason| !reason.is_empty()),
                },
            ),
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
        let created = Advisory::Stream {
            stream: "ORDERS".into(),
            action: Action::Create,
        };
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
        let modified = Advisory::Stream {
            stream: "ORDERS".into(),
            action: Action::Modify,
        };
        assert_eq!(
            modified.subject(),
            "$JS.EVENT.ADVISORY.STREAM.UPDATED.ORDERS"
        );
        assert_eq!(json(&modified)["action"], "modify");
        let deleted = Advisory::Consumer {
            stream: "ORDERS".into(),
            consumer: "proc".into(),
            action: Action::Delete,
        };
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
    fn delivery_advisories() {
        let max = Advisory::MaxDeliveries {
            stream: "S".into(),
            consumer: "C".into(),
            stream_seq: 7,
            deliveries: 3,
        };
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
        let nak = Advisory::Nak {
            stream: "S".into(),
            consumer: "C".into(),
            consumer_seq: 9,
            stream_seq: 7,
            deliveries: 2,
        };
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
        let term = |reason: Option<&str>| Advisory::Terminated {
            stream: "S".into(),
            consumer: "C".into(),
            consumer_seq: 9,
            stream_seq: 7,
            deliveries: 1,
            reason: reason.map(str::to_owned),
        };
        assert_eq!(
            term(None).subject(),
            "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.S.C"
        );
        assert_eq!(json(&term(Some("bad input")))["reason"], "bad input");
        assert!(json(&term(Some(""))).get("reason").is_none());
        assert_eq!(
            json(&term(None))["type"],
            "io.nats.jetstream.advisory.v1.terminated"
        );
    }
}
