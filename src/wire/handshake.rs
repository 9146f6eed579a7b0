//! The JSON of the handshake: the server's `INFO` and the client's `CONNECT`.
//!
//! Field names and presence rules follow nats-server (`omitempty` fields are left out when
//! false or empty), because nats.go replaces its whole view of the server with every INFO it
//! receives: each INFO must be complete.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ServerInfo {
    pub server_id: String,
    pub server_name: String,
    pub version: String,
    pub proto: u8,
    pub go: String,
    pub host: String,
    pub port: u16,
    pub headers: bool,
    pub max_payload: usize,
    #[serde(skip_serializing_if = "is_false")]
    pub auth_required: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub jetstream: bool,
    pub client_id: u64,
    pub client_ip: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub connect_urls: Vec<String>,
    #[serde(skip_serializing_if = "is_false")]
    pub connect_info: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_account: Option<String>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl ServerInfo {
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("ServerInfo serializes")
    }
}

/// What a client asked for in CONNECT. Defaults are nats-server's: a client that omits
/// `verbose`/`pedantic` gets them on, `echo` defaults to on.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct ConnectOptions {
    pub verbose: bool,
    pub pedantic: bool,
    pub echo: bool,
    pub headers: bool,
    pub no_responders: bool,
    pub protocol: i64,
    pub name: Option<String>,
    pub lang: Option<String>,
    pub version: Option<String>,
    pub user: Option<String>,
    pub pass: Option<String>,
    pub auth_token: Option<String>,
    /// Legacy multi-account fields: nats-server refuses a CONNECT that sets them.
    pub account: Option<String>,
    pub new_account: Option<bool>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            verbose: true,
            pedantic: true,
            echo: true,
            headers: false,
            no_responders: false,
            protocol: 0,
            name: None,
            lang: None,
            version: None,
            user: None,
            pass: None,
            auth_token: None,
            account: None,
            new_account: None,
        }
    }
}

impl ConnectOptions {
    /// Parses the CONNECT JSON, which must be an object: serde's derived struct would also
    /// accept an array (`CONNECT []`), which nats-server refuses.
    pub fn parse(json: &[u8]) -> Result<Self, serde_json::Error> {
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(json)?;
        serde_json::from_value(serde_json::Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn omitted_fields_take_nats_server_defaults() {
        let opts = ConnectOptions::parse(b"{}").unwrap();
        assert!(opts.verbose && opts.pedantic && opts.echo);
        assert!(!opts.headers && !opts.no_responders);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let opts = ConnectOptions::parse(
            br#"{"verbose":false,"pedantic":false,"tls_required":false,"protocol":1,"headers":true,"no_responders":true,"sig":"x"}"#,
        )
        .unwrap();
        assert!(!opts.verbose && opts.headers && opts.no_responders);
        assert_eq!(opts.protocol, 1);
    }

    #[test]
    fn info_leaves_out_false_flags() {
        let info = ServerInfo {
            server_id: "NID".into(),
            server_name: "n1".into(),
            version: "2.11.0".into(),
            proto: 1,
            go: "go1.24".into(),
            host: "0.0.0.0".into(),
            port: 4222,
            headers: true,
            max_payload: 1048576,
            auth_required: false,
            jetstream: true,
            client_id: 3,
            client_ip: "127.0.0.1".into(),
            cluster: None,
            connect_urls: vec![],
            connect_info: false,
            remote_account: None,
        };
        let json: serde_json::Value = serde_json::from_slice(&info.to_json()).unwrap();
        assert!(json.get("auth_required").is_none());
        assert_eq!(json["jetstream"], true);
        assert_eq!(json["max_payload"], 1048576);
        assert_eq!(json["headers"], true);
    }
}
