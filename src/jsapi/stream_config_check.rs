//! Server-side defaults and validation of a `StreamConfig`, following nats-server's
//! `checkStreamCfg` (create and update) and `configUpdateCheck` (update only). Checks that
//! need other streams (subjects overlapping another stream: 10065; mirror/source lookups)
//! belong to the meta state machine; `StreamConfig::subjects_overlap` helps it.
//!
//! Order: `normalize()` fills defaults (infallible), `validate()` refuses what nats-server
//! refuses, with its `err_code` and (mostly) its text. `checked()` does both.

use super::error::{ApiError, ErrorKind};
use super::names::{
    is_valid_name, validate_name, NameError, MAX_DESCRIPTION_LEN, MAX_METADATA_LEN, MAX_NAME_LEN,
};
use super::stream_config::{
    DiscardPolicy, PersistMode, RetentionPolicy, StorageType, StreamConfig, StreamSource,
};
use crate::subject::pattern::{is_subset_match, patterns_overlap};
use crate::subject::transform::SubjectTransform;
use crate::subject::{is_valid_literal_subject, is_valid_subject};

/// Default `duplicate_window`: two minutes, in nanoseconds.
pub const DEFAULT_DUPLICATE_WINDOW: i64 = 120 * 1_000_000_000;
/// Most replicas a stream may have.
pub const MAX_REPLICAS: i64 = 5;
const MIN_WINDOW: i64 = 100_000_000; // 100ms
const SECOND: i64 = 1_000_000_000;

fn invalid(detail: impl std::fmt::Display) -> ApiError {
    ApiError::invalid_config(detail)
}

/// Whether one transform's source filter of a mirror or source is a subset of another's
/// (nats-server's check, 10152 / 10147).
fn filters_overlap(transforms: &[super::stream_config::SubjectTransform]) -> bool {
    transforms.iter().enumerate().any(|(outer, a)| {
        transforms
            .iter()
            .enumerate()
            .any(|(inner, b)| inner != outer && is_subset_match(&a.src, &b.src))
    })
}

/// A mirror's or source's transform: a destination, when given, must be a transform
/// nats-server accepts (an empty one keeps the subject).
/// A mirror's or source's durable `consumer` (2.14, ADR-60): a valid consumer name and a
/// literal deliver subject; the start and the filter are the consumer's own, so the origin
/// may not set them (nats-server's 10213 / 10215). Transforms stay allowed.
fn check_origin_consumer(origin: &StreamSource, kind: ErrorKind) -> Result<(), ApiError> {
    let Some(consumer) = &origin.consumer else {
        return Ok(());
    };
    let valid = is_valid_name(&consumer.name)
        && is_valid_literal_subject(consumer.deliver_subject.as_bytes())
        && origin.opt_start_seq == 0
        && origin.opt_start_time.is_none()
        && origin.filter_subject.is_empty();
    if valid {
        Ok(())
    } else {
        Err(kind.into())
    }
}

fn check_origin_transform(src: &str, dest: &str, kind: ErrorKind) -> Result<(), ApiError> {
    if dest.is_empty() {
        return Ok(());
    }
    SubjectTransform::new(src, dest)
        .map(|_| ())
        .map_err(|error| ApiError::with_detail(kind, error))
}

