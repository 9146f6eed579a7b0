//! Unit tests of the state writer (`state_writer.rs`): order, flushes, gathering, failed
//! owners and files, and a writer thread that outlives a panic.

use super::*;

fn tree() -> (sled::Db, sled::Tree) {
    let db = sled::Config::new().temporary(true).open().unwrap();
    let tree = db.open_tree("t").unwrap();
    (db, tree)
}

#[test]
fn writes_land_in_order_and_flush_waits_for_them() {
    let (_db, tree) = tree();
    let writer = StateWriter::start(tree.clone()).unwrap();
    let owner = writer.new_owner();
    for i in 0..500u32 {
        let value = Bytes::from(i.to_be_bytes().to_vec());
        writer
            .submit(owner, vec![(b"k".to_vec(), Some(value))])
            .unwrap();
    }
    writer
        .submit(
            owner,
            vec![(b"gone".to_vec(), Some(Bytes::from_static(b"x")))],
        )
        .unwrap();
    let last = writer
        .submit(owner, vec![(b"gone".to_vec(), None)])
        .unwrap();
    assert_eq!(last, 502, "tickets count the batches in queue order");
    writer.flush(owner).unwrap();
    assert_eq!(writer.written(), last);
    assert_eq!(
        tree.get(b"k").unwrap().unwrap().as_ref(),
        499u32.to_be_bytes()
    );
    assert!(tree.get(b"gone").unwrap().is_none());
}

#[test]
fn a_flush_waits_for_after_written_calls_and_returns_at_once_when_all_is_done() {
    let (_db, tree) = tree();
    let writer = Arc::new(StateWriter::start(tree.clone()).unwrap());
    let owner = writer.new_owner();
    // The batch's after-written call holds the writer's thread until released.
    let (release, held) = mpsc::channel::<()>();
    let (entered, in_call) = mpsc::channel::<()>();
    let files = FileEffects {
        after_written: vec![AfterWritten(Box::new(move || {
            entered.send(()).unwrap();
            held.recv().unwrap();
        }))],
        ..FileEffects::default()
    };
    let ticket = writer
        .submit_with(
            owner,
            vec![(b"a".to_vec(), Some(Bytes::from_static(b"1")))],
            files,
        )
        .unwrap();
    in_call.recv().unwrap();
    assert_eq!(writer.written(), ticket, "written, its call still running");
    let (flushed, done) = mpsc::channel();
    let flusher = {
        let writer = writer.clone();
        thread::spawn(move || {
            writer.flush_all().unwrap();
            flushed.send(()).unwrap();
        })
    };
    assert!(
        done.recv_timeout(std::time::Duration::from_millis(50))
            .is_err(),
        "a flush returned before the batch's after-written call ran"
    );
    release.send(()).unwrap();
    done.recv().unwrap();
    flusher.join().unwrap();
    // Nothing queued since: a flush has nothing to wait for.
    writer.flush_all().unwrap();
    assert_eq!(tree.get(b"a").unwrap().unwrap().as_ref(), b"1");
}

#[test]
fn a_call_after_a_write_that_panics_leaves_the_writer_running() {
    let (_db, tree) = tree();
    let writer = StateWriter::start(tree.clone()).unwrap();
    let owner = writer.new_owner();
    let files = FileEffects {
        after_written: vec![AfterWritten(Box::new(|| panic!("a reader's bug")))],
        ..FileEffects::default()
    };
    writer
        .submit_with(
            owner,
            vec![(b"a".to_vec(), Some(Bytes::from_static(b"1")))],
            files,
        )
        .unwrap();
    writer.flush(owner).unwrap();
    // The thread lives on: a later batch is written and a flush answered.
    writer
        .submit(owner, vec![(b"b".to_vec(), Some(Bytes::from_static(b"2")))])
        .unwrap();
    writer.flush(owner).unwrap();
    assert_eq!(tree.get(b"a").unwrap().unwrap().as_ref(), b"1");
    assert_eq!(tree.get(b"b").unwrap().unwrap().as_ref(), b"2");
}

