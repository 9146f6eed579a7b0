//! Pull requests (`$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`): parsing the body and
//! checking it against the consumer's limits, which nats-server answers with status
//! messages on the request's reply subject rather than JSON errors: `409 Consumer is push
//! based`, `400 Bad Request - …`, `409 Exceeded MaxRequestBatch of <n>`, `409 Exceeded
//! MaxRequestExpires of <duration>`, `409 Exceeded MaxRequestMaxBytes of <n>`, and the
//! priority-group checks (`priority::check_request`, `400 Bad Request - …`).
//!
//! Admitted requests join the consumer's waiting queue (`waiting.rs`) inside its delivery
//! task (`task.rs`), which also answers `409 Exceeded MaxWaiting`, `404 No Messages`, `408
//! Request Timeout` and sends idle heartbeats. The API dispatcher hands requests over in
//! `api::pull`, through `DeliveryRegistry::pull`.

use bytes::Bytes;
use tokio::time::Instant;

use super::outbox;
use super::waiting::WaitingRequest;
use crate::jsapi::{ConsumerConfig, PullRequest, PullRequestError};

/// Checks a parsed pull request (`PullRequest::parse` of a `MSG.NEXT` body, or the rest of
/// a `+NXT` ack) against the consumer; the error is the status to send back.
pub fn admit(
    config: &ConsumerConfig,
    reply: Bytes,
    request: Result<PullRequest, PullRequestError>,
    now: Instant,
) -> Result<WaitingRequest, Bytes> {
    if !config.is_pull() {
        return Err(outbox::conflict("Consumer is push based"));
    }
    let request = request.map_err(|error| match error {
        PullRequestError::Malformed(reason) => outbox::bad_request(&reason),
        PullRequestError::HeartbeatTooLarge => outbox::bad_request("heartbeat value too large"),
    })?;
    if config.max_batch > 0 && request.batch > config.max_batch {
        return Err(outbox::conflict(&format!(
            "Exceeded MaxRequestBatch of {}",
            config.max_batch
        )));
    }
    if config.max_expires > 0 && request.expires > config.max_expires {
        return Err(outbox::conflict(&format!(
            "Exceeded MaxRequestExpires of {}",
            go_duration(config.max_expires)
        )));
    }
    if config.max_bytes > 0 && request.max_bytes > config.max_bytes {
        return Err(outbox::conflict(&format!(
            "Exceeded MaxRequestMaxBytes of {}",
            config.max_bytes
        )));
    }
    super::priority::check_request(config, &request)?;
    Ok(WaitingRequest::new(reply, &request, now))
}

/// A duration as Go's `time.Duration.String()` prints it (`500ms`, `1s`, `1m30s`), for the
/// texts nats-server puts into its statuses.
pub fn go_duration(nanos: i64) -> String {
    const MICRO: i64 = 1_000;
    const MILLI: i64 = 1_000_000;
    const SECOND: i64 = 1_000_000_000;
    let sign = if nanos < 0 { "-" } else { "" };
    let nanos = nanos.unsigned_abs() as i64;
    let fraction = |value: i64, unit: i64, suffix: &str| {
        let whole = value / unit;
        let rest = value % unit;
        if rest == 0 {
            return format!("{sign}{whole}{suffix}");
        }
        let digits = unit.to_string().len() - 1;
        let rest = format!("{rest:0digits$}");
        format!("{sign}{whole}.{}{suffix}", rest.trim_end_matches('0'))
    };
    match nanos {
        0 => "0s".to_string(),
        n if n < MICRO => format!("{sign}{n}ns"),
        n if n < MILLI => fraction(n, MICRO, "µs"),
        n if n < SECOND => fraction(n, MILLI, "ms"),
        n => {
            let hours = n / (3600 * SECOND);
            let minutes = n / (60 * SECOND) % 60;
            let seconds = fraction(n % (60 * SECOND), SECOND, "s");
            let seconds = seconds.trim_start_matches('-');
            match (hours, minutes) {
                (0, 0) => format!("{sign}{seconds}"),
                (0, m) => format!("{sign}{m}m{seconds}"),
                (h, m) => format!("{sign}{h}h{m}m{seconds}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pull_consumer() -> ConsumerConfig {
        ConsumerConfig {
            durable_name: "proc".into(),
            max_waiting: 512,
            ..ConsumerConfig::default()
        }
    }

    fn refused(config: &ConsumerConfig, body: &str) -> String {
        let parsed = PullRequest::parse(body.as_bytes());
        let status =
            admit(config, Bytes::from_static(b"inbox"), parsed, Instant::now()).unwrap_err();
        String::from_utf8(status.to_vec()).unwrap()
    }

    #[test]
    fn natscli_request_is_admitted() {
        let request = admit(
            &pull_consumer(),
            Bytes::from_static(b"_INBOX.x"),
            PullRequest::parse(br#"{"expires":5000000000,"batch":1}"#),
            Instant::now(),
        )
        .unwrap();
        assert_eq!(request.batch_left, 1);
        assert!(request.expires_at.is_some() && !request.no_wait);
    }

    #[test]
    fn refusals_are_status_messages() {
        let push = ConsumerConfig {
            deliver_subject: "deliver.here".into(),
            ..ConsumerConfig::default()
        };
        assert_eq!(
            refused(&push, "1"),
            "NATS/1.0 409 Consumer is push based\r\n\r\n"
        );
        assert!(refused(&pull_consumer(), "{nope").starts_with("NATS/1.0 400 Bad Request - "));
        assert_eq!(
            refused(
                &pull_consumer(),
                r#"{"batch":1,"expires":1000000000,"idle_heartbeat":900000000}"#
            ),
            "NATS/1.0 400 Bad Request - heartbeat value too large\r\n\r\n"
        );
        let limited = ConsumerConfig {
            max_batch: 10,
            max_expires: 2_000_000_000,
            max_bytes: 1024,
            ..pull_consumer()
        };
        assert_eq!(
            refused(&limited, "11"),
            "NATS/1.0 409 Exceeded MaxRequestBatch of 10\r\n\r\n"
        );
        assert_eq!(
            refused(&limited, r#"{"batch":1,"expires":3000000000}"#),
            "NATS/1.0 409 Exceeded MaxRequestExpires of 2s\r\n\r\n"
        );
        assert_eq!(
            refused(&limited, r#"{"batch":1,"max_bytes":2048}"#),
            "NATS/1.0 409 Exceeded MaxRequestMaxBytes of 1024\r\n\r\n"
        );
        assert!(admit(
            &limited,
            Bytes::new(),
            PullRequest::parse(b"10"),
            Instant::now()
        )
        .is_ok());
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(999), "999ns");
        assert_eq!(go_duration(1_500), "1.5µs");
        assert_eq!(go_duration(500_000_000), "500ms");
        assert_eq!(go_duration(1_000_000_000), "1s");
        assert_eq!(go_duration(1_250_000_000), "1.25s");
        assert_eq!(go_duration(90_000_000_000), "1m30s");
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
        assert_eq!(go_duration(-2_000_000_000), "-2s");
    }
}
