//! `MetaMap` against a `BTreeMap`: random appends, out-of-order inserts, front and interior
//! removals, gaps of whole chunks, seals and range queries from both ends (seeded xorshift)
//! give the same answers whatever layout each chunk has; and the layouts and their memory
//! follow the stream's shape.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::chunk_key::MetaChunks;
use super::message::MsgMeta;
use super::meta_map::MetaMap;
use super::meta_spill::VecSpill;
use super::subject_index::SubjectId;
use crate::jscore::xorshift::XorShift;

fn meta(ts_nanos: i64, size: u32, subject: u32) -> MsgMeta {
    MsgMeta {
        ts_nanos,
        size,
        subject: SubjectId::from_raw(subject),
    }
}

/// A message whose fields spread as `shape` says: 0 all alike, 1 narrow, 2 wide.
fn random_meta(rng: &mut XorShift, seq: u64, shape: u64) -> MsgMeta {
    match shape {
        0 => meta(1_000, 64, 1),
        1 => meta(
            1_700_000_000_000_000_000 + seq as i64 * 1_000 + rng.below(900) as i64,
            100 + rng.below(200) as u32,
            1 + rng.below(3) as u32,
        ),
        _ => meta(
            rng.below(u64::MAX) as i64,
            rng.below(u64::from(u32::MAX)) as u32,
            1 + rng.below(100_000) as u32,
        ),
    }
}

fn assert_same(map: &MetaMap, model: &BTreeMap<u64, MsgMeta>, rng: &mut XorShift, context: &str) {
    assert_eq!(map.len(), model.len(), "{context}: len");
    assert_eq!(map.is_empty(), model.is_empty(), "{context}: is_empty");
    let pair = |(seq, meta): (&u64, &MsgMeta)| (*seq, *meta);
    assert_eq!(map.first(), model.first_key_value().map(pair), "{context}");
    assert_eq!(map.last(), model.last_key_value().map(pair), "{context}");
    let all: Vec<(u64, MsgMeta)> = model.iter().map(pair).collect();
    assert_eq!(map.iter().collect::<Vec<_>>(), all, "{context}: iter");
    let reversed: Vec<(u64, MsgMeta)> = all.iter().rev().copied().collect();
    assert_eq!(
        map.iter().rev().collect::<Vec<_>>(),
        reversed,
        "{context}: rev"
    );
    let top = model.last_key_value().map_or(10, |(seq, _)| seq + 10);
    for _ in 0..20 {
        let probe = rng.below(top);
        assert_eq!(
            map.get(probe),
            model.get(&probe).copied(),
            "{context}: get {probe}"
        );
        assert_eq!(
            map.count_after(probe),
            model.range(probe + 1..).count() as u64,
            "{context}: count_after {probe}"
        );
        let end = probe + rng.below(10_000);
        let ranged: Vec<(u64, MsgMeta)> = model.range(probe..end).map(pair).collect();
        assert_eq!(
            map.range(probe..end).collect::<Vec<_>>(),
            ranged,
            "{context}: range {probe}..{end}"
        );
        // Both ends at once meet in the middle without repeats.
        let mut both = map.range(probe..=end);
        let mut seen = Vec::new();
        loop {
            let item = match seen.len() % 2 {
                0 => both.next(),
                _ => both.next_back(),
            };
            match item {
                Some((seq, _)) => seen.push(seq),
                None => break,
            }
        }
        seen.sort_unstable();
        let expected: Vec<u64> = model.range(probe..=end).map(|(seq, _)| *seq).collect();
        assert_eq!(seen, expected, "{context}: both ends {probe}..={end}");
    }
    assert_eq!(map.count_after(0), model.len() as u64);
    assert_eq!(map.count_after(u64::MAX - 1), 0);
}

#[test]
fn answers_as_a_btreemap_whatever_the_layouts() {
    answers_as_a_btreemap(None);
}

