//! Ack sampling (`sample_freq`), as nats-server does it: for that percentage of a consumer's
//! acks of pending messages (explicit ack policy; `+ACK` and `+NXT`), the stream's leader
//! publishes a metric on `$JS.EVENT.METRIC.CONSUMER.ACK.<stream>.<consumer>` with the time
//! from the message's last delivery to its ack (`jsapi::advisory::AckMetric`).
//!
//! The ack batcher (`acks.rs`) asks `delivery_times` before it proposes a batch, since the
//! delivery time goes with the pending entry the ack removes, and publishes the metric for
//! each sampled ack the group then reports as acknowledged.

use crate::jetstream::stream_machine::StreamView;
use crate::jsapi::advisory::{AckMetric, Advisory};
use crate::jsapi::AckKind;
use crate::jscore::consumer::AckOutcome;

use super::acks::AckItem;

/// Whether an ack is sampled at `percent` for a `draw` in `0..100` (nats-server's rule:
/// `draw <= percent`, every ack from 100 on, none at 0).
fn sampled(percent: u32, draw: u32) -> bool {
    match percent {
        0 => false,
        100.. => true,
        _ => draw <= percent,
    }
}

/// For each of `items`, the last delivery time of its message when the ack is sampled.
/// One read of the stream state for the batch; a consumer's config is looked up once per
/// run of its acks.
pub(super) fn delivery_times<'a>(
    view: &StreamView,
    items: impl IntoIterator<Item = &'a AckItem>,
) -> Vec<Option<i64>> {
    view.read(|group| {
        let mut percent: Option<(&str, u32)> = None;
        items
            .into_iter()
            .map(|item| {
                if !matches!(item.kind, AckKind::Ack | AckKind::Next(_)) {
                    return None;
                }
                let rate = match percent {
                    Some((name, rate)) if name == item.consumer => rate,
                    _ => {
                        let rate = group.consumer(&item.consumer).map_or(0, |consumer| {
                            match consumer.policy().acks_cumulatively() {
                                true => 0,
                                false => consumer.config().sample_percent(),
                            }
                        });
                        percent = Some((&item.consumer, rate));
                        rate
                    }
                };
                if rate == 0 || !sampled(rate, rand::random_range(0..100)) {
                    return None;
                }
                let consumer = group.consumer(&item.consumer)?;
                let entry = consumer.pending_entry(item.stream_seq)?;
                Some(entry.last_delivered_nanos)
            })
            .collect()
    })
}

/// The metric of a sampled ack (delivered at `delivered_nanos`), once the group acknowledged
/// it at `now_nanos`; `None` when the ack found the message no longer pending.
pub(super) fn metric(
    stream: &str,
    item: &AckItem,
    outcome: &AckOutcome,
    delivered_nanos: i64,
    now_nanos: i64,
) -> Option<Advisory> {
    let AckOutcome::Acked { stream_seqs } = outcome else {
        return None;
    };
    if !stream_seqs.contains(&item.stream_seq) {
        return None;
    }
    Some(Advisory::AckMetric(AckMetric {
        stream: stream.to_owned(),
        consumer: item.consumer.clone(),
        consumer_seq: item.consumer_seq,
        stream_seq: item.stream_seq,
        ack_time: now_nanos.saturating_sub(delivered_nanos).max(0),
        deliveries: item.num_delivered,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampling_rule_is_nats_servers() {
        assert!((0..100).all(|draw| !sampled(0, draw)));
        assert!((0..100).all(|draw| sampled(100, draw)));
        assert!((0..100).all(|draw| sampled(250, draw)));
        let taken = (0..100).filter(|draw| sampled(30, *draw)).count();
        assert_eq!(taken, 31, "draws 0 to 30");
    }
}
