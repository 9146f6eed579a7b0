//! Disk full and I/O errors: the failed write returns an error, nothing acknowledged is lost,
//! nothing failed is visible (now or after recovery), and the engine keeps working.

use std::sync::Arc;

use bytes::Bytes;

use super::support::*;
use crate::store::log::{FaultInjector, LogError, LogOp, LogOptions, MetaKey};

fn with_faults() -> (LogOptions, Arc<FaultInjector>) {
    let fault = Arc::new(FaultInjector::new());
    let options = LogOptions {
        fault: Some(Arc::clone(&fault)),
        ..small_segments()
    };
    (options, fault)
}

#[tokio::test]
async fn disk_full_mid_batch_then_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (options, fault) = with_faults();
    {
        let (engine, _) = open_with(dir.path(), options.clone());
        engine.write(appends(1, 1..=10)).await.unwrap();
        let segment = newest_segment(dir.path());
        let durable_len = file_len(&segment);

        // The disk fills up 40 bytes into a write that spans two groups.
        fault.fail_next_write_after(40);
        let failed = engine
            .write(vec![
                append(1, 11),
                append(2, 1),
                LogOp::SetMeta {
                    group: 1,
                    key: MetaKey::VOTE,
                    value: Bytes::from_static(b"v"),
                },
            ])
            .await;
        let error = failed.expect_err("write must fail");
        assert!(matches!(error, LogError::WriteFailed(_)), "{error:?}");
        assert!(error.is_disk_full());
        assert_eq!(fault.fired(), 1);
        // Rolled back in memory and cut back on disk.
        assert_eq!(indices(&engine, 1), (1..=10).collect::<Vec<_>>());
        assert_eq!(engine.groups(), vec![1]);
        assert_eq!(engine.meta(1, MetaKey::VOTE), None);
        assert_eq!(file_len(&segment), durable_len);

        // A failed fsync is handled the same way.
        fault.fail_next_sync();
        assert!(engine.write(appends(1, 11..=11)).await.is_err());
        assert_eq!(engine.last_index(1), Some(10));
        assert_eq!(file_len(&segment), durable_len);

        // Space is back: the next write succeeds at the same index.
        engine.write(appends(1, 11..=12)).await.unwrap();
        engine.write(appends(2, 1..=1)).await.unwrap();
        assert_eq!(engine.stats().failed_batches, 2);
    }
    let (engine, report) = open_with(dir.path(), super::support::options());
    assert!(
        report.torn_tail.is_none(),
        "the failed batches were cut back"
    );
    assert!(report.corruptions.is_empty());
    assert_eq!(indices(&engine, 1), (1..=12).collect::<Vec<_>>());
    assert_eq!(indices(&engine, 2), vec![1]);
    assert_eq!(engine.meta(1, MetaKey::VOTE), None);
}

#[tokio::test]
async fn failure_while_rotating_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (options, fault) = with_faults();
    let mut acknowledged = 0;
    {
        let (engine, _) = open_with(dir.path(), options);
        let big = |index: u64| LogOp::Append {
            group: 1,
            index,
            payload: Bytes::from(vec![7u8; 500]),
        };
        // Fail every 3rd write at a varying point, across several rotations (seals, new
        // segment headers and checkpoints all go through the failing write path).
        for attempt in 0..60u64 {
            if attempt % 3 == 2 {
                fault.fail_next_write_after(attempt * 7 % 90);
            }
            match engine.write(vec![big(acknowledged + 1)]).await {
                Ok(()) => acknowledged += 1,
                Err(error) => assert!(error.is_disk_full(), "{error:?}"),
            }
            assert_eq!(engine.last_index(1), Some(acknowledged).filter(|n| *n > 0));
        }
        assert!(engine.stats().segments_created > 3);
    }
    let (engine, report) = open_with(dir.path(), super::support::options());
    assert!(report.corruptions.is_empty(), "{report:?}");
    let found: Vec<u64> = engine.entries(1, ..).unwrap().iter().map(|e| e.0).collect();
    assert_eq!(found, (1..=acknowledged).collect::<Vec<_>>());
}

#[tokio::test]
async fn failed_cut_back_breaks_the_engine_until_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let (options, fault) = with_faults();
    {
        let (engine, _) = open_with(dir.path(), options);
        engine.write(appends(1, 1..=3)).await.unwrap();
        fault.fail_next_write_after(50);
        fault.fail_next_truncate();
        let error = engine.write(appends(1, 4..=5)).await.unwrap_err();
        assert!(matches!(error, LogError::Broken(_)), "{error:?}");
        assert!(matches!(
            engine.write(appends(1, 4..=4)).await,
            Err(LogError::Broken(_))
        ));
        assert_eq!(engine.last_index(1), Some(3));
    }
    // Recovery cuts the half-written batch as a torn tail.
    let (engine, report) = open_with(dir.path(), super::support::options());
    assert_eq!(report.torn_tail.expect("torn tail").bytes_cut, 50);
    assert_eq!(indices(&engine, 1), vec![1, 2, 3]);
    engine.write(appends(1, 4..=4)).await.unwrap();
}
