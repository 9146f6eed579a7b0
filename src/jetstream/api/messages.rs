//! `STREAM.MSG.GET` (by sequence, last or next by subject, first after a time) and
//! `STREAM.MSG.DELETE`.

use std::sync::Arc;

use crate::jsapi::msg_get::{MsgGetRequest, MsgSelector, StoredMsg};
use crate::jsapi::requests::{parse_body, MsgDeleteRequest};
use crate::jsapi::response::{encode_success, MsgGetResponse, ResponseType, SuccessResponse};
use crate::jsapi::time::Timestamp;
use crate::jsapi::{ApiError, ErrorKind};
use crate::jscore::group::StreamCommand;
use crate::jscore::subject_filter::SubjectFilter;

use crate::jetstream::JetStream;

pub fn get(js: &JetStream, stream: &str, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let request: MsgGetRequest = parse_body(body)?;
    let selector = request.selector()?;
    let handle = js.running_stream(stream)?;
    let view = handle.view();
    let found = view.read(|group| {
        let state = group.stream();
        let found = match &selector {
            MsgSelector::Sequence(seq) => state.get(*seq).map(|msg| (*seq, msg)),
            MsgSelector::LastBySubject(subject) => state.last_by_subject(subject),
            MsgSelector::NextBySubject { subject, from_seq } => {
                state.next_matching(&SubjectFilter::new([subject.as_str()]), *from_seq)
            }
            MsgSelector::FirstAtOrAfter { time, subject } => {
                let from = state.first_seq_at_or_after(time.unix_nanos().unwrap_or(0));
                let filter = if subject.is_empty() {
                    SubjectFilter::new(Vec::<String>::new())
                } else {
                    SubjectFilter::new([subject.as_str()])
                };
                state.next_matching(&filter, from)
            }
        };
        let (seq, info) = found?;
        let msg = view.whole(seq, info)?;
        Some(StoredMsg {
            subject: msg.subject,
            seq,
            headers: msg
                .headers
                .as_deref()
                .map(<[u8]>::to_vec)
                .unwrap_or_default(),
            data: msg.payload.to_vec(),
            time: Timestamp::from_unix_nanos(msg.ts_nanos),
        })
    });
    // A body that failed its check is not served, and the answer says why (the group is
    // being set aside: ADR 0018), rather than "no message found".
    let message = found.ok_or_else(|| match view.store().damage() {
        Some(damage) => ApiError::with(ErrorKind::StreamOfflineReason, &[&damage]),
        None => ApiError::new(ErrorKind::NoMessageFound),
    })?;
    Ok(encode_success(
        ResponseType::StreamMsgGet,
        &MsgGetResponse { message },
    ))
}

pub async fn delete(js: &Arc<JetStream>, stream: &str, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let request: MsgDeleteRequest = parse_body(body)?;
    let handle = js.running_stream(stream)?;
    handle
        .propose_one(StreamCommand::DeleteMsg { seq: request.seq })
        .await?;
    Ok(encode_success(
        ResponseType::StreamMsgDelete,
        &SuccessResponse::OK,
    ))
}
