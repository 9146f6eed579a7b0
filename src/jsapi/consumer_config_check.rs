//! Server-side defaults and validation of a `ConsumerConfig` against its stream, following
//! nats-server's `setConsumerConfigDefaults`, `checkConsumerCfg` and (for updates)
//! `checkNewConsumerConfig`. Checks that need the other consumers of the stream (workqueue
//! filter uniqueness 10099/10100, max consumers 10026, name in use) belong to jscore.
//!
//! Server- and account-wide limits (`max_ack_pending`, `max_request_batch`) are not modelled:
//! jetraft has none yet, which is what nats-server does when none are configured.

use super::consumer_config::{AckPolicy, ConsumerConfig, DeliverPolicy, PriorityPolicy};
use super::error::{ApiError, ErrorKind};
use super::names::{validate_name, MAX_DESCRIPTION_LEN, MAX_METADATA_LEN, MAX_NAME_LEN};
use super::stream_config::{RetentionPolicy, StreamConfig};
use crate::subject::pattern::is_subset_match;
use crate::subject::{is_valid_literal_subject, is_valid_subject};

/// Default `ack_wait` for explicit/all ack consumers: 30 s.
pub const DEFAULT_ACK_WAIT: i64 = 30 * SECOND;
/// Default `max_ack_pending` for consumers that ack.
pub const DEFAULT_MAX_ACK_PENDING: i64 = 1000;
/// Default `max_waiting` of pull consumers.
pub const DEFAULT_MAX_WAITING: i64 = 512;
/// Inactivity threshold stamped on ephemeral consumers that set none: 5 s.
pub const DEFAULT_EPHEMERAL_INACTIVE_THRESHOLD: i64 = 5 * SECOND;
/// Default pin TTL of `pinned_client` priority groups: 2 min.
pub const DEFAULT_PRIORITY_TIMEOUT: i64 = 120 * SECOND;
/// Heartbeat nats-server forces on `ack_policy: flow_control` consumers.
const FLOW_CONTROL_HEARTBEAT: i64 = SECOND;
const SECOND: i64 = 1_000_000_000;
const MILLISECOND: i64 = 1_000_000;

impl ConsumerConfig {
    /// Applies nats-server's defaults in place, given the parent stream:
    /// max_deliver 0 -> -1; negative limits -> 0; pull max_waiting 0 -> 512; ack_wait 0 ->
    /// 30 s for explicit/all (or `backoff[0]`); max_ack_pending and inactive_threshold from
    /// the stream's `consumer_limits`, then max_ack_pending 0 -> 1000 unless ack none;
    /// ephemerals without a threshold get 5 s.
    pub fn normalize(&mut self, stream: &StreamConfig) {
        if self.max_deliver == 0 || self.max_deliver < -1 {
            self.max_deliver = -1;
        }
        if self.max_ack_pending < -1 {
            self.max_ack_pending = -1;
        }
        for value in [
            &mut self.max_waiting,
            &mut self.max_batch,
            &mut self.max_expires,
            &mut self.max_bytes,
            &mut self.idle_heartbeat,
            &mut self.inactive_threshold,
            &mut self.priority_timeout,
        ] {
            if *value < 0 {
                *value = 0;
            }
        }
        if self.is_pull() && self.max_waiting == 0 {
            self.max_waiting = DEFAULT_MAX_WAITING;
        }
        if self.ack_wait == 0 && matches!(self.ack_policy, AckPolicy::Explicit | AckPolicy::All) {
            self.ack_wait = DEFAULT_ACK_WAIT;
        }
        if let Some(first) = self.backoff.first() {
            self.ack_wait = *first;
        }
        if self.max_ack_pending == 0 {
            self.max_ack_pending = stream.consumer_limits.max_ack_pending;
        }
        if self.inactive_threshold == 0 {
            self.inactive_threshold = stream.consumer_limits.inactive_threshold;
        }
        if self.max_ack_pending == 0 && self.ack_policy != AckPolicy::None {
            self.max_ack_pending = DEFAULT_MAX_ACK_PENDING;
        }
        if self.priority_policy == PriorityPolicy::PinnedClient && self.priority_timeout == 0 {
            self.priority_timeout = DEFAULT_PRIORITY_TIMEOUT;
        }
        if self.ack_policy == AckPolicy::FlowControl {
            self.flow_control = true;
            self.idle_heartbeat = FLOW_CONTROL_HEARTBEAT;
        }
        // Ephemerals always expire; nats-server stamps the default (sans jitter) into config.
        if !self.is_durable() && self.inactive_threshold <= 0 {
            self.inactive_threshold = DEFAULT_EPHEMERAL_INACTIVE_THRESHOLD;
        }
    }

