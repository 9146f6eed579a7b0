//! `$JS.API.DIRECT.GET.<S>` (JSON body: by sequence, last or next by subject, from a time,
//! batches, `multi_last`) and `$JS.API.DIRECT.GET.<S>.<subject…>` (the last message on that
//! subject), answered as nats-server answers them: with the stored messages themselves (see
//! `jsapi::direct_get`), read from the stream's in-memory state without a Raft round.
//!
//! Only a stream with `allow_direct` answers, or for a stream without it a mirror of it with
//! `mirror_direct` (`JetStream::direct_get_target`: nats-server subscribes such a mirror to
//! its origin's direct-get subjects), from its own messages; for any other (or an unknown
//! stream) the requester gets the 503 no-responders status, as from nats-server, which
//! subscribes a stream to its direct-get subjects only when `allow_direct` is set. In a cluster the
//! stream's leader answers (nats-server lets any replica answer; the leader is never behind),
//! or the replica answering for a stream without a leader (`leaderless.rs`).

use bytes::Bytes;

use crate::jsapi::direct_get::{
    end_of_batch, message_headers, parse_request, DirectMsgMeta, DirectStatus, MAX_MULTI_LAST,
};
use crate::jsapi::msg_get::MsgGetRequest;
use crate::jscore::stream::{MsgInfo, StoredMsg, StreamState};
use crate::jscore::subject_filter::SubjectFilter;

use crate::jetstream::stream_machine::StreamView;
use crate::jetstream::JetStream;

/// Bytes a batch reply stops after when the request sets no `max_bytes` (nats-server uses
/// its `max_pending`, 64 MiB by default).
const DEFAULT_MAX_BYTES: usize = 64 << 20;

/// One reply message: a header block (empty: none) and the payload.
pub type DirectReply = (Vec<u8>, Bytes);

/// The replies to a direct get addressed to `addressed` and answered by stream `target` (the
/// same, or a mirror of it), in order, or `None` when `target` does not answer it (unknown,
/// `allow_direct` unset, or a mirror without `mirror_direct`).
pub fn get(
    js: &JetStream,
    addressed: &str,
    target: &str,
    last_by_subject: Option<&str>,
    body: &[u8],
) -> Option<Vec<DirectReply>> {
    let handle = js.stream(target)?;
    let view = handle.view();
    // Bodies are read under the stream's read lock, as nats-server reads under its stream
    // lock: a direct get reads a few messages, and the reply is consistent with one state.
    view.read(|group| {
        let state = group.stream();
        let config = state.config();
        let answers = if addressed == target {
            config.allow_direct
        } else {
            config.mirror_direct
                && config
                    .mirror
                    .as_ref()
                    .is_some_and(|origin| origin.name == addressed)
        };
        if !answers {
            return None;
        }
        let request = match last_by_subject {
            // The subject form carries its request in the subject; a body is a mistake.
            Some(_) if !body.is_empty() => Err(DirectStatus::BadRequest),
            Some(subject) => Ok(MsgGetRequest {
                last_by_subj: subject.to_string(),
                ..MsgGetRequest::default()
            }),
            None => parse_request(body),
        };
        Some(match request {
            Err(status) => vec![status_reply(status)],
            Ok(request) if !request.multi_last.is_empty() => multi_last(&view, state, &request),
            Ok(request) => by_position(&view, state, &request),
        })
    })
}

fn status_reply(status: DirectStatus) -> DirectReply {
    (status.header_block(), Bytes::new())
}

/// The reply carrying stored message `seq`; `batch` as in [`DirectMsgMeta`]. `no_hdr`
/// leaves out every header, the `Nats-*` ones too (as nats-server does).
fn message_reply(
    state: &StreamState,
    request: &MsgGetRequest,
    seq: u64,
    msg: &StoredMsg,
    batch: Option<(u64, u64)>,
) -> DirectReply {
    let headers = if request.no_headers {
        Vec::new()
    } else {
        let meta = DirectMsgMeta {
            stream: state.name(),
            subject: &msg.subject,
            seq,
            ts_nanos: msg.ts_nanos,
            batch,
        };
        message_headers(msg.headers.as_deref(), &meta)
    };
    (headers, msg.payload.clone())
}

/// What a reply counts against `max_bytes`, as nats-server counts it.
fn reply_size(msg: &StoredMsg) -> usize {
    msg.subject.len() + msg.headers_len() + msg.payload.len()
}

fn max_bytes(request: &MsgGetRequest) -> usize {
    match usize::try_from(request.max_bytes) {
        Ok(0) | Err(_) => DEFAULT_MAX_BYTES,
        Ok(bytes) => bytes,
    }
}