/// The same with a spill that keeps no sealed chunk in memory (every change sends its chunk
/// straight back out, and the garbage is compacted many times over) or one.
#[test]
fn answers_as_a_btreemap_whatever_is_out_of_memory() {
    answers_as_a_btreemap(Some(0));
    answers_as_a_btreemap(Some(1));
}

fn answers_as_a_btreemap(keep: Option<usize>) {
    for (seed, shape) in [(7u64, 0u64), (11, 1), (13, 2), (17, 1)] {
        let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut map = MetaMap::new();
        if let Some(keep) = keep {
            map.spill_to(Arc::new(VecSpill::default()), keep);
        }
        let mut model = BTreeMap::new();
        let mut next = 1 + rng.below(5_000);
        for round in 0..60 {
            for _ in 0..rng.below(3_000) {
                let m = random_meta(&mut rng, next, shape);
                assert_eq!(map.insert(next, m), model.insert(next, m));
                next += 1 + u64::from(rng.below(10) == 0) * rng.below(50);
            }
            match rng.below(8) {
                // A work queue: the oldest go.
                0 | 1 => {
                    let doomed: Vec<u64> = model
                        .keys()
                        .take(rng.below(2_500) as usize)
                        .copied()
                        .collect();
                    for seq in doomed {
                        assert_eq!(map.remove(seq), model.remove(&seq));
                    }
                }
                // Interior deletes, most of them (chunks turn to `few`).
                2 => {
                    let doomed: Vec<u64> = model
                        .keys()
                        .filter(|_| rng.below(10) != 0)
                        .copied()
                        .collect();
                    for seq in doomed {
                        assert_eq!(map.remove(seq), model.remove(&seq));
                    }
                }
                // Out of order: rewrites and inserts below the end (chunks open again).
                3 => {
                    for _ in 0..200 {
                        let seq = 1 + rng.below(next);
                        let m = random_meta(&mut rng, seq, shape);
                        assert_eq!(map.insert(seq, m), model.insert(seq, m));
                    }
                }
                // Skipping ahead over whole chunks.
                4 => next += rng.below(100_000),
                // A seal, and a restore's, which seals the tail too.
                5 => map.seal(),
                6 => map.seal_all(),
                _ => {
                    let seq = 1 + rng.below(next);
                    assert_eq!(map.remove(seq), model.remove(&seq));
                }
            }
            assert_same(
                &map,
                &model,
                &mut rng,
                &format!("seed {seed} keep {keep:?} round {round}"),
            );
            if let Some(keep) = keep {
                let here = map.layouts().iter().filter(|(_, l)| *l != "away").count();
                // The tail, and the chunks touched last.
                assert!(
                    here <= keep + 1,
                    "seed {seed} round {round}: {here} in memory"
                );
                let (live, garbage) = map.spill_bytes().unwrap();
                assert!(
                    garbage < (1 << 20) || garbage <= live,
                    "compacted: {live} {garbage}"
                );
            }
        }
        let copy = map.clone();
        assert_eq!(copy, map, "seed {seed}: a copy");
        let rebuilt: MetaMap = model.iter().map(|(seq, m)| (*seq, *m)).collect();
        assert_eq!(rebuilt, map, "seed {seed}: the same map built in order");
        map.clear();
        assert!(map.is_empty());
        assert_eq!(map.iter().next(), None);
    }
}

