//! JetStream API errors: the `{"code","err_code","description"}` object every failed
//! JetStream reply carries, and the one table (`ErrorKind`) of the errors jetraft can
//! return, with nats-server's exact HTTP-like `code`, `err_code` and description template
//! (from nats-server `server/errors.json`). Clients match on `err_code` (natscli and nats.go
//! use 10059/10014 to mean "does not exist yet"), so numbers must never be invented here.
//!
//! Templates contain placeholders such as `{err}` or `{seq}`; `ApiError::with` fills them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The error object of a JetStream API reply (and of a failed PubAck).
///
/// Serialized as nats-server does: `err_code` and `description` are omitted when empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{description} ({err_code})")]
pub struct ApiError {
    /// HTTP-like status: 400, 404, 409, 412, 429, 500 or 503.
    pub code: u16,
    /// The JetStream error identifier clients match on (10xxx).
    #[serde(default, skip_serializing_if = "is_zero_u16")]
    pub err_code: u16,
    /// Human-readable text; varies between server versions, never matched on by clients.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

fn is_zero_u16(value: &u16) -> bool {
    *value == 0
}

impl ApiError {
    /// An error whose description is the kind's template as is (use for kinds without
    /// placeholders).
    pub fn new(kind: ErrorKind) -> Self {
        Self {
            code: kind.code(),
            err_code: kind.err_code(),
            description: kind.template().to_string(),
        }
    }

    /// An error whose placeholders (`{err}`, `{seq}`, …) are replaced, in order, by `args`.
    /// Placeholders without a matching argument are left as they are.
    pub fn with(kind: ErrorKind, args: &[&dyn fmt::Display]) -> Self {
        let mut description = String::new();
        let mut rest = kind.template();
        let mut args = args.iter();
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else {
                break;
            };
            description.push_str(&rest[..open]);
            match args.next() {
                Some(arg) => description.push_str(&arg.to_string()),
                None => description.push_str(&rest[open..open + close + 1]),
            }
            rest = &rest[open + close + 1..];
        }
        description.push_str(rest);
        Self {
            code: kind.code(),
            err_code: kind.err_code(),
            description,
        }
    }

    /// Shorthand for the many `{err}` kinds (10052 invalid stream config, 10012 consumer
    /// create, 10094 invalid deliver policy, …).
    pub fn with_detail(kind: ErrorKind, detail: impl fmt::Display) -> Self {
        Self::with(kind, &[&detail])
    }

    /// `10052` with the given text: the general "invalid stream configuration" error that
    /// nats-server also reuses for several consumer checks.
    pub fn invalid_config(detail: impl fmt::Display) -> Self {
        Self::with_detail(ErrorKind::StreamInvalidConfig, detail)
    }

    /// True if this error is of the given kind (compares `err_code`).
    pub fn is(&self, kind: ErrorKind) -> bool {
        self.err_code == kind.err_code()
    }

    /// The kind this error came from, if jetraft's table knows its `err_code`.
    pub fn kind(&self) -> Option<ErrorKind> {
        ErrorKind::from_err_code(self.err_code)
    }
}

impl From<ErrorKind> for ApiError {
    fn from(kind: ErrorKind) -> Self {
        ApiError::new(kind)
    }
}

