//! The snapshot reader (`consensus::snapshot`, through `crate::fuzzing`) over arbitrary
//! bytes, then what a follower does with a snapshot that verified: its records become the
//! stream group's sled keys and the `StreamMachine` loads them. Never a panic; reading the
//! records agrees with verifying; and one flipped bit in a valid snapshot is always caught.
//!
//! Input: a control byte, then the snapshot file. Control bit 0 set = recompute the trailing
//! CRC over the (mutated) bytes, so the fuzzer reaches the records and the machine; bit 1 set
//! = if that snapshot verifies, flip bit `(control byte) * 31 + 7` (modulo its size) and check
//! the damage is refused.

use crate::fuzzing::{snapshot_records, verify_snapshot, StreamStateFixture};

/// One run of the target over the fuzzer's input (`fuzz/fuzz_targets/` calls it; the corpus
/// replay test too). Panics on a finding.
pub fn run(data: &[u8]) {
    let Some((&control, file)) = data.split_first() else {
        return;
    };
    let mut file = file.to_vec();
    if control & 1 != 0 && file.len() >= 4 {
        let body = file.len() - 4;
        let crc = crc32c::crc32c(&file[..body]);
        file[body..].copy_from_slice(&crc.to_le_bytes());
    }
    let Ok(meta) = verify_snapshot(&file) else {
        return;
    };
    let (read_meta, records) = snapshot_records(&file).expect("a verified snapshot reads");
    assert_eq!(meta, read_meta);
    if control & 2 != 0 {
        let bit = (usize::from(control) * 31 + 7) % (file.len() * 8);
        let mut damaged = file.clone();
        damaged[bit / 8] ^= 1 << (bit % 8);
        assert!(
            verify_snapshot(&damaged).is_err(),
            "flip of bit {bit} not detected"
        );
    }
    let _ = StreamStateFixture::shared().load_and_apply(&records, &[]);
}