    /// `normalize(stream)` then `validate(stream)`.
    pub fn checked(mut self, stream: &StreamConfig) -> Result<Self, ApiError> {
        self.normalize(stream);
        self.validate(stream)?;
        Ok(self)
    }

    /// Refuses a (normalized) config the way nats-server's `checkConsumerCfg` does, plus
    /// the workqueue rules that do not depend on other consumers (10098, 10101, 10084).
    pub fn validate(&self, stream: &StreamConfig) -> Result<(), ApiError> {
        self.validate_names()?;
        if self.num_replicas > 0 && self.num_replicas > stream.num_replicas {
            return Err(ErrorKind::ConsumerReplicasExceedsStream.into());
        }
        if self.num_replicas < 0 {
            return Err(ErrorKind::ReplicasCountCannotBeNegative.into());
        }
        let retention_needs_match = matches!(
            stream.retention,
            RetentionPolicy::Interest | RetentionPolicy::WorkQueue
        );
        if retention_needs_match
            && self.num_replicas != 0
            && self.num_replicas != stream.num_replicas
        {
            return Err(ErrorKind::ConsumerReplicasShouldMatchStream.into());
        }
        if self.backoff.iter().any(|delay| *delay < 0) {
            return Err(ErrorKind::ConsumerBackOffNegative.into());
        }
        if self.ack_wait < 0 {
            return Err(ErrorKind::ConsumerAckWaitNegative.into());
        }
        if self.ack_policy == AckPolicy::FlowControl {
            // Acks ride on flow-control replies, so the consumer must be a flow-controlled
            // push consumer with a pending cap and no ack timers (nats-server 2.14).
            if self.is_pull() {
                return Err(ErrorKind::ConsumerAckFcRequiresPush.into());
            }
            if !self.flow_control {
                return Err(ErrorKind::ConsumerAckFcRequiresFc.into());
            }
            if self.max_ack_pending <= 0 {
                return Err(ErrorKind::ConsumerAckFcRequiresMaxAckPending.into());
            }
            if self.ack_wait != 0 || !self.backoff.is_empty() {
                return Err(ErrorKind::ConsumerAckFcRequiresNoAckWait.into());
            }
            if self.max_deliver > 0 {
                return Err(ErrorKind::ConsumerAckFcRequiresNoMaxDeliver.into());
            }
        }
        let backoff_len = self.backoff.len() as i64;
        if backoff_len > 0 && self.max_deliver != -1 && backoff_len > self.max_deliver {
            return Err(ErrorKind::ConsumerMaxDeliverBackoff.into());
        }
        if self.description.len() > MAX_DESCRIPTION_LEN {
            return Err(ApiError::with(
                ErrorKind::ConsumerDescriptionTooLong,
                &[&MAX_DESCRIPTION_LEN],
            ));
        }
        if self.is_pull() {
            self.validate_pull(stream)?;
        } else {
            self.validate_push(stream)?;
        }
        if self.direct {
            if self.is_pull() {
                return Err(ErrorKind::ConsumerDirectRequiresPush.into());
            }
            if self.is_durable() {
                return Err(ErrorKind::ConsumerDirectRequiresEphemeral.into());
            }
        }
        self.validate_filters()?;
        self.validate_deliver_policy()?;
        if !self.sample_freq.is_empty() {
            let digits = self.sample_freq.trim_end_matches('%');
            if digits.parse::<u32>().is_err() {
                return Err(ApiError::with_detail(
                    ErrorKind::ConsumerInvalidSampling,
                    format!("strconv.Atoi: parsing {digits:?}: invalid syntax"),
                ));
            }
        }
        if self.flow_control && self.idle_heartbeat == 0 {
            return Err(ErrorKind::ConsumerWithFlowControlNeedsHeartbeats.into());
        }
        let metadata_len: usize = self.metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
        if metadata_len > MAX_METADATA_LEN {
            return Err(ApiError::with(
                ErrorKind::ConsumerMetadataLength,
                &[&format!("{}KB", MAX_METADATA_LEN / 1024)],
            ));
        }
        self.validate_priority()?;
        if stream.retention == RetentionPolicy::WorkQueue && !self.direct && !self.sourcing {
            if !matches!(
                self.ack_policy,
                AckPolicy::Explicit | AckPolicy::FlowControl
            ) {
                return Err(ErrorKind::ConsumerWqRequiresExplicitAck.into());
            }
            if self.deliver_policy != DeliverPolicy::All {
                return Err(ErrorKind::ConsumerWqConsumerNotDeliverAll.into());
            }
        }
        Ok(())
    }

