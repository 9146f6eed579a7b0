//! Who this node says it is: the facts INFO, `/varz` and (later) cluster info report.
//!
//! One `Identity` per node, created at start-up and never changed.

use rand::distr::{Alphanumeric, SampleString};

/// The NATS server version jetraft claims in INFO. Clients gate features on it (nats.go needs at
/// least 2.9 for the named consumer-create subjects, nats-py parses it as strict semver), so it
/// is the nats-server release whose client-visible behaviour jetraft matches.
pub const NATS_COMPAT_VERSION: &str = "2.12.0";

/// NATS client protocol version: 1 = clients may receive asynchronous INFO.
pub const PROTOCOL_VERSION: u8 = 1;

#[derive(Debug, Clone)]
pub struct Identity {
    /// 56 upper-case characters starting with `N`, shaped like a nats-server public nkey.
    pub server_id: String,
    /// `-n/--server_name`, or the server id when none was given (as nats-server does).
    pub server_name: String,
    pub version: &'static str,
    /// jetraft's own crate version, reported beside the compatibility version.
    pub jetraft_version: &'static str,
}

impl Identity {
    pub fn new(server_name: Option<&str>) -> Self {
        let mut server_id = String::from("N");
        server_id.push_str(
            &Alphanumeric
                .sample_string(&mut rand::rng(), 55)
                .to_ascii_uppercase(),
        );
        let server_name = server_name
            .map(str::to_owned)
            .unwrap_or_else(|| server_id.clone());
        Identity {
            server_id,
            server_name,
            version: NATS_COMPAT_VERSION,
            jetraft_version: env!("CARGO_PKG_VERSION"),
        }
    }
}
