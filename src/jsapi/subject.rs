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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(subject: &str) -> ApiRequest {
        ApiRequest::parse(subject).unwrap_or_else(|e| panic!("{subject}: {e}"))
    }

    fn s(text: &str) -> String {
        text.to_string()
    }

    #[test]
    fn stream_calls() {
        assert_eq!(parse("$JS.API.INFO"), ApiRequest::AccountInfo);
        assert_eq!(
            parse("$JS.API.STREAM.CREATE.ORDERS"),
            ApiRequest::StreamCreate {
                stream: s("ORDERS")
            }
        );
        assert_eq!(
            parse("$JS.API.STREAM.UPDATE.ORDERS"),
            ApiRequest::StreamUpdate {
                stream: s("ORDERS")
            }
        );
        assert_eq!(
            parse("$JS.API.STREAM.INFO.ORDERS"),
            ApiRequest::StreamInfo {
                stream: s("ORDERS")
            }
        );
        assert_eq!(
            parse("$JS.API.STREAM.DELETE.ORDERS"),
            ApiRequest::StreamDelete {
                stream: s("ORDERS")
            }
        );
        assert_eq!(
            parse("$JS.API.STREAM.PURGE.ORDERS"),
            ApiRequest::StreamPurge {
                stream: s("ORDERS")
            }
        );
        assert_eq!(parse("$JS.API.STREAM.NAMES"), ApiRequest::StreamNames);
        assert_eq!(parse("$JS.API.STREAM.LIST"), ApiRequest::StreamList);
        assert_eq!(
            parse("$JS.API.STREAM.MSG.GET.ORDERS"),
            ApiRequest::StreamMsgGet {
                stream: s("ORDERS")
            }
        );
        assert_eq!(
            parse("$JS.API.STREAM.MSG.DELETE.ORDERS"),
            ApiRequest::StreamMsgDelete {
                stream: s("ORDERS")
            }
        );
        assert_eq!(
            parse("$JS.API.STREAM.LEADER.STEPDOWN.ORDERS"),
            ApiRequest::StreamLeaderStepdown {
                stream: s("ORDERS")
            }
        );
        assert_eq!(
            parse("$JS.API.META.LEADER.STEPDOWN"),
            ApiRequest::MetaLeaderStepdown
        );
    }

    #[test]
    fn consumer_create_forms() {
        assert_eq!(
            parse("$JS.API.CONSUMER.CREATE.ORDERS"),
            ApiRequest::ConsumerCreate {
                stream: s("ORDERS"),
                form: ConsumerCreateForm::LegacyEphemeral
            }
        );
        assert_eq!(
            parse("$JS.API.CONSUMER.CREATE.ORDERS.order-processor"),
            ApiRequest::ConsumerCreate {
                stream: s("ORDERS"),
                form: ConsumerCreateForm::Named {
                    consumer: s("order-processor"),
                    filter: None
                },
            }
        );
        assert_eq!(
            parse("$JS.API.CONSUMER.CREATE.ORDERS.proc.orders.*.eu"),
            ApiRequest::ConsumerCreate {
                stream: s("ORDERS"),
                form: ConsumerCreateForm::Named {
                    consumer: s("proc"),
                    filter: Some(s("orders.*.eu"))
                },
            }
        );
        assert_eq!(
            parse("$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.dur"),
            ApiRequest::ConsumerCreate {
                stream: s("ORDERS"),
                form: ConsumerCreateForm::LegacyDurable { durable: s("dur") },
            }
        );
        let err = ApiRequest::parse("$JS.API.CONSUMER.DURABLE.CREATE.ORDERS").unwrap_err();
        assert_eq!(err.to_api_error().err_code, 10016);
    }

    #[test]
    fn consumer_calls() {
        let sc = |stream: &str, consumer: &str| (s(stream), s(consumer));
        let (stream, consumer) = sc("ORDERS", "c1");
        assert_eq!(
            parse("$JS.API.CONSUMER.INFO.ORDERS.c1"),
            ApiRequest::ConsumerInfo {
                stream: stream.clone(),
                consumer: consumer.clone()
            }
        );
        assert_eq!(
            parse("$JS.API.CONSUMER.DELETE.ORDERS.c1"),
            ApiRequest::ConsumerDelete {
                stream: stream.clone(),
                consumer: consumer.clone()
            }
        );
        assert_eq!(
            parse("$JS.API.CONSUMER.NAMES.ORDERS"),
            ApiRequest::ConsumerNames {
                stream: stream.clone()
            }
        );
        assert_eq!(
            parse("$JS.API.CONSUMER.LIST.ORDERS"),
            ApiRequest::ConsumerList {
                stream: stream.clone()
            }
        );
        assert_eq!(
            parse("$JS.API.CONSUMER.MSG.NEXT.ORDERS.c1"),
            ApiRequest::ConsumerMsgNext {
                stream: stream.clone(),
                consumer: consumer.clone()
            }
        );
        assert_eq!(
            parse("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.c1"),
            ApiRequest::ConsumerLeaderStepdown {
                stream: stream.clone(),
                consumer: consumer.clone()
            }
        );
        assert_eq!(
            parse("$JS.API.CONSUMER.PAUSE.ORDERS.c1"),
            ApiRequest::ConsumerPause { stream, consumer }
        );
        assert_eq!(
            parse("$JS.API.CONSUMER.MSG.NEXT.ORDERS.c1").response_type(),
            None
        );
        assert_eq!(
            parse("$JS.API.CONSUMER.INFO.ORDERS.c1").response_type(),
            Some(ResponseType::ConsumerInfo)
        );
    }

    #[test]
    fn direct_get_and_domains() {
        assert_eq!(
            parse("$JS.API.DIRECT.GET.KV_x"),
            ApiRequest::DirectGet {
                stream: s("KV_x"),
                last_by_subject: None
            }
        );
        assert_eq!(
            parse("$JS.API.DIRECT.GET.KV_x.$KV.x.key"),
            ApiRequest::DirectGet {
                stream: s("KV_x"),
                last_by_subject: Some(s("$KV.x.key"))
            }
        );
        assert_eq!(
            parse("$JS.hub.API.STREAM.INFO.S"),
            ApiRequest::StreamInfo { stream: s("S") }
        );
        assert_eq!(
            strip_api_prefix("$JS.hub.API.INFO"),
            Some((Some("hub"), "INFO"))
        );
        assert_eq!(strip_api_prefix("$JS.API.INFO"), Some((None, "INFO")));
        assert_eq!(strip_api_prefix("$JS.ACK.S.C.1.1.1.1.0"), None);
    }

    #[test]
    fn unknown_and_bad_names() {
        for subject in [
            "$JS.API.STREAM.FROB.S",
            "$JS.API.STREAM.INFO",
            "$JS.API.STREAM.INFO.S.extra",
            "$JS.API.CONSUMER.INFO.S",
            "$JS.API.NOPE",
            "$JS.API.",
        ] {
            let err = ApiRequest::parse(subject).unwrap_err();
            assert!(
                matches!(err, SubjectError::Unknown(_)),
                "{subject}: {err:?}"
            );
            assert_eq!(err.to_api_error().err_code, 10003);
        }
        assert_eq!(
            ApiRequest::parse("foo.bar").unwrap_err(),
            SubjectError::NotApi
        );
        let err = ApiRequest::parse("$JS.API.STREAM.INFO.*").unwrap_err();
        assert_eq!(err.to_api_error().err_code, 10052);
        let err = ApiRequest::parse("$JS.API.STREAM.CREATE.a/b").unwrap_err();
        assert_eq!(err.to_api_error().err_code, 10128);
        let err = ApiRequest::parse("$JS.API.CONSUMER.INFO.S.c\\d").unwrap_err();
        assert_eq!(err.to_api_error().err_code, 10127);
        let long = format!("$JS.API.STREAM.INFO.{}", "x".repeat(256));
        assert!(ApiRequest::parse(&long).is_err());
    }
}
