//! `SeqSet` against `BTreeSet`: random appends (some after gaps of thousands or millions),
//! front, interior and bulk removals (seeded xorshift) give the same answers whatever the
//! layout; consecutive sequences use bitmaps that turn back into lists when thinned; sparse
//! sets stay flat; and the memory per sequence stays within bounds.

use std::collections::BTreeSet;

use super::seq_set::SeqSet;
use crate::jscore::xorshift::XorShift;

/// Sequences that probe chunk edges (4095 | 4096), both ends of the set and around `near`.
fn probes(model: &BTreeSet<u64>, near: u64, random: u64) -> Vec<u64> {
    let mut probes = vec![0, 1, 4095, 4096, 4097, 8191, 8192, u64::MAX, random];
    let chunk = near & !4095;
    probes.extend([
        chunk,
        chunk.saturating_sub(1),
        chunk | 4095,
        (chunk | 4095) + 1,
    ]);
    probes.extend([near.saturating_sub(1), near, near + 1]);
    for end in [model.first(), model.last()].into_iter().flatten() {
        probes.extend([end.saturating_sub(1), *end, end + 1]);
    }
    probes
}

/// Cheap checks (every step): sizes, ends, probes and the chunks' invariants. `sorted` is
/// the model's sequences, to answer the probes by binary search.
fn assert_probes(set: &SeqSet, model: &BTreeSet<u64>, probes: &[u64], context: &str) {
    let sorted: Vec<u64> = model.iter().copied().collect();
    assert_eq!(set.len(), model.len(), "{context}: len");
    assert_eq!(set.is_empty(), model.is_empty(), "{context}: is_empty");
    assert_eq!(set.first(), model.first().copied(), "{context}: first");
    assert_eq!(set.last(), model.last().copied(), "{context}: last");
    for &p in probes {
        assert_eq!(
            set.contains(p),
            model.contains(&p),
            "{context}: contains {p}"
        );
        let at_or_below = sorted.partition_point(|&s| s <= p);
        let expected = at_or_below.checked_sub(1).map(|i| sorted[i]);
        assert_eq!(
            set.last_at_or_below(p),
            expected,
            "{context}: at or below {p}"
        );
        let expected = (sorted.len() - at_or_below) as u64;
        assert_eq!(set.count_after(p), expected, "{context}: count_after {p}");
    }
    // Flat until 64 sequences and 16 per chunk; chunked until below half of either.
    let mut chunks: Vec<u64> = sorted.iter().map(|s| s >> 12).collect();
    chunks.dedup();
    let (len, chunks) = (sorted.len(), chunks.len());
    let Some(layouts) = set.layouts() else {
        let thick = len >= 64 && len >= 16 * chunks;
        assert!(!thick, "{context}: flat with {len} in {chunks} chunks");
        return;
    };
    assert!(
        len >= 32 && len >= 8 * chunks,
        "{context}: {len} in {chunks} chunks"
    );
    assert_eq!(layouts.iter().map(|(_, _, n)| n).sum::<usize>(), set.len());
    for &(chunk, layout, count) in &layouts {
        let range = chunk << 12..=chunk << 12 | 4095;
        assert_eq!(
            count,
            model.range(range).count(),
            "{context}: chunk {chunk}"
        );
        match layout {
            "list" => assert!((1..=256).contains(&count), "{context}: list of {count}"),
            _ => assert!(
                (128..=4096).contains(&count),
                "{context}: bitmap of {count}"
            ),
        }
    }
}

/// Full checks: iteration both ways and a partly consumed iterator from both ends.
fn assert_iterates(set: &SeqSet, model: &BTreeSet<u64>, context: &str) {
    assert!(set.iter().eq(model.iter().copied()), "{context}: iter");
    assert!(
        set.iter().rev().eq(model.iter().rev().copied()),
        "{context}: rev"
    );
    let (mut ours, mut theirs) = (set.iter(), model.iter().copied());
    for i in 0..model.len() + 2 {
        match i % 3 {
            0 => assert_eq!(ours.next_back(), theirs.next_back(), "{context}: mixed"),
            _ => assert_eq!(ours.next(), theirs.next(), "{context}: mixed"),
        }
    }
    let half = model.len() / 2;
    assert!(set.iter().take(half).eq(model.iter().take(half).copied()));
}

