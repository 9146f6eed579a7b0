//! JetStream API request decoding (`crate::jsapi`) as the API handlers do it: the JSON
//! body of each request kind parsed, then the checks run on what parsed; configs that pass
//! also survive the trip through JSON they make in the log (equal after re-parsing) and are
//! given to a stream group (`jscore`) as a create would. Subjects of API requests and acks
//! are parsed too. Never a panic.
//!
//! Input: a selector byte (which request, below), then the body (or subject) bytes.

use crate::jsapi::{
    parse_body, parse_optional_body, require_empty_body, AckKind, AckReply, ApiRequest,
    ConsumerCreateForm, ConsumerPauseRequest, ConsumersRequest, CreateConsumerRequest,
    LeaderStepdownRequest, MsgDeleteRequest, MsgGetRequest, PeerRemoveRequest, PullRequest,
    StreamConfig, StreamConfigRequest, StreamInfoRequest, StreamNamesRequest, StreamPurgeRequest,
};
use crate::jscore::consumer::ConsumerCommand;
use crate::jscore::group::{StreamCommand, StreamGroup};
use crate::jscore::stream::AppendRequest;
use bytes::Bytes;

/// A stream create or update: parsed, checked, refused if unsupported, validated, then
/// created as a stream group that takes a message.
fn stream_config(body: &[u8]) {
    let Ok(request) = parse_body::<StreamConfigRequest>(body) else {
        return;
    };
    let mut config = request.config;
    if config.name.is_empty() {
        config.name = "S".into();
    }
    let Ok(config) = config.checked() else {
        return;
    };
    let stored = serde_json::to_vec(&config).expect("a config serializes");
    let reloaded: StreamConfig = serde_json::from_slice(&stored).expect("stored config reloads");
    assert_eq!(
        reloaded, config,
        "the config changed through its stored JSON"
    );
    let _ = config.validate_update(&StreamConfig::new("S", &["s.>"]));
    let _ = config.validate_update(&config);
    let Ok(config) = config.refuse_unsupported() else {
        return;
    };
    if config.validate_create().is_err() {
        return;
    }
    let subject = config
        .subjects
        .first()
        .cloned()
        .unwrap_or_else(|| "S".into());
    let mut group = StreamGroup::new(config);
    for now_nanos in [1, 2] {
        let _ = group.apply(StreamCommand::Append(AppendRequest {
            subject: subject.replace(['*', '>'], "x"),
            headers: None,
            payload: Bytes::from_static(b"fuzz"),
            now_nanos,
        }));
    }
}

/// A consumer create: parsed, resolved against the subject's form, checked against a
/// stream, then created on that stream and asked for messages.
fn consumer_config(body: &[u8]) {
    let Ok(request) = parse_body::<CreateConsumerRequest>(body) else {
        return;
    };
    let stream = StreamConfig::new("S", &["s.>"]);
    let form = match request.config.durable_name.as_str() {
        "" => ConsumerCreateForm::LegacyEphemeral,
        durable => ConsumerCreateForm::Named {
            consumer: durable.to_owned(),
            filter: None,
        },
    };
    let Ok(mut config) = request.resolve("S", &form) else {
        return;
    };
    if config.name.is_empty() {
        config.name = "c".into();
    }
    let Ok(config) = config.checked(&stream) else {
        return;
    };
    let stored = serde_json::to_vec(&config).expect("a config serializes");
    let reloaded: crate::jsapi::ConsumerConfig =
        serde_json::from_slice(&stored).expect("stored config reloads");
    assert_eq!(
        reloaded, config,
        "the config changed through its stored JSON"
    );
    let _ = config.validate_update(&config);
    if config.refuse_unsupported().is_err() {
        return;
    }
    let mut group = StreamGroup::new(stream);
    let _ = group.apply(StreamCommand::Append(AppendRequest {
        subject: "s.a".into(),
        headers: None,
        payload: Bytes::from_static(b"fuzz"),
        now_nanos: 1,
    }));
    let name = config.name.clone();
    let _ = group.apply(StreamCommand::UpsertConsumer {
        name: name.clone(),
        config,
        created_nanos: 2,
    });
    let _ = group.apply(StreamCommand::Consumer {
        name: name.clone(),
        command: ConsumerCommand::DeliverNext {
            max_messages: 10,
            now_nanos: 3,
        },
    });
    // A reset as the API checks and proposes it, to the floor and to the stream's start.
    for seq in [0, 1] {
        let allowed = group
            .consumer(&name)
            .map(|consumer| consumer.check_reset(group.stream(), seq));
        if let Some(Ok(_)) = allowed {
            let _ = group.apply(StreamCommand::Consumer {
                name: name.clone(),
                command: ConsumerCommand::Reset { seq },
            });
        }
    }
}

/// Subjects: an API request's, and an ack's (with the body as the ack kind).
fn subjects(bytes: &[u8]) {
    let _ = AckKind::parse(bytes);
    let Ok(subject) = std::str::from_utf8(bytes) else {
        return;
    };
    if let Ok(request) = ApiRequest::parse(subject) {
        let _ = request.response_type();
        let _ = request.stream();
    }
    let _ = AckReply::parse(subject);
}

/// One run of the target over the fuzzer's input (`fuzz/fuzz_targets/` calls it; the corpus
/// replay test too). Panics on a finding.
pub fn run(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    match selector % 14 {
        0 => stream_config(body),
        1 => consumer_config(body),
        2 => drop(parse_optional_body::<StreamInfoRequest>(body)),
        3 => {
            if let Ok(request) = parse_optional_body::<StreamPurgeRequest>(body) {
                let _ = request.validate();
            }
        }
        4 => drop(parse_optional_body::<StreamNamesRequest>(body)),
        5 => drop(parse_body::<MsgDeleteRequest>(body)),
        6 => {
            if let Ok(request) = parse_body::<MsgGetRequest>(body) {
                let _ = request.selector();
            }
        }
        7 => drop(parse_optional_body::<ConsumersRequest>(body)),
        8 => drop(PullRequest::parse(body)),
        9 => drop(parse_optional_body::<LeaderStepdownRequest>(body)),
        10 => drop(parse_body::<PeerRemoveRequest>(body)),
        11 => drop(parse_optional_body::<ConsumerPauseRequest>(body)),
        12 => subjects(body),
        _ => drop(require_empty_body(body)),
    }
}
