//! Which replica serves a stream: a watcher per stream group on every replica that follows the
//! group's Raft metrics and tells `JetStream` whenever this node starts or stops leading it.
//! The leader subscribes the stream's subjects, runs its consumers' delivery and its max_age
//! expiry; followers only apply the log. After a failover the new leader's delivery starts from
//! the replicated consumer state, so whatever was delivered but not acknowledged is delivered
//! again once its ack wait passes (at-least-once).

use std::sync::{Arc, Weak};

use openraft::ServerState;
use tokio_util::sync::CancellationToken;

use super::service::JetStream;
use crate::consensus::RaftGroup;

pub async fn watch(
    js: Weak<JetStream>,
    name: String,
    group: Arc<RaftGroup>,
    stop: CancellationToken,
) {
    let mut metrics = group.raft().metrics();
    loop {
        let leading = {
            let m = metrics.borrow_and_update();
            m.state == ServerState::Leader && m.current_leader == Some(group.node())
        };
        match js.upgrade() {
            Some(js) => js.set_leading(&name, leading),
            None => return,
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = metrics.changed() => if changed.is_err() { return },
        }
    }
}