impl StreamConfig {
    /// Applies nats-server's create/update defaults in place:
    /// replicas 0 -> 1; max_msgs, max_bytes, max_msgs_per_subject, max_msg_size and
    /// max_consumers 0 (or < -1) -> -1; duplicate_window 0 -> 2 min, or `max_age` when that
    /// is smaller (not for mirrors/sourcing streams); no subjects and no mirror/sources ->
    /// `[name]`; a subject-delete-marker TTL switches on msg TTLs and rollups.
    pub fn normalize(&mut self) {
        if self.num_replicas == 0 {
            self.num_replicas = 1;
        }
        for limit in [
            &mut self.max_msgs,
            &mut self.max_bytes,
            &mut self.max_msgs_per_subject,
            &mut self.max_consumers,
        ] {
            if *limit == 0 || *limit < -1 {
                *limit = -1;
            }
        }
        if self.max_msg_size == 0 || self.max_msg_size < -1 {
            self.max_msg_size = -1;
        }
        if self.duplicate_window == 0 && self.mirror.is_none() && self.sources.is_empty() {
            self.duplicate_window = if self.max_age > 0 && self.max_age < DEFAULT_DUPLICATE_WINDOW {
                self.max_age
            } else {
                DEFAULT_DUPLICATE_WINDOW
            };
        }
        // An empty republish source means every subject, and is echoed as `>`.
        if let Some(republish) = &mut self.republish {
            if republish.src.is_empty() {
                republish.src = ">".to_owned();
            }
        }
        if self.subject_delete_marker_ttl > 0 {
            self.allow_msg_ttl = true;
            if !self.allow_rollup_hdrs {
                self.allow_rollup_hdrs = true;
                self.deny_purge = false;
            }
        }
        if self.allow_msg_schedules && !self.allow_rollup_hdrs {
            self.allow_rollup_hdrs = true;
            self.deny_purge = false;
        }
        if self.subjects.is_empty() && self.mirror.is_none() && self.sources.is_empty() {
            self.subjects.push(self.name.clone());
        }
    }

    /// `normalize()` then `validate()`: the config as it will be stored, or the error
    /// nats-server would answer.
    pub fn checked(mut self) -> Result<Self, ApiError> {
        self.normalize();
        self.validate()?;
        Ok(self)
    }

    /// Refuses a (normalized) config the way nats-server does. Mostly 10052 with the
    /// server's text; negative replicas is 10133.
    pub fn validate(&self) -> Result<(), ApiError> {
        match validate_name(&self.name) {
            Ok(()) => {}
            Err(NameError::TooLong) => {
                return Err(invalid(format!(
                    "stream name is too long, maximum allowed is {MAX_NAME_LEN}"
                )))
            }
            Err(_) => {
                return Err(invalid(
                    "stream name is required and can not contain '.', '*', '>', '\\', '/'",
                ))
            }
        }
        if self.description.len() > MAX_DESCRIPTION_LEN {
            return Err(invalid(format!(
                "stream description is too long, maximum allowed is {MAX_DESCRIPTION_LEN}"
            )));
        }
        let metadata_len: usize = self.metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
        if metadata_len > MAX_METADATA_LEN {
            return Err(invalid(format!(
                "stream metadata exceeds maximum size of {MAX_METADATA_LEN} bytes"
            )));
        }
        if self.num_replicas > MAX_REPLICAS {
            return Err(invalid(format!("maximum replicas is {MAX_REPLICAS}")));
        }
        if self.num_replicas < 0 {
            return Err(ErrorKind::ReplicasCountCannotBeNegative.into());
        }
        if self.max_age < 0 {
            return Err(invalid("max age can not be negative"));
        }
        if self.max_age != 0 && self.max_age < MIN_WINDOW {
            return Err(invalid("max age needs to be >= 100ms"));
        }
        if self.duplicate_window < 0 {
            return Err(invalid("duplicates window can not be negative"));
        }
        if self.max_age != 0 && self.duplicate_window > self.max_age {
            return Err(invalid("duplicates window can not be larger then max age"));
        }
        if self.duplicate_window > 0 && self.duplicate_window < MIN_WINDOW {
            return Err(invalid("duplicates window needs to be >= 100ms"));
        }
        if self.deny_purge && self.allow_rollup_hdrs {
            return Err(invalid("roll-ups require the purge permission"));
        }
        self.validate_feature_combinations()?;
        self.validate_mirror_and_sources()?;
        self.validate_subjects()?;
        if let Some(placement) = &self.placement {
            if !placement.preferred.is_empty() {
                return Err(invalid("preferred server not permitted in placement"));
            }
        }
        Ok(())
    }