/// One message, or a batch (`batch` > 0) ending with an EOB: by sequence, next by subject
/// from a sequence, from a start time, or the last on a subject.
fn by_position(
    view: &StreamView,
    state: &StreamState,
    request: &MsgGetRequest,
) -> Vec<DirectReply> {
    let all = SubjectFilter::new(Vec::<String>::new());
    let next_filter = SubjectFilter::new([request.next_by_subj.as_str()]);
    let mut seq = match request.start_time {
        Some(time) => state.first_seq_at_or_after(time.unix_nanos().unwrap_or(0)),
        None => request.seq,
    };
    let is_batch = request.batch > 0;
    let batch = request.batch.max(1);
    let (mut pending, mut last_sent) = (0, 0);
    if is_batch {
        let filter = if request.next_by_subj.is_empty() {
            &all
        } else {
            &next_filter
        };
        pending = state.count_matching_after(filter, seq.saturating_sub(1));
    }
    let limit = max_bytes(request);
    let mut sent_bytes = 0;
    let mut replies = Vec::new();
    for i in 0..batch {
        let found = if seq > 0 && request.next_by_subj.is_empty() {
            let found = if i == 0 {
                state.get(seq).map(|msg| (seq, msg))
            } else {
                state.next_matching(&all, seq)
            };
            seq = found.map_or(seq, |(found, _)| found) + 1;
            found
        } else if !request.next_by_subj.is_empty() {
            let found = state.next_matching(&next_filter, seq);
            seq = found.map_or(seq, |(found, _)| found) + 1;
            found
        } else if request.last_by_subj.is_empty() {
            state
                .get(state.last_seq())
                .map(|msg| (state.last_seq(), msg))
        } else {
            state.last_by_subject(&request.last_by_subj)
        };
        let whole = |(seq, msg): (u64, MsgInfo<'_>)| Some((seq, view.whole(seq, msg)?));
        let Some((found_seq, msg)) = found.and_then(whole) else {
            if is_batch && i > 0 {
                break;
            }
            return vec![status_reply(DirectStatus::MessageNotFound)];
        };
        // In a batch each message counts what is left after it.
        pending = pending.saturating_sub(1);
        let batch = is_batch.then_some((pending, last_sent));
        replies.push(message_reply(state, request, found_seq, &msg, batch));
        last_sent = found_seq;
        sent_bytes += reply_size(&msg);
        if sent_bytes >= limit {
            break;
        }
    }
    if is_batch {
        replies.push((end_of_batch(pending, last_sent, None), Bytes::new()));
    }
    replies
}

/// The last message of every subject the `multi_last` filters select, at or below
/// `up_to_seq` / `up_to_time`, from `seq` on, ending with an EOB.
fn multi_last(view: &StreamView, state: &StreamState, request: &MsgGetRequest) -> Vec<DirectReply> {
    let mut up_to = request.up_to_seq;
    if let Some(time) = request.up_to_time {
        let from = state.first_seq_at_or_after(time.unix_nanos().unwrap_or(0));
        // Nothing stored before that time: no message can qualify.
        if from <= state.first_seq() {
            return vec![status_reply(DirectStatus::NoResults)];
        }
        up_to = from - 1;
    }
    if up_to == 0 {
        up_to = state.last_seq();
    }
    let filters: Vec<SubjectFilter> = request
        .multi_last
        .iter()
        .map(|subject| SubjectFilter::new([subject.as_str()]))
        .collect();
    let seqs = state.last_seqs_up_to(&filters, up_to);
    if seqs.len() > MAX_MULTI_LAST {
        return vec![status_reply(DirectStatus::TooManyResults)];
    }
    if seqs.is_empty() {
        return vec![status_reply(DirectStatus::NoResults)];
    }
    let limit = max_bytes(request);
    let (mut pending, mut last_sent, mut sent_bytes, mut sent) = (seqs.len() as u64 - 1, 0, 0, 0);
    let mut replies = Vec::new();
    for seq in seqs {
        if seq < request.seq {
            pending = pending.saturating_sub(1);
            continue;
        }
        let Some(msg) = state.get(seq).and_then(|msg| view.whole(seq, msg)) else {
            return vec![status_reply(DirectStatus::MessageNotFound)];
        };
        replies.push(message_reply(
            state,
            request,
            seq,
            &msg,
            Some((pending, last_sent)),
        ));
        pending = pending.saturating_sub(1);
        last_sent = seq;
        sent_bytes += reply_size(&msg);
        if sent_bytes >= limit {
            break;
        }
        sent += 1;
        if request.batch > 0 && sent >= request.batch {
            break;
        }
    }
    replies.push((end_of_batch(pending, last_sent, Some(up_to)), Bytes::new()));
    replies
}
