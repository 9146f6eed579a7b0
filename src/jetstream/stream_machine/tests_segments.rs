//! Message blocks in segment files (`segments.rs`, ADR 0022): what sled holds for them,
//! when their files go, and blocks still kept in sled. Over the `tests_load` harness.

use std::time::Instant;

use bytes::Bytes;

use super::keys;
use super::segments::{Locator, Segments, QUIET_FOR};
use super::summary::{self, SegmentSummary};
use super::tests_load::{append_cmd, encode, Harness};
use crate::consensus::state_db::{key, SPACE_DATA};
use crate::consensus::GroupMachine;
use crate::jsapi::stream_config::StreamConfig;
use crate::jscore::group::StreamCommand;
use crate::jscore::stream::{AppendRequest, PurgeRequest};

/// The names of the group's files ending in `suffix`, sorted.
fn files(harness: &Harness, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(harness.view.files_dir()) {
        Ok(entries) => entries
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(suffix))
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

fn segment_files(harness: &Harness) -> Vec<String> {
    files(harness, ".seg")
}

fn summary_files(harness: &Harness) -> Vec<String> {
    files(harness, ".sum")
}

fn block_value(harness: &Harness, first: u64) -> Bytes {
    harness.view.get(&keys::block(first)).unwrap().unwrap()
}

/// `count` appends of `size`-byte payloads, one apply call each (one block each).
fn fill(harness: &mut Harness, count: usize, size: usize) {
    for n in 0..count {
        harness.apply(&[encode(StreamCommand::Append(AppendRequest {
            subject: "s.big".into(),
            headers: None,
            payload: Bytes::from(vec![n as u8; size]),
            now_nanos: n as i64 + 1,
        }))]);
    }
}

#[test]
fn blocks_go_to_segment_files_and_sled_holds_their_locators() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    harness.apply(&[append_cmd("s.a", 1), append_cmd("s.b", 2)]);
    let first = Locator::decode(&block_value(&harness, 1)).unwrap().unwrap();
    assert_eq!(first.offset, 0);
    // A call of a message or two extends the last block (`extend.rs`): its locator grows
    // over a frame written right after it, and no key is added.
    harness.apply(&[append_cmd("s.c", 3)]);
    let grown = Locator::decode(&block_value(&harness, 1)).unwrap().unwrap();
    assert_eq!((grown.segment, grown.offset), (first.segment, 0));
    assert!(grown.len > first.len);
    assert_eq!(harness.keys_under(keys::BLOCK_PREFIX), vec![keys::block(1)]);
    assert_eq!(segment_files(&harness).len(), 1);
    assert_eq!(
        harness.view.get(keys::LAYOUT).unwrap().unwrap().as_ref(),
        [keys::LAYOUT_V4]
    );
    harness.check_reload("a block extended by a frame");
    // A block past 64 KiB takes no more: the next call starts one right after it.
    harness.apply(&[encode(StreamCommand::Append(AppendRequest {
        subject: "s.big".into(),
        headers: None,
        payload: Bytes::from(vec![7; 70 << 10]),
        now_nanos: 4,
    }))]);
    harness.apply(&[append_cmd("s.d", 5)]);
    let blocks = harness.keys_under(keys::BLOCK_PREFIX);
    assert_eq!(blocks, vec![keys::block(1), keys::block(5)]);
    let last = Locator::decode(&block_value(&harness, 5)).unwrap().unwrap();
    let big = Locator::decode(&block_value(&harness, 1)).unwrap().unwrap();
    assert_eq!(last.offset, u64::from(big.len));
    harness.check_reload("blocks in a segment");
}

