//! A message block that fails its checksum (ADR 0018): `load` refuses it, and a read after
//! `load` serves no body, answers with the damage and reports it for the group, so the
//! group's replica is set aside and rebuilt (or its stream taken offline). Over the
//! `tests_load` harness.

use super::keys;
use super::segments::{Locator, Segments};
use super::tests_load::{append_cmd, Harness};
use super::StreamMachine;
use crate::consensus::state_db::{key, SPACE_DATA};
use crate::consensus::{GroupMachine, MachineError};
use crate::jsapi::stream_config::StreamConfig;

/// Flips one bit of stored block `first`, behind every check but its own checksum: in the
/// segment file its locator names (or in the sled value of a block kept in sled, which
/// sled stores with a valid record checksum of its own).
fn flip_in_block(harness: &Harness, first: u64, byte: usize) {
    let full = key(9, SPACE_DATA, &keys::block(first));
    let mut value = harness.tree().get(&full).unwrap().unwrap().to_vec();
    if let Some(locator) = Locator::decode(&value).unwrap() {
        use std::os::unix::fs::FileExt;
        let path = Segments::open(harness.view.files_dir())
            .unwrap()
            .path(locator.segment);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let at = locator.offset + (byte % locator.len as usize) as u64;
        let mut bit = [0u8];
        file.read_exact_at(&mut bit, at).unwrap();
        file.write_all_at(&[bit[0] ^ 0x10], at).unwrap();
        return;
    }
    let at = byte % value.len();
    value[at] ^= 0x10;
    harness.tree().insert(full, value).unwrap();
}

fn with_messages() -> Harness {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    harness.apply(&[append_cmd("s.a", 1), append_cmd("s.b", 2)]);
    harness
}

#[test]
fn load_refuses_a_block_failing_its_checksum() {
    for byte in [1, 7, 40] {
        let harness = with_messages();
        flip_in_block(&harness, 1, byte);
        let (mut machine, _) =
            StreamMachine::new(StreamConfig::new("S", &["s.>"]), Default::default());
        let loaded = machine.load(&harness.view);
        assert!(
            matches!(&loaded, Err(e @ MachineError::Checksum { .. }) if e.is_damage()),
            "byte {byte}: {loaded:?}"
        );
    }
}

#[test]
fn a_block_damaged_after_load_serves_no_body_and_reports_the_group() {
    let harness = with_messages();
    // Loaded while intact; the block is read from sled on first use (a fresh cache).
    let stream = harness.reloaded_view();
    flip_in_block(&harness, 1, 30);
    assert!(stream.message(1).is_none(), "an altered body was served");
    assert!(stream.messages(&[1, 2]).iter().all(Option::is_none));
    let reason = harness.db.damage().reason(9).expect("damage reported");
    assert!(reason.contains("checksum"), "{reason}");
    assert_eq!(stream.store().damage(), Some(reason));
    // Other groups of the node are not affected.
    assert_eq!(harness.db.damage().groups(), vec![9]);
}

#[test]
fn a_panic_reading_the_store_is_a_typed_error() {
    let caught = crate::consensus::machine::catching(|| -> u8 { panic!("sled page") });
    assert!(
        matches!(&caught, Err(e @ MachineError::ReadPanicked(m)) if m == "sled page" && e.is_damage()),
        "{caught:?}"
    );
}

#[test]
fn a_damaged_block_never_leaves_in_a_snapshot() {
    use crate::consensus::snapshot::{write_checked_dump, DamagedRecord};
    let harness = with_messages();
    let dir = tempfile::tempdir().unwrap();
    let export = harness.machine.stored_value_export();
    let meta = Default::default();
    let intact = write_checked_dump(harness.tree(), 9, &meta, &dir.path().join("a"), &*export);
    assert!(intact.is_ok(), "{intact:?}");
    flip_in_block(&harness, 1, 12);
    let error = write_checked_dump(harness.tree(), 9, &meta, &dir.path().join("b"), &*export)
        .expect_err("a damaged block was dumped");
    assert!(
        error.get_ref().is_some_and(|e| e.is::<DamagedRecord>()),
        "{error}"
    );
}
