//! Acknowledgements: the `$JS.ACK.…` reply subject every delivered message carries (which
//! message, for which consumer, how often delivered, how much is still pending), and the
//! payloads clients publish to it (`+ACK`, `-NAK`, `+WPI`, `+TERM`, `+NXT`).
//!
//! jetraft emits the v1 (9-token) form, as nats-server does by default; it accepts v1 and
//! the v2 form (ADR-15: domain and account hash after `$JS.ACK`, 11 tokens, possibly more).

use std::fmt;

use super::requests::{PullRequest, PullRequestError};
use super::time::parse_go_duration;

/// Prefix of every ack subject.
pub const ACK_PREFIX: &str = "$JS.ACK.";

/// The metadata in an ack reply subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckReply {
    /// v2 only; `None` for v1 and for the `_` placeholder.
    pub domain: Option<String>,
    /// v2 only: 8-character hash of the account name.
    pub account_hash: Option<String>,
    pub stream: String,
    pub consumer: String,
    /// How many times this message has been delivered to this consumer (1 = first time).
    pub num_delivered: u64,
    pub stream_seq: u64,
    /// Delivery sequence; grows on every delivery, redeliveries included.
    pub consumer_seq: u64,
    /// The message's stored time, ns since the Unix epoch.
    pub timestamp: i64,
    /// Messages still pending for the consumer after this one.
    pub num_pending: u64,
}

/// Why an ack subject was not understood (nats-server ignores such acks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckSubjectError {
    #[error("not an ack subject")]
    NotAck,
    #[error("ack subject has {0} tokens, expected 9 or at least 11")]
    TokenCount(usize),
    #[error("ack subject field {0} is not a number")]
    BadNumber(&'static str),
}

impl AckReply {
    /// Parses `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>` (v1)
    /// or `$JS.ACK.<domain>.<hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.…]` (v2).
    pub fn parse(subject: &str) -> Result<AckReply, AckSubjectError> {
        if !subject.starts_with(ACK_PREFIX) {
            return Err(AckSubjectError::NotAck);
        }
        // The first 11 tokens and how many there are, without collecting them (an ack is
        // parsed for every acknowledged message).
        let mut tokens = [""; 11];
        let mut count = 0;
        for token in subject.split('.') {
            if count < tokens.len() {
                tokens[count] = token;
            }
            count += 1;
        }
        let (domain, account_hash, rest) = match count {
            9 => (None, None, &tokens[2..9]),
            n if n >= 11 => {
                let domain = (tokens[2] != "_").then(|| tokens[2].to_string());
                (domain, Some(tokens[3].to_string()), &tokens[4..11])
            }
            n => return Err(AckSubjectError::TokenCount(n)),
        };
        let number = |index: usize, name: &'static str| -> Result<u64, AckSubjectError> {
            rest[index]
                .parse::<u64>()
                .map_err(|_| AckSubjectError::BadNumber(name))
        };
        Ok(AckReply {
            domain,
            account_hash,
            stream: rest[0].to_string(),
            consumer: rest[1].to_string(),
            num_delivered: number(2, "delivered")?,
            stream_seq: number(3, "stream sequence")?,
            consumer_seq: number(4, "consumer sequence")?,
            timestamp: rest[5]
                .parse::<i64>()
                .map_err(|_| AckSubjectError::BadNumber("timestamp"))?,
            num_pending: number(6, "pending")?,
        })
    }

    /// The v1 subject text for a delivery, written directly (the same text as
    /// `AckReply::v1(...).to_string()`; this runs for every delivered message).
    pub fn v1_subject(
        stream: &str,
        consumer: &str,
        num_delivered: u64,
        stream_seq: u64,
        consumer_seq: u64,
        timestamp: i64,
        num_pending: u64,
    ) -> String {
        let mut out = String::with_capacity(ACK_PREFIX.len() + stream.len() + consumer.len() + 64);
        out.push_str(ACK_PREFIX);
        out.push_str(stream);
        out.push('.');
        out.push_str(consumer);
        let mut number = itoa::Buffer::new();
        for value in [num_delivered, stream_seq, consumer_seq] {
            out.push('.');
            out.push_str(number.format(value));
        }
        out.push('.');
        out.push_str(number.format(timestamp));
        out.push('.');
        out.push_str(number.format(num_pending));
        out
    }

    /// The v1 subject for a delivery (what jetraft sends).
    pub fn v1(
        stream: &str,
        consumer: &str,
        num_delivered: u64,
        stream_seq: u64,
        consumer_seq: u64,
        timestamp: i64,
        num_pending: u64,
    ) -> AckReply {
        AckReply {
            domain: None,
            account_hash: None,
            stream: stream.to_string(),
            consumer: consumer.to_string(),
            num_delivered,
            stream_seq,
            consumer_seq,
            timestamp,
            num_pending,
        }
    }
}

