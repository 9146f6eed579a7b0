//! The publish headers checked before a publish is proposed: those of features jetraft does
//! not implement, atomic batches (`Nats-Batch-Id`) and schedules (`Nats-Schedule`), the
//! per-message TTL (`Nats-TTL`), which only a stream with `allow_msg_ttl` takes and which
//! must parse (`ttl.rs`), and counter increments (`Nats-Incr`), which only a counter stream
//! takes (`counter.rs`). A stream refuses the stream
//! settings that enable the unimplemented ones (`jsapi::unsupported`), so every jetraft
//! stream is one where nats-server refuses those publishes: with the same PubAck errors,
//! and never storing the message with its header ignored.
//!
//! Checked on the stream leader before the publish is proposed, as nats-server checks them
//! before its clustered proposal: nothing refused reaches the Raft log, so the replicated
//! apply (`append.rs`) and the logs already written are untouched.

use crate::jsapi::stream_config::StreamConfig;
use crate::wire::headers::lookup;

use super::counter::{check_increment, MsgCounters};
use super::error::AppendError;
use super::publish_headers::EXPECTED_STREAM;
use super::schedule::{check_publish, ScheduleRules};
use super::ttl::{parse_ttl, MsgTtl, MSG_TTL};

pub const MSG_INCR: &str = "Nats-Incr";
pub const BATCH_ID: &str = "Nats-Batch-Id";

/// Whether the stream takes per-message TTLs (its `allow_msg_ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgTtls {
    Allowed,
    Disabled,
}

/// What a stream's config lets a publish's headers ask for.
#[derive(Debug, Clone, Copy)]
pub struct HeaderRules<'a> {
    pub ttls: MsgTtls,
    pub counters: MsgCounters,
    pub schedules: ScheduleRules<'a>,
}

impl HeaderRules<'static> {
    /// A stream that takes none of them (or one not known here).
    pub const NONE: HeaderRules<'static> = HeaderRules {
        ttls: MsgTtls::Disabled,
        counters: MsgCounters::Disabled,
        schedules: ScheduleRules::NONE,
    };
}

/// What a stream with `config` takes: `Nats-TTL` (its `allow_msg_ttl`, which can only be
/// switched on), `Nats-Incr` (its `allow_msg_counter`, fixed at creation) and schedules
/// (its `allow_msg_schedules`, targets among its subjects).
pub fn header_rules(config: &StreamConfig) -> HeaderRules<'_> {
    let ttls = match config.allow_msg_ttl {
        true => MsgTtls::Allowed,
        false => MsgTtls::Disabled,
    };
    let counters = match config.allow_msg_counter {
        true => MsgCounters::Allowed,
        false => MsgCounters::Disabled,
    };
    let schedules = ScheduleRules {
        allowed: config.allow_msg_schedules,
        ttls: config.allow_msg_ttl,
        subjects: &config.subjects,
    };
    HeaderRules {
        ttls,
        counters,
        schedules,
    }
}

/// The refusal nats-server answers a publish carrying `block` to `subject` of stream
/// `stream` (which allows no atomic batches, and takes what `rules` says), in nats-server's
/// order; `Ok` when nothing refused is asked for.
pub fn refuse_unsupported_headers(
    block: &[u8],
    subject: &str,
    stream: &str,
    rules: HeaderRules<'_>,
) -> Result<(), AppendError> {
    // A batch goes down its own path in nats-server, refused before any other check.
    if header_value(block, BATCH_ID).is_some() {
        return Err(AppendError::AtomicPublishDisabled);
    }
    if refuse_common(block, stream, rules.ttls, rules.counters)? == Checks::LeftToTheApply {
        return Ok(());
    }
    check_publish(block, subject, rules.schedules)
}

/// Whether the checks after the common ones still run.
#[derive(Debug, PartialEq, Eq)]
enum Checks {
    Continue,
    /// A wrong expected stream: the apply answers it (10060), as in nats-server.
    LeftToTheApply,
}

fn header_value<'a>(block: &'a [u8], name: &str) -> Option<&'a [u8]> {
    lookup(block, name)
        .map(|value| value.trim_ascii_end())
        .filter(|value| !value.is_empty())
}

/// As [`refuse_unsupported_headers`] for a member of an atomic batch to `subject` on a
/// stream that takes them (`allow_atomic`): every check but the batch's own.
pub fn refuse_unsupported_member_headers(
    block: &[u8],
    subject: &str,
    stream: &str,
    rules: HeaderRules<'_>,
) -> Result<(), AppendError> {
    if refuse_common(block, stream, rules.ttls, rules.counters)? == Checks::LeftToTheApply {
        return Ok(());
    }
    check_publish(block, subject, rules.schedules)
}

