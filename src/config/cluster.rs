//! Cluster settings, spelled as nats-server spells them: `--cluster nats://HOST:PORT` (this
//! node's cluster listen address; jetraft speaks gRPC on it), `--cluster_name NAME`, and
//! `--routes URL,URL,...` (the peers). A route is `nats://host:port`, `nats-route://host:port`
//! or a bare `host:port`; the list may include this node's own address, so every node of a
//! cluster can be started with the same list. In a config file:
//!
//! ```text
//! cluster {
//!   name: jetraft
//!   listen: 0.0.0.0:6222
//!   routes: [ nats-route://n1:6222, nats-route://n2:6222, nats-route://n3:6222 ]
//! }
//! ```

use std::net::{SocketAddr, ToSocketAddrs};

use super::ConfigError;

/// The default cluster name when none is given (nats-server generates a random one; a
/// fixed name lets nodes started from the same flags agree).
pub const DEFAULT_CLUSTER_NAME: &str = "jetraft";

/// This node's cluster settings. One per node; `None` in [`Config`](super::Config) means a
/// single node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    pub name: String,
    /// Where this node listens for peers (gRPC).
    pub listen: SocketAddr,
    /// How this node is reached by peers, as written in the routes (`host:port`); defaults to
    /// `listen`.
    pub advertise: String,
    /// The peers' cluster addresses (`host:port`), possibly including this node's own.
    pub routes: Vec<String>,
}

/// Strips `nats://`, `nats-route://` or `grpc://` and any trailing `/`, leaving `host:port`.
pub fn route_address(url: &str) -> Result<String, String> {
    let trimmed = url.trim();
    let rest = ["nats-route://", "nats://", "grpc://", "http://"]
        .iter()
        .find_map(|scheme| trimmed.strip_prefix(scheme))
        .unwrap_or(trimmed)
        .trim_end_matches('/');
    // Credentials in a route URL (user:pass@host) are not supported: refuse rather than ignore.
    if rest.contains('@') {
        return Err(format!(
            "route '{url}' carries credentials, which jetraft does not support"
        ));
    }
    match rest.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
            Ok(rest.to_string())
        }
        _ => Err(format!("route '{url}' is not host:port")),
    }
}

/// Splits a comma-separated `--routes` value.
pub fn parse_routes(text: &str) -> Result<Vec<String>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(route_address)
        .collect()
}

/// Builds the cluster config from its parts (flags over file). `listen` is required once any
/// cluster setting is given.
pub fn resolve(
    name: Option<String>,
    listen: Option<String>,
    routes: Vec<String>,
) -> Result<Option<ClusterConfig>, ConfigError> {
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        key: key.to_string(),
        message,
    };
    let Some(listen) = listen else {
        if !routes.is_empty() {
            return Err(invalid(
                "routes",
                "needs --cluster HOST:PORT (this node's cluster address)".into(),
            ));
        }
        return Ok(None);
    };
    let advertise = route_address(&listen).map_err(|m| invalid("cluster", m))?;
    let listen = advertise
        .to_socket_addrs()
        .map_err(|e| invalid("cluster", format!("'{advertise}': {e}")))?
        .next()
        .ok_or_else(|| invalid("cluster", format!("'{advertise}' resolves to nothing")))?;
    let name = name.unwrap_or_else(|| DEFAULT_CLUSTER_NAME.to_string());
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(invalid(
            "cluster_name",
            format!("'{name}' is not a valid name"),
        ));
    }
    Ok(Some(ClusterConfig {
        name,
        listen,
        advertise,
        routes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_urls_reduce_to_host_port() {
        assert_eq!(route_address("nats-route://a:6222").unwrap(), "a:6222");
        assert_eq!(
            route_address("nats://10.0.0.1:6222/").unwrap(),
            "10.0.0.1:6222"
        );
        assert_eq!(route_address("b:1").unwrap(), "b:1");
        assert!(route_address("nats://a").is_err());
        assert!(route_address("nats://u:p@a:1").is_err());
        assert_eq!(
            parse_routes("nats://a:1, b:2,").unwrap(),
            vec!["a:1".to_string(), "b:2".to_string()]
        );
    }

    #[test]
    fn routes_need_a_listen_address() {
        assert!(resolve(None, None, vec!["a:1".into()]).is_err());
        assert_eq!(resolve(None, None, vec![]).unwrap(), None);
        let c = resolve(Some("c1".into()), Some("127.0.0.1:6222".into()), vec![])
            .unwrap()
            .unwrap();
        assert_eq!(c.name, "c1");
        assert_eq!(c.listen.port(), 6222);
        assert!(resolve(Some("a b".into()), Some("127.0.0.1:1".into()), vec![]).is_err());
    }
}
