//! The `$JS.API.INFO` reply body: the account's JetStream usage, limits and API counters.
//! async-nats decodes every field here without defaults, so none may be omitted.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::serde_util::{is_zero_u64, nullable};

/// JetStream usage of the account (one per account; jetraft has one account).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AccountInfo {
    #[serde(flatten)]
    pub usage: AccountUsage,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub domain: String,
    pub api: ApiStats,
    /// Per-tier (`R1`, `R3`) usage when tiered limits are configured.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub tiers: BTreeMap<String, AccountUsage>,
}

/// Usage and limits, account-wide or for one tier.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AccountUsage {
    /// Bytes held by memory streams.
    pub memory: u64,
    /// Bytes held by file streams.
    pub storage: u64,
    pub reserved_memory: u64,
    pub reserved_storage: u64,
    pub streams: i64,
    pub consumers: i64,
    pub limits: AccountLimits,
}

/// Account limits; -1 = unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AccountLimits {
    pub max_memory: i64,
    pub max_storage: i64,
    pub max_streams: i64,
    pub max_consumers: i64,
    pub max_ack_pending: i64,
    pub memory_max_stream_bytes: i64,
    pub storage_max_stream_bytes: i64,
    /// When true natscli insists on a `max_bytes` for new streams.
    pub max_bytes_required: bool,
}

impl Default for AccountLimits {
    /// No limits, as a server with JetStream enabled and no account limits reports.
    fn default() -> Self {
        Self {
            max_memory: -1,
            max_storage: -1,
            max_streams: -1,
            max_consumers: -1,
            max_ack_pending: -1,
            memory_max_stream_bytes: -1,
            storage_max_stream_bytes: -1,
            max_bytes_required: false,
        }
    }
}

/// API counters and the advertised API level (feature gate for clients: 1 = 2.11 features).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiStats {
    pub level: i64,
    pub total: u64,
    pub errors: u64,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_u64")]
    pub inflight: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unlimited_account_matches_nats_server_shape() {
        let info = AccountInfo {
            usage: AccountUsage {
                storage: 1234,
                streams: 1,
                consumers: 1,
                ..AccountUsage::default()
            },
            api: ApiStats {
                level: 1,
                total: 10,
                errors: 0,
                inflight: 0,
            },
            ..AccountInfo::default()
        };
        assert_eq!(
            serde_json::to_value(&info).unwrap(),
            json!({"memory":0,"storage":1234,"reserved_memory":0,"reserved_storage":0,
                   "streams":1,"consumers":1,
                   "limits":{"max_memory":-1,"max_storage":-1,"max_streams":-1,
                     "max_consumers":-1,"max_ack_pending":-1,"memory_max_stream_bytes":-1,
                     "storage_max_stream_bytes":-1,"max_bytes_required":false},
                   "api":{"level":1,"total":10,"errors":0}})
        );
        let back: AccountInfo =
            serde_json::from_value(serde_json::to_value(&info).unwrap()).unwrap();
        assert_eq!(back, info);
    }
}