#[test]
fn a_block_is_extended_while_it_is_last_in_the_active_segment() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    for n in 1..=600 {
        harness.apply(&[append_cmd("s.a", n)]);
        if n == 300 {
            // Frames waiting for their batch are served from memory, the rest from the block.
            harness.check_reload("frames pinned and written");
        }
    }
    // One message a call, under 64 KiB in all: one block of 600 frames, one key.
    assert_eq!(harness.keys_under(keys::BLOCK_PREFIX), vec![keys::block(1)]);
    harness.db.writer().flush_all().unwrap();
    let pinned = harness.stream.store().pinned();
    assert_eq!(
        pinned.blocks, 0,
        "nothing stays pinned once written: {pinned:?}"
    );
    harness.check_reload("a block of one-message frames");

    // A reload starts a new segment: the next call starts a block there, which the call
    // after it extends.
    let (machine, stream) =
        super::StreamMachine::new(StreamConfig::new("S", &["s.>"]), Default::default());
    harness.machine = machine;
    harness.stream = stream;
    harness.machine.load(&harness.view).unwrap();
    harness.apply(&[append_cmd("s.a", 601)]);
    harness.apply(&[append_cmd("s.a", 602)]);
    assert_eq!(
        harness.keys_under(keys::BLOCK_PREFIX),
        vec![keys::block(1), keys::block(601)]
    );
    harness.check_reload("a block started after a reload");
    // Deleting every message of the extended block removes it, frames and all.
    let deletes: Vec<_> = (601..=602)
        .map(|seq| encode(StreamCommand::DeleteMsg { seq }))
        .collect();
    harness.apply(&deletes);
    assert_eq!(harness.keys_under(keys::BLOCK_PREFIX), vec![keys::block(1)]);
    harness.check_reload("an extended block removed");
}

#[test]
fn a_segment_goes_once_its_blocks_are_gone_and_sled_forgot_them_durably() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    // Three segments' worth: 60 blocks of ~300 KiB, segments roll at 8 MiB.
    fill(&mut harness, 60, 300 << 10);
    let before = segment_files(&harness);
    assert!(before.len() >= 3, "{before:?}");
    harness.apply(&[encode(StreamCommand::Purge(PurgeRequest {
        filter: None,
        seq: 0,
        keep: 1,
    }))]);
    assert!(harness.keys_under(keys::BLOCK_PREFIX).len() == 1);
    // Not before sled's forgetting the blocks is durable.
    assert_eq!(segment_files(&harness), before);
    harness.db.sync().unwrap();
    let after = segment_files(&harness);
    assert_eq!(
        after,
        before[before.len() - 1..],
        "only the last block's segment"
    );
    harness.check_reload("after the purge");
    summary::settle();
    harness.db.sync().unwrap();
    let summaries = summary_files(&harness);
    assert!(
        summaries
            .iter()
            .all(|name| after.contains(&name.replace(".sum", ".seg"))),
        "the summaries of removed segments go with them: {summaries:?}, segments {after:?}"
    );
    // The emptied active segment is not written again: the next block opens a new one.
    harness.apply(&[encode(StreamCommand::Purge(PurgeRequest {
        filter: None,
        seq: 0,
        keep: 0,
    }))]);
    harness.apply(&[append_cmd("s.a", 100)]);
    harness.db.sync().unwrap();
    let last = segment_files(&harness);
    assert_eq!(last.len(), 1);
    assert!(last[0] > after[0], "{last:?} after {after:?}");
    harness.check_reload("after emptying the active segment");
}

#[test]
fn blocks_kept_in_sled_still_load_serve_and_leave_in_snapshots() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    harness.apply(&[append_cmd("s.a", 1), append_cmd("s.b", 2)]);
    // As layout 2 stored it (and a snapshot installs it): the block itself under `b/1`.
    let locator = Locator::decode(&block_value(&harness, 1)).unwrap().unwrap();
    let segments = Segments::open(harness.view.files_dir()).unwrap();
    let block = segments.read(locator).unwrap();
    let full = key(9, SPACE_DATA, &keys::block(1));
    harness.tree().insert(full, block.as_ref()).unwrap();
    harness
        .tree()
        .insert(key(9, SPACE_DATA, keys::LAYOUT), &[keys::LAYOUT_V2][..])
        .unwrap();
    // The harness goes on with a machine loaded from that (a machine keeps writing to the
    // segment it opened; the load removes the ones nothing points into).
    let (machine, stream) =
        super::StreamMachine::new(StreamConfig::new("S", &["s.>"]), Default::default());
    harness.machine = machine;
    harness.stream = stream;
    harness.machine.load(&harness.view).unwrap();
    assert_eq!(harness.stream.message(2).unwrap().subject, "s.b");
    // The reload let go of the segment no locator points into any more: it goes with the
    // next durable sync.
    assert_eq!(segment_files(&harness).len(), 1);
    harness.db.sync().unwrap();
    assert!(segment_files(&harness).is_empty());
    // A block in a segment leaves in a snapshot as the block itself, as one kept in sled.
    harness.apply(&[append_cmd("s.c", 3)]);
    let export = harness.machine.stored_value_export();
    let kept = block_value(&harness, 1);
    assert_eq!(export(&keys::block(1), &kept).unwrap(), None);
    let located = block_value(&harness, 3);
    let exported = export(&keys::block(3), &located).unwrap().unwrap();
    assert_eq!(keys::parse_block(&exported).unwrap()[0].seq, 3);
    harness.check_reload("a block in sled beside one in a segment");
}

