//! The `o/` keys: how far each mirror origin or source has been copied
//! (`jscore::sourcing::SourcePositions`), one key per origin, rewritten when its position
//! moves. Key `o/` ++ the origin key (UTF-8); value `VALUE_V1` ++ postcard u64 (the last
//! origin sequence copied). Added in layout 2 without a new layout version: a store without
//! `o/` keys has copied nothing (ADR 0017).

use std::collections::BTreeMap;

use super::keys;
use super::stage::Persisted;
use crate::consensus::{MachineError, MachineTxn, MachineView};
use crate::jscore::group::StreamGroup;
use crate::jscore::sourcing::SourcePositions;

/// Prefix of the origin position keys.
pub const SOURCE_PREFIX: &[u8] = b"o/";

fn key(source: &str) -> Vec<u8> {
    let mut key = SOURCE_PREFIX.to_vec();
    key.extend_from_slice(source.as_bytes());
    key
}

/// Stages the positions that moved since the last apply call (once per call, in `finish`).
pub fn stage_sources(persisted: &mut Persisted, group: &StreamGroup, txn: &mut MachineTxn<'_>) {
    for (source, position) in group.source_positions().iter() {
        if persisted.sources.get(source) != Some(&position) {
            txn.insert(key(source), keys::encode(&position));
            persisted.sources.insert(source.to_owned(), position);
        }
    }
}

/// The stored positions.
pub fn load_sources(view: &MachineView) -> Result<SourcePositions, MachineError> {
    let mut positions = BTreeMap::new();
    for item in view.scan_prefix(SOURCE_PREFIX) {
        let (stored_key, value) = item?;
        let source = std::str::from_utf8(&stored_key[SOURCE_PREFIX.len()..])
            .map_err(|_| MachineError::Corrupt(format!("bad key {stored_key:?}")))?;
        let position: u64 = keys::decode("source position", &value)?;
        positions.insert(source.to_owned(), position);
    }
    Ok(SourcePositions::from_map(positions))
}
