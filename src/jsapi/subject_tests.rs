//! Tests of the `$JS.API.*` subject parser.

use super::response::ResponseType;
use super::subject::*;

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
        parse("$JS.API.CONSUMER.RESET.ORDERS.c1"),
        ApiRequest::ConsumerReset {
            stream: stream.clone(),
            consumer: consumer.clone()
        }
    );
    assert_eq!(
        parse("$JS.API.CONSUMER.RESET.ORDERS.c1").response_type(),
        Some(ResponseType::ConsumerReset)
    );
    assert_eq!(
        parse("$JS.API.CONSUMER.RESET.ORDERS.c1").stream(),
        Some("ORDERS")
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