macro_rules! error_table {
    ( $( $(#[$doc:meta])* $variant:ident = $code:literal, $err_code:literal, $template:literal; )+ ) => {
        /// Every JetStream error jetraft can produce, named after nats-server's constants
        /// (without the `JS` prefix and `Err`/`ErrF` suffix).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorKind {
            $( $(#[$doc])* $variant, )+
        }

        impl ErrorKind {
            /// All kinds, for table checks.
            pub const ALL: &'static [ErrorKind] = &[ $( ErrorKind::$variant, )+ ];

            /// HTTP-like status code.
            pub const fn code(self) -> u16 {
                match self { $( ErrorKind::$variant => $code, )+ }
            }

            /// JetStream error code.
            pub const fn err_code(self) -> u16 {
                match self { $( ErrorKind::$variant => $err_code, )+ }
            }

            /// Description template, placeholders in braces.
            pub const fn template(self) -> &'static str {
                match self { $( ErrorKind::$variant => $template, )+ }
            }

            /// Looks a kind up by its `err_code`.
            pub fn from_err_code(err_code: u16) -> Option<ErrorKind> {
                match err_code {
                    $( $err_code => Some(ErrorKind::$variant), )+
                    _ => None,
                }
            }
        }
    };
}

error_table! {
    // ---- general / account ----
    AccountResourcesExceeded = 400, 10002, "resource limits exceeded for account";
    /// Malformed or contradictory request; also the reply to an unknown `$JS.API` subject.
    BadRequest = 400, 10003, "bad request";
    ClusterIncomplete = 503, 10004, "incomplete results";
    ClusterNoPeers = 400, 10005, "{err}";
    ClusterNotActive = 500, 10006, "JetStream not in clustered mode";
    ClusterNotAssigned = 500, 10007, "JetStream cluster not assigned to this server";
    /// No meta leader right now.
    ClusterNotAvail = 503, 10008, "JetStream system temporarily unavailable";
    ClusterNotLeader = 500, 10009, "JetStream cluster can not handle request";
    ClusterRequired = 503, 10010, "JetStream clustering support required";
    ClusterTags = 400, 10011, "tags placement not supported for operation";
    ClusterUnSupportFeature = 503, 10036, "not currently supported in clustered mode";
    ClusterPeerNotMember = 400, 10040, "peer not a member";
    ClusterServerNotMember = 400, 10044, "server is not a member of the cluster";
    InsufficientResources = 503, 10023, "insufficient resources";
    /// Body is not valid JSON (or does not fit the request type).
    InvalidJson = 400, 10025, "invalid JSON: {err}";
    MaximumConsumersLimit = 400, 10026, "maximum consumers limit reached";
    MaximumStreamsLimit = 400, 10027, "maximum number of streams reached";
    MemoryResourcesExceeded = 500, 10028, "insufficient memory resources available";
    NoAccount = 503, 10035, "account not found";
    NotEmptyRequest = 400, 10038, "expected an empty request payload";
    NotEnabledForAccount = 503, 10039, "JetStream not enabled for account";
    RaftGeneral = 500, 10041, "{err}";
    StorageResourcesExceeded = 500, 10047, "insufficient storage resources available";
    NotEnabled = 503, 10076, "JetStream not enabled";
    NoLimits = 400, 10120, "no JetStream default or applicable tiered limit present";
    ReplicasCountCannotBeNegative = 400, 10133, "replicas count cannot be negative";
    Pedantic = 400, 10157, "pedantic mode: {err}";
    RequiredApiLevel = 412, 10185, "JetStream minimum api level required";

    // ---- streams ----
    StreamExternalApiOverlap = 400, 10021, "stream external api prefix {prefix} must not overlap with {subject}";
    StreamExternalDelPrefixOverlaps = 400, 10022, "stream external delivery prefix {prefix} overlaps with stream subject {subject}";
    StreamInvalidExternalDeliverySubj = 400, 10024, "stream external delivery prefix {prefix} must not contain wildcards";
    NoMessageFound = 404, 10037, "no message found";
    SequenceNotFound = 400, 10043, "sequence {seq} not found";
    StreamAssignment = 500, 10048, "{err}";
    StreamCreate = 500, 10049, "{err}";
    StreamDelete = 500, 10050, "{err}";
    StreamGeneralError = 500, 10051, "{err}";
    /// Invalid stream configuration; the text says which check failed.
    StreamInvalidConfig = 500, 10052, "{err}";
    StreamLimits = 500, 10053, "{err}";
    StreamMessageExceedsMaximum = 400, 10054, "message size exceeds maximum allowed";
    StreamMirrorNotUpdatable = 400, 10055, "stream mirror configuration can not be updated";
    /// The name in the request body differs from the name in the subject.
    StreamMismatch = 400, 10056, "stream name in subject does not match request";
    StreamMsgDeleteFailed = 500, 10057, "{err}";
    StreamNameExist = 400, 10058, "stream name already in use with a different configuration";
    StreamNotFound = 404, 10059, "stream not found";
    /// `Nats-Expected-Stream` mismatch.
    StreamNotMatch = 400, 10060, "expected stream does not match";
    StreamReplicasNotUpdatable = 400, 10061, "Replicas configuration can not be updated";
    StreamRestore = 500, 10062, "restore failed: {err}";
    StreamSequenceNotMatch = 503, 10063, "expected stream sequence does not match";
    StreamSnapshot = 500, 10064, "snapshot failed: {err}";
    StreamSubjectOverlap = 400, 10065, "subjects overlap with an existing stream";
    StreamUpdate = 500, 10069, "{err}";
    /// `Nats-Expected-Last-Msg-Id` mismatch; `{id}` is the actual last id.
    StreamWrongLastMsgId = 400, 10070, "wrong last msg ID: {id}";
    /// `Nats-Expected-Last-(Subject-)Sequence` mismatch; `{seq}` is the actual sequence.
    StreamWrongLastSequence = 400, 10071, "wrong last sequence: {seq}";
    StreamReplicasNotSupported = 500, 10074, "replicas > 1 not supported in non-clustered mode";
    PeerRemap = 503, 10075, "peer remap failed";
    /// Store failure on publish ("maximum messages exceeded", "maximum bytes exceeded", …).
    StreamStoreFailed = 503, 10077, "{err}";
    StreamInvalid = 500, 10096, "stream not valid";
    StreamHeaderExceedsMaximum = 400, 10097, "header size exceeds maximum allowed of 64k";
    StreamSealed = 400, 10109, "invalid operation on sealed stream";
    StreamPurgeFailed = 500, 10110, "{err}";
    StreamRollupFailed = 500, 10111, "{err}";
    StreamMaxBytesRequired = 400, 10113, "account requires a stream config to have max bytes set";
    StreamInfoMaxSubjects = 500, 10117, "subject details would exceed maximum allowed";
    StreamOffline = 500, 10118, "stream is offline";
    StreamMaxStreamBytesExceeded = 400, 10122, "stream max bytes exceeds account limit max stream bytes";
    StreamMoveAndScale = 400, 10123, "can not move and scale a stream in a single update";
    StreamMoveInProgress = 400, 10124, "stream move already in progress";
    StreamNameContainsPathSeparators = 400, 10128, "Stream name can not contain path separators";
    StreamNameExistRestoreFailed = 400, 10130, "stream name already in use, cannot restore";
    StreamTransformInvalidSource = 400, 10155, "stream transform source: {err}";
    StreamTransformInvalidDestination = 400, 10156, "stream transform: {err}";
    StreamDuplicateMessageConflict = 409, 10158, "duplicate message id is in process";
    StreamExpectedLastSeqPerSubjectNotReady = 503, 10163, "expected last sequence per subject temporarily unavailable";
    StreamWrongLastSequenceConstant = 400, 10164, "wrong last sequence";
    MessageTtlInvalid = 400, 10165, "invalid per-message TTL";
    MessageTtlDisabled = 400, 10166, "per-message TTL is disabled";
    /// `Nats-Incr` on a stream that is not a counter stream.
    MessageIncrDisabled = 400, 10168, "message counters is disabled";
    MessageIncrMissing = 400, 10169, "message counter increment is missing";
    MessageIncrPayload = 400, 10170, "message counter has payload";
    MessageIncrInvalid = 400, 10171, "message counter increment is invalid";
    MessageCounterBroken = 400, 10172, "message counter is broken";
    /// `Nats-Batch-Id` on a stream without atomic publish (every jetraft stream).
    AtomicPublishDisabled = 400, 10174, "atomic publish is disabled";
    /// Atomic batch publish (ADR-50): the refusals of a batch member or commit.
    AtomicPublishMissingSeq = 400, 10175, "atomic publish sequence is missing";
    AtomicPublishIncompleteBatch = 400, 10176, "atomic publish batch is incomplete";
    AtomicPublishUnsupportedHeader = 400, 10177, "atomic publish unsupported header used: {header}";
    AtomicPublishInvalidBatchId = 400, 10179, "atomic publish batch ID is invalid";
    AtomicPublishTooLargeBatch = 400, 10199, "atomic publish batch is too large: {size}";
    AtomicPublishInvalidBatchCommit = 400, 10200, "atomic publish batch commit is invalid";
    AtomicPublishDuplicateMsgId = 400, 10201, "atomic publish batch contains duplicate message id";
    AtomicPublishTooManyInflight = 429, 10210, "atomic publish too many inflight";
    /// `Nats-Schedule` on a stream without `allow_msg_schedules`; then the schedule checks.
    MessageSchedulesDisabled = 400, 10188, "message schedules is disabled";
    MessageSchedulesPatternInvalid = 400, 10189, "message schedules pattern is invalid";
    MessageSchedulesTimeZoneInvalid = 400, 10223, "message schedules time zone is invalid";
    MessageSchedulesTargetInvalid = 400, 10190, "message schedules target is invalid";
    MessageSchedulesTtlInvalid = 400, 10191, "message schedules invalid per-message TTL";
    MessageSchedulesRollupInvalid = 400, 10192, "message schedules invalid rollup";
    MessageSchedulesSourceInvalid = 400, 10203, "message schedules source is invalid";
    MessageSchedulesSchedulerInvalid = 400, 10212, "message schedules invalid scheduler";
    MirrorWithMsgSchedules = 400, 10186, "stream mirrors can not also schedule messages";
    SourceWithMsgSchedules = 400, 10187, "stream source can not also schedule messages";
    StreamTooManyRequests = 429, 10167, "too many requests";
    StreamMinLastSeq = 412, 10180, "min last sequence";
    StreamExpectedLastSeqPerSubjectInvalid = 400, 10193, "missing sequence for expected last sequence per subject";
    StreamOfflineReason = 500, 10194, "stream is offline: {err}";

    // ---- mirrors and sources ----
    MirrorConsumerSetupFailed = 500, 10029, "{err}";
    MirrorMaxMessageSizeTooBig = 400, 10030, "stream mirror must have max message size >= source";
    MirrorWithAtomicPublish = 400, 10198, "stream mirrors can not also use atomic publishing";
    MirrorWithSources = 400, 10031, "stream mirrors can not also contain other sources";
    MirrorWithStartSeqAndTime = 400, 10032, "stream mirrors can not have both start seq and start time configured";
    MirrorWithSubjectFilters = 400, 10033, "stream mirrors can not contain filtered subjects";
    MirrorWithSubjects = 400, 10034, "stream mirrors can not contain subjects";
    SourceConsumerSetupFailed = 500, 10045, "{err}";
    SourceMaxMessageSizeTooBig = 400, 10046, "stream source must have max message size >= target";
    SourceDuplicateDetected = 400, 10140, "duplicate source configuration detected";
    SourceInvalidStreamName = 400, 10141, "sourced stream name is invalid";
    MirrorInvalidStreamName = 400, 10142, "mirrored stream name is invalid";
    MirrorWithCounters = 400, 10173, "stream mirrors can not also calculate counters";
    MirrorWithFirstSeq = 400, 10143, "stream mirrors can not have first sequence configured";
    SourceMultipleFiltersNotAllowed = 400, 10144, "source with multiple subject transforms cannot also have a single subject filter";
    SourceInvalidSubjectFilter = 400, 10145, "source transform source: {err}";
    SourceInvalidTransformDestination = 400, 10146, "source transform: {err}";
    SourceOverlappingSubjectFilters = 400, 10147, "source filters can not overlap";
    MirrorMultipleFiltersNotAllowed = 400, 10150, "mirror with multiple subject transforms cannot also have a single subject filter";
    MirrorInvalidSubjectFilter = 400, 10151, "mirror transform source: {err}";
    MirrorOverlappingSubjectFilters = 400, 10152, "mirror subject filters can not overlap";
    MirrorInvalidTransformDestination = 400, 10154, "mirror transform: {err}";
    MirrorConsumerConfigInvalid = 400, 10213, "stream mirror consumer config is invalid";
    MirrorConsumerRequiresAckFc = 400, 10214, "stream mirror consumer requires flow control ack policy";
    SourceConsumerConfigInvalid = 400, 10215, "stream source consumer config is invalid";
    SourceConsumerDuplicateDetected = 400, 10216, "duplicate stream source consumer detected";
    SourceConsumerRequiresAckFc = 400, 10217, "stream source consumer requires flow control ack policy";

    // ---- consumers ----
    /// Consumer create/update failure; the text says which (e.g. "deliver policy can not be updated").
    ConsumerCreate = 500, 10012, "{err}";
    ConsumerNameExist = 400, 10013, "consumer name already in use";
    ConsumerNotFound = 404, 10014, "consumer not found";
    SnapshotDeliverSubjectInvalid = 400, 10015, "deliver subject not valid";
    ConsumerDurableNameNotInSubject = 400, 10016, "consumer expected to be durable but no durable name set in subject";
    ConsumerDurableNameNotMatchSubject = 400, 10017, "consumer name in subject does not match durable name in request";
    ConsumerDurableNameNotSet = 400, 10018, "consumer expected to be durable but a durable name was not set";
    ConsumerEphemeralWithDurableInSubject = 400, 10019, "consumer expected to be ephemeral but detected a durable name set in subject";
    ConsumerEphemeralWithDurableName = 400, 10020, "consumer expected to be ephemeral but a durable name was set in request";
    ConsumerConfigRequired = 400, 10078, "consumer config required";
    ConsumerDeliverToWildcards = 400, 10079, "consumer deliver subject has wildcards";
    ConsumerPushMaxWaiting = 400, 10080, "consumer in push mode can not set max waiting";
    ConsumerDeliverCycle = 400, 10081, "consumer deliver subject forms a cycle";
    ConsumerMaxPendingAckPolicyRequired = 400, 10082, "consumer requires ack policy for max ack pending";
    ConsumerSmallHeartbeat = 400, 10083, "consumer idle heartbeat needs to be >= 100ms";
    ConsumerPullRequiresAck = 400, 10084, "consumer in pull mode requires explicit ack policy on workqueue stream";
    ConsumerPullNotDurable = 400, 10085, "consumer in pull mode requires a durable name";
    ConsumerPullWithRateLimit = 400, 10086, "consumer in pull mode can not have rate limit set";
    ConsumerMaxWaitingNegative = 400, 10087, "consumer max waiting needs to be positive";
    ConsumerHbRequiresPush = 400, 10088, "consumer idle heartbeat requires a push based consumer";
    ConsumerFcRequiresPush = 400, 10089, "consumer flow control requires a push based consumer";
    ConsumerDirectRequiresPush = 400, 10090, "consumer direct requires a push based consumer";
    ConsumerDirectRequiresEphemeral = 400, 10091, "consumer direct requires an ephemeral consumer";
    ConsumerOnMapped = 400, 10092, "consumer direct on a mapped consumer";
    ConsumerFilterNotSubset = 400, 10093, "consumer filter subject is not a valid subset of the interest subjects";
    /// Deliver policy / optional start combination invalid.
    ConsumerInvalidPolicy = 400, 10094, "{err}";
    ConsumerInvalidSampling = 400, 10095, "failed to parse consumer sampling configuration: {err}";
    ConsumerWqRequiresExplicitAck = 400, 10098, "workqueue stream requires explicit ack";
    ConsumerWqMultipleUnfiltered = 400, 10099, "multiple non-filtered consumers not allowed on workqueue stream";
    ConsumerWqConsumerNotUnique = 400, 10100, "filtered consumer not unique on workqueue stream";
    ConsumerWqConsumerNotDeliverAll = 400, 10101, "consumer must be deliver all on workqueue stream";
    ConsumerNameTooLong = 400, 10102, "consumer name is too long, maximum allowed is {max}";
    ConsumerBadDurableName = 400, 10103, "durable name can not contain '.', '*', '>'";
    ConsumerStoreFailed = 500, 10104, "error creating store for consumer: {err}";
    ConsumerExistingActive = 400, 10105, "consumer already exists and is still active";
    ConsumerReplacementWithDifferentName = 400, 10106, "consumer replacement durable config not the same";
    ConsumerDescriptionTooLong = 400, 10107, "consumer description is too long, maximum allowed is {max}";
    ConsumerWithFlowControlNeedsHeartbeats = 400, 10108, "consumer with flow control also needs heartbeats";
    ConsumerInvalidDeliverSubject = 400, 10112, "invalid push consumer deliver subject";
    ConsumerMaxRequestBatchNegative = 400, 10114, "consumer max request batch needs to be > 0";
    ConsumerMaxRequestExpiresTooSmall = 400, 10115, "consumer max request expires needs to be >= 1ms";
    ConsumerMaxDeliverBackoff = 400, 10116, "max deliver is required to be > length of backoff values";
    ConsumerOffline = 500, 10119, "consumer is offline";
    ConsumerMaxPendingAckExcess = 400, 10121, "consumer max ack pending exceeds system limit of {limit}";
    ConsumerMaxRequestBatchExceeded = 400, 10125, "consumer max request batch exceeds server limit of {limit}";
    ConsumerReplicasExceedsStream = 400, 10126, "consumer config replica count exceeds parent stream";
    ConsumerNameContainsPathSeparators = 400, 10127, "Consumer name can not contain path separators";
    ConsumerCreateFilterSubjectMismatch = 400, 10131, "Consumer create request did not match filtered subject from create subject";
    ConsumerCreateDurableAndNameMismatch = 400, 10132, "Consumer Durable and Name have to be equal if both are provided";
    ConsumerReplicasShouldMatchStream = 400, 10134, "consumer config replicas must match interest retention stream's replicas";
    ConsumerMetadataLength = 400, 10135, "consumer metadata exceeds maximum size of {limit}";
    ConsumerDuplicateFilterSubjects = 400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified";
    ConsumerMultipleFiltersNotAllowed = 400, 10137, "consumer with multiple subject filters cannot use subject based API";
    ConsumerOverlappingSubjectFilters = 400, 10138, "consumer subject filters cannot overlap";
    ConsumerEmptyFilter = 400, 10139, "consumer filter in FilterSubjects cannot be empty";
    /// Action "create" on an existing consumer with a different config.
    ConsumerAlreadyExists = 400, 10148, "consumer already exists";
    /// Action "update" on a consumer that does not exist.
    ConsumerDoesNotExist = 400, 10149, "consumer does not exist";
    ConsumerInactiveThresholdExcess = 400, 10153, "consumer inactive threshold exceeds system limit of {limit}";
    ConsumerPriorityPolicyWithoutGroup = 400, 10159, "Setting PriorityPolicy requires at least one PriorityGroup to be set";
    ConsumerInvalidPriorityGroup = 400, 10160, "Provided priority group does not exist for this consumer";
    ConsumerEmptyGroupName = 400, 10161, "Group name cannot be an empty string";
    ConsumerInvalidGroupName = 400, 10162, "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters";
    ConsumerPushWithPriorityGroup = 400, 10178, "priority groups can not be used with push consumers";
    ConsumerAckPolicyInvalid = 400, 10181, "consumer ack policy invalid";
    ConsumerReplayPolicyInvalid = 400, 10182, "consumer replay policy invalid";
    ConsumerAckWaitNegative = 400, 10183, "consumer ack wait needs to be positive";
    ConsumerBackOffNegative = 400, 10184, "consumer backoff needs to be positive";
    ConsumerOfflineReason = 500, 10195, "consumer is offline: {err}";
    /// `CONSUMER.RESET` refused: "below start seq", "below start time" or "not allowed".
    ConsumerInvalidReset = 400, 10204, "invalid reset: {err}";
    ConsumerAckFcRequiresPush = 400, 10218, "flow control ack policy requires a push based consumer";
    ConsumerAckFcRequiresFc = 400, 10219, "flow control ack policy requires flow control";
    ConsumerAckFcRequiresMaxAckPending = 400, 10220, "flow control ack policy requires max ack pending";
    ConsumerAckFcRequiresNoAckWait = 400, 10221, "flow control ack policy requires unset ack wait";
    ConsumerAckFcRequiresNoMaxDeliver = 400, 10222, "flow control ack policy requires unset max deliver";
    ConsumerPriorityGroupWithPolicyNone = 400, 10196, "consumer can not have priority groups when policy is none";
    ConsumerPinnedTtlWithoutPriorityPolicyNone = 400, 10197, "PinnedTTL cannot be set when PriorityPolicy is none";
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn err_codes_are_unique_and_lookup_round_trips() {
        let mut seen = HashSet::new();
        for kind in ErrorKind::ALL {
            assert!(
                seen.insert(kind.err_code()),
                "duplicate {}",
                kind.err_code()
            );
            assert_eq!(ErrorKind::from_err_code(kind.err_code()), Some(*kind));
            assert!(matches!(
                kind.code(),
                400 | 404 | 409 | 412 | 429 | 500 | 503
            ));
        }
    }

    #[test]
    fn well_known_codes_match_nats_server() {
        let expect = [
            (ErrorKind::StreamNotFound, 404, 10059, "stream not found"),
            (
                ErrorKind::ConsumerNotFound,
                404,
                10014,
                "consumer not found",
            ),
            (
                ErrorKind::StreamNameExist,
                400,
                10058,
                "stream name already in use with a different configuration",
            ),
            (
                ErrorKind::StreamSubjectOverlap,
                400,
                10065,
                "subjects overlap with an existing stream",
            ),
            (
                ErrorKind::StreamMismatch,
                400,
                10056,
                "stream name in subject does not match request",
            ),
            (ErrorKind::NoMessageFound, 404, 10037, "no message found"),
            (ErrorKind::BadRequest, 400, 10003, "bad request"),
            (
                ErrorKind::MaximumConsumersLimit,
                400,
                10026,
                "maximum consumers limit reached",
            ),
            (
                ErrorKind::StreamReplicasNotSupported,
                500,
                10074,
                "replicas > 1 not supported in non-clustered mode",
            ),
            (
                ErrorKind::InsufficientResources,
                503,
                10023,
                "insufficient resources",
            ),
            (
                ErrorKind::StreamNotMatch,
                400,
                10060,
                "expected stream does not match",
            ),
            (
                ErrorKind::ConsumerAlreadyExists,
                400,
                10148,
                "consumer already exists",
            ),
            (
                ErrorKind::ConsumerNameExist,
                400,
                10013,
                "consumer name already in use",
            ),
        ];
        for (kind, code, err_code, text) in expect {
            let err = ApiError::new(kind);
            assert_eq!(
                (err.code, err.err_code, err.description.as_str()),
                (code, err_code, text)
            );
        }
    }

    #[test]
    fn placeholders_are_filled_in_order() {
        let err = ApiError::with(ErrorKind::StreamWrongLastSequence, &[&42u64]);
        assert_eq!(err.description, "wrong last sequence: 42");
        let err = ApiError::with(ErrorKind::StreamExternalApiOverlap, &[&"$JS.X", &"$JS.API"]);
        assert_eq!(
            err.description,
            "stream external api prefix $JS.X must not overlap with $JS.API"
        );
        let err = ApiError::with(ErrorKind::InvalidJson, &[]);
        assert_eq!(err.description, "invalid JSON: {err}");
        let err = ApiError::with_detail(ErrorKind::ConsumerInvalidReset, "below start seq");
        assert_eq!((err.code, err.err_code), (400, 10204));
        assert_eq!(err.description, "invalid reset: below start seq");
        let err = ApiError::invalid_config("max age needs to be >= 100ms");
        assert_eq!((err.code, err.err_code), (500, 10052));
        assert_eq!(err.to_string(), "max age needs to be >= 100ms (10052)");
    }

    #[test]
    fn serializes_like_nats_server() {
        let json = serde_json::to_string(&ApiError::new(ErrorKind::StreamNotFound)).unwrap();
        assert_eq!(
            json,
            r#"{"code":404,"err_code":10059,"description":"stream not found"}"#
        );
        let back: ApiError = serde_json::from_str(r#"{"code":503}"#).unwrap();
        assert_eq!(
            back,
            ApiError {
                code: 503,
                err_code: 0,
                description: String::new()
            }
        );
        assert_eq!(serde_json::to_string(&back).unwrap(), r#"{"code":503}"#);
        assert!(ApiError::new(ErrorKind::StreamNotFound).is(ErrorKind::StreamNotFound));
        assert_eq!(
            ApiError::new(ErrorKind::BadRequest).kind(),
            Some(ErrorKind::BadRequest)
        );
    }
}