    fn validate_feature_combinations(&self) -> Result<(), ApiError> {
        if self.allow_msg_counter {
            if self.discard == DiscardPolicy::New {
                return Err(invalid("counter stream cannot use discard new"));
            }
            if self.allow_msg_ttl {
                return Err(invalid("counter stream cannot use message TTLs"));
            }
            if self.allow_msg_schedules {
                return Err(invalid("counter stream cannot use message schedules"));
            }
            if self.retention != RetentionPolicy::Limits {
                return Err(invalid("counter stream can only use limits retention"));
            }
        }
        if self.discard_new_per_subject {
            if self.discard != DiscardPolicy::New {
                return Err(invalid(
                    "discard new per subject requires discard new policy to be set",
                ));
            }
            if self.max_msgs_per_subject <= 0 {
                return Err(invalid(
                    "discard new per subject requires max msgs per subject > 0",
                ));
            }
        }
        if self.subject_delete_marker_ttl < 0 {
            return Err(invalid("subject delete marker TTL must not be negative"));
        }
        if self.subject_delete_marker_ttl > 0 && self.subject_delete_marker_ttl < SECOND {
            return Err(invalid(
                "subject delete marker TTL must be at least 1 second",
            ));
        }
        if self.allow_msg_schedules && self.discard == DiscardPolicy::New {
            return Err(invalid("message scheduling cannot use discard new"));
        }
        if self.persist_mode == Some(PersistMode::Async) {
            if self.storage != StorageType::File {
                return Err(invalid(
                    "async persist mode is only supported on file storage",
                ));
            }
            if self.num_replicas > 1 {
                return Err(invalid(
                    "async persist mode is not supported on replicated streams",
                ));
            }
        }
        Ok(())
    }

    fn validate_mirror_and_sources(&self) -> Result<(), ApiError> {
        if let Some(mirror) = &self.mirror {
            if self.first_seq > 0 {
                return Err(ErrorKind::MirrorWithFirstSeq.into());
            }
            if !self.subjects.is_empty() {
                return Err(ErrorKind::MirrorWithSubjects.into());
            }
            if !self.sources.is_empty() {
                return Err(ErrorKind::MirrorWithSources.into());
            }
            if self.allow_msg_counter {
                return Err(ErrorKind::MirrorWithCounters.into());
            }
            if self.allow_msg_schedules {
                return Err(ErrorKind::MirrorWithMsgSchedules.into());
            }
            if !mirror.filter_subject.is_empty() && !mirror.subject_transforms.is_empty() {
                return Err(ErrorKind::MirrorMultipleFiltersNotAllowed.into());
            }
            if mirror.opt_start_seq > 0 && mirror.opt_start_time.is_some() {
                return Err(ErrorKind::MirrorWithStartSeqAndTime.into());
            }
            // A mirror stores its origin's messages, never batches of its own (ADR-50).
            if self.allow_atomic {
                return Err(ErrorKind::MirrorWithAtomicPublish.into());
            }
            if self.subject_delete_marker_ttl > 0 {
                return Err(ApiError::invalid_config(
                    "subject delete markers forbidden on mirrors",
                ));
            }
            if mirror.external.is_none() && !is_valid_name(&mirror.name) {
                return Err(ErrorKind::MirrorInvalidStreamName.into());
            }
            for transform in &mirror.subject_transforms {
                if !transform.src.is_empty() && !is_valid_subject(transform.src.as_bytes()) {
                    return Err(ApiError::with_detail(
                        ErrorKind::MirrorInvalidSubjectFilter,
                        format!("invalid subject {}", transform.src),
                    ));
                }
                check_origin_transform(
                    &transform.src,
                    &transform.dest,
                    ErrorKind::MirrorInvalidTransformDestination,
                )?;
            }
            if filters_overlap(&mirror.subject_transforms) {
                return Err(ErrorKind::MirrorOverlappingSubjectFilters.into());
            }
            check_origin_consumer(mirror, ErrorKind::MirrorConsumerConfigInvalid)?;
        }
        if !self.sources.is_empty() && self.allow_msg_schedules {
            return Err(ErrorKind::SourceWithMsgSchedules.into());
        }
        let mut seen = std::collections::HashSet::new();
        let mut consumers = std::collections::HashSet::new();
        for source in &self.sources {
            check_origin_consumer(source, ErrorKind::SourceConsumerConfigInvalid)?;
            if let Some(consumer) = &source.consumer {
                if !consumers.insert((&source.name, &consumer.name)) {
                    return Err(ErrorKind::SourceConsumerDuplicateDetected.into());
                }
            }
            if !is_valid_name(&source.name) {
                return Err(ErrorKind::SourceInvalidStreamName.into());
            }
            // Same stream + filter + transforms (+ external API) twice is a duplicate.
            let identity = (
                &source.name,
                &source.filter_subject,
                &source.subject_transforms,
                source.external.as_ref().map(|e| &e.api_prefix),
            );
            if !seen.insert(identity) {
                return Err(ErrorKind::SourceDuplicateDetected.into());
            }
            if !source.filter_subject.is_empty() && !source.subject_transforms.is_empty() {
                return Err(ErrorKind::SourceMultipleFiltersNotAllowed.into());
            }
            for transform in &source.subject_transforms {
                if !transform.src.is_empty() && !is_valid_subject(transform.src.as_bytes()) {
                    return Err(ApiError::with_detail(
                        ErrorKind::SourceInvalidSubjectFilter,
                        format!("invalid subject {}", transform.src),
                    ));
                }
                check_origin_transform(
                    &transform.src,
                    &transform.dest,
                    ErrorKind::SourceInvalidTransformDestination,
                )?;
            }
            if filters_overlap(&source.subject_transforms) {
                return Err(ErrorKind::SourceOverlappingSubjectFilters.into());
            }
        }
        Ok(())
    }