impl fmt::Display for AckReply {
    /// v1 form unless an account hash is set, then v2 (domain `_` when none).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(ACK_PREFIX)?;
        if let Some(hash) = &self.account_hash {
            write!(f, "{}.{}.", self.domain.as_deref().unwrap_or("_"), hash)?;
        }
        write!(
            f,
            "{}.{}.{}.{}.{}.{}.{}",
            self.stream,
            self.consumer,
            self.num_delivered,
            self.stream_seq,
            self.consumer_seq,
            self.timestamp,
            self.num_pending
        )
    }
}

/// What an ack payload asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckKind {
    /// Empty payload, `+ACK`, or the legacy `+OK`.
    Ack,
    /// `-NAK`: redeliver; with a delay (ns) from `-NAK {"delay":ns}` or `-NAK 5s`.
    /// An unparsable delay is a plain NAK, as in nats-server.
    Nak { delay: Option<i64> },
    /// `+WPI`: still working, restart the ack timer.
    InProgress,
    /// `+TERM [reason]`: never redeliver.
    Term { reason: Option<String> },
    /// `+NXT [request]`: ack, then treat the rest as a pull request (batch number or JSON)
    /// whose reply subject is the ack message's reply subject.
    Next(Result<PullRequest, PullRequestError>),
}

impl AckKind {
    /// Parses an ack payload; `None` for payloads nats-server ignores.
    pub fn parse(payload: &[u8]) -> Option<AckKind> {
        if payload.is_empty() || payload == b"+ACK" || payload == b"+OK" {
            return Some(AckKind::Ack);
        }
        if payload == b"+WPI" {
            return Some(AckKind::InProgress);
        }
        if let Some(rest) = payload.strip_prefix(b"+NXT") {
            return Some(AckKind::Next(PullRequest::parse(rest)));
        }
        if let Some(rest) = payload.strip_prefix(b"-NAK") {
            return Some(AckKind::Nak {
                delay: parse_nak_delay(rest),
            });
        }
        if let Some(rest) = payload.strip_prefix(b"+TERM") {
            let reason = String::from_utf8_lossy(rest).trim().to_string();
            return Some(AckKind::Term {
                reason: (!reason.is_empty()).then_some(reason),
            });
        }
        None
    }
}

