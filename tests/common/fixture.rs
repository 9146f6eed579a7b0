//! The JetStream topology fixture: one test body runs on a single node (R1) and on a
//! three-node cluster whose streams all have three replicas (R3), as DESIGN rule 8 asks.
//! [`on_r1_and_r3!`] turns `async fn scenario(fx: JsFixture)` bodies into `r1::scenario` and
//! `r3::scenario` tests.
//!
//! The nodes run in-process (not as the `jetraft` processes of [`super::cluster`]): a cluster
//! of three in-process nodes is up in about the time of its first meta election, with no
//! process start, no log piping and no HTTP polling (measured on the 2-core test machine,
//! loaded: 0.12-0.94 s in-process against 0.67-1.63 s for three processes; one node
//! 0.02-0.24 s against 0.11-0.31 s); and the fixture can look at
//! what a client cannot (which node leads a stream, whether a node's router already knows
//! the interest a stream's leader subscribed) to wait for exactly that once, here, instead of
//! every test retrying. A restart here is a graceful shutdown of every node and a start on
//! the same directories and ports; `kill -9` needs real processes, see
//! [`super::process_fixture`].
//!
//! R3 clients connect to the nodes in turn (the first to node 1, the next to node 2, …), so a
//! scenario's API calls, publishes and acks cross the cluster's forwarding paths as well as
//! the leader's own.
//!
//! Everything that names `jetraft::node` (how a node is started) stays in `tests/common`: here
//! and in `mod.rs` (`RunningNode`, `start_with_log_options`).

use std::sync::atomic::{AtomicUsize, Ordering};

use async_nats::jetstream::{self, kv, stream};
use bytes::Bytes;
use jetraft::config::cluster::ClusterConfig;
use jetraft::config::Config;
use jetraft::node::{Node, RunningNode};

use super::{wait_until, within};

/// How many nodes, and so how many replicas each stream gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One node, no cluster configured (a standalone server).
    R1,
    /// Three nodes in one cluster; every stream created through the fixture has 3 replicas.
    R3,
}

impl Topology {
    pub fn nodes(self) -> usize {
        match self {
            Topology::R1 => 1,
            Topology::R3 => 3,
        }
    }
}

/// One test's nodes, their stores and their configs (kept for [`JsFixture::restart`]).
pub struct JsFixture {
    topology: Topology,
    configs: Vec<Config>,
    nodes: Vec<Option<RunningNode>>,
    _dirs: Vec<tempfile::TempDir>,
    /// Which node the next client connects to (R3 spreads clients over the nodes).
    next_client: AtomicUsize,
}

fn node_configs(topology: Topology, dirs: &[tempfile::TempDir]) -> Vec<Config> {
    let base = |dir: &tempfile::TempDir| {
        let mut config = Config::loopback();
        config.jetstream = true;
        config.store_dir = dir.path().to_path_buf();
        config
    };
    match topology {
        Topology::R1 => vec![base(&dirs[0])],
        Topology::R3 => {
            // Fixed ports: a restarted node comes back where its peers' tables say it is.
            let ports = super::ports::free_ports(2 * dirs.len());
            let (client_ports, cluster_ports) = ports.split_at(dirs.len());
            let routes: Vec<String> = cluster_ports
                .iter()
                .map(|port| format!("127.0.0.1:{port}"))
                .collect();
            dirs.iter()
                .enumerate()
                .map(|(i, dir)| {
                    let mut config = base(dir);
                    config.listen = ([127, 0, 0, 1], client_ports[i]).into();
                    config.server_name = Some(format!("n{i}"));
                    config.cluster = Some(ClusterConfig {
                        name: "test".into(),
                        listen: ([127, 0, 0, 1], cluster_ports[i]).into(),
                        advertise: routes[i].clone(),
                        routes: routes.clone(),
                    });
                    config
                })
                .collect()
        }
    }
}

