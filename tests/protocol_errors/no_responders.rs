//! Section 11 of the notes: a request nobody subscribes to gets a 503 status on the
//! requester's own reply subscription, byte-exact: `HMSG <reply> <sid> 40 40` with the header
//! block `NATS/1.0 503\r\nNats-Subject: <subject>\r\n\r\n` and no payload.

use crate::{cat, Harness, CH};

const NR: &[u8] = b"CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\n";

fn status(reply: &str, sid: &str, subject: &str) -> Vec<u8> {
    let block = format!("NATS/1.0 503\r\nNats-Subject: {subject}\r\n\r\n");
    let len = block.len();
    format!("HMSG {reply} {sid} {len} {len}\r\n{block}\r\n").into_bytes()
}

#[tokio::test]
async fn no_responders_status_is_byte_exact() {
    let mut h = Harness::start().await;
    let expected = cat(&status("_INBOX.x", "1", "svc.none"), b"PONG\r\n");
    assert!(expected.starts_with(b"HMSG _INBOX.x 1 40 40\r\n"));
    h.answers(
        &cat(
            NR,
            b"SUB _INBOX.x 1\r\nPUB svc.none _INBOX.x 0\r\n\r\nPING\r\n",
        ),
        &expected,
    )
    .await;
    // The request's payload is not echoed.
    h.answers(
        &cat(
            NR,
            b"SUB _INBOX.x 1\r\nPUB svc.none _INBOX.x 5\r\nhello\r\nPING\r\n",
        ),
        &expected,
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn no_responders_uses_the_matching_wildcard_subscription() {
    let mut h = Harness::start().await;
    h.answers(
        &cat(
            NR,
            b"SUB _INBOX.> 3\r\nPUB svc.none _INBOX.abc.1 0\r\n\r\nPING\r\n",
        ),
        &cat(&status("_INBOX.abc.1", "3", "svc.none"), b"PONG\r\n"),
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn no_responders_for_an_hpub_request() {
    let mut h = Harness::start().await;
    h.answers(
        &cat(
            NR,
            b"SUB _INBOX.x 7\r\nHPUB svc.none _INBOX.x 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\nPING\r\n",
        ),
        &cat(&status("_INBOX.x", "7", "svc.none"), b"PONG\r\n"),
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn own_subscription_without_echo_is_not_a_responder() {
    let mut h = Harness::start().await;
    h.answers(
        b"CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true,\"echo\":false}\r\n\
          SUB _INBOX.x 1\r\nSUB svc.self 2\r\nPUB svc.self _INBOX.x 0\r\n\r\nPING\r\n",
        &cat(&status("_INBOX.x", "1", "svc.self"), b"PONG\r\n"),
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn no_status_without_a_reply_subscription_or_without_no_responders() {
    let mut h = Harness::start().await;
    // Nobody subscribes to the reply subject.
    h.answers(
        &cat(NR, b"PUB svc.none _INBOX.y 0\r\n\r\nPING\r\n"),
        b"PONG\r\n",
    )
    .await;
    // Headers, but no `no_responders`.
    h.answers(
        &cat(
            CH,
            b"SUB _INBOX.x 1\r\nPUB svc.none _INBOX.x 0\r\n\r\nPING\r\n",
        ),
        b"PONG\r\n",
    )
    .await;
    h.stop().await;
}