    fn validate_subjects(&self) -> Result<(), ApiError> {
        if self.subjects.is_empty() && self.mirror.is_none() && self.sources.is_empty() {
            return Err(invalid(
                "stream needs at least one configured subject or be a source/mirror",
            ));
        }
        for (index, subject) in self.subjects.iter().enumerate() {
            if !is_valid_subject(subject.as_bytes()) {
                return Err(invalid("invalid subject"));
            }
            if self.subjects[..index].contains(subject) {
                return Err(invalid("duplicate subjects detected"));
            }
            if subject == ">" {
                if !self.no_ack {
                    return Err(invalid("capturing all subjects requires no-ack to be true"));
                }
                if self.num_replicas != 1 {
                    return Err(invalid("capturing all subjects requires replicas of 1"));
                }
            }
            // A stream capturing its own API (or its acks) would swallow the control plane.
            let in_js_api = is_subset_match(subject, "$JS.>") || is_subset_match(subject, "$JSC.>");
            if !self.no_ack && in_js_api && !is_subset_match(subject, "$JS.EVENT.>") {
                return Err(invalid(
                    "subjects that overlap with jetstream api require no-ack to be true",
                ));
            }
            if !self.no_ack
                && is_subset_match(subject, "$SYS.>")
                && !is_subset_match(subject, "$SYS.ACCOUNT.>")
            {
                return Err(invalid(
                    "subjects that overlap with system api require no-ack to be true",
                ));
            }
        }
        for (index, subject) in self.subjects.iter().enumerate() {
            for other in &self.subjects[index + 1..] {
                if patterns_overlap(subject, other) {
                    return Err(invalid(format!(
                        "subject {subject:?} overlaps with {other:?}"
                    )));
                }
            }
        }
        if let Some(transform) = &self.subject_transform {
            if !transform.src.is_empty() && !is_valid_subject(transform.src.as_bytes()) {
                return Err(ApiError::with_detail(
                    ErrorKind::StreamTransformInvalidSource,
                    format!("invalid subject {}", transform.src),
                ));
            }
            if !transform.src.is_empty() || !transform.dest.is_empty() {
                SubjectTransform::new(&transform.src, &transform.dest).map_err(|error| {
                    ApiError::with_detail(ErrorKind::StreamTransformInvalidDestination, error)
                })?;
            }
        }
        if let Some(republish) = &self.republish {
            if self
                .subjects
                .iter()
                .any(|s| patterns_overlap(&republish.dest, s))
            {
                return Err(invalid(
                    "stream configuration for republish destination forms a cycle",
                ));
            }
            if SubjectTransform::new(&republish.src, &republish.dest).is_err() {
                return Err(invalid(format!(
                    "stream configuration for republish with transform from '{}' to '{}' not valid",
                    republish.src, republish.dest
                )));
            }
        }
        Ok(())
    }

