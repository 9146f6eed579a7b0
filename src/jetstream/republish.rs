//! What a stream's config does to a message on its way in and after it is stored: the
//! stream's `subject_transform` (ADR-36: the subject stored is the transformed one, chosen on
//! the leader before the proposal, so every replica applies the same subject) and its
//! `republish` (ADR-28: once the append is committed and applied, the leader publishes the
//! republished message, in the order the appends were applied). The ingest (`publish.rs`)
//! and the mirror and source tasks (`sourcing/`) both go through here.
//!
//! Read from the stream's config per batch, so an updated config takes effect with the next
//! batch. The formats are `jsapi::republish` and `subject::transform` (pure).

use bytes::Bytes;

use super::stream::StreamHandle;
use crate::jsapi::republish::{Republisher, StoredRef};
use crate::jscore::stream::AppendOutcome;
use crate::server::dispatch::Dispatch;
use crate::server::message::Message;
use crate::server::router::Router;
use crate::subject::transform::SubjectTransform;

/// A stream's transforms as its config reads now. Built per batch of appends.
#[derive(Debug, Default)]
pub struct StreamTransforms {
    subject: Option<SubjectTransform>,
    republish: Option<Republisher>,
}

impl StreamTransforms {
    pub fn of(stream: &StreamHandle) -> Self {
        stream.view().read(|group| {
            let config = group.stream().config();
            let subject = config
                .subject_transform
                .as_ref()
                .filter(|t| !t.src.is_empty() || !t.dest.is_empty())
                .and_then(|t| SubjectTransform::new(&t.src, &t.dest).ok());
            Self {
                subject,
                republish: Republisher::of(config.republish.as_ref()),
            }
        })
    }

    /// The subject a message published on `subject` is stored under.
    pub fn stored_subject(&self, subject: &Bytes) -> Bytes {
        let Some(transform) = &self.subject else {
            return subject.clone();
        };
        match std::str::from_utf8(subject)
            .ok()
            .and_then(|text| transform.apply(text))
        {
            Some(stored) => Bytes::from(stored),
            None => subject.clone(),
        }
    }

    /// Routes the republished copy of `msg` (stored as `outcome` says, at `now_nanos`) into
    /// `dispatch`; nothing when the stream does not republish or the message was not stored.
    pub fn republish(
        &self,
        router: &Router,
        dispatch: &mut Dispatch,
        stream: &str,
        msg: &Message,
        now_nanos: i64,
        outcome: &AppendOutcome,
    ) {
        let (
            Some(republisher),
            AppendOutcome::StoredRepublished {
                seq,
                last_subject_seq,
                ..
            },
        ) = (&self.republish, outcome)
        else {
            return;
        };
        let Ok(subject) = std::str::from_utf8(&msg.subject) else {
            return;
        };
        let stored = StoredRef {
            stream,
            subject,
            headers: msg.headers.as_deref(),
            payload: &msg.payload,
            seq: *seq,
            ts_nanos: now_nanos,
            last_subject_seq: *last_subject_seq,
        };
        let Some(out) = republisher.message(&stored) else {
            return;
        };
        let copy = Message::new(out.subject, out.payload).with_headers(Some(out.headers));
        let matches = router.matches(&copy.subject);
        dispatch.route(router, &matches, &copy, None);
    }
}