/// Starts every node at once (a cluster node's start waits for its peers to answer).
async fn start_nodes(configs: &[Config]) -> Vec<Option<RunningNode>> {
    super::capture_node_logs();
    let started = within(
        "every node to start",
        futures::future::join_all(configs.iter().cloned().map(Node::start)),
    )
    .await;
    started
        .into_iter()
        .map(|node| Some(node.expect("node starts")))
        .collect()
}

/// A subject inside `filter` (`orders.*` -> `orders.x`), to ask a router who receives it.
fn sample_subject(filter: &str) -> Bytes {
    let tokens: Vec<&str> = filter
        .split('.')
        .map(|token| match token {
            "*" | ">" => "x",
            literal => literal,
        })
        .collect();
    Bytes::from(tokens.join("."))
}

impl JsFixture {
    /// Starts the nodes of `topology` and waits until JetStream answers on every one.
    pub async fn start(topology: Topology) -> JsFixture {
        JsFixture::start_configured(topology, |_| {}).await
    }

    /// [`start`](Self::start), with `configure` applied to every node's config.
    pub async fn start_configured(
        topology: Topology,
        configure: impl Fn(&mut Config),
    ) -> JsFixture {
        let dirs: Vec<tempfile::TempDir> = (0..topology.nodes())
            .map(|_| tempfile::tempdir().expect("a temporary store"))
            .collect();
        let mut configs = node_configs(topology, &dirs);
        configs.iter_mut().for_each(configure);
        let nodes = start_nodes(&configs).await;
        let fixture = JsFixture {
            topology,
            configs,
            nodes,
            _dirs: dirs,
            next_client: AtomicUsize::new(1),
        };
        fixture.wait_until_meta_leader().await;
        fixture
    }

    pub fn topology(&self) -> Topology {
        self.topology
    }

    /// The `num_replicas` every stream of a scenario is created with.
    pub fn stream_replicas(&self) -> usize {
        self.topology.nodes()
    }

    /// `config` with this topology's replicas.
    pub fn replicated(&self, config: stream::Config) -> stream::Config {
        stream::Config {
            num_replicas: self.stream_replicas(),
            ..config
        }
    }

    fn node(&self, i: usize) -> &RunningNode {
        self.nodes[i].as_ref().expect("node running")
    }

    fn running(&self) -> impl Iterator<Item = &RunningNode> {
        self.nodes.iter().flatten()
    }

    /// The client URL of node `i`.
    pub fn url_of(&self, i: usize) -> String {
        format!("nats://{}", self.node(i).client_addr())
    }

    /// The URL of the node the next client uses (on R3 each call names the next node).
    pub fn url(&self) -> String {
        let count = self.nodes.len();
        let i = (0..count)
            .map(|_| self.next_client.fetch_add(1, Ordering::Relaxed) % count)
            .find(|&i| self.nodes[i].is_some())
            .expect("a running node");
        self.url_of(i)
    }

    /// A client of the next node (see [`url`](Self::url)).
    pub async fn client(&self) -> async_nats::Client {
        let url = self.url();
        within("client connects", async_nats::connect(url))
            .await
            .expect("client connects")
    }

    /// A JetStream context on a new [`client`](Self::client).
    pub async fn js(&self) -> jetstream::Context {
        jetstream::new(self.client().await)
    }

    /// Creates the stream with this topology's replicas and waits until it is served from
    /// every node (see [`wait_until_served`](Self::wait_until_served)).
    pub async fn create_stream(
        &self,
        js: &jetstream::Context,
        config: stream::Config,
    ) -> stream::Stream {
        let name = config.name.clone();
        let stream = within("stream create", js.create_stream(self.replicated(config)))
            .await
            .expect("stream created");
        self.wait_until_served(&name).await;
        stream
    }

    /// [`create_stream`](Self::create_stream) that also accepts the stream already there.
    pub async fn get_or_create_stream(
        &self,
        js: &jetstream::Context,
        config: stream::Config,
    ) -> stream::Stream {
        let name = config.name.clone();
        let stream = within(
            "stream create",
            js.get_or_create_stream(self.replicated(config)),
        )
        .await
        .expect("stream created");
        self.wait_until_served(&name).await;
        stream
    }

