//! The payload conventions every JetStream group's commands and responses share: the registry
//! of command kinds, postcard encoding ([`encode`] / [`decode`], [`PayloadError`]), values
//! carried as JSON inside postcard ([`JsonValue`]), and the response envelope (an outcome or
//! the API error, [`response`] / [`decode_response`]). What each group's commands and outcomes
//! hold lives with its machine: the stream group's in `stream_machine/` (`entry.rs`,
//! `response.rs`), the meta group's in `meta.rs`.
//!
//! A `consensus::Command` is a `kind` plus bytes. Kinds are one namespace for all groups (a
//! command given to the wrong machine fails to decode instead of being misread) and are
//! append-only: never renumber or reuse one; a new encoding gets a new kind.
//!
//! | kind | name | group | payload | defined in |
//! |---|---|---|---|---|
//! | 1 | `STREAM_COMMAND_V1` | stream | postcard `StreamCommandWire` | `stream_machine/entry.rs` |
//! | 2 | [`META_COMMAND_V1`] | meta | postcard `MetaCommand` | here (`meta.rs` has the enum) |
//! | 3 | `STREAM_APPEND_V1` | stream | raw append fields | `stream_machine/entry.rs` |
//! | 4 | `STREAM_APPEND_BATCH_V1` | stream | raw atomic batch (appends) | `stream_machine/entry.rs` |
//!
//! Responses carry no kind: a response answers the command at the same position, and is
//! postcard `Result<Outcome, WireError>`, `Outcome` being the group's outcome type.
//!
//! Payloads are postcard (compact, serde-driven); enums encode their variant index, so
//! variants of the encoded enums are append-only too. postcard is not self-describing, so
//! types whose serde attributes are tuned for the JSON API (`skip_serializing_if`, lenient
//! deserializers: `StreamConfig`, `ConsumerConfig`, `ApiError`) never go into postcard
//! directly: configs travel as their JSON text ([`JsonValue`]), errors as [`WireError`].

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::consensus::{Command, Response};
use crate::jsapi::ApiError;

/// A meta group command (`meta::MetaCommand`), version 1.
pub const META_COMMAND_V1: u16 = 2;

/// A command or response payload that did not decode.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("unknown command kind {0}")]
    UnknownKind(u16),
    #[error("undecodable payload: {0}")]
    Payload(#[from] postcard::Error),
}

pub fn encode<T: Serialize>(value: &T) -> Bytes {
    Bytes::from(postcard::to_stdvec(value).expect("in-memory encoding cannot fail"))
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, PayloadError> {
    Ok(postcard::from_bytes(bytes)?)
}

pub fn command<T: Serialize>(kind: u16, value: &T) -> Command {
    Command::new(kind, encode(value))
}

/// Decodes a command of the expected `kind`.
pub fn decode_command<T: DeserializeOwned>(
    kind: u16,
    command: &Command,
) -> Result<T, PayloadError> {
    if command.kind != kind {
        return Err(PayloadError::UnknownKind(command.kind));
    }
    decode(&command.payload)
}

/// An `ApiError` in a form postcard can carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    pub code: u16,
    pub err_code: u16,
    pub description: String,
}

impl From<&ApiError> for WireError {
    fn from(error: &ApiError) -> Self {
        WireError {
            code: error.code,
            err_code: error.err_code,
            description: error.description.clone(),
        }
    }
}

impl From<WireError> for ApiError {
    fn from(error: WireError) -> Self {
        ApiError {
            code: error.code,
            err_code: error.err_code,
            description: error.description,
        }
    }
}

/// A value carried as its JSON text inside a postcard payload (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonValue<T>(pub T);

impl<T: Serialize> Serialize for JsonValue<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let json = serde_json::to_vec(&self.0).map_err(serde::ser::Error::custom)?;
        serializer.serialize_bytes(&json)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for JsonValue<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json: Vec<u8> = serde_bytes_vec(deserializer)?;
        serde_json::from_slice(&json)
            .map(JsonValue)
            .map_err(serde::de::Error::custom)
    }
}

fn serde_bytes_vec<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    struct BytesVisitor;
    impl<'de> serde::de::Visitor<'de> for BytesVisitor {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("bytes")
        }
        fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }
        fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }
    }
    deserializer.deserialize_bytes(BytesVisitor)
}

/// A machine's answer to one command: an outcome or the API error to report.
pub fn response<T: Serialize>(outcome: &Result<T, ApiError>) -> Response {
    let wire: Result<&T, WireError> = outcome.as_ref().map_err(WireError::from);
    // Sized up front: one allocation per response (there is one per command).
    let bytes = postcard::to_extend(&wire, Vec::with_capacity(32)).expect("in-memory encoding");
    Response::new(bytes)
}

pub fn decode_response<T: DeserializeOwned>(
    response: &Response,
) -> Result<Result<T, ApiError>, PayloadError> {
    let wire: Result<T, WireError> = decode(&response.payload)?;
    Ok(wire.map_err(ApiError::from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsapi::{ErrorKind, StreamConfig};

    #[test]
    fn configs_travel_as_json_and_errors_as_wire_errors() {
        let config: StreamConfig =
            serde_json::from_str(r#"{"name":"ORDERS","subjects":["orders.*"]}"#).unwrap();
        let bytes = encode(&JsonValue(config.clone()));
        let back: JsonValue<StreamConfig> = decode(&bytes).unwrap();
        assert_eq!(back.0, config);

        let failed: Result<u64, ApiError> = Err(ApiError::new(ErrorKind::StreamNotFound));
        let decoded: Result<u64, ApiError> = decode_response(&response(&failed)).unwrap();
        assert_eq!(decoded, failed);
        let ok: Result<u64, ApiError> = Ok(7);
        assert_eq!(decode_response::<u64>(&response(&ok)).unwrap(), ok);
    }
}
