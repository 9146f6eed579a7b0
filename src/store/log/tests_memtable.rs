//! Unit tests of the in-memory log ([`Tables`]): Raft log semantics, validation, undo and
//! the index bound.

use bytes::Bytes;

use super::error::LogError;
use super::memtable::*;
use super::types::{LogOp, MetaKey};

fn append(group: u64, index: u64) -> LogOp {
    LogOp::Append {
        group,
        index,
        payload: Bytes::from(format!("{group}/{index}")),
    }
}

fn indices(tables: &Tables, group: u64) -> Vec<u64> {
    let entries = tables.entries(group, ..).unwrap();
    for (index, payload) in &entries {
        assert_eq!(payload, &Bytes::from(format!("{group}/{index}")));
    }
    entries.into_iter().map(|(index, _)| index).collect()
}

#[test]
fn raft_log_semantics() {
    let mut tables = Tables::default();
    let ops: Vec<LogOp> = (5..=10).map(|index| append(1, index)).collect();
    tables.apply_submitted(&ops).unwrap();
    assert_eq!(indices(&tables, 1), vec![5, 6, 7, 8, 9, 10]);
    assert!(matches!(
        tables.apply_submitted(&[append(1, 12)]),
        Err(LogError::NonContiguous { expected: 11, .. })
    ));
    tables
        .apply_submitted(&[LogOp::TruncateFrom { group: 1, index: 8 }, append(1, 8)])
        .unwrap();
    assert_eq!(indices(&tables, 1), vec![5, 6, 7, 8]);
    tables
        .apply_submitted(&[LogOp::PurgeUpTo { group: 1, index: 6 }])
        .unwrap();
    assert_eq!(indices(&tables, 1), vec![7, 8]);
    assert_eq!(tables.first_index(1), Some(7));
    assert_eq!(tables.last_purged(1), Some(6));
    assert!(matches!(
        tables.apply_submitted(&[LogOp::TruncateFrom { group: 1, index: 6 }]),
        Err(LogError::TruncatePurged { purged: 6, .. })
    ));
    // Purge beyond the last entry (snapshot installed ahead of the log).
    tables
        .apply_submitted(&[LogOp::PurgeUpTo {
            group: 1,
            index: 20,
        }])
        .unwrap();
    assert_eq!(tables.last_index(1), None);
    assert_eq!(tables.first_index(1), None);
    assert!(tables.apply_submitted(&[append(1, 20)]).is_err());
    tables.apply_submitted(&[append(1, 21)]).unwrap();
    assert_eq!(indices(&tables, 1), vec![21]);
    assert_eq!(tables.entries(1, 22..).unwrap(), vec![]);
    assert_eq!(tables.entries(1, ..21).unwrap(), vec![]);
}

#[test]
fn invalid_op_leaves_no_trace() {
    let mut tables = Tables::default();
    tables.apply_submitted(&[append(3, 1)]).unwrap();
    let bad = [
        LogOp::SetMeta {
            group: 3,
            key: MetaKey::VOTE,
            value: Bytes::from_static(b"v"),
        },
        append(3, 2),
        append(4, 1),
        append(3, 9),
    ];
    assert!(tables.apply_submitted(&bad).is_err());
    assert_eq!(indices(&tables, 3), vec![1]);
    assert_eq!(tables.meta(3, MetaKey::VOTE), None);
    assert_eq!(tables.groups(), vec![3]);
}

#[test]
fn an_index_above_the_bound_is_refused() {
    let mut tables = Tables::default();
    let too_large = [
        append(3, MAX_INDEX + 1),
        LogOp::PurgeUpTo {
            group: 3,
            index: u64::MAX,
        },
    ];
    for op in too_large {
        assert!(matches!(
            tables.apply_submitted(std::slice::from_ref(&op)),
            Err(LogError::IndexTooLarge { group: 3, .. })
        ));
    }
    assert_eq!(tables.groups(), Vec::<u64>::new());
    // The bound itself is an index; the next one is refused as not contiguous, without
    // overflowing.
    tables.apply_submitted(&[append(3, MAX_INDEX)]).unwrap();
    assert_eq!(indices(&tables, 3), vec![MAX_INDEX]);
    assert!(tables.apply_submitted(&[append(3, 1)]).is_err());
}

#[test]
fn undo_restores_every_kind_of_op() {
    let mut tables = Tables::default();
    let setup: Vec<LogOp> = (1..=10).map(|index| append(1, index)).collect();
    tables.apply_submitted(&setup).unwrap();
    tables
        .apply_submitted(&[LogOp::PurgeUpTo { group: 1, index: 2 }])
        .unwrap();
    let undo = tables
        .apply_submitted(&[
            LogOp::TruncateFrom { group: 1, index: 8 },
            append(1, 8),
            LogOp::PurgeUpTo { group: 1, index: 5 },
            LogOp::SetMeta {
                group: 1,
                key: MetaKey::VOTE,
                value: Bytes::from_static(b"v"),
            },
            append(2, 1),
            LogOp::DropGroup { group: 1 },
        ])
        .unwrap();
    assert_eq!(tables.groups(), vec![2]);
    tables.undo(undo);
    assert_eq!(tables.groups(), vec![1]);
    assert_eq!(indices(&tables, 1), (3..=10).collect::<Vec<_>>());
    assert_eq!(tables.last_purged(1), Some(2));
    assert_eq!(tables.meta(1, MetaKey::VOTE), None);
}

/// The node-wide count of resident payload bytes equals the sum over every group's live
/// entries after any mix of appends, truncations, purges, drops and undos.
#[test]
fn resident_bytes_follow_every_kind_of_op_and_undo() {
    fn sum(tables: &Tables, groups: &[u64]) -> u64 {
        groups
            .iter()
            .flat_map(|group| tables.entries(*group, ..).unwrap())
            .map(|(_, payload)| payload.len() as u64)
            .sum()
    }
    let groups = [1, 2, 3];
    let mut tables = Tables::default();
    let resident = tables.resident();
    for group in groups {
        let ops: Vec<LogOp> = (1..=20).map(|index| append(group, index)).collect();
        tables.apply_submitted(&ops).unwrap();
    }
    assert_eq!(resident.bytes(), sum(&tables, &groups));
    assert!(resident.bytes() > 0);
    let largest = tables.largest(2);
    assert_eq!(largest.len(), 2);
    assert!(largest[0].1 >= largest[1].1);
    tables
        .apply_submitted(&[
            LogOp::TruncateFrom {
                group: 1,
                index: 15,
            },
            LogOp::PurgeUpTo { group: 2, index: 9 },
        ])
        .unwrap();
    assert_eq!(resident.bytes(), sum(&tables, &groups));
    let undo = tables
        .apply_submitted(&[
            LogOp::DropGroup { group: 3 },
            LogOp::PurgeUpTo { group: 1, index: 3 },
            append(2, 21),
        ])
        .unwrap();
    assert_eq!(tables.entries(3, ..).unwrap().len(), 0);
    tables.undo(undo);
    assert_eq!(tables.entries(3, ..).unwrap().len(), 20);
    assert_eq!(resident.bytes(), sum(&tables, &groups));
    // A dropped group's entries leave the count once nothing holds them.
    let undo = tables
        .apply_submitted(&[LogOp::DropGroup { group: 3 }])
        .unwrap();
    drop(undo);
    assert_eq!(resident.bytes(), sum(&tables, &groups));
    assert_eq!(
        tables.largest(10).iter().filter(|(g, _)| *g == 3).count(),
        0
    );
    drop(tables);
    assert_eq!(resident.bytes(), 0);
}