    /// A stream `name` on `<prefix>s.*` (created unless there) holding `messages` more
    /// messages on `<prefix>s.new`, each `"<prefix> i"` and acknowledged.
    pub async fn stream_of(
        &self,
        js: &jetstream::Context,
        name: &str,
        prefix: &str,
        messages: u64,
    ) {
        let config = stream::Config {
            name: name.into(),
            subjects: vec![format!("{prefix}s.*")],
            ..Default::default()
        };
        self.get_or_create_stream(js, config).await;
        for i in 1..=messages {
            super::jetstream::publish_acked(js, format!("{prefix}s.new"), format!("{prefix} {i}"))
                .await;
        }
    }

    /// Creates a stream from a raw `STREAM.CREATE` body (for settings async-nats does not
    /// know) with this topology's replicas, asserts it was accepted, waits until every node
    /// serves it and returns the reply.
    pub async fn create_stream_raw(
        &self,
        client: &async_nats::Client,
        mut body: serde_json::Value,
    ) -> serde_json::Value {
        let name = body["name"].as_str().expect("a stream name").to_string();
        body["num_replicas"] = serde_json::json!(self.stream_replicas());
        let subject = format!("$JS.API.STREAM.CREATE.{name}");
        let reply = super::jetstream::api(client, subject, body).await;
        assert!(reply["error"].is_null(), "{reply}");
        self.wait_until_served(&name).await;
        reply
    }

    /// Stream `name`'s info as the server answers it now.
    pub async fn stream_info(&self, name: &str) -> stream::Info {
        let js = self.js().await;
        let mut stream = within("stream lookup", js.get_stream(name))
            .await
            .expect("stream exists");
        within("stream info", stream.info())
            .await
            .expect("stream info")
            .clone()
    }

    /// Creates the key-value bucket with this topology's replicas, served from every node.
    pub async fn create_key_value(&self, js: &jetstream::Context, config: kv::Config) -> kv::Store {
        let stream = format!("KV_{}", config.bucket);
        let config = kv::Config {
            num_replicas: self.stream_replicas(),
            ..config
        };
        let store = within("bucket create", js.create_key_value(config))
            .await
            .expect("bucket created");
        self.wait_until_served(&stream).await;
        store
    }

    /// Waits until JetStream has a meta leader that every node knows.
    async fn wait_until_meta_leader(&self) {
        wait_until("every node to know the meta leader", || {
            self.running().all(|node| {
                node.jetstream()
                    .is_some_and(|js| !js.meta_leader_name().is_empty())
            })
        })
        .await;
    }

    /// Waits until a node leads stream `name` and every node's router delivers the stream's
    /// subjects and its acks to it (over a route that is up, not only known interest): from then on a client of any node publishes, acks and
    /// pulls without "no responders". On R1 this holds once the create has answered.
    pub async fn wait_until_served(&self, name: &str) {
        let subjects = self.node_subjects_of(name).await;
        wait_until(
            &format!("stream {name} to be served from every node"),
            || {
                let led = self
                    .running()
                    .any(|node| node.jetstream().is_some_and(|js| js.leads_stream(name)));
                led && self.running().all(|node| {
                    subjects
                        .iter()
                        .all(|subject| node.shared().router.matches(subject).has_receiver())
                })
            },
        )
        .await;
    }

    /// Waits until every node's router delivers `subject` somewhere: a subscription made on
    /// one node is known on all (what the server publishes from any node reaches it).
    pub async fn wait_until_known_everywhere(&self, subject: &str) {
        let subject = Bytes::copy_from_slice(subject.as_bytes());
        wait_until("interest to reach every node", || {
            self.running()
                .all(|node| node.shared().router.matches(&subject).has_receiver())
        })
        .await;
    }

