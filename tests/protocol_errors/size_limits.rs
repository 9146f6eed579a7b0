//! Sections 3 and 4 of the notes: the control-line limit (4096 bytes of *arguments*, checked
//! with or without the CRLF, CONNECT included) and `max_payload` (checked on the control line,
//! on the total size for HPUB).

use jetraft::config::Config;

use crate::{cat, err, Harness, C, CH};

const CONTROL_LINE: &str = "maximum control line exceeded";
const MAX_PAYLOAD: &str = "Maximum Payload Violation";

/// `SUB <subject> 1` whose arguments (after `SUB `) are exactly `arg_len` bytes.
fn sub_line(arg_len: usize) -> Vec<u8> {
    let subject = "a".repeat(arg_len - 2);
    format!("SUB {subject} 1").into_bytes()
}

#[tokio::test]
async fn control_line_over_the_limit_errs_and_closes() {
    let mut h = Harness::start().await;
    let line = format!("SUB {} 1", "a".repeat(4990)); // 4996 bytes
    h.closes(&cat(C, &cat(line.as_bytes(), b"\r\n")), &err(CONTROL_LINE))
        .await;
    // Without its CRLF: the partial line is checked too.
    h.closes(&cat(C, line.as_bytes()), &err(CONTROL_LINE)).await;
    let publish = format!("PUB {} 0\r\n\r\n", "b".repeat(5000));
    h.closes(&cat(C, publish.as_bytes()), &err(CONTROL_LINE))
        .await;
    // CONNECT's JSON counts as well.
    let connect = format!("CONNECT {{\"name\":\"{}\"}}\r\n", "x".repeat(5000));
    h.closes(connect.as_bytes(), &err(CONTROL_LINE)).await;
    // Much longer: the server may reset rather than FIN because of unread input.
    let long = format!("SUB {} 1\r\n", "a".repeat(7994));
    h.closes(&cat(C, long.as_bytes()), &err(CONTROL_LINE)).await;
    h.stop().await;
}

#[tokio::test]
async fn control_line_over_the_limit_in_two_writes() {
    let mut h = Harness::start().await;
    let line = cat(C, format!("SUB {} 1\r\n", "a".repeat(4990)).as_bytes());
    let (first, second) = line.split_at(C.len() + 3000);
    let mut raw = h.client(b"4996-byte SUB line in two writes").await;
    raw.send(first).await;
    let _ = raw.try_send(second).await;
    assert_eq!(raw.expect_closed().await, err(CONTROL_LINE));
    h.check_bystander().await;
    h.stop().await;
}

#[tokio::test]
async fn control_line_limit_is_4096_argument_bytes() {
    let mut h = Harness::start().await;
    // 4096 argument bytes: accepted, with its CRLF in the same write or a later one.
    h.answers(&cat(C, &cat(&sub_line(4096), b"\r\n")), b"")
        .await;
    let mut raw = h.client(b"SUB with 4096 argument bytes, CRLF later").await;
    raw.send(cat(C, &sub_line(4096))).await;
    raw.send(b"\r\n").await;
    raw.assert_open().await;
    // 4097: refused, with or without the CRLF.
    h.closes(&cat(C, &cat(&sub_line(4097), b"\r\n")), &err(CONTROL_LINE))
        .await;
    h.closes(&cat(C, &sub_line(4097)), &err(CONTROL_LINE)).await;
    h.stop().await;
}

#[tokio::test]
async fn payload_over_the_default_max_payload_errs_and_closes() {
    let mut h = Harness::start().await;
    for input in [&b"PUB foo 2000000\r\n"[..], b"PUB foo 1048577\r\n"] {
        h.closes(&cat(C, input), &err(MAX_PAYLOAD)).await;
    }
    // HPUB is checked on its total size.
    h.closes(&cat(CH, b"HPUB foo 100 2000000\r\n"), &err(MAX_PAYLOAD))
        .await;
    h.stop().await;
}

#[tokio::test]
async fn payload_of_exactly_the_default_max_payload_is_accepted() {
    let h = Harness::start().await;
    let mut raw = h.client(b"PUB foo 1048576").await;
    raw.send(cat(C, b"SUB foo 1\r\nPUB foo 1048576\r\n")).await;
    let payload = vec![b'p'; 1048576];
    raw.send(&payload).await;
    raw.send(b"\r\n").await;
    raw.expect(b"MSG foo 1 1048576\r\n").await;
    raw.expect(&payload).await;
    raw.expect(b"\r\n").await;
    raw.assert_open().await;
    h.stop().await;
}

#[tokio::test]
async fn configured_max_payload_is_advertised_and_enforced() {
    let mut h = Harness::with(Config {
        max_payload: 1024,
        ..Config::loopback()
    })
    .await;
    let raw = h.client(b"INFO").await;
    assert_eq!(raw.info["max_payload"], 1024, "INFO: {}", raw.info);

    h.closes(&cat(C, b"PUB foo 1025\r\n"), &err(MAX_PAYLOAD))
        .await;
    h.closes(&cat(CH, b"HPUB foo 12 1025\r\n"), &err(MAX_PAYLOAD))
        .await;

    // At the limit: accepted and delivered.
    let mut watcher = h.client(b"watcher").await;
    watcher.send(cat(CH, b"SUB foo 1\r\nPING\r\n")).await;
    watcher.expect(b"PONG\r\n").await;
    let payload = vec![b'p'; 1024];
    let publish = [C, b"PUB foo 1024\r\n", &payload, b"\r\n"].concat();
    h.answers(&publish, b"").await;
    watcher.expect(b"MSG foo 1 1024\r\n").await;
    watcher.expect(&payload).await;
    watcher.expect(b"\r\n").await;

    let hpub = [
        CH,
        b"HPUB foo 12 1024\r\nNATS/1.0\r\n\r\n",
        &payload[..1012],
        b"\r\n",
    ]
    .concat();
    h.answers(&hpub, b"").await;
    watcher
        .expect(b"HMSG foo 1 12 1024\r\nNATS/1.0\r\n\r\n")
        .await;
    watcher.expect(&payload[..1012]).await;
    watcher.expect(b"\r\n").await;
    watcher.assert_open().await;
    h.stop().await;
}
