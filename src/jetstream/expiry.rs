//! `max_age`: one task per stream (on its leader) that sleeps until the oldest message is
//! due to expire and then proposes `Expire { now }`, so every replica removes the same
//! messages at the same log position. The task wakes early whenever an entry is applied
//! (a new first message, a config change).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::stream::StreamHandle;
use crate::jscore::group::StreamCommand;

/// Expiry is not worth a proposal more often than this.
const MIN_INTERVAL: Duration = Duration::from_millis(50);

pub async fn run(stream: Arc<StreamHandle>, stop: CancellationToken) {
    let mut applied = stream.view().applied();
    loop {
        let due = stream.view().read(|group| group.stream().next_expiry_at());
        let wait = match due {
            None => None,
            Some(at) => {
                let now = super::now_nanos();
                Some(Duration::from_nanos(at.saturating_sub(now).max(0) as u64).max(MIN_INTERVAL))
            }
        };
        let expire_now = tokio::select! {
            _ = stop.cancelled() => return,
            changed = applied.changed() => {
                if changed.is_err() {
                    return;
                }
                false
            }
            _ = sleep_or_forever(wait) => true,
        };
        if expire_now {
            let now = super::now_nanos();
            if let Err(error) = stream
                .propose_one(StreamCommand::Expire { now_nanos: now })
                .await
            {
                tracing::warn!(stream = stream.name(), "expiry failed: {error}");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}

async fn sleep_or_forever(wait: Option<Duration>) {
    match wait {
        Some(wait) => tokio::time::sleep(wait).await,
        None => std::future::pending().await,
    }
}
