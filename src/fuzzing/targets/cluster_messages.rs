//! What a node decodes from its peers (`proto/cluster.proto` through prost, the Raft RPCs and
//! forwarded proposals of `consensus::raft_codec`, their replies) down to the commands inside
//! the entries (`jetstream::stream_machine::entry`, the meta commands), which are applied to
//! a stream group and a meta state as a replica would. Never a panic.
//!
//! Input: a selector byte (below), then the bytes of that message.

use crate::cluster::proto;
use crate::consensus::raft_codec::decode;
use crate::consensus::{Command, NodeId, Proposal, Response, TypeConfig};
use crate::jetstream::meta::{MetaCommand, MetaState};
use crate::jetstream::payload::{self, META_COMMAND_V1};
use crate::jetstream::stream_machine::entry;
use crate::jetstream::stream_machine::response::decode_response;
use crate::jsapi::StreamConfig;
use crate::jscore::group::StreamGroup;
use crate::subject::validate::{is_valid_queue, is_valid_subject};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::EntryPayload;
use prost::Message;

/// The replica state commands are applied to, one per input.
struct Replica {
    stream: StreamGroup,
    meta: MetaState,
}

impl Replica {
    fn new() -> Self {
        Replica {
            stream: StreamGroup::new(StreamConfig::new("S", &["s.>"])),
            meta: MetaState::default(),
        }
    }

    fn apply(&mut self, command: &Command) {
        if command.kind == META_COMMAND_V1 {
            if let Ok(meta) = payload::decode_command::<MetaCommand>(META_COMMAND_V1, command) {
                let _ = self.meta.apply(meta);
            }
        } else if let Ok(stream) = entry::decode_command(command) {
            let _ = self.stream.apply(stream);
        }
    }

    fn proposal(&mut self, proposal: &Proposal) {
        proposal
            .commands
            .iter()
            .for_each(|command| self.apply(command));
    }

    fn append_entries(&mut self, bytes: &[u8]) {
        let Ok(rpc) = decode::<AppendEntriesRequest<TypeConfig>>(bytes) else {
            return;
        };
        for entry in &rpc.entries {
            if let EntryPayload::Normal(proposal) = &entry.payload {
                self.proposal(proposal);
            }
        }
    }

    /// A Raft RPC as the `Raft` handler decodes it, by its kind.
    fn raft_rpc(&mut self, kind: i32, bytes: &[u8]) {
        match proto::RaftKind::try_from(kind) {
            Ok(proto::RaftKind::AppendEntries) => self.append_entries(bytes),
            Ok(proto::RaftKind::Vote) => drop(decode::<VoteRequest<NodeId>>(bytes)),
            Ok(proto::RaftKind::InstallSnapshot) => {
                drop(decode::<InstallSnapshotRequest<TypeConfig>>(bytes))
            }
            Err(_) => {}
        }
    }

    /// The protobuf messages a node receives, each followed into what it carries.
    fn protobuf(&mut self, selector: u8, bytes: &[u8]) {
        match selector % 10 {
            0 => {
                if let Ok(request) = proto::RaftRequest::decode(bytes) {
                    self.raft_rpc(request.kind, &request.payload);
                }
            }
            1 => {
                if let Ok(request) = proto::ProposeRequest::decode(bytes) {
                    if let Ok(proposal) = decode::<Proposal>(&request.proposal) {
                        self.proposal(&proposal);
                    }
                }
            }
            2 => {
                let Ok(batch) = proto::RouteBatch::decode(bytes) else {
                    return;
                };
                for frame in batch.frames.into_iter().filter_map(|frame| frame.frame) {
                    if let proto::route_frame::Frame::Subscribe(interest)
                    | proto::route_frame::Frame::Unsubscribe(interest) = frame
                    {
                        let _ = is_valid_subject(interest.subject.as_bytes())
                            && is_valid_queue(interest.queue.as_bytes());
                    }
                }
            }
            3 => drop(proto::PingRequest::decode(bytes)),
            4 => drop(proto::HelloRequest::decode(bytes)),
            5 => drop(proto::ElectRequest::decode(bytes)),
            6 => {
                if let Ok(reply) = proto::RaftReply::decode(bytes) {
                    if let Some(proto::raft_reply::Result::Outcome(outcome)) = reply.result {
                        replies(&outcome);
                    }
                }
            }
            7 => {
                if let Ok(reply) = proto::ProposeReply::decode(bytes) {
                    if let Some(proto::propose_reply::Result::Responses(responses)) = reply.result {
                        replies(&responses);
                    }
                }
            }
            8 => drop(proto::AppliedRequest::decode(bytes)),
            _ => drop(proto::PingReply::decode(bytes)),
        }
    }
}

/// The reply decoders of the transport (each Raft RPC's outcome, a forwarded proposal's
/// responses and the stream responses inside).
fn replies(bytes: &[u8]) {
    let _ = decode::<Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>>(bytes);
    let _ = decode::<Result<VoteResponse<NodeId>, RaftError<NodeId>>>(bytes);
    let _ = decode::<
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    >(bytes);
    if let Ok(responses) = decode::<Vec<Response>>(bytes) {
        for response in &responses {
            let _ = decode_response(response);
        }
    }
}

/// One run of the target over the fuzzer's input (`fuzz/fuzz_targets/` calls it; the corpus
/// replay test too). Panics on a finding.
pub fn run(data: &[u8]) {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let mut replica = Replica::new();
    match selector % 10 {
        0 => replica.append_entries(bytes),
        1 => drop(decode::<VoteRequest<NodeId>>(bytes)),
        2 => drop(decode::<InstallSnapshotRequest<TypeConfig>>(bytes)),
        3 => {
            if let Ok(proposal) = decode::<Proposal>(bytes) {
                replica.proposal(&proposal);
            }
        }
        4 => replica.apply(&Command::new(entry::STREAM_COMMAND_V1, bytes.to_vec())),
        5 => replica.apply(&Command::new(entry::STREAM_APPEND_V1, bytes.to_vec())),
        6 => replica.apply(&Command::new(META_COMMAND_V1, bytes.to_vec())),
        7 => replies(bytes),
        _ => replica.protobuf(selector / 10, bytes),
    }
}
