//! `StreamHandle`: the front's handle on one stream group — propose commands, read state.
//! One per stream hosted on this node, held by the `Catalog` and shared by the stream's
//! ingest, delivery and expiry tasks.
//!
//! The group behind a handle can be replaced (`replace_group`): when a group stops on a
//! fatal storage error, the supervisor (`supervisor`) restarts it from its log and sled state
//! and swaps it in, so every holder of the handle uses the restarted group without re-wiring.

use std::sync::Arc;

use parking_lot::RwLock;

use crate::consensus::{Command, ProposeError, RaftGroup};
use crate::jsapi::{ApiError, ErrorKind};
use crate::jscore::group::{StreamCommand, StreamOutcome};

use super::ingest_progress::IngestProgress;
use super::source_status::SourceStatuses;
use super::stream_machine::{entry, response, StreamView};

pub struct StreamHandle {
    name: String,
    /// The running group and the view its state machine publishes to; replaced together.
    current: RwLock<(Arc<RaftGroup>, StreamView)>,
    /// The mirror's or sources' progress while this node leads (`sourcing/`).
    sources: SourceStatuses,
    /// Publishes queued for and settled by this node's ingest task (`publish.rs`).
    ingest: IngestProgress,
}

impl std::fmt::Debug for StreamHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamHandle")
            .field("name", &self.name)
            .field("group", &self.group().id())
            .finish()
    }
}

impl StreamHandle {
    pub fn new(name: String, group: Arc<RaftGroup>, view: StreamView) -> Self {
        StreamHandle {
            name,
            current: RwLock::new((group, view)),
            sources: SourceStatuses::default(),
            ingest: IngestProgress::default(),
        }
    }

    pub fn ingest(&self) -> &IngestProgress {
        &self.ingest
    }

    /// Waits (bounded) until the publishes this node queued for the stream before now are
    /// applied and answered: a request handled after a publish sees it (`ingest_progress`).
    pub async fn after_queued_publishes(&self) {
        let mark = self.ingest.mark();
        if !self.ingest.is_settled(mark) {
            self.ingest
                .settled_to(mark, super::ingest_progress::SETTLE_BOUND)
                .await;
        }
    }

    pub fn sources(&self) -> &SourceStatuses {
        &self.sources
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn group(&self) -> Arc<RaftGroup> {
        self.current.read().0.clone()
    }

    pub fn view(&self) -> StreamView {
        self.current.read().1.clone()
    }

    /// Installs a restarted group (same id) and its view.
    pub fn replace_group(&self, group: Arc<RaftGroup>, view: StreamView) {
        *self.current.write() = (group, view);
    }

    /// True once the group stopped for good (a fatal storage error): proposals fail until
    /// the supervisor replaces it.
    pub fn is_stopped(&self) -> bool {
        stopped_reason(&self.group()).is_some()
    }

    /// Proposes `commands` as one Raft entry; returns each command's outcome once the entry
    /// is committed (fsynced) and applied. The outer error means the entry's fate is
    /// unknown or it was not accepted (no leader, storage failure).
    pub async fn propose(
        &self,
        commands: Vec<StreamCommand>,
    ) -> Result<Vec<Result<StreamOutcome, ApiError>>, ApiError> {
        let commands = commands.into_iter().map(entry::encode_command).collect();
        self.propose_encoded(commands).await
    }

    /// [`StreamHandle::propose`] for commands already encoded (`stream_machine::entry`).
    pub async fn propose_encoded(
        &self,
        commands: Vec<Command>,
    ) -> Result<Vec<Result<StreamOutcome, ApiError>>, ApiError> {
        let responses = self
            .group()
            .propose_all(commands)
            .await
            .map_err(propose_error)?;
        Ok(responses
            .iter()
            .map(|reply| {
                response::decode_response(reply).unwrap_or_else(|e| {
                    tracing::error!(stream = %self.name, "undecodable stream response: {e}");
                    Err(ApiError::new(ErrorKind::ClusterNotAvail))
                })
            })
            .collect())
    }

    /// Proposes one command.
    pub async fn propose_one(&self, command: StreamCommand) -> Result<StreamOutcome, ApiError> {
        let mut outcomes = self.propose(vec![command]).await?;
        outcomes
            .pop()
            .unwrap_or_else(|| Err(ApiError::new(ErrorKind::ClusterNotAvail)))
    }
}

/// How a failed proposal is reported to clients: "JetStream system temporarily
/// unavailable" (10008), as nats-server answers while a group has no leader or quorum.
/// Why `group` stopped for good (a fatal storage error), or `None` while it runs.
pub fn stopped_reason(group: &RaftGroup) -> Option<String> {
    group
        .raft()
        .metrics()
        .borrow()
        .running_state
        .clone()
        .err()
        .map(|fatal| fatal.to_string())
}

pub fn propose_error(error: ProposeError) -> ApiError {
    tracing::warn!("proposal failed: {error}");
    ApiError::new(ErrorKind::ClusterNotAvail)
}
