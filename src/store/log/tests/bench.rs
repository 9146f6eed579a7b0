//! Throughput and fsync batching of the log on this machine's disk. Not a timed test: run by
//! hand with `cargo test --release --lib store::log::tests::bench -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::support::*;
use crate::store::log::LogOp;

struct Run {
    appends: u64,
    fsyncs: u64,
    elapsed: Duration,
}

async fn run(tasks: u64, writes_per_task: u64, entries_per_write: u64, size: usize) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = open(dir.path());
    let before = engine.stats();
    let started = Instant::now();
    let mut handles = Vec::new();
    for group in 1..=tasks {
        let engine = engine.clone();
        handles.push(tokio::spawn(async move {
            let payload = Bytes::from(vec![b'm'; size]);
            let mut next = 1;
            for _ in 0..writes_per_task {
                let ops = (0..entries_per_write)
                    .map(|offset| LogOp::Append {
                        group,
                        index: next + offset,
                        payload: payload.clone(),
                    })
                    .collect();
                next += entries_per_write;
                engine.write(ops).await.unwrap();
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    let elapsed = started.elapsed();
    let stats = engine.stats();
    Run {
        appends: stats.appends - before.appends,
        fsyncs: stats.fsyncs - before.fsyncs,
        elapsed,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark; run by hand"]
async fn append_throughput() {
    println!(
        "tasks x writes x entries/write, 128 B entries: appends, fsyncs, appends/fsync, appends/s"
    );
    for (tasks, writes, per_write) in [
        (1, 2000, 1),
        (8, 500, 1),
        (64, 100, 1),
        (256, 40, 1),
        (64, 50, 10),
    ] {
        let run = run(tasks, writes, per_write, 128).await;
        println!(
            "{tasks:>4} x {writes:>5} x {per_write:>2}: {:>6} appends, {:>5} fsyncs, {:>7.1} appends/fsync, {:>9.0} appends/s",
            run.appends,
            run.fsyncs,
            run.appends as f64 / run.fsyncs as f64,
            run.appends as f64 / run.elapsed.as_secs_f64()
        );
    }
}
