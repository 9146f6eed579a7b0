//! What the INFO sent to every new client says about the cluster this node belongs to: the
//! cluster's name and the client address of every node (`connect_urls`, which clients use to
//! fail over). Core NATS owns this narrow door; `cluster::ClusterNode` implements it, and the
//! composition root (`node.rs`) hands it to [`super::serve_clients`]. A node without a cluster
//! has none, and its INFO has neither field.

use std::fmt;

/// The cluster as a connecting client is told about it. Read once per connection, so what
/// it reports may change while the node runs (peers' client ports are learnt as they say
/// hello).
pub trait ClusterAdvertisement: Send + Sync + fmt::Debug {
    /// INFO `cluster`.
    fn cluster_name(&self) -> &str;
    /// INFO `connect_urls`: every node's client address, `host:port`.
    fn connect_urls(&self) -> Vec<String>;
}