#[test]
fn random_operations_answer_like_a_btree_set() {
    let (mut saw_flat, mut saw_list_after_bits) = (false, false);
    for seed in 1..=16u64 {
        let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (mut set, mut model) = (SeqSet::new(), BTreeSet::new());
        let mut next = rng.below(10_000);
        let mut bitmaps = BTreeSet::new();
        for step in 0..2_000 {
            let context = format!("seed {seed} step {step}");
            match rng.below(100) {
                // Append at the next sequence (the common case), sometimes after a gap.
                0..=44 => {
                    next += match rng.below(300) {
                        0 => 1_000_000,
                        1..=8 => rng.below(5_000),
                        9..=40 => rng.below(4),
                        _ => 0,
                    };
                    assert_eq!(set.insert(next), model.insert(next), "{context}");
                    next += 1;
                }
                // A burst of consecutive appends (one subject alone for a while).
                45..=46 => {
                    for _ in 0..rng.below(400) {
                        assert_eq!(set.insert(next), model.insert(next), "{context}");
                        next += 1;
                    }
                }
                // Remove the oldest (limits, acks in order, expiry), sometimes many.
                47..=66 => {
                    let count = if rng.below(20) == 0 { 300 } else { 1 };
                    for _ in 0..count {
                        if let Some(&seq) = model.first() {
                            assert!(set.remove(seq), "{context}: remove oldest {seq}");
                            model.remove(&seq);
                        }
                    }
                }
                // Remove one somewhere: present (found from a random point) or not.
                67..=86 => {
                    let at = rng.below(next + 2);
                    let seq = match rng.below(2) {
                        0 => model.range(at..).next().copied().unwrap_or(at),
                        _ => at,
                    };
                    assert_eq!(set.remove(seq), model.remove(&seq), "{context}: {seq}");
                }
                // Insert below the end: fill a hole, or a duplicate.
                87..=96 => {
                    let seq = rng.below(next + 1);
                    assert_eq!(set.insert(seq), model.insert(seq), "{context}: {seq}");
                }
                // Purge everything now and then.
                _ => {
                    if rng.below(10) == 0 {
                        set.clear();
                        model.clear();
                    }
                }
            }
            let near = model.range(rng.below(next + 1)..).next().copied();
            let probes = probes(&model, near.unwrap_or(next), rng.below(next + 3));
            assert_probes(&set, &model, &probes, &context);
            if step % 10 == 0 {
                assert_iterates(&set, &model, &context);
            }
            let layouts = set.layouts().unwrap_or_default();
            saw_flat |= layouts.is_empty() && !model.is_empty();
            for (chunk, layout, _) in layouts {
                saw_list_after_bits |= layout == "list" && bitmaps.contains(&chunk);
                if layout == "bits" {
                    bitmaps.insert(chunk);
                }
            }
        }
        assert_iterates(&set, &model, &format!("seed {seed} end"));
        assert!(!bitmaps.is_empty(), "seed {seed}: never a bitmap");
        // Built in other orders (so with other layouts): equal all the same.
        assert_eq!(
            set,
            model.iter().copied().collect::<SeqSet>(),
            "seed {seed}"
        );
        assert_eq!(set, model.iter().rev().copied().collect::<SeqSet>());
        let mut one_more = set.clone();
        one_more.insert(next + 5);
        assert_ne!(set, one_more);
    }
    assert!(saw_flat, "never flat");
    assert!(saw_list_after_bits, "no bitmap turned back into a list");
}