#[test]
fn dropping_the_writer_writes_what_was_queued() {
    let (_db, tree) = tree();
    let writer = StateWriter::start(tree.clone()).unwrap();
    let owner = writer.new_owner();
    writer
        .submit(owner, vec![(b"a".to_vec(), Some(Bytes::from_static(b"1")))])
        .unwrap();
    drop(writer);
    assert_eq!(tree.get(b"a").unwrap().unwrap().as_ref(), b"1");
}

#[test]
fn a_lone_batch_is_written_once_the_gathering_window_ends_without_a_flush() {
    let (_db, tree) = tree();
    let writer = StateWriter::start(tree.clone()).unwrap();
    let owner = writer.new_owner();
    let ticket = writer
        .submit(owner, vec![(b"a".to_vec(), Some(Bytes::from_static(b"1")))])
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while writer.written() < ticket {
        assert!(std::time::Instant::now() < deadline, "never written");
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(tree.get(b"a").unwrap().unwrap().as_ref(), b"1");
}

#[test]
fn a_failed_owner_is_refused_and_others_go_on() {
    let (_db, tree) = tree();
    let writer = StateWriter::start(tree.clone()).unwrap();
    let (sick, healthy) = (writer.new_owner(), writer.new_owner());
    writer.shared.failed.lock().insert(
        sick,
        WriteBehindError::Failed(Arc::new(sled::Error::Unsupported("test".into()))),
    );
    assert!(writer
        .submit(sick, vec![(b"s".to_vec(), Some(Bytes::from_static(b"1")))])
        .is_err());
    writer
        .submit(
            healthy,
            vec![(b"h".to_vec(), Some(Bytes::from_static(b"1")))],
        )
        .unwrap();
    assert!(writer.flush(sick).is_err());
    writer.flush(healthy).unwrap();
    assert!(tree.get(b"s").unwrap().is_none());
    assert!(tree.get(b"h").unwrap().is_some());
    writer.release(sick);
    writer.flush(sick).unwrap();
}

#[test]
fn a_file_that_fails_to_sync_fails_only_the_batch_pointing_into_it() {
    let (_db, tree) = tree();
    let dir = tempfile::tempdir().unwrap();
    let writer = StateWriter::start(tree.clone()).unwrap();
    let owners: Vec<Owner> = (0..12).map(|_| writer.new_owner()).collect();
    let shared_file = Arc::new(File::create(dir.path().join("shared")).unwrap());
    for (i, owner) in owners.iter().enumerate() {
        let file = if i == 5 {
            // A pipe's write end: syncing it fails (fdatasync: EINVAL; with the
            // round's other files committed together, sync_file_range: ESPIPE).
            let (_reader, pipe) = std::io::pipe().unwrap();
            Arc::new(File::from(std::os::fd::OwnedFd::from(pipe)))
        } else {
            Arc::new(File::create(dir.path().join(i.to_string())).unwrap())
        };
        let files = FileEffects {
            sync_first: vec![file, shared_file.clone()],
            unlink_after_sync: Vec::new(),
            after_written: Vec::new(),
        };
        let key = format!("k{i}").into_bytes();
        writer
            .submit_with(*owner, vec![(key, Some(Bytes::from_static(b"v")))], files)
            .unwrap();
    }
    for (i, owner) in owners.iter().enumerate() {
        let key = format!("k{i}");
        if i == 5 {
            assert!(matches!(
                writer.flush(*owner),
                Err(WriteBehindError::FileSync(_))
            ));
            assert!(tree.get(&key).unwrap().is_none(), "{key}");
        } else {
            writer.flush(*owner).unwrap();
            assert!(tree.get(&key).unwrap().is_some(), "{key}");
        }
    }
}