fn refuse_common(
    block: &[u8],
    stream: &str,
    ttls: MsgTtls,
    counters: MsgCounters,
) -> Result<Checks, AppendError> {
    let value = |name: &str| header_value(block, name);
    // Counters (`counter.rs`): the payload is checked while applying.
    check_increment(block, None, counters)?;
    // nats-server answers a wrong expected stream (10060) before the TTL; the apply does too.
    if value(EXPECTED_STREAM).is_some_and(|expected| expected != stream.as_bytes()) {
        return Ok(Checks::LeftToTheApply);
    }
    if let Some(ttl) = value(MSG_TTL) {
        match (parse_ttl(ttl), ttls) {
            (Ok(MsgTtl::None), _) => {}
            (_, MsgTtls::Disabled) => return Err(AppendError::TtlDisabled),
            (Err(_), MsgTtls::Allowed) => return Err(AppendError::TtlInvalid),
            (Ok(_), MsgTtls::Allowed) => {}
        }
    }
    Ok(Checks::Continue)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(headers: &[(&str, &str)]) -> Result<(), AppendError> {
        let mut block = String::from("NATS/1.0\r\n");
        for (name, value) in headers {
            block += &format!("{name}: {value}\r\n");
        }
        block += "\r\n";
        refuse_unsupported_headers(block.as_bytes(), "s.a", "S", HeaderRules::NONE)
    }

    #[test]
    fn ttls_on_a_stream_that_allows_them_must_parse() {
        let check = |ttl: &str| {
            let block = format!("NATS/1.0\r\nNats-TTL: {ttl}\r\n\r\n");
            refuse_unsupported_headers(
                block.as_bytes(),
                "s.a",
                "S",
                HeaderRules {
                    ttls: MsgTtls::Allowed,
                    ..HeaderRules::NONE
                },
            )
        };
        for ok in ["1", "60", "1m", "never", "00"] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        for invalid in ["0", "500ms", "-1", "banana"] {
            assert_eq!(check(invalid), Err(AppendError::TtlInvalid), "{invalid}");
        }
        let err = AppendError::TtlInvalid.to_api_error();
        assert_eq!((err.code, err.err_code), (400, 10165));
    }

    #[test]
    fn ordinary_publishes_pass() {
        assert_eq!(refusal(&[]), Ok(()));
        assert_eq!(
            refusal(&[("Nats-Msg-Id", "1"), ("Nats-Rollup", "sub")]),
            Ok(())
        );
        assert_eq!(refusal(&[("Nats-TTL", "")]), Ok(()));
        assert_eq!(refusal(&[("Nats-TTL", "00")]), Ok(()));
    }

    #[test]
    fn ttls_are_refused_as_disabled_whatever_their_value() {
        for ttl in [
            "1", "60", "1m", "never", "NEVER", "0", "0s", "500ms", "banana", "-1",
        ] {
            assert_eq!(
                refusal(&[("Nats-TTL", ttl)]),
                Err(AppendError::TtlDisabled),
                "{ttl}"
            );
        }
        let err = AppendError::TtlDisabled.to_api_error();
        assert_eq!((err.code, err.err_code), (400, 10166));
        // A wrong expected stream is the apply's 10060, as in nats-server.
        assert_eq!(
            refusal(&[("Nats-Expected-Stream", "T"), ("Nats-TTL", "1m")]),
            Ok(())
        );
        assert_eq!(
            refusal(&[("Nats-Expected-Stream", "S"), ("Nats-TTL", "1m")]),
            Err(AppendError::TtlDisabled)
        );
    }

    #[test]
    fn counters_batches_and_schedules_are_refused() {
        for incr in ["1", "+5", "-20", "123456789012345678901234567890"] {
            assert_eq!(
                refusal(&[("Nats-Incr", incr)]),
                Err(AppendError::CountersDisabled)
            );
        }
        for incr in ["x", "+", "1.5", "1e3"] {
            assert_eq!(
                refusal(&[("Nats-Incr", incr)]),
                Err(AppendError::CounterIncrementInvalid)
            );
        }
        assert_eq!(
            refusal(&[("Nats-TTL", "1m"), ("Nats-Batch-Id", "b1")]),
            Err(AppendError::AtomicPublishDisabled)
        );
        assert_eq!(
            refusal(&[("Nats-Schedule", "@at 2030-01-01T00:00:00Z")]),
            Err(AppendError::SchedulesDisabled)
        );
        for (error, code) in [
            (AppendError::CountersDisabled, 10168),
            (AppendError::CounterIncrementInvalid, 10171),
            (AppendError::AtomicPublishDisabled, 10174),
            (AppendError::SchedulesDisabled, 10188),
        ] {
            let err = error.to_api_error();
            assert_eq!((err.code, err.err_code), (400, code), "{error}");
        }
    }
}
