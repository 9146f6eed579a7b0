//! Server configuration: the resolved [`Config`] every other module reads, built from the
//! command line (`cli.rs`) overlaid on an optional config file (`file.rs`).
//!
//! One `Config` per node, created in `main.rs` (or by a test) and shared read-only.

pub mod cli;
pub mod cluster;
pub mod file;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How clients must authenticate. nats-server accepts exactly one of these per server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Auth {
    /// No credentials required.
    #[default]
    None,
    /// CONNECT must carry this `user` and `pass`.
    UserPass { user: String, pass: String },
    /// CONNECT must carry this `auth_token`.
    Token(String),
}

impl Auth {
    pub fn required(&self) -> bool {
        !matches!(self, Auth::None)
    }
}

/// Log verbosity, as nats-server's `-D`, `-V` and `-DV`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Logging {
    pub debug: bool,
    pub trace: bool,
}

/// The fully resolved configuration of one node.
#[derive(Debug, Clone)]
pub struct Config {
    /// Client listener address; port 0 picks a free port (tests use this).
    pub listen: SocketAddr,
    pub server_name: Option<String>,
    /// Monitoring HTTP listener, if any.
    pub http: Option<SocketAddr>,
    /// Snapshot every this many applied entries and keep a tenth as many behind it (hidden
    /// flag `--raft_compact_every`, for tests of snapshot catch-up); `None`: the default.
    pub raft_compact_every: Option<u64>,
    /// `None`: a single node. See [`cluster`].
    pub cluster: Option<cluster::ClusterConfig>,
    pub jetstream: bool,
    pub store_dir: PathBuf,
    /// Byte budget of the node's cache of stream message blocks (`--js_cache_bytes`,
    /// `jetstream { cache_bytes }`); message bodies are read through it.
    pub js_cache_bytes: u64,
    pub max_payload: usize,
    pub max_control_line: usize,
    /// Outbound bytes a client may have queued before it is cut off as a slow consumer.
    pub max_pending: usize,
    pub max_connections: usize,
    pub ping_interval: Duration,
    pub ping_max: u32,
    pub auth: Auth,
    pub auth_timeout: Duration,
    pub logging: Logging,
}

pub const DEFAULT_PORT: u16 = 4222;
pub const DEFAULT_MAX_PAYLOAD: usize = 1024 * 1024;
pub const DEFAULT_MAX_CONTROL_LINE: usize = 4096;
pub const DEFAULT_MAX_PENDING: usize = 64 * 1024 * 1024;
pub const DEFAULT_MAX_CONNECTIONS: usize = 64 * 1024;
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(120);
pub const DEFAULT_PING_MAX: u32 = 2;
pub const DEFAULT_AUTH_TIMEOUT: Duration = Duration::from_secs(2);
/// The block cache's budget: 32 MiB (why: `jetstream::stream_machine::DEFAULT_CACHE_BYTES`,
/// which `node.rs` checks it equals).
pub const DEFAULT_JS_CACHE_BYTES: u64 = 32 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT)),
            server_name: None,
            http: None,
            raft_compact_every: None,
            cluster: None,
            jetstream: false,
            store_dir: PathBuf::from("./jetraft-data"),
            js_cache_bytes: DEFAULT_JS_CACHE_BYTES,
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_control_line: DEFAULT_MAX_CONTROL_LINE,
            max_pending: DEFAULT_MAX_PENDING,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            ping_interval: DEFAULT_PING_INTERVAL,
            ping_max: DEFAULT_PING_MAX,
            auth: Auth::None,
            auth_timeout: DEFAULT_AUTH_TIMEOUT,
            logging: Logging::default(),
        }
    }
}

impl Config {
    /// A config for tests: loopback, a free port, defaults otherwise.
    pub fn loopback() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..Config::default()
        }
    }
}

/// Why a configuration could not be built. `main.rs` prints it and exits with code 1.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}, line {line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("invalid value for {key}: {message}")]
    Invalid { key: String, message: String },
}
