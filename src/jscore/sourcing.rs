//! Mirrors and sources, the replicated half: how far each origin has been copied, and the
//! command that copies one origin message.
//!
//! A stream's leader reads its origins (`jetstream::sourcing`) and proposes each message it
//! read as a [`SourcedMessage`] carrying the origin sequence and the position the leader
//! believed current (`expected_position`). Applying it stores the message and moves the
//! position only when the replicated position still is `expected_position`: a copy is
//! applied at most once, in origin order, even when a deposed leader's proposals commit
//! after a new leader's, and a message refused by this stream's limits stops the chain (the
//! ones after it carry a position that is no longer current) until the leader retries it.
//! A new leader resumes from the replicated position: no loss, no duplicates.
//!
//! One `SourcePositions` per stream group on every replica; replicated and persisted
//! (`jetstream::stream_machine`, key `o/`).

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// How a copied message is stored. Serde (postcard) writes the variant index: append only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SourceKind {
    /// At the origin's own sequence (a mirror).
    Mirror,
    /// At this stream's next sequence (one of its sources).
    Source,
}

/// One origin message to copy. Its fields are the entry format (`StreamCommandWire`'s
/// `Sourced`): append only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcedMessage {
    /// The origin's key: the mirrored stream's name, or a source's internal name
    /// (`jsapi::stream_config::StreamSource::internal_name`).
    pub source: String,
    pub kind: SourceKind,
    /// The message's sequence in the origin.
    pub origin_seq: u64,
    /// The origin position the proposing leader started from; the copy is applied only if
    /// it is still the replicated one.
    pub expected_position: u64,
    pub subject: String,
    pub headers: Option<Bytes>,
    pub payload: Bytes,
    /// The stored time: the origin's for a mirror, the leader's receive time for a source.
    pub ts_nanos: i64,
}

/// The last origin sequence copied, per origin key (0: none yet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourcePositions {
    positions: BTreeMap<String, u64>,
}

impl SourcePositions {
    pub fn from_map(positions: BTreeMap<String, u64>) -> Self {
        Self { positions }
    }

    pub fn get(&self, source: &str) -> u64 {
        self.positions.get(source).copied().unwrap_or(0)
    }

    pub fn set(&mut self, source: &str, origin_seq: u64) {
        self.positions.insert(source.to_owned(), origin_seq);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.positions
            .iter()
            .map(|(source, seq)| (source.as_str(), *seq))
    }

    /// Whether `message` continues the chain from the current position.
    pub fn accepts(&self, message: &SourcedMessage) -> bool {
        let position = self.get(&message.source);
        position == message.expected_position && message.origin_seq > position
    }
}
