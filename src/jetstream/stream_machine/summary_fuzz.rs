//! Summaries over bytes in memory, for `crate::fuzzing` (nothing else calls it).

#[cfg(test)]
use super::keys::BlockMsg;
#[cfg(test)]
use super::summary::{
    encode_record, encode_record_v1, write_version_aside, SUMMARY_V1, SUMMARY_V2,
};
use super::summary::{MsgMetaRef, SegmentSummary};
use super::summary_shaped;

/// A message of a record as read: sequence, subject, headers, payload length, time.
pub type Msg = (u64, String, Option<Vec<u8>>, usize, i64);
/// A record's block (offset, length) and its messages (`None`: they do not decode whole).
pub type Block = ((u64, u32), Option<Vec<Msg>>);

fn owned(msg: MsgMetaRef<'_>) -> Msg {
    let headers = msg.headers.map(<[u8]>::to_vec);
    let subject = msg.subject.to_string();
    (msg.seq, subject, headers, msg.payload_len, msg.ts_nanos)
}

/// The summary file in `bytes` as a load reads it: `None` when it does not check out,
/// else each record's [`Block`].
pub fn read(bytes: Vec<u8>) -> Option<Vec<Block>> {
    let summary = SegmentSummary::from_bytes(bytes)?;
    let blocks = summary
        .blocks
        .iter()
        .map(|(&offset, (len, range))| {
            let mut msgs = Vec::new();
            let decoded = summary.each_of(range, |msg, _| msgs.push(owned(msg)));
            ((offset, *len), decoded.then_some(msgs))
        })
        .collect();
    Some(blocks)
}

/// `msgs` (a record's, in order) written as a version-2 record and read back.
pub fn reencoded(msgs: &[Msg]) -> Option<Vec<Msg>> {
    let metas: Vec<MsgMetaRef<'_>> = msgs
        .iter()
        .map(
            |(seq, subject, headers, payload_len, ts_nanos)| MsgMetaRef {
                seq: *seq,
                subject,
                headers: headers.as_deref(),
                payload_len: *payload_len,
                ts_nanos: *ts_nanos,
            },
        )
        .collect();
    let bytes = summary_shaped::encode(&metas);
    let read = summary_shaped::decode(&bytes)?;
    Some(read.into_iter().map(|(msg, _)| owned(msg)).collect())
}

/// Two summary files of the same two blocks, in version 2 and in version 1: the fuzz
/// target's seeds.
#[cfg(test)]
pub fn sample_files() -> Vec<Vec<u8>> {
    let headers = b"NATS/1.0\r\nNats-TTL: 5s\r\n\r\n";
    let msg = |seq: u64, subject, headers, payload| BlockMsg {
        seq,
        subject,
        headers,
        payload,
        ts_nanos: 1_700_000_000_000_000_000 + 15_000 * seq as i64,
    };
    let uniform: Vec<BlockMsg<'_>> = (1..=4)
        .map(|seq| msg(seq, "orders.new", None, b"body"))
        .collect();
    let mixed = [
        msg(5, "orders.new", Some(&headers[..]), b"x"),
        msg(7, "orders.old", None, b""),
    ];
    let dir = tempfile::tempdir().expect("a scratch directory");
    let path = dir.path().join("00000001.sum");
    let mut files = Vec::new();
    for (version, encode) in [
        (
            SUMMARY_V2,
            encode_record as fn(u64, u32, &[BlockMsg<'_>]) -> Vec<u8>,
        ),
        (SUMMARY_V1, encode_record_v1),
    ] {
        let records = [encode(0, 100, &uniform), encode(100, 60, &mixed)];
        let tmp = write_version_aside(&path, version, &records).expect("written");
        files.push(std::fs::read(tmp).expect("read back"));
    }
    files
}