    /// Sample subjects stream `name` receives: one per subject filter, and one ack subject.
    async fn node_subjects_of(&self, name: &str) -> Vec<Bytes> {
        let mut assignment = None;
        wait_until(&format!("every node to know stream {name}"), || {
            assignment = self
                .running()
                .map(|node| node.jetstream().and_then(|js| js.assignment(name)))
                .collect::<Option<Vec<_>>>()
                .and_then(|mut all| all.pop());
            assignment.is_some()
        })
        .await;
        let config = assignment.expect("assigned").config;
        let mut subjects: Vec<Bytes> = config
            .subjects
            .iter()
            .map(|filter| sample_subject(filter))
            .collect();
        subjects.push(Bytes::from(format!("$JS.ACK.{name}.x")));
        subjects
    }

    /// Waits until every replica of stream `name` has applied up to its sequence `last_seq`
    /// (the leader acknowledges once a quorum has; the last follower may still be writing).
    pub async fn wait_until_replicas_hold(&self, name: &str, last_seq: u64) {
        let replicas = self.stream_replicas();
        wait_until(&format!("every replica of {name} at {last_seq}"), || {
            let holding = self
                .running()
                .filter_map(|node| node.jetstream())
                .flat_map(|js| js.replica_states())
                .filter(|replica| replica.name == name && replica.last_seq == last_seq)
                .count();
            holding == replicas
        })
        .await;
    }

    /// Reports the stored state of stream `name` damaged on the node leading it, as a read
    /// that failed its check does (`consensus::damage`); returns that node's index.
    pub fn report_damage_on_leader(&self, name: &str, reason: &str) -> usize {
        let index = self
            .leader_index(name)
            .unwrap_or_else(|| panic!("no node leads {name}"));
        let js = self.nodes[index]
            .as_ref()
            .and_then(|node| node.jetstream())
            .expect("the leader runs JetStream");
        let group = js.assignment(name).expect("assigned").group;
        js.state_damage().report(group, reason);
        index
    }

    /// Node `i`'s JetStream (the node running).
    pub fn jetstream_of(&self, i: usize) -> &std::sync::Arc<jetraft::jetstream::JetStream> {
        self.nodes[i]
            .as_ref()
            .and_then(|node| node.jetstream())
            .expect("node runs with JetStream")
    }

    /// The index of the running node leading stream `name`, if one does.
    pub fn leader_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|node| {
            node.as_ref()
                .and_then(|node| node.jetstream())
                .is_some_and(|js| js.leads_stream(name))
        })
    }

    /// The Raft index the leader of stream `name` has applied: what grows with every entry
    /// the stream group commits.
    pub fn leader_applied_index(&self, name: &str) -> u64 {
        self.running()
            .filter_map(|node| node.jetstream())
            .flat_map(|js| js.replica_states())
            .find(|replica| replica.name == name && replica.leader)
            .unwrap_or_else(|| panic!("no node leads {name}"))
            .applied_index
    }

    /// The store directory of node `i`.
    pub fn store_dir(&self, i: usize) -> &std::path::Path {
        &self.configs[i].store_dir
    }

    /// Waits until every running replica of stream `name` holds exactly `messages`
    /// messages (expiry is applied by each replica from the log).
    pub async fn wait_until_replicas_count(&self, name: &str, messages: u64) {
        let replicas = self
            .running()
            .filter_map(|node| node.jetstream())
            .flat_map(|js| js.replica_states())
            .filter(|replica| replica.name == name)
            .count();
        wait_until(
            &format!("every replica of {name} at {messages} messages"),
            || {
                self.running()
                    .filter_map(|node| node.jetstream())
                    .flat_map(|js| js.replica_states())
                    .filter(|replica| replica.name == name && replica.messages == messages)
                    .count()
                    == replicas
            },
        )
        .await;
    }

    /// WAL fsyncs so far, summed over the nodes.
    /// The message block caches of the running nodes.
    pub fn block_caches(&self) -> Vec<jetraft::jetstream::stream_machine::CacheStats> {
        self.running()
            .filter_map(|node| node.jetstream())
            .map(|js| js.block_cache().stats())
            .collect()
    }

    pub fn wal_fsyncs(&self) -> u64 {
        self.running()
            .filter_map(|node| node.jetstream())
            .map(|js| js.log_stats().fsyncs)
            .sum()
    }

    /// Stops every node (gracefully), starts them again on the same stores and ports, and
    /// waits until every stream is served again.
    pub async fn restart(&mut self) {
        self.shutdown_all().await;
        self.nodes = start_nodes(&self.configs).await;
        self.wait_until_meta_leader().await;
        let names = self
            .running()
            .next()
            .and_then(|node| node.jetstream())
            .map(|js| js.stream_names())
            .unwrap_or_default();
        for name in names {
            self.wait_until_served(&name).await;
        }
    }

    /// Stops the node that leads stream `name` (on R1 the node), as a server shutdown does.
    pub async fn stop_leader_of(&mut self, name: &str) {
        let leader = self
            .nodes
            .iter()
            .position(|node| {
                node.as_ref()
                    .and_then(RunningNode::jetstream)
                    .is_some_and(|js| js.leads_stream(name))
            })
            .unwrap_or_else(|| panic!("no node leads {name}"));
        let node = self.nodes[leader].take().expect("leader running");
        within("the leader to stop", node.shutdown()).await;
    }

    async fn shutdown_all(&mut self) {
        for node in self.nodes.iter_mut().filter_map(Option::take) {
            within("a node to stop", node.shutdown()).await;
        }
    }

    /// Stops every node.
    pub async fn shutdown(mut self) {
        self.shutdown_all().await;
    }
}

