//! Concurrent writers from many groups share fsyncs.

use std::time::Instant;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_share_fsyncs() {
    const TASKS: u64 = 8;
    const WRITES: u64 = 200;
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = open(dir.path());
    let before = engine.stats();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for group in 1..=TASKS {
        let engine = engine.clone();
        tasks.push(tokio::spawn(async move {
            for index in 1..=WRITES {
                engine.write(vec![append(group, index)]).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    let stats = engine.stats();
    let writes = stats.writes - before.writes;
    let fsyncs = stats.fsyncs - before.fsyncs;
    let batches = stats.batches - before.batches;
    println!(
        "{writes} writes from {TASKS} tasks: {batches} batches, {fsyncs} fsyncs \
         ({:.2} fsyncs/write) in {elapsed:?} ({:.0} writes/s)",
        fsyncs as f64 / writes as f64,
        writes as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(writes, TASKS * WRITES);
    assert_eq!(stats.appends - before.appends, TASKS * WRITES);
    assert_eq!(fsyncs, batches, "one fsync per batch, nothing else");
    assert!(
        fsyncs * 2 <= writes,
        "group commit should at least halve the fsyncs: {fsyncs} for {writes} writes"
    );
    drop(engine);
    let (engine, _) = open(dir.path());
    for group in 1..=TASKS {
        assert_eq!(indices(&engine, group), (1..=WRITES).collect::<Vec<_>>());
    }
}
