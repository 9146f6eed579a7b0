//! The `$JS.API.*` subject grammar: which API call a request subject names, with the stream
//! and consumer names taken from it and checked. The domain form `$JS.<domain>.API.*` maps
//! onto the same calls (clients use it with `--js-domain`).
//!
//! Parsing is allocation-light and total: anything not recognised is `SubjectError::Unknown`,
//! which the API front answers with a `system_response` 10003 "bad request", as nats-server
//! does for a `$JS.API` subject it has no handler for.

use super::error::{ApiError, ErrorKind};
use super::names::{validate_name, NameError, MAX_NAME_LEN};
use super::response::ResponseType;

/// Prefix of every JetStream API subject (without a domain).
pub const API_PREFIX: &str = "$JS.API.";

/// One JetStream API call, as named by its subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiRequest {
    /// `$JS.API.INFO`
    AccountInfo,
    StreamCreate {
        stream: String,
    },
    StreamUpdate {
        stream: String,
    },
    StreamInfo {
        stream: String,
    },
    StreamDelete {
        stream: String,
    },
    StreamPurge {
        stream: String,
    },
    /// `$JS.API.STREAM.NAMES`
    StreamNames,
    /// `$JS.API.STREAM.LIST`
    StreamList,
    StreamMsgGet {
        stream: String,
    },
    StreamMsgDelete {
        stream: String,
    },
    StreamLeaderStepdown {
        stream: String,
    },
    StreamPeerRemove {
        stream: String,
    },
    StreamSnapshot {
        stream: String,
    },
    StreamRestore {
        stream: String,
    },
    /// Any of the three consumer-create subject forms.
    ConsumerCreate {
        stream: String,
        form: ConsumerCreateForm,
    },
    ConsumerInfo {
        stream: String,
        consumer: String,
    },
    ConsumerDelete {
        stream: String,
        consumer: String,
    },
    ConsumerNames {
        stream: String,
    },
    ConsumerList {
        stream: String,
    },
    ConsumerLeaderStepdown {
        stream: String,
        consumer: String,
    },
    ConsumerPause {
        stream: String,
        consumer: String,
    },
    ConsumerUnpin {
        stream: String,
        consumer: String,
    },
    ConsumerReset {
        stream: String,
        consumer: String,
    },
    /// `$JS.API.CONSUMER.MSG.NEXT.<S>.<C>`: a pull request, not a JSON call.
    ConsumerMsgNext {
        stream: String,
        consumer: String,
    },
    /// `$JS.API.DIRECT.GET.<S>` (JSON body) or `$JS.API.DIRECT.GET.<S>.<subject…>` (last
    /// message on that subject, empty body). Replies are raw messages, not JSON.
    DirectGet {
        stream: String,
        last_by_subject: Option<String>,
    },
    /// `$JS.API.META.LEADER.STEPDOWN`
    MetaLeaderStepdown,
    /// `$JS.API.SERVER.REMOVE`
    ServerRemove,
    /// `$JS.API.ACCOUNT.PURGE.<account>`
    AccountPurge {
        account: String,
    },
}

/// How a consumer create request named its consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerCreateForm {
    /// `CONSUMER.CREATE.<S>`: legacy ephemeral, name chosen by the server.
    LegacyEphemeral,
    /// `CONSUMER.CREATE.<S>.<C>[.<filter…>]` (2.9+): `filter` is everything after `<C>`
    /// (it may contain dots and wildcards) and must equal `config.filter_subject`.
    Named {
        consumer: String,
        filter: Option<String>,
    },
    /// `CONSUMER.DURABLE.CREATE.<S>.<C>`: legacy durable.
    LegacyDurable { durable: String },
}

/// Whose name was bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameOwner {
    Stream,
    Consumer,
}

/// Why a subject is not a JetStream API call we can serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubjectError {
    /// Not under `$JS.API.` (or `$JS.<domain>.API.`).
    #[error("not a JetStream API subject")]
    NotApi,
    /// Under the API prefix but not a call we know (or the wrong number of tokens).
    #[error("unknown JetStream API subject {0:?}")]
    Unknown(String),
    /// `CONSUMER.DURABLE.CREATE` without exactly a stream and a durable name.
    #[error("durable create subject has no durable name")]
    DurableNameNotInSubject,
    /// A stream or consumer name token that is not a valid name.
    #[error("invalid {owner:?} name: {error}")]
    BadName { owner: NameOwner, error: NameError },
}

