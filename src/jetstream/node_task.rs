//! `NodeTask`: the queue into one task per node that serves many streams (the leadership
//! watcher, max_age expiry), started by its first item, so that a stream adds an item to a
//! node's task instead of a task of its own (issue 15).

use std::future::Future;
use std::sync::OnceLock;

use tokio::sync::mpsc;

use crate::server::ServerShared;

/// See the module docs.
#[derive(Debug)]
pub(super) struct NodeTask<T> {
    queue: OnceLock<mpsc::UnboundedSender<T>>,
}

impl<T> Default for NodeTask<T> {
    fn default() -> Self {
        NodeTask {
            queue: OnceLock::new(),
        }
    }
}

impl<T> NodeTask<T> {
    /// Hands `item` to the task, first spawning it (tracked by the server) as `start(queue)`.
    /// A closed queue means the node shuts down: the item is dropped.
    pub(super) fn send<F>(
        &self,
        shared: &ServerShared,
        item: T,
        start: impl FnOnce(mpsc::UnboundedReceiver<T>) -> F,
    ) where
        F: Future<Output = ()> + Send + 'static,
    {
        let queue = self.queue.get_or_init(|| {
            let (queue, items) = mpsc::unbounded_channel();
            shared.tasks.spawn(start(items));
            queue
        });
        let _ = queue.send(item);
    }
}
