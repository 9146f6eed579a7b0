use super::*;
use crate::jetstream::stream_machine::keys::{encode_block, BlockMsg};

/// A segment file of one block of one message; its path and the block's extent.
fn one_block_segment(dir: &Path) -> (PathBuf, (u64, u32)) {
    let block = encode_block([BlockMsg {
        seq: 1,
        subject: "s.a",
        headers: None,
        payload: b"body",
        ts_nanos: 7,
    }]);
    let path = dir.join("00000001.seg");
    std::fs::write(&path, &block).unwrap();
    (path, (0, block.len() as u32))
}

#[test]
fn a_record_read_back_is_the_record_written() {
    let msg = |seq, payload: &'static [u8]| BlockMsg {
        seq,
        subject: "s.a",
        headers: None,
        payload,
        ts_nanos: 7 + seq as i64,
    };
    let first = encode_record(0, 100, &[msg(1, b"one"), msg(2, b"two")]);
    let second = encode_record(100, 60, &[msg(3, b"three")]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000001.sum");
    write(&path, &[first.clone(), second.clone()]).unwrap();
    let read = SegmentSummary::read(&path).expect("a summary just written");
    assert_eq!(read.record(0, 100), Some(first.clone()));
    assert_eq!(read.record(100, 60), Some(second.clone()));
    assert_eq!(read.record(100, 61), None, "another block's length");
    assert_eq!(read.records(), BTreeMap::from([(0, first), (100, second)]));
}

#[test]
fn a_version_1_summary_reads_and_is_written_anew_in_version_2() {
    let headers = b"NATS/1.0\r\nNats-TTL: 5s\r\n\r\n";
    let msgs = [
        BlockMsg {
            seq: 4,
            subject: "s.a",
            headers: None,
            payload: b"one",
            ts_nanos: 70,
        },
        BlockMsg {
            seq: 6,
            subject: "s.b",
            headers: Some(headers),
            payload: b"three",
            ts_nanos: 69,
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000001.sum");
    let tmp = write_version_aside(&path, SUMMARY_V1, &[encode_record_v1(0, 100, &msgs)]);
    std::fs::rename(tmp.unwrap(), &path).unwrap();
    let read = SegmentSummary::read(&path).expect("a version-1 summary");
    let locator = Locator {
        segment: 1,
        offset: 0,
        len: 100,
    };
    let mut seen = Vec::new();
    assert!(read.for_each(locator, |msg, slot| seen.push((msg, slot))));
    let expected: Vec<(MsgMetaRef<'_>, usize)> =
        msgs.iter().map(MsgMetaRef::from).zip([0, 1]).collect();
    assert_eq!(seen, expected);
    // Carried into a summary written now: in version 2.
    let current = encode_record(0, 100, &msgs);
    assert_eq!(read.record(0, 100), Some(current.clone()));
    assert_eq!(read.records(), BTreeMap::from([(0, current)]));
    assert_eq!(read.record(0, 99), None, "another block's length");
}

#[test]
fn a_summary_is_put_in_place_only_while_its_segment_is_not_retired() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, extent) = one_block_segment(dir.path());
    let summary = dir.path().join("00000001.sum");
    let retired = Retired::default();
    summarize(&segment, &summary, &[extent], &retired).unwrap();
    let read = SegmentSummary::read(&summary).expect("written while not retired");
    let locator = Locator {
        segment: 1,
        offset: extent.0,
        len: extent.1,
    };
    let mut seqs = Vec::new();
    assert!(read.for_each(locator, |msg, _| seqs.push(msg.seq)));
    assert_eq!(seqs, [1]);

    // Retired before the worker gets to it, or while it reads the blocks: nothing stays,
    // not even the temporary file.
    std::fs::remove_file(&summary).unwrap();
    retired.set();
    summarize(&segment, &summary, &[extent], &retired).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["00000001.seg"]);
}