#[test]
fn a_missing_segment_is_damage_at_load() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    harness.apply(&[append_cmd("s.a", 1)]);
    harness.db.writer().flush_all().unwrap();
    std::fs::remove_dir_all(harness.view.files_dir()).unwrap();
    let (mut machine, _) =
        super::StreamMachine::new(StreamConfig::new("S", &["s.>"]), Default::default());
    let loaded = machine.load(&harness.view);
    assert!(
        matches!(&loaded, Err(error) if error.is_damage()),
        "{loaded:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installed_snapshot_puts_its_blocks_in_segments() {
    use crate::consensus::restore::restore;
    use crate::consensus::snapshot::write_checked_dump;
    use crate::consensus::MachineView;
    use crate::jscore::group::StreamGroup;

    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    harness.apply(&[append_cmd("s.a", 1), append_cmd("s.b", 2)]);
    harness.apply(&[append_cmd("s.c", 3)]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snapshot");
    let export = harness.machine.stored_value_export();
    write_checked_dump(harness.tree(), 9, &Default::default(), &path, &*export).unwrap();

    // Installed as group 10 of the same node.
    let view = MachineView::new(harness.db.clone(), 10);
    let (mut machine, stream) =
        super::StreamMachine::new(StreamConfig::new("S", &["s.>"]), Default::default());
    let import = machine.stored_value_import(&view).unwrap();
    restore(harness.db.tree().clone(), 10, path, import)
        .await
        .unwrap();
    let blocks: Vec<Bytes> = view
        .scan_prefix(keys::BLOCK_PREFIX)
        .map(|item| item.unwrap().1)
        .collect();
    assert_eq!(blocks.len(), 1, "one block of two frames");
    for value in &blocks {
        assert!(
            Locator::decode(value).unwrap().is_some(),
            "a block stayed in sled"
        );
    }
    machine.load(&view).unwrap();
    assert_eq!(stream.read(StreamGroup::clone), harness.state());
    assert_eq!(stream.message(3).unwrap().subject, "s.c");
    assert_eq!(
        stream.message(1).unwrap().payload,
        harness.stream.message(1).unwrap().payload
    );
}

/// Flips one byte of segment `segment` at `offset`.
fn flip(harness: &Harness, segment: u32, offset: u64) {
    use std::os::unix::fs::FileExt;
    let path = Segments::open(harness.view.files_dir())
        .unwrap()
        .path(segment);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset).unwrap();
    file.write_all_at(&[byte[0] ^ 0x10], offset).unwrap();
}

#[test]
fn a_full_segment_gets_a_summary_that_a_load_reads_instead_of_its_blocks() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    fill(&mut harness, 60, 300 << 10);
    summary::settle();
    let segments = segment_files(&harness);
    let summaries = summary_files(&harness);
    assert!(segments.len() >= 3, "{segments:?}");
    // Every segment: the full ones whole, the active one (past 1 MiB) as far as it went.
    let expected: Vec<String> = segments
        .iter()
        .map(|name| name.replace(".seg", ".sum"))
        .collect();
    assert_eq!(summaries, expected);
    harness.check_reload("through the summaries");

    // A payload byte of the first block damaged: the load, reading the summary, does not
    // see it; a read of that message does, and serves no altered body.
    let locator = Locator::decode(&block_value(&harness, 1)).unwrap().unwrap();
    flip(
        &harness,
        locator.segment,
        locator.offset + u64::from(locator.len) - 100,
    );
    let reloaded = harness.reloaded_view();
    assert_eq!(reloaded.read(Clone::clone), harness.state());
    assert!(reloaded.message(1).is_none(), "an altered body was served");
    let reason = harness.db.damage().reason(9).expect("damage reported");
    assert!(reason.contains("checksum"), "{reason}");
}

