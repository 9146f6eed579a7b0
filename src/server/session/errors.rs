//! How each kind of bad input is answered: the `-ERR` text nats-server sends for it and the
//! reason the connection is closed. One table, so the texts live in one place.

use crate::server::client::CloseReason;
use crate::wire::DecodeError;

pub const AUTHORIZATION_VIOLATION: &str = "Authorization Violation";
pub const AUTHENTICATION_TIMEOUT: &str = "Authentication Timeout";
pub const INVALID_SUBJECT: &str = "Invalid Subject";
pub const INVALID_PUBLISH_SUBJECT: &str = "Invalid Publish Subject";
pub const INVALID_PROTOCOL: &str = "invalid client protocol";
pub const NO_RESPONDERS_NEEDS_HEADERS: &str = "no responders requires headers support";
pub const UNKNOWN_OPERATION: &str = "Unknown Protocol Operation";
pub const STALE_CONNECTION: &str = "Stale Connection";
pub const MAX_CONNECTIONS: &str = "maximum connections exceeded";

/// The `-ERR` text (if any) and close reason for a decode error.
pub fn for_decode_error(err: &DecodeError) -> (Option<&'static str>, CloseReason) {
    match err {
        DecodeError::UnknownOperation => (Some(UNKNOWN_OPERATION), CloseReason::ProtocolViolation),
        // nats-server logs argument errors but closes without telling the client.
        DecodeError::BadArguments { .. } | DecodeError::ClientError => {
            (None, CloseReason::ProtocolViolation)
        }
        DecodeError::ControlLineTooLong { .. } => (
            Some("maximum control line exceeded"),
            CloseReason::MaxControlLineExceeded,
        ),
        DecodeError::MaxPayload { .. } => (
            Some("Maximum Payload Violation"),
            CloseReason::MaxPayloadExceeded,
        ),
    }
}
