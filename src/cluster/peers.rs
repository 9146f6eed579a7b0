//! The peer table: every node of the cluster (id, name, cluster and client addresses), found
//! once by asking every configured route who it is (`Hello`), then kept in
//! `<store_dir>/cluster.json` so that a restarted node knows its cluster even while some peers
//! are down. One per node, owned by [`ClusterNode`](super::ClusterNode).
//!
//! Formation needs no bootstrap step: each node waits until every route answered, and since
//! all nodes are started with the same route list they all arrive at the same membership, which
//! is what the meta group is initialized with.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::proto::NodeInfo;
use crate::consensus::NodeId;

/// One node of the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    pub id: NodeId,
    pub name: String,
    /// gRPC address (`host:port`).
    pub cluster_addr: String,
    /// `nats://host:port` for clients (INFO connect_urls).
    pub client_url: String,
}

impl From<&NodeInfo> for Peer {
    fn from(info: &NodeInfo) -> Self {
        Peer {
            id: info.node_id,
            name: info.server_name.clone(),
            cluster_addr: info.cluster_addr.clone(),
            client_url: info.client_url.clone(),
        }
    }
}

/// Every node of the cluster, this one included, by id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerTable {
    pub cluster_name: String,
    pub nodes: BTreeMap<NodeId, Peer>,
}

/// The table could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PeerTableError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

const FILE_NAME: &str = "cluster.json";

impl PeerTable {
    /// The table saved by an earlier run, if any.
    pub fn load(store_dir: &Path) -> Result<Option<PeerTable>, PeerTableError> {
        let path = store_dir.join(FILE_NAME);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(PeerTableError::Io { path, source }),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| PeerTableError::Invalid {
                path,
                message: e.to_string(),
            })
    }

    /// Saves the table (write to a temp file, fsync, rename).
    pub fn save(&self, store_dir: &Path) -> Result<(), PeerTableError> {
        use std::io::Write;
        let path = store_dir.join(FILE_NAME);
        let temp = store_dir.join(format!("{FILE_NAME}.tmp"));
        let io = |source| PeerTableError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(store_dir).map_err(io)?;
        let mut file = std::fs::File::create(&temp).map_err(io)?;
        file.write_all(&serde_json::to_vec_pretty(self).expect("peer table serializes"))
            .map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&temp, &path).map_err(io)?;
        Ok(())
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    pub fn get(&self, id: NodeId) -> Option<&Peer> {
        self.nodes.get(&id)
    }
}

/// Backoff between attempts to reach a peer: 100 ms doubling to 2 s.
pub fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << attempt.min(5)).min(2_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_round_trips_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(PeerTable::load(dir.path()).unwrap(), None);
        let mut table = PeerTable {
            cluster_name: "c".into(),
            ..PeerTable::default()
        };
        table.nodes.insert(
            7,
            Peer {
                id: 7,
                name: "n7".into(),
                cluster_addr: "127.0.0.1:1".into(),
                client_url: "nats://127.0.0.1:2".into(),
            },
        );
        table.save(dir.path()).unwrap();
        assert_eq!(PeerTable::load(dir.path()).unwrap(), Some(table));
        std::fs::write(dir.path().join(FILE_NAME), b"{").unwrap();
        assert!(PeerTable::load(dir.path()).is_err());
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert_eq!(backoff(0), Duration::from_millis(100));
        assert_eq!(backoff(1), Duration::from_millis(200));
        assert_eq!(backoff(30), Duration::from_secs(2));
    }
}
