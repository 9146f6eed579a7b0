//! How a stream's mirror or sources are doing, as its leader's copy tasks
//! (`sourcing/`) see them: last contact with each origin, how far behind, the last error.
//! `STREAM.INFO` reports it in the `mirror` and `sources` blocks (`info.rs`). Leader memory
//! (as nats-server's): a new leader starts with no contact yet. One per `StreamHandle`.

use std::collections::BTreeMap;
use std::time::Instant;

use parking_lot::Mutex;

use crate::jsapi::stream_config::StreamSource;
use crate::jsapi::stream_info::StreamSourceInfo;
use crate::jsapi::ApiError;

/// One origin's progress, keyed by its internal name.
#[derive(Debug, Clone, Default)]
pub struct SourceProgress {
    pub last_contact: Option<Instant>,
    /// Origin messages not copied yet (as of the last contact).
    pub lag: u64,
    pub error: Option<ApiError>,
}

#[derive(Debug, Default)]
pub struct SourceStatuses {
    /// Small (one entry per origin); never held across an `.await`.
    by_origin: Mutex<BTreeMap<String, SourceProgress>>,
}

impl SourceStatuses {
    pub fn get(&self, origin: &str) -> Option<SourceProgress> {
        self.by_origin.lock().get(origin).cloned()
    }

    pub fn update(&self, origin: &str, f: impl FnOnce(&mut SourceProgress)) {
        f(self.by_origin.lock().entry(origin.to_owned()).or_default());
    }

    /// Forgets every origin (leadership lost: a new leader reports afresh).
    pub fn clear(&self) {
        self.by_origin.lock().clear();
    }
}

impl SourceStatuses {
    /// The `mirror` block of `STREAM.INFO` (keyed by the origin's name).
    pub fn mirror_info(&self, mirror: &StreamSource) -> StreamSourceInfo {
        self.info(mirror, &mirror.name)
    }

    /// A `sources` entry of `STREAM.INFO` (keyed by the source's internal name).
    pub fn source_info(&self, source: &StreamSource) -> StreamSourceInfo {
        self.info(source, &source.internal_name())
    }

    fn info(&self, config: &StreamSource, key: &str) -> StreamSourceInfo {
        let progress = self.get(key).unwrap_or_default();
        StreamSourceInfo {
            name: config.name.clone(),
            external: config.external.clone(),
            lag: progress.lag,
            // nats-server reports -1 until the first contact.
            active: progress.last_contact.map_or(-1, |at| {
                at.elapsed().as_nanos().min(i64::MAX as u128) as i64
            }),
            error: progress.error,
            filter_subject: config.filter_subject.clone(),
            subject_transforms: config.subject_transforms.clone(),
        }
    }
}
