//! A segment summary file (`jetstream::stream_machine`'s `summary.rs`, ADR 0028 and 0037)
//! over arbitrary bytes, read as a restart's load reads it. Never a panic; every record that
//! decodes, written again as a version-2 record, reads back the same messages; and one
//! flipped bit in a file that checks out is always caught.
//!
//! Input: a control byte, then the file. Control bit 0 set = recompute the file's crc32c (its
//! bytes 1..5, over everything after them) so the fuzzer reaches the records; bit 1 set = if
//! the file checks out, flip bit `(control byte) * 31 + 7` of what follows its version byte
//! (modulo its size) and check the damage is refused.

use crate::jetstream::stream_machine::summary_fuzz;

const HEADER: usize = 5;

/// One run of the target over the fuzzer's input (`fuzz/fuzz_targets/` calls it; the corpus
/// replay test too). Panics on a finding.
pub fn run(data: &[u8]) {
    let Some((&control, file)) = data.split_first() else {
        return;
    };
    let mut file = file.to_vec();
    if control & 1 != 0 && file.len() >= HEADER {
        let crc = crc32c::crc32c(&file[HEADER..]);
        file[1..HEADER].copy_from_slice(&crc.to_le_bytes());
    }
    let Some(blocks) = summary_fuzz::read(file.clone()) else {
        return;
    };
    // A version-1 record may hold no message (a block never does; the load then finds the
    // block not starting at its key): nothing to write again.
    for msgs in blocks.iter().filter_map(|(_, msgs)| msgs.as_ref()) {
        if !msgs.is_empty() {
            let again = summary_fuzz::reencoded(msgs).expect("a record written reads back");
            assert_eq!(&again, msgs, "a record written again reads back another");
        }
    }
    if control & 2 != 0 && file.len() > HEADER {
        let bits = (file.len() - 1) * 8;
        let bit = (usize::from(control) * 31 + 7) % bits + 8;
        let mut damaged = file;
        damaged[bit / 8] ^= 1 << (bit % 8);
        assert!(
            summary_fuzz::read(damaged).is_none(),
            "flip of bit {bit} not detected"
        );
    }
}