    fn validate_names(&self) -> Result<(), ApiError> {
        let bad_chars = "consumer name can not contain '.', '*', '>', '\\', '/'";
        if !self.name.is_empty() && validate_name(&self.name).is_err() {
            if self.name.len() > MAX_NAME_LEN {
                return Err(ApiError::with(
                    ErrorKind::ConsumerNameTooLong,
                    &[&MAX_NAME_LEN],
                ));
            }
            return Err(ApiError::invalid_config(bad_chars));
        }
        if self.is_durable() && validate_name(&self.durable_name).is_err() {
            if self.durable_name.len() > MAX_NAME_LEN {
                return Err(ApiError::with(
                    ErrorKind::ConsumerNameTooLong,
                    &[&MAX_NAME_LEN],
                ));
            }
            return Err(ApiError::invalid_config(
                "consumer durable name can not contain '.', '*', '>', '\\', '/'",
            ));
        }
        if self.is_durable() && !self.name.is_empty() && self.name != self.durable_name {
            return Err(ErrorKind::ConsumerCreateDurableAndNameMismatch.into());
        }
        Ok(())
    }

    fn validate_push(&self, stream: &StreamConfig) -> Result<(), ApiError> {
        if !is_valid_literal_subject(self.deliver_subject.as_bytes()) {
            if is_valid_subject(self.deliver_subject.as_bytes()) {
                return Err(ErrorKind::ConsumerDeliverToWildcards.into());
            }
            return Err(ErrorKind::ConsumerInvalidDeliverSubject.into());
        }
        // Delivering into the stream's own subjects would store every delivery again.
        if stream
            .subjects
            .iter()
            .any(|subject| is_subset_match(&self.deliver_subject, subject))
        {
            return Err(ErrorKind::ConsumerDeliverCycle.into());
        }
        if self.max_waiting != 0 {
            return Err(ErrorKind::ConsumerPushMaxWaiting.into());
        }
        if self.max_ack_pending > 0 && self.ack_policy == AckPolicy::None {
            return Err(ErrorKind::ConsumerMaxPendingAckPolicyRequired.into());
        }
        if self.idle_heartbeat > 0 && self.idle_heartbeat < 100 * MILLISECOND {
            return Err(ErrorKind::ConsumerSmallHeartbeat.into());
        }
        Ok(())
    }

    fn validate_pull(&self, stream: &StreamConfig) -> Result<(), ApiError> {
        if self.ack_policy == AckPolicy::None && stream.retention == RetentionPolicy::WorkQueue {
            return Err(ErrorKind::ConsumerPullRequiresAck.into());
        }
        if self.rate_limit_bps > 0 {
            return Err(ErrorKind::ConsumerPullWithRateLimit.into());
        }
        if self.max_waiting < 0 {
            return Err(ErrorKind::ConsumerMaxWaitingNegative.into());
        }
        if self.idle_heartbeat > 0 {
            return Err(ErrorKind::ConsumerHbRequiresPush.into());
        }
        if self.flow_control {
            return Err(ErrorKind::ConsumerFcRequiresPush.into());
        }
        if self.max_batch < 0 {
            return Err(ErrorKind::ConsumerMaxRequestBatchNegative.into());
        }
        if self.max_expires != 0 && self.max_expires < MILLISECOND {
            return Err(ErrorKind::ConsumerMaxRequestExpiresTooSmall.into());
        }
        Ok(())
    }

    fn validate_filters(&self) -> Result<(), ApiError> {
        if !self.filter_subject.is_empty() && !self.filter_subjects.is_empty() {
            return Err(ErrorKind::ConsumerDuplicateFilterSubjects.into());
        }
        if self.filter_subjects.iter().any(String::is_empty) {
            return Err(ErrorKind::ConsumerEmptyFilter.into());
        }
        let filters = self.filters();
        for (index, filter) in filters.iter().enumerate() {
            if !is_valid_subject(filter.as_bytes()) {
                return Err(ApiError::invalid_config("invalid subject"));
            }
            for (other_index, other) in filters.iter().enumerate() {
                if index != other_index && is_subset_match(filter, other) {
                    return Err(ErrorKind::ConsumerOverlappingSubjectFilters.into());
                }
            }
        }
        Ok(())
    }

