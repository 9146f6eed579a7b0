//! The topology fixture for scenarios that need real processes, because `kill -9` must be
//! real: R1 is one `jetraft` process, R3 a [`TestCluster`] of three whose streams all have
//! three replicas. The in-process [`super::fixture`] serves every other scenario: it starts
//! faster and can wait on what only the nodes know.
//!
//! A process cannot be asked whether its router knows a leader's interest yet, so after a
//! create or a restart the fixture waits (through `/jsz`) until the stream has a leader and
//! hands out a client of that leader's node ([`js_at_leader_of`](ProcessFixture::js_at_leader_of)).

use async_nats::jetstream::{self, stream};

use super::cluster::TestCluster;
use super::fixture::Topology;
use super::process::JetraftProcess;
use super::within;

enum Nodes {
    Single {
        dir: tempfile::TempDir,
        node: Option<JetraftProcess>,
        url: String,
    },
    Cluster(TestCluster),
}

pub struct ProcessFixture {
    topology: Topology,
    nodes: Nodes,
}

/// Starts one node on `store`, on a port of its choosing; returns it and its client URL.
fn spawn_single(store: &std::path::Path) -> (JetraftProcess, String) {
    let mut node = JetraftProcess::spawn(&[
        "-a",
        "127.0.0.1",
        "-p",
        "0",
        "-js",
        "-sd",
        store.to_str().expect("a UTF-8 path"),
    ]);
    let url = format!("nats://{}", node.client_addr());
    (node, url)
}

impl ProcessFixture {
    /// Starts the processes of `topology` (R3: until every node knows the meta leader).
    pub fn start(topology: Topology) -> ProcessFixture {
        let nodes = match topology {
            Topology::R1 => {
                let dir = tempfile::tempdir().expect("a temporary store");
                let (node, url) = spawn_single(dir.path());
                Nodes::Single {
                    dir,
                    node: Some(node),
                    url,
                }
            }
            Topology::R3 => Nodes::Cluster(TestCluster::start(3)),
        };
        ProcessFixture { topology, nodes }
    }

    /// `config` with this topology's replicas.
    pub fn replicated(&self, config: stream::Config) -> stream::Config {
        stream::Config {
            num_replicas: self.topology.nodes(),
            ..config
        }
    }

    /// A JetStream context on a client of the first node.
    pub async fn js(&self) -> jetstream::Context {
        let url = match &self.nodes {
            Nodes::Single { url, .. } => url.clone(),
            Nodes::Cluster(cluster) => cluster.url(0),
        };
        connect(url).await
    }

    /// A JetStream context on a client of the node leading `stream`, once it leads.
    pub async fn js_at_leader_of(&self, stream: &str) -> jetstream::Context {
        let url = match &self.nodes {
            Nodes::Single { url, .. } => url.clone(),
            Nodes::Cluster(cluster) => {
                let leader = tokio::task::block_in_place(|| cluster.leader_of(stream));
                cluster.url(leader)
            }
        };
        connect(url).await
    }

    /// `kill -9` of every node (no shutdown, no flush), then every node started again on its
    /// store; R3 waits until every node knows the meta leader again.
    pub fn kill_all_and_restart(&mut self) {
        match &mut self.nodes {
            Nodes::Single { dir, node, url } => {
                drop(node.take()); // SIGKILL on drop
                let (restarted, restarted_url) = spawn_single(dir.path());
                *node = Some(restarted);
                *url = restarted_url;
            }
            Nodes::Cluster(cluster) => tokio::task::block_in_place(|| {
                cluster.kill_all_and_restart();
                cluster.wait_for_meta_leader();
            }),
        }
    }
}

async fn connect(url: String) -> jetstream::Context {
    let client = within("client connects", async_nats::connect(url))
        .await
        .expect("client connects");
    jetstream::new(client)
}
