//! `$JS.API.INFO`: the account's JetStream usage, limits (none) and API counters.

use std::sync::atomic::Ordering;

use crate::jsapi::response::{encode_success, ResponseType};
use crate::jsapi::{AccountInfo, AccountUsage, ApiStats, StorageType};

use crate::jetstream::JetStream;

pub use crate::jetstream::info::API_LEVEL;

pub async fn info(js: &JetStream) -> Vec<u8> {
    let mut usage = AccountUsage::default();
    let names = js.stream_names();
    // In a cluster some streams are led elsewhere: their leaders report their usage.
    let infos =
        futures::future::join_all(names.iter().map(|name| super::streams::info_of(js, name))).await;
    for info in infos.into_iter().flatten() {
        let (bytes, storage, consumers) = (
            info.state.bytes,
            info.config.storage,
            info.state.consumer_count,
        );
        match storage {
            StorageType::Memory => usage.memory += bytes,
            StorageType::File => usage.storage += bytes,
        }
        usage.streams += 1;
        usage.consumers += consumers;
    }
    let info = AccountInfo {
        usage,
        domain: String::new(),
        api: ApiStats {
            level: API_LEVEL,
            total: js.api_total.load(Ordering::Relaxed),
            errors: js.api_errors.load(Ordering::Relaxed),
            inflight: 0,
        },
        tiers: Default::default(),
    };
    encode_success(ResponseType::AccountInfo, &info)
}
