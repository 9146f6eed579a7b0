//! jetraft: tokio's unbounded channels with every message boxed on its way through.
//!
//! A tokio unbounded channel allocates its slots in blocks of 32 (the first when the channel is
//! created) and keeps a block it emptied for reuse. openraft's messages are large (`RaftMsg`,
//! `Notify`, the state machine's `Command`, `Replicate`: hundreds of bytes each), so each channel
//! held several kilobytes from the start and often twice that once it had carried a burst.
//! jetraft runs a Raft group per stream, each with four or more of these channels: at 1000
//! groups that was ~40 MB (heaptrack). Boxed, a slot is a pointer and a block 256 bytes; each
//! message costs one allocation more on its way.
//!
//! The same names as `tokio::sync::mpsc`, for the methods openraft uses.

use tokio::sync::mpsc as tokio_mpsc;

pub(crate) mod error {
    pub(crate) use tokio::sync::mpsc::error::SendError;
    pub(crate) use tokio::sync::mpsc::error::TryRecvError;
}

/// A channel whose messages are boxed in transit.
pub(crate) fn unbounded_channel<T>() -> (UnboundedSender<T>, UnboundedReceiver<T>) {
    let (tx, rx) = tokio_mpsc::unbounded_channel();
    (UnboundedSender(tx), UnboundedReceiver(rx))
}

pub(crate) struct UnboundedSender<T>(tokio_mpsc::UnboundedSender<Box<T>>);

impl<T> Clone for UnboundedSender<T> {
    fn clone(&self) -> Self {
        UnboundedSender(self.0.clone())
    }
}

impl<T> std::fmt::Debug for UnboundedSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<T> UnboundedSender<T> {
    pub(crate) fn send(&self, message: T) -> Result<(), error::SendError<T>> {
        self.0.send(Box::new(message)).map_err(|error::SendError(boxed)| error::SendError(*boxed))
    }

    pub(crate) fn downgrade(&self) -> WeakUnboundedSender<T> {
        WeakUnboundedSender(self.0.downgrade())
    }
}

pub(crate) struct WeakUnboundedSender<T>(tokio_mpsc::WeakUnboundedSender<Box<T>>);

impl<T> Clone for WeakUnboundedSender<T> {
    fn clone(&self) -> Self {
        WeakUnboundedSender(self.0.clone())
    }
}

impl<T> std::fmt::Debug for WeakUnboundedSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<T> WeakUnboundedSender<T> {
    pub(crate) fn upgrade(&self) -> Option<UnboundedSender<T>> {
        self.0.upgrade().map(UnboundedSender)
    }
}

pub(crate) struct UnboundedReceiver<T>(tokio_mpsc::UnboundedReceiver<Box<T>>);

impl<T> std::fmt::Debug for UnboundedReceiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<T> UnboundedReceiver<T> {
    pub(crate) async fn recv(&mut self) -> Option<T> {
        self.0.recv().await.map(|boxed| *boxed)
    }

    pub(crate) fn try_recv(&mut self) -> Result<T, error::TryRecvError> {
        self.0.try_recv().map(|boxed| *boxed)
    }
}
