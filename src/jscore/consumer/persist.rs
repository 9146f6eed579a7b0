//! Exporting and importing a `ConsumerState`, for the stream group's state machine, which
//! keeps consumers in sled (`jetstream::stream_machine`): the config, the positions
//! (`ConsumerExport`) and the pending entries, which are stored one key each so an ack
//! rewrites one of them. The delivery policy is derived from the config again.
//!
//! No behaviour of the consumer depends on this file: `import(export(c)) == c`, except the
//! creation time, which is stored with the config and set by the loader.

use std::collections::BTreeMap;

use crate::jsapi::consumer_config::ConsumerConfig;

use super::pending::{PendingEntry, PendingSet};
use super::policy::DeliveryPolicy;
use super::start::LastPerSubjectPlan;
use super::state::{ConsumerState, SequencePair};

/// A consumer's state apart from its config and its pending entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerExport {
    pub next_consumer_seq: u64,
    pub next_stream_seq: u64,
    pub ack_floor: SequencePair,
    /// Messages out of deliveries → delivery count.
    pub exhausted: BTreeMap<u64, u64>,
    pub last_per_subject: Option<LastPerSubjectPlan>,
}

impl ConsumerState {
    pub fn export(&self) -> ConsumerExport {
        ConsumerExport {
            next_consumer_seq: self.next_consumer_seq,
            next_stream_seq: self.next_stream_seq,
            ack_floor: self.ack_floor,
            exhausted: self.exhausted.clone(),
            last_per_subject: self.last_per_subject.clone(),
        }
    }

    /// The pending entries by stream sequence, ascending.
    pub fn pending(&self) -> &PendingSet {
        &self.pending
    }

    /// Rebuilds a consumer from its config, its export and its pending entries.
    pub fn import(
        config: ConsumerConfig,
        export: ConsumerExport,
        pending: impl IntoIterator<Item = (u64, PendingEntry)>,
    ) -> Self {
        let mut set = PendingSet::default();
        for (stream_seq, entry) in pending {
            set.insert(stream_seq, entry);
        }
        Self {
            policy: DeliveryPolicy::from_config(&config),
            config,
            next_consumer_seq: export.next_consumer_seq,
            next_stream_seq: export.next_stream_seq,
            ack_floor: export.ack_floor,
            pending: set,
            exhausted: export.exhausted,
            last_per_subject: export.last_per_subject,
            created_nanos: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig, DeliverPolicy};

    use super::super::tests_deliver::stream_with;
    use super::*;

    fn round_trip(consumer: &ConsumerState) -> ConsumerState {
        let pending: Vec<(u64, PendingEntry)> = consumer
            .pending()
            .iter()
            .map(|(seq, entry)| (seq, *entry))
            .collect();
        ConsumerState::import(consumer.config().clone(), consumer.export(), pending)
    }

    #[test]
    fn import_of_the_export_is_the_same_consumer() {
        let stream = stream_with(&["s.a", "s.b", "s.a", "s.c", "s.b"]);
        let config = ConsumerConfig {
            ack_policy: AckPolicy::Explicit,
            deliver_policy: DeliverPolicy::LastPerSubject,
            ack_wait: 10,
            max_deliver: 2,
            ..Default::default()
        };
        let mut consumer = ConsumerState::new(config, &stream);
        assert!(consumer.export().last_per_subject.is_some());
        assert_eq!(round_trip(&consumer), consumer);
        consumer.deliver_next(&stream, 2, 0);
        consumer.ack(3);
        assert_eq!(round_trip(&consumer), consumer);
        // Redeliver until the remaining message runs out of deliveries.
        consumer.deliver_next(&stream, 5, 20);
        consumer.deliver_next(&stream, 5, 40);
        assert!(!consumer.export().exhausted.is_empty());
        assert_eq!(round_trip(&consumer), consumer);
    }
}