impl SubjectError {
    /// The error nats-server answers with for this subject.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            SubjectError::NotApi | SubjectError::Unknown(_) => ErrorKind::BadRequest.into(),
            SubjectError::DurableNameNotInSubject => {
                ErrorKind::ConsumerDurableNameNotInSubject.into()
            }
            SubjectError::BadName { owner, error } => match (owner, error) {
                (NameOwner::Stream, NameError::PathSeparator) => {
                    ErrorKind::StreamNameContainsPathSeparators.into()
                }
                (NameOwner::Consumer, NameError::PathSeparator) => {
                    ErrorKind::ConsumerNameContainsPathSeparators.into()
                }
                (NameOwner::Stream, NameError::TooLong) => ApiError::invalid_config(format!(
                    "stream name is too long, maximum allowed is {MAX_NAME_LEN}"
                )),
                (NameOwner::Consumer, NameError::TooLong) => {
                    ApiError::with(ErrorKind::ConsumerNameTooLong, &[&MAX_NAME_LEN])
                }
                (NameOwner::Stream, _) => ApiError::invalid_config(
                    "stream name is required and can not contain '.', '*', '>', '\\', '/'",
                ),
                (NameOwner::Consumer, _) => ApiError::invalid_config(
                    "consumer name can not contain '.', '*', '>', '\\', '/'",
                ),
            },
        }
    }
}

/// Splits `$JS.API.<rest>` or `$JS.<domain>.API.<rest>` into (domain, rest).
pub fn strip_api_prefix(subject: &str) -> Option<(Option<&str>, &str)> {
    if let Some(rest) = subject.strip_prefix(API_PREFIX) {
        return Some((None, rest));
    }
    let after_js = subject.strip_prefix("$JS.")?;
    let (domain, rest) = after_js.split_once('.')?;
    let rest = rest.strip_prefix("API.")?;
    if domain.is_empty() {
        return None;
    }
    Some((Some(domain), rest))
}

fn stream_name(token: &str) -> Result<String, SubjectError> {
    checked_name(token, NameOwner::Stream)
}

fn consumer_name(token: &str) -> Result<String, SubjectError> {
    checked_name(token, NameOwner::Consumer)
}

fn checked_name(token: &str, owner: NameOwner) -> Result<String, SubjectError> {
    validate_name(token)
        .map(|()| token.to_string())
        .map_err(|error| SubjectError::BadName { owner, error })
}

impl ApiRequest {
    /// Parses an API subject (with or without a domain).
    pub fn parse(subject: &str) -> Result<ApiRequest, SubjectError> {
        let (_, rest) = strip_api_prefix(subject).ok_or(SubjectError::NotApi)?;
        let unknown = || SubjectError::Unknown(subject.to_string());
        let tokens: Vec<&str> = rest.split('.').collect();
        let request = match tokens.as_slice() {
            ["INFO"] => ApiRequest::AccountInfo,
            ["STREAM", "NAMES"] => ApiRequest::StreamNames,
            ["STREAM", "LIST"] => ApiRequest::StreamList,
            ["STREAM", op, s] => {
                let stream = stream_name(s)?;
                match *op {
                    "CREATE" => ApiRequest::StreamCreate { stream },
                    "UPDATE" => ApiRequest::StreamUpdate { stream },
                    "INFO" => ApiRequest::StreamInfo { stream },
                    "DELETE" => ApiRequest::StreamDelete { stream },
                    "PURGE" => ApiRequest::StreamPurge { stream },
                    "SNAPSHOT" => ApiRequest::StreamSnapshot { stream },
                    "RESTORE" => ApiRequest::StreamRestore { stream },
                    _ => return Err(unknown()),
                }
            }
            ["STREAM", "MSG", "GET", s] => ApiRequest::StreamMsgGet {
                stream: stream_name(s)?,
            },
            ["STREAM", "MSG", "DELETE", s] => ApiRequest::StreamMsgDelete {
                stream: stream_name(s)?,
            },
            ["STREAM", "LEADER", "STEPDOWN", s] => ApiRequest::StreamLeaderStepdown {
                stream: stream_name(s)?,
            },
            ["STREAM", "PEER", "REMOVE", s] => ApiRequest::StreamPeerRemove {
                stream: stream_name(s)?,
            },
            ["CONSUMER", "CREATE", s] => ApiRequest::ConsumerCreate {
                stream: stream_name(s)?,
                form: ConsumerCreateForm::LegacyEphemeral,
            },
            ["CONSUMER", "CREATE", s, c, filter @ ..] => ApiRequest::ConsumerCreate {
                stream: stream_name(s)?,
                form: ConsumerCreateForm::Named {
                    consumer: consumer_name(c)?,
                    filter: (!filter.is_empty()).then(|| filter.join(".")),
                },
            },
            ["CONSUMER", "DURABLE", "CREATE", s, c] => ApiRequest::ConsumerCreate {
                stream: stream_name(s)?,
                form: ConsumerCreateForm::LegacyDurable {
                    durable: consumer_name(c)?,
                },
            },
            ["CONSUMER", "DURABLE", "CREATE", ..] => {
                return Err(SubjectError::DurableNameNotInSubject)
            }
            ["CONSUMER", "NAMES", s] => ApiRequest::ConsumerNames {
                stream: stream_name(s)?,
            },
            ["CONSUMER", "LIST", s] => ApiRequest::ConsumerList {
                stream: stream_name(s)?,
            },
            ["CONSUMER", "MSG", "NEXT", s, c] => ApiRequest::ConsumerMsgNext {
                stream: stream_name(s)?,
                consumer: consumer_name(c)?,
            },
            ["CONSUMER", "LEADER", "STEPDOWN", s, c] => ApiRequest::ConsumerLeaderStepdown {
                stream: stream_name(s)?,
                consumer: consumer_name(c)?,
            },
            ["CONSUMER", op, s, c] => {
                let stream = stream_name(s)?;
                let consumer = consumer_name(c)?;
                match *op {
                    "INFO" => ApiRequest::ConsumerInfo { stream, consumer },
                    "DELETE" => ApiRequest::ConsumerDelete { stream, consumer },
                    "PAUSE" => ApiRequest::ConsumerPause { stream, consumer },
                    "UNPIN" => ApiRequest::ConsumerUnpin { stream, consumer },
                    "RESET" => ApiRequest::ConsumerReset { stream, consumer },
                    _ => return Err(unknown()),
                }
            }
            ["DIRECT", "GET", s] => ApiRequest::DirectGet {
                stream: stream_name(s)?,
                last_by_subject: None,
            },
            ["DIRECT", "GET", s, subject @ ..] => ApiRequest::DirectGet {
                stream: stream_name(s)?,
                last_by_subject: Some(subject.join(".")),
            },
            ["META", "LEADER", "STEPDOWN"] => ApiRequest::MetaLeaderStepdown,
            ["SERVER", "REMOVE"] => ApiRequest::ServerRemove,
            ["ACCOUNT", "PURGE", account] => ApiRequest::AccountPurge {
                account: account.to_string(),
            },
            _ => return Err(unknown()),
        };
        Ok(request)
    }