#[test]
fn chunks_seal_as_appends_move_on_and_empty_ones_go() {
    const L: u64 = MetaChunks::LEN as u64;
    let mut map = MetaMap::new();
    for seq in 1..=3 * L {
        map.insert(seq, meta(seq as i64 * 1_000, 1_054, 1));
    }
    // Sequence 3 * L is the first of chunk 3: it sealed chunk 2.
    assert_eq!(
        map.layouts(),
        vec![(0, "packed"), (1, "packed"), (2, "packed"), (3, "open")]
    );
    // Most of chunk 1 goes: it becomes a short list.
    for seq in L..2 * L - L / 32 {
        map.remove(seq);
    }
    assert_eq!(map.layouts()[1], (1, "few"));
    // An insert into a packed chunk opens it.
    map.insert(5, meta(1, 1, 1));
    assert_eq!(map.layouts()[0], (0, "open"));
    // Chunk 1 emptied goes; the restore-like seal packs chunk 0 again.
    for seq in 2 * L - 32..2 * L {
        map.remove(seq);
    }
    map.seal();
    assert_eq!(
        map.layouts(),
        vec![(0, "packed"), (2, "packed"), (3, "open")]
    );
    // A restore's seal packs the tail as well (a few messages: a list), which takes the next
    // appends.
    let mut restored = map.clone();
    restored.seal_all();
    assert_eq!(
        restored.layouts(),
        vec![(0, "packed"), (2, "packed"), (3, "few")]
    );
    let last = restored.last().unwrap().0;
    restored.insert(last + 1, meta(7, 7, 1));
    assert_eq!(restored.get(last + 1), Some(meta(7, 7, 1)));
    assert_eq!(restored.len(), map.len() + 1);
    // A chunk of a few live messages seals into a list.
    let mut sparse = MetaMap::new();
    for seq in (0..L).step_by(L as usize / 8) {
        sparse.insert(seq, meta(seq as i64, 10, 2));
    }
    sparse.insert(L, meta(0, 10, 2));
    assert_eq!(sparse.layouts(), vec![(0, "few"), (1, "open")]);
}

#[test]
fn a_busy_stream_of_one_subject_keeps_a_few_bytes_a_message() {
    let count = 1_000_000u64;
    let mut map = MetaMap::new();
    // 1 KiB messages, 15 µs apart with jitter.
    let mut rng = XorShift(3);
    for seq in 1..=count {
        let ts = 1_700_000_000_000_000_000 + seq as i64 * 15_000 + rng.below(5_000) as i64;
        map.insert(seq, meta(ts, 1_054, 1));
    }
    let per_message = map.heap_bytes() as f64 / count as f64;
    assert!(per_message < 5.0, "{per_message} bytes a message");
    // Sizes and subjects that vary within a chunk cost a byte or two more each.
    let mut varied = MetaMap::new();
    for seq in 1..=count {
        let ts = 1_700_000_000_000_000_000 + seq as i64 * 15_000;
        let size = 100 + rng.below(1_000) as u32;
        varied.insert(seq, meta(ts, size, 1 + rng.below(100) as u32));
    }
    let per_message = varied.heap_bytes() as f64 / count as f64;
    assert!(per_message < 8.0, "{per_message} bytes a message");
}

#[test]
fn a_slow_stream_keeps_its_times_in_as_few_bytes_as_their_spread_needs() {
    // 15 messages a second: a chunk of 256 spans about 17 s, which needs 5 bytes of
    // nanoseconds (an 8-byte column before), and its headers under a byte a message.
    let mut rng = XorShift(5);
    let times: Vec<i64> = (1..=100_000i64)
        .map(|seq| 1_700_000_000_000_000_000 + seq * 66_000_000 + rng.below(1_000) as i64)
        .collect();
    let mut map = MetaMap::new();
    for (seq, ts) in (1u64..).zip(&times) {
        map.insert(seq, meta(*ts, 1_054, 1));
    }
    map.seal_all();
    let per_message = map.heap_bytes() as f64 / times.len() as f64;
    assert!(per_message < 6.0, "{per_message} bytes a message");
    for (seq, ts) in (1u64..).zip(&times) {
        assert_eq!(map.get(seq), Some(meta(*ts, 1_054, 1)), "seq {seq}");
    }
}

