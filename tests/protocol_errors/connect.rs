//! Sections 0, 7, 8 and 12 of the notes: CONNECT option errors, verbose `+OK` sequences, the
//! defaults of a client that omits options (or CONNECT), the INFO fields, and the second INFO
//! a protocol-1 client gets after its first PONG.

use serde_json::Value;

use crate::common::raw::show;
use crate::{cat, err, Harness};

const VERBOSE: &[u8] = b"CONNECT {\"verbose\":true,\"pedantic\":false}\r\n";

#[tokio::test]
async fn bad_protocol_version_is_refused() {
    let mut h = Harness::start().await;
    for input in [
        &b"CONNECT {\"verbose\":false,\"protocol\":2}\r\n"[..],
        b"CONNECT {\"verbose\":false,\"protocol\":-1}\r\n",
    ] {
        h.closes(input, &err("invalid client protocol")).await;
    }
    h.stop().await;
}

#[tokio::test]
async fn no_responders_without_headers_is_refused() {
    let mut h = Harness::start().await;
    for input in [
        &b"CONNECT {\"verbose\":false,\"no_responders\":true,\"headers\":false}\r\n"[..],
        b"CONNECT {\"verbose\":false,\"no_responders\":true}\r\n",
    ] {
        h.closes(input, &err("no responders requires headers support"))
            .await;
    }
    h.stop().await;
}

#[tokio::test]
async fn accepted_connect_options() {
    let mut h = Harness::start().await;
    for input in [
        &b"CONNECT {\"verbose\":false,\"protocol\":0}\r\n"[..],
        b"CONNECT {\"verbose\":false}\r\n",
        b"CONNECT {\"verbose\":false,\"unknown_field\":[1,2],\"sig\":\"x\"}\r\n",
        b"CONNECT {\"verbose\":false,\"echo\":false}\r\n",
        b"CONNECT {\"verbose\":false,\"lang\":\"rust\",\"version\":\"1.0\",\"name\":\"t\"}\r\n",
    ] {
        h.answers(&cat(input, b"PING\r\n"), b"PONG\r\n").await;
    }
    h.stop().await;
}

#[tokio::test]
async fn verbose_acks_each_operation_written_separately() {
    let mut h = Harness::start().await;
    let mut raw = h.answers(VERBOSE, b"+OK\r\n").await;
    for (input, answer) in [
        (&b"SUB foo 1\r\n"[..], &b"+OK\r\n"[..]),
        // The +OK comes before the echoed message.
        (b"PUB foo 2\r\nhi\r\n", b"+OK\r\nMSG foo 1 2\r\nhi\r\n"),
        (b"UNSUB 1\r\n", b"+OK\r\n"),
        (b"UNSUB 99\r\n", b"+OK\r\n"),
        // No +OK for PING or PONG.
        (b"PING\r\n", b"PONG\r\n"),
        (b"PONG\r\n", b""),
        // An invalid subject gets only the -ERR.
        (b"SUB foo..bar 2\r\n", b"-ERR 'Invalid Subject'\r\n"),
        (b"PUB bar 0\r\n\r\n", b"+OK\r\n"),
    ] {
        raw.send(input).await;
        raw.expect(answer).await;
        // Nothing more than `answer`.
        raw.assert_open().await;
    }
    h.stop().await;
}

#[tokio::test]
async fn verbose_acks_a_pipelined_session() {
    let mut h = Harness::start().await;
    h.answers(
        &cat(
            VERBOSE,
            b"SUB foo 1\r\nPUB foo 2\r\nhi\r\nUNSUB 1\r\nPING\r\n",
        ),
        b"+OK\r\n+OK\r\n+OK\r\nMSG foo 1 2\r\nhi\r\n+OK\r\nPONG\r\n",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn empty_connect_means_verbose_and_pedantic() {
    let mut h = Harness::start().await;
    h.answers(
        b"CONNECT {}\r\nPUB foo.* 0\r\n\r\nPING\r\n",
        b"+OK\r\n-ERR 'Invalid Publish Subject'\r\n+OK\r\nPONG\r\n",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn without_auth_a_client_may_skip_connect_and_gets_the_defaults() {
    let mut h = Harness::start().await;
    h.answers(
        b"SUB foo 1\r\nPUB foo 1\r\nx\r\nPING\r\n",
        b"+OK\r\n+OK\r\nMSG foo 1 1\r\nx\r\nPONG\r\n",
    )
    .await;
    h.stop().await;
}

fn is_semver(version: &str) -> bool {
    let parts: Vec<&str> = version.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

#[tokio::test]
async fn info_has_the_nats_server_fields() {
    let h = Harness::start().await;
    let first = h.client(b"first").await.info;
    let second = h.client(b"second").await.info;
    let id = first["server_id"].as_str().expect("server_id is a string");
    assert!(!id.is_empty(), "INFO: {first}");
    assert_eq!(
        first["server_name"], id,
        "server_name defaults to server_id"
    );
    let version = first["version"].as_str().expect("version is a string");
    assert!(is_semver(version), "version {version:?} is not x.y.z");
    assert_eq!(first["proto"], 1);
    assert_eq!(first["headers"], true);
    assert_eq!(first["max_payload"], 1048576);
    assert_eq!(first["host"], "127.0.0.1");
    assert_eq!(first["port"], h.server.client_addr().port());
    assert_eq!(first["client_ip"], "127.0.0.1");
    let (a, b) = (first["client_id"].as_u64(), second["client_id"].as_u64());
    assert!(
        matches!((a, b), (Some(a), Some(b)) if b > a),
        "client_id must increase: {a:?} then {b:?}"
    );
    // Features that are off are left out.
    for absent in [
        "auth_required",
        "tls_required",
        "jetstream",
        "connect_urls",
        "connect_info",
    ] {
        assert!(
            first.get(absent).is_none(),
            "unexpected {absent} in {first}"
        );
    }
    h.stop().await;
}

#[tokio::test]
async fn info_line_ends_with_a_space_before_crlf() {
    // nats-server sends `INFO {...} \r\n` (clients don't care, but it is what is on the wire).
    let h = Harness::start().await;
    let line = h.client(b"INFO").await.info_line;
    assert!(
        line.starts_with(b"INFO {") && line.ends_with(b"} \r\n"),
        "INFO line: {}",
        show(&line)
    );
    h.stop().await;
}

#[tokio::test]
async fn protocol_1_client_gets_a_second_info_after_its_first_pong() {
    let h = Harness::start().await;
    let mut raw = h.client(b"protocol 1").await;
    let first = raw.info.clone();
    raw.send(b"CONNECT {\"verbose\":false,\"pedantic\":false,\"protocol\":1}\r\nPING\r\n")
        .await;
    raw.expect(b"PONG\r\n").await;
    let second = raw.read_info().await;
    let mut expected = first.clone();
    expected["connect_info"] = Value::Bool(true);
    expected["remote_account"] = Value::from("$G");
    assert_eq!(
        second, expected,
        "second INFO = first INFO + connect_info, remote_account"
    );
    // Only once: the next PING gets a plain PONG.
    raw.assert_open().await;
    raw.assert_open().await;
    h.stop().await;
}

#[tokio::test]
async fn protocol_0_client_gets_no_second_info() {
    let mut h = Harness::start().await;
    for input in [
        &b"CONNECT {\"verbose\":false,\"protocol\":0}\r\nPING\r\n"[..],
        b"CONNECT {\"verbose\":false}\r\nPING\r\n",
    ] {
        // `answers` also checks that the next PING gets exactly PONG.
        h.answers(input, b"PONG\r\n").await;
    }
    h.stop().await;
}
