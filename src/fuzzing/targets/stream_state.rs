//! A stream group's stored state (`jetstream::stream_machine`'s sled keys and records, the
//! `keys.rs` decoders) loaded by its `StreamMachine` as at a restart or after a snapshot,
//! then committed commands applied to what loaded (through `crate::fuzzing`): a damaged or
//! inconsistent state is a typed error, never a panic, also in the applies that follow.
//!
//! Input: frames (`crate::fuzzing::seeds::frames`): key, value, key, value, ... up to an
//! empty frame, then one frame per command: its kind (u16 LE) and its payload.

use crate::consensus::Command;
use crate::fuzzing::seeds::frames;
use crate::fuzzing::StreamStateFixture;

/// Applies per input, so that one input cannot run for long.
const MAX_COMMANDS: usize = 32;

/// One run of the target over the fuzzer's input (`fuzz/fuzz_targets/` calls it; the corpus
/// replay test too). Panics on a finding.
pub fn run(data: &[u8]) {
    let parts = frames(data);
    let split = parts
        .iter()
        .position(|part| part.is_empty())
        .unwrap_or(parts.len());
    let records: Vec<(Vec<u8>, Vec<u8>)> = parts[..split]
        .chunks_exact(2)
        .map(|pair| (pair[0].to_vec(), pair[1].to_vec()))
        .collect();
    let commands: Vec<Command> = parts
        .get(split + 1..)
        .unwrap_or_default()
        .iter()
        .filter_map(|part| part.split_first_chunk::<2>())
        .take(MAX_COMMANDS)
        .map(|(kind, payload)| Command::new(u16::from_le_bytes(*kind), payload.to_vec()))
        .collect();
    let _ = StreamStateFixture::shared().load_and_apply(&records, &commands);
}