fn parse_nak_delay(rest: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(rest).ok()?.trim();
    if text.is_empty() {
        return None;
    }
    if text.starts_with('{') {
        #[derive(serde::Deserialize)]
        struct NakOptions {
            #[serde(default)]
            delay: i64,
        }
        return serde_json::from_str::<NakOptions>(text)
            .ok()
            .map(|o| o.delay);
    }
    parse_go_duration(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_round_trip() {
        let subject = "$JS.ACK.ORDERS.order-processor.1.1.1.1755770400000000000.0";
        let ack = AckReply::parse(subject).unwrap();
        assert_eq!(
            ack,
            AckReply::v1(
                "ORDERS",
                "order-processor",
                1,
                1,
                1,
                1_755_770_400_000_000_000,
                0
            )
        );
        assert_eq!(ack.to_string(), subject);
        assert_eq!(
            AckReply::v1_subject(
                "ORDERS",
                "order-processor",
                1,
                1,
                1,
                1_755_770_400_000_000_000,
                0
            ),
            subject
        );
        assert_eq!(
            AckReply::v1_subject("S", "C", 7, u64::MAX, 3, -5, 9),
            AckReply::v1("S", "C", 7, u64::MAX, 3, -5, 9).to_string()
        );
    }

    #[test]
    fn v2_forms() {
        let ack = AckReply::parse("$JS.ACK._.AbCdEfGh.S.C.2.10.12.99.3").unwrap();
        assert_eq!(ack.domain, None);
        assert_eq!(ack.account_hash.as_deref(), Some("AbCdEfGh"));
        assert_eq!(
            (ack.num_delivered, ack.stream_seq, ack.consumer_seq),
            (2, 10, 12)
        );
        assert_eq!((ack.timestamp, ack.num_pending), (99, 3));
        assert_eq!(ack.to_string(), "$JS.ACK._.AbCdEfGh.S.C.2.10.12.99.3");
        let with_token = AckReply::parse("$JS.ACK.hub.AbCdEfGh.S.C.1.5.5.7.0.rand0m").unwrap();
        assert_eq!(with_token.domain.as_deref(), Some("hub"));
        assert_eq!(with_token.stream_seq, 5);
    }

    #[test]
    fn bad_subjects() {
        assert_eq!(
            AckReply::parse("$JS.API.INFO"),
            Err(AckSubjectError::NotAck)
        );
        assert_eq!(
            AckReply::parse("$JS.ACK.S.C.1.1.1.1"),
            Err(AckSubjectError::TokenCount(8))
        );
        assert_eq!(
            AckReply::parse("$JS.ACK.x.S.C.1.1.1.1.0"),
            Err(AckSubjectError::TokenCount(10))
        );
        assert_eq!(
            AckReply::parse("$JS.ACK.S.C.x.1.1.1.0"),
            Err(AckSubjectError::BadNumber("delivered"))
        );
    }

    #[test]
    fn ack_payloads() {
        assert_eq!(AckKind::parse(b""), Some(AckKind::Ack));
        assert_eq!(AckKind::parse(b"+ACK"), Some(AckKind::Ack));
        assert_eq!(AckKind::parse(b"+OK"), Some(AckKind::Ack));
        assert_eq!(AckKind::parse(b"+WPI"), Some(AckKind::InProgress));
        assert_eq!(AckKind::parse(b"-NAK"), Some(AckKind::Nak { delay: None }));
        assert_eq!(
            AckKind::parse(br#"-NAK {"delay": 2000000000}"#),
            Some(AckKind::Nak {
                delay: Some(2_000_000_000)
            })
        );
        assert_eq!(
            AckKind::parse(b"-NAK 5s"),
            Some(AckKind::Nak {
                delay: Some(5_000_000_000)
            })
        );
        assert_eq!(
            AckKind::parse(b"-NAK soon"),
            Some(AckKind::Nak { delay: None })
        );
        assert_eq!(
            AckKind::parse(b"+TERM"),
            Some(AckKind::Term { reason: None })
        );
        assert_eq!(
            AckKind::parse(b"+TERM bad payload"),
            Some(AckKind::Term {
                reason: Some("bad payload".into())
            })
        );
        assert_eq!(AckKind::parse(b"hello"), None);
    }

    #[test]
    fn next_payloads() {
        let Some(AckKind::Next(Ok(req))) = AckKind::parse(b"+NXT") else {
            panic!("plain +NXT")
        };
        assert_eq!(req.batch, 1);
        let Some(AckKind::Next(Ok(req))) = AckKind::parse(b"+NXT 10") else {
            panic!("+NXT 10")
        };
        assert_eq!(req.batch, 10);
        let Some(AckKind::Next(Ok(req))) = AckKind::parse(br#"+NXT {"batch":3,"no_wait":true}"#)
        else {
            panic!("+NXT json")
        };
        assert!(req.no_wait && req.batch == 3);
        assert!(matches!(
            AckKind::parse(b"+NXT {oops"),
            Some(AckKind::Next(Err(_)))
        ));
    }
}
