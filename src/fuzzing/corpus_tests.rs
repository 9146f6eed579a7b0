//! Every committed corpus input (`fuzz/corpus/<target>/`) through its target's `run`, in a
//! plain `cargo test`: a finding libFuzzer made and that was fixed (its input is committed to
//! the corpus) stays fixed without a fuzzing toolchain, and the seeds keep passing.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use super::targets;

/// A target's name (its corpus directory) and body.
type Target = (&'static str, fn(&[u8]));

#[test]
fn every_committed_corpus_input_passes_its_target() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let targets: [Target; 7] = [
        ("cluster_messages", targets::cluster_messages::run),
        ("jsapi_requests", targets::jsapi_requests::run),
        ("segment_summary", targets::segment_summary::run),
        ("snapshot", targets::snapshot::run),
        ("stream_state", targets::stream_state::run),
        ("wal_recovery", targets::wal_recovery::run),
        ("wire_decoder", targets::wire_decoder::run),
    ];
    for (name, run) in targets {
        let mut inputs: Vec<_> = std::fs::read_dir(corpus.join(name))
            .unwrap_or_else(|e| panic!("fuzz/corpus/{name}: {e}"))
            .map(|entry| entry.expect("a directory entry").path())
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "fuzz/corpus/{name} holds no input");
        for path in inputs {
            let input = std::fs::read(&path).expect("a corpus file");
            if catch_unwind(AssertUnwindSafe(|| run(&input))).is_err() {
                panic!("{name} fails on {}", path.display());
            }
        }
    }
    let _ = std::fs::remove_dir_all(super::scratch_root());
}
