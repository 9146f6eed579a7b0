//! Section 13 of the notes: `UNSUB <sid> <max>` delivers exactly `max` messages; a max of 0,
//! a negative or a non-numeric max unsubscribes at once; a duplicate sid is ignored; sids need
//! not be numeric.

use crate::{cat, Harness, C};

/// `SUB foo 1`, then `middle`, then one PUB per payload letter, then PING.
fn session(middle: &[u8], payloads: &str) -> Vec<u8> {
    let mut input = cat(C, b"SUB foo 1\r\n");
    input.extend_from_slice(middle);
    for p in payloads.chars() {
        input.extend_from_slice(format!("PUB foo 1\r\n{p}\r\n").as_bytes());
    }
    input.extend_from_slice(b"PING\r\n");
    input
}

#[tokio::test]
async fn unsub_with_max_delivers_exactly_max() {
    let mut h = Harness::start().await;
    h.answers(
        &session(b"UNSUB 1 2\r\n", "abc"),
        b"MSG foo 1 1\r\na\r\nMSG foo 1 1\r\nb\r\nPONG\r\n",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn unsub_with_zero_negative_or_non_numeric_max_unsubscribes_now() {
    let mut h = Harness::start().await;
    for unsub in [&b"UNSUB 1 0\r\n"[..], b"UNSUB 1 -1\r\n", b"UNSUB 1 x\r\n"] {
        h.answers(&session(unsub, "ab"), b"PONG\r\n").await;
    }
    h.stop().await;
}

#[tokio::test]
async fn plain_unsub_overrides_a_max() {
    let mut h = Harness::start().await;
    h.answers(&session(b"UNSUB 1 3\r\nUNSUB 1\r\n", "ab"), b"PONG\r\n")
        .await;
    h.stop().await;
}

#[tokio::test]
async fn max_already_reached_unsubscribes_now() {
    let mut h = Harness::start().await;
    let mut input = session(b"", "ab");
    input.extend_from_slice(b"UNSUB 1 1\r\nPUB foo 1\r\nc\r\nPING\r\n");
    h.answers(
        &input,
        b"MSG foo 1 1\r\na\r\nMSG foo 1 1\r\nb\r\nPONG\r\nPONG\r\n",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn duplicate_sid_is_ignored() {
    let mut h = Harness::start().await;
    h.answers(
        &cat(
            C,
            b"SUB foo 1\r\nSUB bar 1\r\nPUB bar 1\r\nb\r\nPUB foo 1\r\nf\r\nPING\r\n",
        ),
        b"MSG foo 1 1\r\nf\r\nPONG\r\n",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn non_numeric_sid_works_for_sub_and_unsub() {
    let mut h = Harness::start().await;
    h.answers(
        &cat(
            C,
            b"SUB foo abc\r\nPUB foo 1\r\nx\r\nUNSUB abc\r\nPUB foo 1\r\ny\r\nPING\r\n",
        ),
        b"MSG foo abc 1\r\nx\r\nPONG\r\n",
    )
    .await;
    h.stop().await;
}
