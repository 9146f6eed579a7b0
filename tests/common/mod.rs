//! Shared helpers for the black-box tests: start a node in-process on a free loopback port,
//! and wait for conditions with a deadline instead of sleeping.
#![allow(dead_code)]

pub mod raw;

pub mod process;

pub mod cluster;

pub mod jetstream;

pub mod proxy;

pub mod fixture;

pub mod process_fixture;

pub mod damage;

pub mod ports;

use std::future::Future;
use std::time::Duration;

use jetraft::config::Config;
use jetraft::node::Node;
pub use jetraft::node::RunningNode;
use jetraft::store::log::LogOptions;

pub const WAIT: Duration = Duration::from_secs(10);

/// Sends the logs of in-process nodes to the test harness's captured output, shown with a
/// failing test: errors only, or what `RUST_LOG` asks for (e.g. `RUST_LOG=info,openraft=warn`).
/// The first test of a binary to start a node installs it; later calls do nothing.
pub fn capture_node_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub async fn start(config: Config) -> RunningNode {
    capture_node_logs();
    Node::start(config).await.expect("server starts")
}

/// [`start`] with explicit write-ahead-log options (storage fault injection).
pub async fn start_with_log_options(config: Config, options: LogOptions) -> RunningNode {
    capture_node_logs();
    Node::start_with_log_options(config, options)
        .await
        .expect("server starts")
}

pub async fn start_default() -> RunningNode {
    start(Config::loopback()).await
}

/// A node with JetStream over a fresh temporary store (kept as long as the `TempDir` lives).
pub async fn start_jetstream() -> (RunningNode, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::loopback();
    config.jetstream = true;
    config.store_dir = dir.path().to_path_buf();
    (start(config).await, dir)
}

pub fn url(server: &RunningNode) -> String {
    format!("nats://{}", server.client_addr())
}

pub async fn connect(server: &RunningNode) -> async_nats::Client {
    async_nats::connect(url(server))
        .await
        .expect("client connects")
}

/// Awaits `future`, failing the test with `what` if it takes longer than [`WAIT`].
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Polls `condition` until it holds, failing with `what` after [`WAIT`].
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    within(what, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}
