//! Consumers whose deliveries stay with their leader (ADR 0034): an `ack_policy: none`
//! consumer with `mem_storage` on a limits stream — what nats.go, async-nats and nats.py
//! create for every ordered consumer and KV watcher. nats-server keeps such a consumer's
//! state on one server in memory, replicated nowhere; here its leader delivers from a copy of
//! the replicated state that only it advances, so a delivery costs no Raft round.
//!
//! The replicated state stays what every replica applied (deliveries of such a consumer are
//! not commands), so nothing the group decides depends on the copy: under limits retention a
//! delivery to an ack-none consumer changes nothing but the consumer's own position. When the
//! stream leaves limits retention, or the leader changes, delivery goes on from the
//! replicated position (messages delivered from the copy may come again; an ordered consumer
//! sees its consumer sequence go back and starts over from the last message it got).
//!
//! The copy follows what the replicated state learns meanwhile: a new config (`update_config`)
//! and a purge that passed its position (`on_stream_purged`). A reset replaces it (the API
//! handler drops it once the reset is applied).

use crate::jsapi::consumer_config::AckPolicy;
use crate::jsapi::stream_config::RetentionPolicy;
use crate::jscore::stream::StreamState;

use super::state::ConsumerState;

impl ConsumerState {
    /// Whether this consumer's leader delivers from a copy of its own, unreplicated: it takes
    /// no acks, asked for memory storage, and its deliveries change nothing else in `stream`
    /// (limits retention: a delivery is no acknowledgement there).
    pub fn delivers_locally(&self, stream: &StreamState) -> bool {
        self.config.ack_policy == AckPolicy::None
            && self.config.mem_storage
            && stream.config().retention == RetentionPolicy::Limits
    }

    /// Brings a leader's copy (`self`) up to what `replicated` and `stream` learned since it
    /// was taken: the config, and a purge past the copy's position. Delivery state stays the
    /// copy's own.
    pub fn follow(&mut self, replicated: &ConsumerState, stream: &StreamState) {
        if self.config != replicated.config {
            self.update_config(replicated.config.clone());
        }
        if self.next_stream_seq < stream.first_seq() {
            self.on_stream_purged(stream);
        }
    }
}