    /// The `type` of the JSON reply, or `None` for calls answered with messages
    /// (`MSG.NEXT`, `DIRECT.GET`).
    pub fn response_type(&self) -> Option<ResponseType> {
        use ApiRequest as R;
        Some(match self {
            R::AccountInfo => ResponseType::AccountInfo,
            R::StreamCreate { .. } => ResponseType::StreamCreate,
            R::StreamUpdate { .. } => ResponseType::StreamUpdate,
            R::StreamInfo { .. } => ResponseType::StreamInfo,
            R::StreamDelete { .. } => ResponseType::StreamDelete,
            R::StreamPurge { .. } => ResponseType::StreamPurge,
            R::StreamNames => ResponseType::StreamNames,
            R::StreamList => ResponseType::StreamList,
            R::StreamMsgGet { .. } => ResponseType::StreamMsgGet,
            R::StreamMsgDelete { .. } => ResponseType::StreamMsgDelete,
            R::StreamLeaderStepdown { .. } => ResponseType::StreamLeaderStepdown,
            R::StreamPeerRemove { .. } => ResponseType::StreamRemovePeer,
            R::StreamSnapshot { .. } => ResponseType::StreamSnapshot,
            R::StreamRestore { .. } => ResponseType::StreamRestore,
            R::ConsumerCreate { .. } => ResponseType::ConsumerCreate,
            R::ConsumerInfo { .. } => ResponseType::ConsumerInfo,
            R::ConsumerDelete { .. } => ResponseType::ConsumerDelete,
            R::ConsumerNames { .. } => ResponseType::ConsumerNames,
            R::ConsumerList { .. } => ResponseType::ConsumerList,
            R::ConsumerLeaderStepdown { .. } => ResponseType::ConsumerLeaderStepdown,
            R::ConsumerPause { .. } => ResponseType::ConsumerPause,
            R::ConsumerUnpin { .. } => ResponseType::ConsumerUnpin,
            R::ConsumerReset { .. } => ResponseType::ConsumerReset,
            R::MetaLeaderStepdown => ResponseType::MetaLeaderStepdown,
            R::ServerRemove => ResponseType::MetaServerRemove,
            R::AccountPurge { .. } => ResponseType::AccountPurge,
            R::ConsumerMsgNext { .. } | R::DirectGet { .. } => return None,
        })
    }

    /// The stream this call is about, if any.
    pub fn stream(&self) -> Option<&str> {
        use ApiRequest as R;
        match self {
            R::StreamCreate { stream }
            | R::StreamUpdate { stream }
            | R::StreamInfo { stream }
            | R::StreamDelete { stream }
            | R::StreamPurge { stream }
            | R::StreamMsgGet { stream }
            | R::StreamMsgDelete { stream }
            | R::StreamLeaderStepdown { stream }
            | R::StreamPeerRemove { stream }
            | R::StreamSnapshot { stream }
            | R::StreamRestore { stream }
            | R::ConsumerCreate { stream, .. }
            | R::ConsumerInfo { stream, .. }
            | R::ConsumerDelete { stream, .. }
            | R::ConsumerNames { stream }
            | R::ConsumerList { stream }
            | R::ConsumerLeaderStepdown { stream, .. }
            | R::ConsumerPause { stream, .. }
            | R::ConsumerUnpin { stream, .. }
            | R::ConsumerReset { stream, .. }
            | R::ConsumerMsgNext { stream, .. }
            | R::DirectGet { stream, .. } => Some(stream),
            R::AccountInfo
            | R::StreamNames
            | R::StreamList
            | R::MetaLeaderStepdown
            | R::ServerRemove
            | R::AccountPurge { .. } => None,
        }
    }
}
