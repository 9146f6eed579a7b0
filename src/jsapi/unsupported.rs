//! The stream and consumer settings jetraft decodes (so a config round-trips and nats-server's
//! own checks still run) but does not implement, and the refusal of any config that asks for
//! one of them. A setting that is accepted and then ignored is worse than one refused: a user
//! trusts it (issue 19). So `STREAM.CREATE`/`UPDATE` and `CONSUMER.CREATE` call
//! `refuse_unsupported()` after `checked()`, and nothing asking for such a setting is stored.
//!
//! What is refused is only a non-default value: absent, `null`, `false`, `0`, `""`, `[]` and
//! the Go zero time are what the real clients (nats CLI, async-nats, nats-py) send by default
//! and stay accepted. Streams are refused with 10052 (invalid stream configuration), consumers
//! with 10012 (consumer create failed), each naming the JSON field, so a user sees which
//! setting to drop. When a feature is implemented, its line here goes.
//!
//! One exception: `allow_batched: true` (2.14's fast batch publish) is recorded as `false`
//! (what a nats-server without that feature does with it): the nats CLI's `nats bench js`
//! sets it on the streams it creates; the stream then reports it off (clients gate fast
//! batch publishing on it). `allow_atomic` (atomic batch publish, ADR-50) is implemented
//! (`jscore::atomic_batch`, `jetstream::atomic_publish`) and stored as asked.
//!
//! Accepted on purpose although jetraft does something stronger than asked: `persist_mode:
//! async` (every write is committed through Raft before the ack anyway), `compression: s2`
//! (transparent to clients; stored uncompressed), consumer `mem_storage` and a consumer
//! `num_replicas` below the stream's (consumer state always lives in the stream's group).
//!
//! Per-message TTLs (`allow_msg_ttl`, recorded as `false` until they were implemented) and
//! `subject_delete_marker_ttl` are implemented (`jscore::stream::{ttl, expire}`). Consumer
//! `pause_until` and the priority-group settings were refused here until they were
//! implemented (`jscore::consumer::pause`, `jetstream::delivery::{pause, priority}`); so were
//! a stream's `subject_transform`, `republish`, `mirror` and `sources` (`jetstream::republish`,
//! `jetstream::sourcing`). Of mirrors and sources, an `external` origin (another account or
//! domain) and a durable sourcing `consumer` (2.14) are still refused. Counter streams
//! (`allow_msg_counter`) likewise, until `jscore::stream::counter` implemented them, and
//! message schedules (`allow_msg_schedules`) until `jscore::stream::{schedule, fire}` did
//! (their `@at` form; the others are refused per message, ADR 0023).

use super::consumer_config::{ConsumerConfig, ReplayPolicy};
use super::error::{ApiError, ErrorKind};
use super::stream_config::{StreamConfig, StreamSource};

/// The text of every refusal: what is not supported, and the field that asked for it.
fn not_supported(what: &str, field: &str) -> String {
    format!("{what} not supported by jetraft ({field})")
}

impl StreamConfig {
    /// The (normalized, validated) config as jetraft stores it, or 10052 if it sets a stream
    /// feature jetraft does not implement. `allow_batched` is recorded as `false` (see the
    /// module docs). Placement is the placement module's (it needs the topology).
    pub fn refuse_unsupported(mut self) -> Result<StreamConfig, ApiError> {
        self.check_supported()?;
        self.allow_batched = false;
        Ok(self)
    }

    /// The mirror and the sources.
    fn origins(&self) -> impl Iterator<Item = &StreamSource> {
        self.mirror.iter().chain(self.sources.iter())
    }

    fn check_supported(&self) -> Result<(), ApiError> {
        let refusals: [(bool, &str, &str); 3] = [
            // Origins in another account or domain (read through another API prefix): a
            // jetraft cluster is one account and one domain, without leafnodes.
            (
                self.origins().any(|origin| origin.external.is_some()),
                "external stream origins are",
                "external",
            ),
            // jetraft answers every publish that has a reply subject.
            (self.no_ack, "streams without publish acks are", "no_ack"),
            (
                !self.template_owner.is_empty(),
                "stream templates are",
                "template_owner",
            ),
        ];
        match refusals.iter().find(|(set, _, _)| *set) {
            Some((_, what, field)) => Err(ApiError::invalid_config(not_supported(what, field))),
            None => Ok(()),
        }
    }
}

impl ConsumerConfig {
    /// Refuses a (normalized, validated) config that sets a consumer feature jetraft does not
    /// implement, with 10012.
    pub fn refuse_unsupported(&self) -> Result<(), ApiError> {
        let refusals: [(bool, &str, &str); 3] = [
            (
                self.replay_policy == ReplayPolicy::Original,
                "replay policy original is",
                "replay_policy",
            ),
            (self.rate_limit_bps > 0, "rate limits are", "rate_limit_bps"),
            // For the ephemeral consumers nats-server makes for mirrors and sources: jetraft
            // reads its origins through the API instead. (`sourcing`, which marks a durable
            // `flow_control` consumer a stream sources through, is implemented.)
            (self.direct, "direct consumers are", "direct"),
        ];
        match refusals.iter().find(|(set, _, _)| *set) {
            Some((_, what, field)) => Err(ApiError::with_detail(
                ErrorKind::ConsumerCreate,
                not_supported(what, field),
            )),
            None => Ok(()),
        }
    }
}