#[test]
fn consecutive_sequences_use_bitmaps_and_thinned_ones_lists() {
    let mut set: SeqSet = (0..3 * 4096).collect();
    let layouts = |set: &SeqSet| set.layouts().expect("chunked");
    let all_bits = vec![(0, "bits", 4096), (1, "bits", 4096), (2, "bits", 4096)];
    assert_eq!(layouts(&set), all_bits);
    // Thinned to 128 a bitmap stays (hysteresis); at 127 it is a list again.
    for seq in 4096..4096 + 3968 {
        assert!(set.remove(seq));
    }
    assert_eq!(layouts(&set)[1], (1, "bits", 128));
    assert!(set.remove(8064));
    assert_eq!(layouts(&set)[1], (1, "list", 127));
    assert_eq!(set.count_after(4095), 127 + 4096);
    // A list grows back to 256 offsets; the 257th makes it a bitmap.
    for seq in 4096..4096 + 129 {
        assert!(set.insert(seq));
    }
    assert_eq!(layouts(&set)[1], (1, "list", 256));
    assert!(!set.insert(4096), "already there");
    assert!(set.insert(5000));
    assert_eq!(layouts(&set)[1], (1, "bits", 257));
    // An emptied chunk goes.
    for seq in 4096..8192 {
        set.remove(seq);
    }
    let keys: Vec<u64> = layouts(&set).iter().map(|(k, _, _)| *k).collect();
    assert_eq!(keys, vec![0, 2]);
    assert_eq!(set.len(), 2 * 4096);
    assert_eq!(set.last_at_or_below(8191), Some(4095));
    assert_eq!(set.count_after(4095), 4096);
    assert_eq!(set.count_after(4094), 4097);
    assert_eq!(set.iter().nth(4096), Some(8192));
    assert_eq!(set.iter().rev().nth(4096), Some(4095));
    assert_eq!(
        set.iter().rev().take(2).collect::<Vec<_>>(),
        vec![12287, 12286]
    );
    // Same sequences, other layouts: equal.
    let mut bits: SeqSet = (0..300).collect();
    (0..140).for_each(|seq| assert!(bits.remove(seq)));
    let list: SeqSet = (140..300).collect();
    assert_ne!(bits.layouts(), list.layouts());
    assert_eq!(bits, list);
    assert_eq!(
        format!("{:?}", SeqSet::from_iter([3, 1, 2, 1])),
        "{1, 2, 3}"
    );
}

#[test]
fn sparse_sets_stay_flat_until_chunks_fill() {
    let one: SeqSet = [1_000_000].into_iter().collect();
    assert_eq!(one.layouts(), None);
    assert!(
        one.heap_bytes() <= 32,
        "one sequence: {} bytes",
        one.heap_bytes()
    );
    // Four per chunk: flat is cheaper than a chunk each.
    let thin: SeqSet = (1..=10_000u64).map(|i| i * 1_000).collect();
    assert_eq!(thin.layouts(), None);
    // Forty per chunk: chunked, and flat again once thinned below 8 per chunk.
    let mut set: SeqSet = (1..=1_000u64).map(|i| i * 100).collect();
    let chunks = set.layouts().expect("chunked").len();
    assert_eq!(chunks, 100_000 / 4096 + 1);
    for seq in (1..=1_000u64).map(|i| i * 100).filter(|s| s % 700 != 0) {
        set.remove(seq);
    }
    assert_eq!(set.layouts(), None);
    assert_eq!(set.len(), 142);
    assert_eq!(set.count_after(50_000), 142 - 71);
}

#[test]
fn memory_per_sequence_stays_small() {
    let dense: SeqSet = (1..=1_000_000).collect();
    assert!(
        dense.heap_bytes() < 200_000,
        "dense: {}",
        dense.heap_bytes()
    );
    // Every 100th of 10 M: 2 bytes per offset and a B-tree entry per 41 of them (about
    // 355 KB with a counting allocator; a `BTreeSet` takes 1 MB).
    let every_100th: SeqSet = (1..=100_000u64).map(|i| i * 100).collect();
    let bytes = every_100th.heap_bytes();
    assert!(bytes < 400_000, "every 100th: {bytes}");
    // One of ten thousand interleaved subjects: flat, at most 16 bytes per sequence.
    let every_10_000th: SeqSet = (1..=10_000u64).map(|i| i * 10_000).collect();
    let bytes = every_10_000th.heap_bytes();
    assert!(bytes <= 16 * 10_000, "every 10,000th: {bytes}");
}

#[test]
fn a_slice_extends_like_inserts_one_at_a_time() {
    for seed in 1..=6u64 {
        let mut rng = XorShift(seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let (mut set, mut model) = (SeqSet::new(), BTreeSet::new());
        let mut next = rng.below(5_000);
        for round in 0..25 {
            // Runs as a restore gathers them: ascending, across chunk edges, with gaps; some
            // rounds go back below what is there or repeat sequences already in.
            let len = rng.below(6_000) as usize;
            let mut slice: Vec<u64> = Vec::with_capacity(len);
            for _ in 0..len {
                next += 1 + rng.below(3) * rng.below(2);
                slice.push(next);
            }
            match rng.below(5) {
                0 => slice.reverse(),
                1 => slice.extend(model.iter().take(50).copied()),
                2 => next += rng.below(1 << 20),
                _ => {}
            }
            set.extend_from_slice(&slice);
            model.extend(slice.iter().copied());
            let context = format!("seed {seed} round {round}");
            let probes = probes(&model, next, rng.next());
            assert_probes(&set, &model, &probes, &context);
            assert_iterates(&set, &model, &context);
        }
    }
}
