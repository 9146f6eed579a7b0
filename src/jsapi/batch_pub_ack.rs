//! The PubAck that answers an atomic batch's commit (ADR-50): the stream, the sequence of
//! the batch's last message, and `batch` (its id) and `count` (how many were stored), as
//! nats-server 2.15 sends it: `{"stream":"S","seq":3,"batch":"b1","count":3}`. A separate
//! type from `PubAck` (its hand-written JSON is the lone publish's hot path).

use serde::Serialize;

#[derive(Debug, Serialize)]
struct BatchPubAck<'a> {
    stream: &'a str,
    seq: u64,
    batch: &'a str,
    count: usize,
}

/// The commit's PubAck as JSON.
pub fn batch_pub_ack_json(stream: &str, seq: u64, batch: &str, count: usize) -> Vec<u8> {
    let ack = BatchPubAck {
        stream,
        seq,
        batch,
        count,
    };
    serde_json::to_vec(&ack).expect("a PubAck serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_ack_is_nats_servers() {
        assert_eq!(
            batch_pub_ack_json("T", 3, "b1", 3),
            br#"{"stream":"T","seq":3,"batch":"b1","count":3}"#
        );
    }
}