    /// The extra checks nats-server makes on `STREAM.CREATE` only (after `validate()`).
    pub fn validate_create(&self) -> Result<(), ApiError> {
        if self.sealed {
            return Err(ApiError::invalid_config(
                "stream configuration for create can not be sealed",
            ));
        }
        if self.mirror_direct && self.mirror.is_none() {
            return Err(ApiError::invalid_config(
                "stream has no mirror but does have mirror direct",
            ));
        }
        Ok(())
    }

    /// Checks that `self` (normalized) may replace `old` (nats-server `configUpdateCheck`).
    /// Call after `validate()`.
    pub fn validate_update(&self, old: &StreamConfig) -> Result<(), ApiError> {
        if self.name != old.name {
            return Err(invalid("stream configuration name must match original"));
        }
        if self.max_consumers != old.max_consumers {
            return Err(invalid(
                "stream configuration update can not change MaxConsumers",
            ));
        }
        if self.storage != old.storage {
            return Err(invalid(
                "stream configuration update can not change storage type",
            ));
        }
        if self.retention != old.retention
            && (self.retention == RetentionPolicy::WorkQueue
                || old.retention == RetentionPolicy::WorkQueue)
        {
            return Err(invalid(
                "stream configuration update can not change retention policy to/from workqueue",
            ));
        }
        if old.sealed && !self.sealed {
            return Err(invalid(
                "stream configuration update can not unseal a sealed stream",
            ));
        }
        if old.deny_delete && !self.deny_delete {
            return Err(invalid(
                "stream configuration update can not cancel deny message deletes",
            ));
        }
        if old.deny_purge && !self.deny_purge {
            return Err(invalid(
                "stream configuration update can not cancel deny purge",
            ));
        }
        // A mirror's origin cannot change; removing it promotes the mirror to an ordinary
        // stream (nats-server 2.12), whose copy task stops with the config update.
        if self.mirror.is_some() && self.mirror != old.mirror {
            return Err(ErrorKind::StreamMirrorNotUpdatable.into());
        }
        // TTLs can be switched on by an update, not off (nats-server 2.12).
        if old.allow_msg_ttl && !self.allow_msg_ttl {
            return Err(invalid("message TTL status can not be disabled"));
        }
        // A counter's value is its subject's last message: a stream cannot start or stop
        // counting.
        if self.allow_msg_counter != old.allow_msg_counter {
            return Err(invalid(
                "stream configuration update can not change message counter setting",
            ));
        }
        // Schedules can be switched on by an update, not off (nats-server 2.15.1).
        if old.allow_msg_schedules && !self.allow_msg_schedules {
            return Err(invalid("message schedules can not be disabled"));
        }
        Ok(())
    }

    /// What nats-server does to an update that seals the stream: a sealed stream keeps its
    /// messages forever and refuses every change to them.
    pub fn apply_seal(&mut self) {
        if self.sealed {
            self.max_age = 0;
            self.discard = DiscardPolicy::New;
            self.deny_delete = true;
            self.deny_purge = true;
            self.allow_rollup_hdrs = false;
        }
    }

    /// True if any subject of `self` overlaps any subject of `other` (the 10065 check
    /// between two different streams).
    pub fn subjects_overlap(&self, other: &StreamConfig) -> bool {
        self.subjects.iter().any(|mine| {
            other
                .subjects
                .iter()
                .any(|theirs| patterns_overlap(mine, theirs))
        })
    }
}
