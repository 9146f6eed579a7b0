//! `UpdateConfig`: a new (already validated) config replaces the old one, and any limit it
//! tightened is enforced at once, as nats-server's store `UpdateConfig` does.
//!
//! Replicated: applied from the log with the time in the command, so expiry by a new
//! `max_age` removes the same messages everywhere.

use crate::jsapi::stream_config::StreamConfig;

use super::limits::StreamLimits;
use super::state::StreamState;

impl StreamState {
    /// Installs `config` and returns the sequences removed by the new limits. Validation of
    /// what may change (storage type, retention to/from workqueue, unsealing, …) is the API
    /// layer's job (`StreamConfig::validate_update`) before the command is proposed.
    pub fn update_config(&mut self, config: StreamConfig, now_nanos: i64) -> Vec<u64> {
        self.limits = StreamLimits::from_config(&config);
        self.config = config;
        // The TTL raise depends on the config: back to own deadlines (`ttl_index.rs`).
        self.ttls.lower_all();
        let mut removed = self.enforce_per_subject_limit_everywhere();
        removed.extend(self.enforce_stream_limits());
        removed.extend(self.expire_without_markers(now_nanos));
        removed
    }
}
