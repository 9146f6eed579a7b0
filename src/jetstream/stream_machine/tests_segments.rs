//! Message blocks in segment files (`segments.rs`, ADR 0022): what sled holds for them,
//! when their files go, and blocks still kept in sled. Over the `tests_load` harness.

use bytes::Bytes;

use super::keys;
use super::segments::{Locator, Segments};
use super::tests_load::{append_cmd, encode, Harness};
use crate::consensus::state_db::{key, SPACE_DATA};
use crate::consensus::GroupMachine;
use crate::jsapi::stream_config::StreamConfig;
use crate::jscore::group::StreamCommand;
use crate::jscore::stream::{AppendRequest, PurgeRequest};

fn segment_files(harness: &Harness) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(harness.view.files_dir()) {
        Ok(entries) => entries
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
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
    harness.apply(&[append_cmd("s.c", 3)]);
    let first = Locator::decode(&block_value(&harness, 1)).unwrap().unwrap();
    let second = Locator::decode(&block_value(&harness, 3)).unwrap().unwrap();
    assert_eq!(first.segment, second.segment);
    assert_eq!(second.offset, u64::from(first.len));
    assert_eq!(segment_files(&harness).len(), 1);
    assert_eq!(
        harness.view.get(keys::LAYOUT).unwrap().unwrap().as_ref(),
        [keys::LAYOUT_V3]
    );
    harness.check_reload("blocks in a segment");
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
    assert_eq!(blocks.len(), 2);
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