#[test]
fn a_load_summarizes_the_segments_it_read_whole_and_ignores_a_damaged_summary() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    harness.apply(&[append_cmd("s.a", 1), append_cmd("s.b", 2)]);
    harness.apply(&[
        encode(StreamCommand::Append(AppendRequest {
            subject: "s.h".into(),
            headers: Some(Bytes::from_static(b"NATS/1.0\r\nNats-Msg-Id: x\r\n\r\n")),
            payload: Bytes::from_static(b"with headers"),
            now_nanos: -7,
        })),
        append_cmd("s.a", 4),
    ]);
    assert!(
        summary_files(&harness).is_empty(),
        "the active segment has none"
    );
    harness.check_reload("reading the blocks");
    let path = Segments::open(harness.view.files_dir())
        .unwrap()
        .summary_path(1);
    assert!(SegmentSummary::read(&path).is_some(), "the load wrote one");
    harness.check_reload("through the summary");

    // A damaged summary is ignored (its checksum), the blocks read and it is written again.
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    assert!(SegmentSummary::read(&path).is_none());
    harness.check_reload("with a damaged summary");
    assert!(SegmentSummary::read(&path).is_some(), "written again");
    // So is a torn one.
    std::fs::write(&path, &bytes[..middle]).unwrap();
    harness.check_reload("with a torn summary");
    assert!(SegmentSummary::read(&path).is_some(), "written again");
}

#[test]
fn the_active_segment_is_summarized_as_it_grows_and_a_load_completes_its_summary() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    // Blocks of ~100 KB: the eleventh takes the active segment past 1 MiB.
    fill(&mut harness, 10, 100_000);
    summary::settle();
    assert!(summary_files(&harness).is_empty(), "under 1 MiB: none yet");
    fill(&mut harness, 2, 100_000);
    summary::settle();
    let path = Segments::open(harness.view.files_dir())
        .unwrap()
        .summary_path(1);
    let located = |harness: &Harness, first: u64| {
        Locator::decode(&block_value(harness, first))
            .unwrap()
            .unwrap()
    };
    let described = |harness: &Harness| -> Vec<bool> {
        let summary = SegmentSummary::read(&path).expect("a summary");
        (1..=12)
            .map(|seq| {
                let locator = located(harness, seq);
                summary.record(locator.offset, locator.len).is_some()
            })
            .collect()
    };
    // Written when the segment passed 1 MiB: its first eleven blocks, not the twelfth.
    let mut expected = vec![true; 11];
    expected.push(false);
    assert_eq!(described(&harness), expected);

    // A load reads the twelfth whole and writes the summary of all twelve.
    harness.check_reload("through the partial summary and a block");
    assert_eq!(described(&harness), vec![true; 12]);
    harness.check_reload("through the completed summary");
}

#[test]
fn a_quiet_active_segment_is_summarized_when_its_group_compacts() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    // Three blocks of ~100 KB: far from the 1 MiB that summarizes a growing segment.
    fill(&mut harness, 3, 100_000);
    // A round right after the appends: the group is busy, nothing is summarized.
    harness.machine.snapshot_taken();
    summary::settle();
    assert!(summary_files(&harness).is_empty(), "busy: none yet");

    let segments = harness.machine.segments().expect("loaded");
    let later = Instant::now() + QUIET_FOR;
    assert!(segments.summarize_quiet_at(later), "quiet: summarized");
    assert!(!segments.summarize_quiet_at(later), "nothing new since");
    summary::settle();
    let summary = SegmentSummary::read(&segments.summary_path(1)).expect("a summary");
    for seq in 1..=3 {
        let locator = Locator::decode(&block_value(&harness, seq))
            .unwrap()
            .unwrap();
        assert!(
            summary.record(locator.offset, locator.len).is_some(),
            "block {seq} described"
        );
    }
    harness.check_reload("through the quiet segment's summary");
}