#[test]
fn a_spilled_stream_keeps_a_bounded_few_chunks_in_memory() {
    const L: u64 = MetaChunks::LEN as u64;
    let spill = Arc::new(VecSpill::default());
    let mut map = MetaMap::new();
    map.spill_to(spill.clone(), 2);
    // 15 messages a second, one subject: ~5 bytes a message packed.
    let at = |seq: u64| 1_700_000_000_000_000_000 + seq as i64 * 66_000_000;
    let count = 200 * L;
    for seq in 1..=count {
        map.insert(seq, meta(at(seq), 1_054, 1));
    }
    let layouts = map.layouts();
    let here: Vec<_> = layouts.iter().filter(|(_, l)| *l != "away").collect();
    assert_eq!(here.len(), 3, "the tail and the two sealed last: {here:?}");
    assert!(map.heap_bytes() < 64 * 1024, "{} bytes", map.heap_bytes());
    let (live, garbage) = map.spill_bytes().unwrap();
    assert!(live > 4 * count, "{live} bytes out for {count} messages");
    assert_eq!(garbage, 0);
    // Reads from anywhere, memory unchanged.
    assert_eq!(map.get(5), Some(meta(at(5), 1_054, 1)));
    assert_eq!(map.range(L..L + 3).count(), 3);
    assert_eq!(map.first(), Some((1, meta(at(1), 1_054, 1))));
    assert_eq!(map.count_after(10 * L), count - 10 * L);
    assert_eq!(map.layouts(), layouts);
    // A work queue consuming from the front brings the head chunk in, and the ones before
    // the tail go out again.
    for seq in 1..=3 * L {
        assert!(map.remove(seq).is_some());
    }
    assert_eq!(map.first().map(|(seq, _)| seq), Some(3 * L + 1));
    // The chunks it emptied no longer count toward the two kept: the one sealed last stays.
    let layouts = map.layouts();
    let here: Vec<_> = layouts.iter().filter(|(_, l)| *l != "away").collect();
    assert_eq!(
        here.len(),
        3,
        "the tail, the head and the one sealed last: {here:?}"
    );
    // Removing a sequence no longer stored leaves its chunk out of memory, nothing read back
    // into it and no garbage made.
    let old = 100 * L + 5;
    assert!(map.remove(old).is_some());
    for seq in [101 * L + 5, 102 * L + 5] {
        assert!(map.remove(seq).is_some());
    }
    let (_, garbage) = map.spill_bytes().unwrap();
    let layouts = map.layouts();
    assert!(layouts.contains(&(100, "away")), "{layouts:?}");
    assert_eq!(map.remove(old), None);
    assert_eq!(map.layouts(), layouts);
    assert_eq!(map.spill_bytes().unwrap().1, garbage);
    // Clearing empties the spill too.
    map.clear();
    assert_eq!(map.spill_bytes(), Some((0, 0)));
    assert!(map.is_empty());
}

#[test]
fn a_restore_writes_its_spill_in_batches_and_leaves_nothing_waiting() {
    use super::tests_append::{config, publish};
    use super::StreamState;
    const L: u64 = MetaChunks::LEN as u64;
    // More chunks than a restore keeps in memory (256), so most go to the spill.
    let count = 300 * L;
    let mut stream = StreamState::new(config(&["s.>"]));
    for at in 0..count {
        publish(&mut stream, "s.a", at as i64);
    }
    let spill = Arc::new(VecSpill::default());
    let mut restoring = StreamState::restoring();
    restoring.spill_metadata_to(spill.clone());
    for seq in 1..=count {
        restoring.push(seq, stream.get(seq).unwrap(), None);
    }
    let (waiting, writes) = spill.waits_and_writes();
    assert!(waiting > 0, "chunks went out");
    assert_eq!(writes, 0, "none written one at a time");
    let mut restored =
        StreamState::restore_from(stream.config().clone(), stream.scalars(), restoring, []);
    assert_eq!(
        spill.waits_and_writes(),
        (0, 1),
        "all of them in one write at the end"
    );
    assert_eq!(restored, stream);
    // After the restore, a chunk sealed and sent out is written at once.
    for at in count..count + 3 * L {
        publish(&mut restored, "s.a", at as i64);
    }
    let (waiting, writes) = spill.waits_and_writes();
    assert_eq!(waiting, 0);
    assert!(writes > 1, "{writes} writes");
}