    fn validate_deliver_policy(&self) -> Result<(), ApiError> {
        let bad_start = |policy: &str, start: &str| {
            ApiError::with_detail(
                ErrorKind::ConsumerInvalidPolicy,
                format!(
                    "consumer delivery policy is deliver {policy}, but optional start {start} is also set"
                ),
            )
        };
        let not_set = |policy: &str, what: &str| {
            ApiError::with_detail(
                ErrorKind::ConsumerInvalidPolicy,
                format!(
                    "consumer delivery policy is deliver {policy}, but optional {what} is not set"
                ),
            )
        };
        let has_seq = self.opt_start_seq > 0;
        let has_time = self.opt_start_time.is_some();
        let simple = match self.deliver_policy {
            DeliverPolicy::All => Some("all"),
            DeliverPolicy::Last => Some("last"),
            DeliverPolicy::LastPerSubject => Some("last per subject"),
            DeliverPolicy::New => Some("new"),
            DeliverPolicy::ByStartSequence | DeliverPolicy::ByStartTime => None,
        };
        if let Some(policy) = simple {
            if has_seq {
                return Err(bad_start(policy, "sequence"));
            }
            if has_time {
                return Err(bad_start(policy, "time"));
            }
        }
        match self.deliver_policy {
            DeliverPolicy::LastPerSubject if self.filters().is_empty() => {
                Err(not_set("last per subject", "filter subject"))
            }
            DeliverPolicy::ByStartSequence if !has_seq => {
                Err(not_set("by start sequence", "start sequence"))
            }
            DeliverPolicy::ByStartSequence if has_time => {
                Err(bad_start("by start sequence", "time"))
            }
            DeliverPolicy::ByStartTime if !has_time => Err(not_set("by start time", "start time")),
            DeliverPolicy::ByStartTime if has_seq => {
                Err(bad_start("by start time", "start sequence"))
            }
            _ => Ok(()),
        }
    }

    fn validate_priority(&self) -> Result<(), ApiError> {
        if self.priority_policy != PriorityPolicy::None {
            if !self.is_pull() {
                return Err(ErrorKind::ConsumerPushWithPriorityGroup.into());
            }
            if self.priority_groups.is_empty() {
                return Err(ErrorKind::ConsumerPriorityPolicyWithoutGroup.into());
            }
            for group in &self.priority_groups {
                if group.is_empty() {
                    return Err(ErrorKind::ConsumerEmptyGroupName.into());
                }
                if !is_valid_group_name(group) {
                    return Err(ErrorKind::ConsumerInvalidGroupName.into());
                }
            }
        } else {
            if !self.priority_groups.is_empty() {
                return Err(ErrorKind::ConsumerPriorityGroupWithPolicyNone.into());
            }
            if self.priority_timeout > 0 {
                return Err(ErrorKind::ConsumerPinnedTtlWithoutPriorityPolicyNone.into());
            }
        }
        Ok(())
    }

    /// Checks that `self` (normalized) may replace the existing `old` config (nats-server
    /// `checkNewConsumerConfig`); failures are 10012 with nats-server's text. Whether a
    /// push consumer's old deliver subject still has interest (10013) is for the caller.
    pub fn validate_update(&self, old: &ConsumerConfig) -> Result<(), ApiError> {
        if self == old {
            return Ok(());
        }
        let refuse = |text: &str| ApiError::with_detail(ErrorKind::ConsumerCreate, text);
        if self.deliver_policy != old.deliver_policy {
            return Err(refuse("deliver policy can not be updated"));
        }
        if self.mem_storage != old.mem_storage {
            return Err(refuse("storage type can not be updated"));
        }
        if self.direct != old.direct {
            return Err(refuse("direct can not be updated"));
        }
        if self.sourcing != old.sourcing {
            return Err(refuse("sourcing can not be updated"));
        }
        if self.opt_start_seq != old.opt_start_seq {
            return Err(refuse("start sequence can not be updated"));
        }
        if self.opt_start_time != old.opt_start_time {
            return Err(refuse("start time can not be updated"));
        }
        if self.ack_policy != old.ack_policy {
            return Err(refuse("ack policy can not be updated"));
        }
        if self.replay_policy != old.replay_policy {
            return Err(refuse("replay policy can not be updated"));
        }
        if self.idle_heartbeat != old.idle_heartbeat {
            return Err(refuse("heart beats can not be updated"));
        }
        if self.flow_control != old.flow_control {
            return Err(refuse("flow control can not be updated"));
        }
        if self.deliver_subject != old.deliver_subject {
            if old.deliver_subject.is_empty() {
                return Err(refuse("can not update pull consumer to push based"));
            }
            if self.deliver_subject.is_empty() {
                return Err(refuse("can not update push consumer to pull based"));
            }
        }
        if self.max_waiting != old.max_waiting {
            return Err(refuse("max waiting can not be updated"));
        }
        let backoff_len = self.backoff.len() as i64;
        if backoff_len > 0 && self.max_deliver != -1 && backoff_len > self.max_deliver {
            return Err(ErrorKind::ConsumerMaxDeliverBackoff.into());
        }
        Ok(())
    }
}

/// A priority group name as nats-server accepts it (`^[a-zA-Z0-9/_=-]{1,16}$`), in consumer
/// configs and `CONSUMER.UNPIN` requests.
pub fn is_valid_group_name(group: &str) -> bool {
    (1..=16).contains(&group.len())
        && group
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/_=-".contains(&b))
}
