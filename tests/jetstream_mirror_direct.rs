//! `mirror_direct` (as nats.go sets it on every KV mirror bucket): a mirror with it answers
//! the direct gets addressed to its origin from its own copy when the origin does not allow
//! direct gets itself (nats-server subscribes it to the origin's direct-get subjects), and
//! its own direct gets when it allows them; an origin that allows them answers its own.
//! On R1 and R3.

mod common;

use async_nats::jetstream::{self, stream};
use common::fixture::{on_r1_and_r3, JsFixture};
use common::jetstream::{api, publish_acked};
use common::within;
use serde_json::json;

on_r1_and_r3!(a_mirror_with_mirror_direct_answers_its_origins_direct_gets);

/// A direct get by subject: the payload and the `Nats-Stream` that answered, or the status
/// (`no responders` when nobody answers).
async fn direct_last(client: &async_nats::Client, stream: &str, subject: &str) -> (String, String) {
    let request = format!("$JS.API.DIRECT.GET.{stream}.{subject}");
    let reply = match within("direct get", client.request(request, "".into())).await {
        Ok(reply) => reply,
        Err(error) if error.kind() == async_nats::RequestErrorKind::NoResponders => {
            return (String::new(), "no responders".to_string());
        }
        Err(error) => panic!("direct get: {error}"),
    };
    let headers = reply.headers.unwrap_or_default();
    let answered = match headers.get(async_nats::header::NATS_STREAM) {
        Some(stream) => stream.to_string(),
        None => format!("status {:?} {headers:?}", reply.status),
    };
    (
        String::from_utf8_lossy(&reply.payload).into_owned(),
        answered,
    )
}

async fn a_mirror_with_mirror_direct_answers_its_origins_direct_gets(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    fx.create_stream(
        &js,
        stream::Config {
            name: "ORIG".into(),
            subjects: vec!["o.>".into()],
            ..Default::default()
        },
    )
    .await;
    publish_acked(&js, "o.a", "first a").await;
    publish_acked(&js, "o.b", "first b").await;
    publish_acked(&js, "o.a", "second a").await;
    let reply = fx
        .create_stream_raw(
            &client,
            json!({"name":"MIR","mirror":{"name":"ORIG"},"mirror_direct":true,"allow_direct":true}),
        )
        .await;
    assert_eq!(
        reply["config"]["mirror_direct"], true,
        "stored as asked: {reply}"
    );
    fx.wait_until_replicas_count("MIR", 3).await;

    // The origin does not allow direct gets: its mirror answers them, from its copy.
    assert_eq!(
        direct_last(&client, "ORIG", "o.a").await,
        ("second a".to_string(), "MIR".to_string())
    );
    assert_eq!(
        direct_last(&client, "MIR", "o.b").await,
        ("first b".to_string(), "MIR".to_string())
    );
    // Without mirror_direct the mirror does not answer for its origin (no responders).
    let update = json!({"name":"MIR","mirror":{"name":"ORIG"},"mirror_direct":false,
        "allow_direct":true,"num_replicas":fx.stream_replicas()});
    let reply = api(&client, "$JS.API.STREAM.UPDATE.MIR", update).await;
    assert_eq!(reply["config"]["mirror_direct"], false, "{reply}");
    assert_eq!(
        direct_last(&client, "ORIG", "o.a").await,
        (String::new(), "no responders".to_string())
    );

    // An origin that allows direct gets answers its own.
    let update = json!({"name":"ORIG","subjects":["o.>"],"allow_direct":true,
        "num_replicas":fx.stream_replicas()});
    let reply = api(&client, "$JS.API.STREAM.UPDATE.ORIG", update).await;
    assert_eq!(reply["config"]["allow_direct"], true, "{reply}");
    assert_eq!(
        direct_last(&client, "ORIG", "o.a").await,
        ("second a".to_string(), "ORIG".to_string())
    );
    fx.shutdown().await;
}