/// Declares each `async fn name(fx: JsFixture)` of the list as two tests, `r1::name` and
/// `r3::name`, each on a fresh fixture of its topology. Scenarios take a runtime with two
/// workers: three nodes and a client share it on R3. After `; ignored_on_r3:` come scenarios
/// whose R3 test is `#[ignore]`d with a reason (an R3 bug being reported, not a weaker test).
/// (Unused in the suites without R1/R3 scenarios: `common` is compiled into every test crate.)
/// `on_r1_and_r3!(cache_bytes: N; a, b)`: the same, every node with a message block cache of
/// `N` bytes.
#[allow(unused_macros)]
macro_rules! on_r1_and_r3 {
    (cache_bytes: $bytes:expr; $($scenario:ident),* $(,)?) => {
        mod r1 {
            $($crate::common::fixture::on_r1_and_r3!(@cached R1, $bytes, $scenario);)*
        }
        mod r3 {
            $($crate::common::fixture::on_r1_and_r3!(@cached R3, $bytes, $scenario);)*
        }
    };
    (@cached $topology:ident, $bytes:expr, $scenario:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $scenario() {
            let fixture = $crate::common::fixture::JsFixture::start_configured(
                $crate::common::fixture::Topology::$topology,
                |config| config.js_cache_bytes = $bytes,
            )
            .await;
            super::$scenario(fixture).await;
        }
    };
    ($($scenario:ident),* $(,)? $(; ignored_on_r3: $($ignored:ident = $reason:literal),* $(,)?)?) => {
        mod r1 {
            $($crate::common::fixture::on_r1_and_r3!(@test R1, $scenario);)*
            $($($crate::common::fixture::on_r1_and_r3!(@test R1, $ignored);)*)?
        }
        mod r3 {
            $($crate::common::fixture::on_r1_and_r3!(@test R3, $scenario);)*
            $($($crate::common::fixture::on_r1_and_r3!(@test R3, $ignored, $reason);)*)?
        }
    };
    (@test $topology:ident, $scenario:ident $(, $reason:literal)?) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[ignore = $reason])?
        async fn $scenario() {
            let fixture = $crate::common::fixture::JsFixture::start(
                $crate::common::fixture::Topology::$topology,
            )
            .await;
            super::$scenario(fixture).await;
        }
    };
}
#[allow(unused_imports)]
pub(crate) use on_r1_and_r3;
