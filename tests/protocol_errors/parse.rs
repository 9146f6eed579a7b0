//! Sections 0, 1, 2 and 14 of the notes: unknown operations, malformed arguments (silent
//! close), the CRLF after a payload, case/tabs/bare LF, and protocol lines a client sends back.

use crate::{cat, err, Harness, C, CH};

const UNKNOWN: &str = "Unknown Protocol Operation";

#[tokio::test]
async fn unknown_operation_after_connect_errs_and_closes() {
    let mut h = Harness::start().await;
    for input in [
        &b"FOO bar\r\n"[..],
        b"PX\r\n",
        // A client may not send MSG/HMSG.
        b"MSG foo 1 5\r\nhello\r\n",
        b"HMSG foo 1 0 0\r\n",
        // An empty line, and a leading space.
        b"\r\nPING\r\n",
        b" PING\r\n",
    ] {
        h.closes(&cat(C, input), &err(UNKNOWN)).await;
    }
    h.stop().await;
}

#[tokio::test]
async fn unknown_operation_without_connect_errs_and_closes() {
    let mut h = Harness::start().await;
    h.closes(b"FOO bar\r\n", &err(UNKNOWN)).await;
    h.stop().await;
}

#[tokio::test]
async fn unknown_operation_is_refused_before_its_newline() {
    // nats-server fails on the first bad byte `F`, without waiting for a newline.
    let mut h = Harness::start().await;
    h.closes(&cat(C, b"FOO"), &err(UNKNOWN)).await;
    h.stop().await;
}

#[tokio::test]
async fn ping_ignores_the_rest_of_its_line() {
    let mut h = Harness::start().await;
    for input in [&b"PING \r\n"[..], b"PING foo\r\n", b"ping\r\n"] {
        h.answers(&cat(C, input), b"PONG\r\n").await;
    }
    h.stop().await;
}

// Everything between `PING` and `\n` is ignored, even without a separator.

#[tokio::test]
async fn ping_followed_by_letters_is_still_ping() {
    let mut h = Harness::start().await;
    h.answers(&cat(C, b"PINGX\r\n"), b"PONG\r\n").await;
    h.stop().await;
}

#[tokio::test]
async fn ping_cr_ping_is_one_ping() {
    let mut h = Harness::start().await;
    h.answers(&cat(C, b"PING\rPING\r\n"), b"PONG\r\n").await;
    h.stop().await;
}

#[tokio::test]
async fn argument_errors_close_without_an_err() {
    let mut h = Harness::start().await;
    for input in [
        &b"PUB \r\n"[..],
        b"PUB foo\r\n",
        b"PUB foo bar\r\n",
        b"PUB foo -1\r\n",
        b"PUB foo +1\r\n",
        b"PUB foo 99999999999999999999\r\n",
        b"PUB foo 1 2 3\r\n",
        b"SUB foo\r\n",
        b"SUB  \r\n",
        b"SUB foo bar baz qux\r\n",
        b"SUB foo q .. 1\r\n",
        b"UNSUB 1 2 3\r\n",
        // HPUB from a client that did not announce headers.
        b"HPUB foo 10 5\r\n",
    ] {
        h.closes(&cat(C, input), b"").await;
    }
    for input in [
        // Header size larger than the total, missing and non-numeric sizes.
        &b"HPUB foo 10 5\r\n"[..],
        b"HPUB foo 5\r\n",
        b"HPUB foo x 5\r\n",
    ] {
        h.closes(&cat(CH, input), b"").await;
    }
    h.stop().await;
}

#[tokio::test]
async fn operation_without_its_separator_is_unknown() {
    // `PUB` must be followed by a space or tab: the byte-level parser fails, which does send
    // an -ERR (unlike the argument errors above).
    let mut h = Harness::start().await;
    for input in [&b"PUB\r\n"[..], b"SUB\r\n", b"UNSUB\r\n"] {
        h.closes(&cat(C, input), &err(UNKNOWN)).await;
    }
    h.stop().await;
}

#[tokio::test]
async fn lenient_arguments_are_accepted() {
    let mut h = Harness::start().await;
    // A size with a leading zero.
    h.answers(
        &cat(C, b"SUB foo 1\r\nPUB foo 01\r\nx\r\n"),
        b"MSG foo 1 1\r\nx\r\n",
    )
    .await;
    // An unknown sid is ignored.
    h.answers(&cat(C, b"UNSUB 99\r\n"), b"").await;
    // The header size is not checked against the header block's real length.
    h.answers(&cat(CH, b"HPUB foo 5 12\r\nNATS/1.0\r\n\r\n\r\n"), b"")
        .await;
    // A reply subject; a queue group.
    h.answers(
        &cat(C, b"SUB foo bar 1\r\nPUB foo rep 1\r\nx\r\n"),
        b"MSG foo 1 rep 1\r\nx\r\n",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn bad_connect_json_closes_without_an_err() {
    let mut h = Harness::start().await;
    for input in [
        &b"CONNECT {bad json\r\n"[..],
        b"CONNECT\r\n",
        b"CONNECT \r\n",
        b"CONNECT {\"verbose\":\"x\"}\r\n",
        b"CONNECT {\"verbose\":true} trailing\r\n",
    ] {
        h.closes(input, b"").await;
    }
    // A bad second CONNECT, too.
    h.closes(&cat(C, b"CONNECT {bad\r\n"), b"").await;
    h.stop().await;
}

#[tokio::test]
async fn connect_json_that_is_not_an_object_closes_without_an_err() {
    let mut h = Harness::start().await;
    h.closes(b"CONNECT []\r\n", b"").await;
    h.stop().await;
}

#[tokio::test]
async fn a_second_valid_connect_applies_its_options() {
    let mut h = Harness::start().await;
    let mut raw = h
        .answers(
            &cat(C, b"CONNECT {\"verbose\":true}\r\nPING\r\n"),
            b"+OK\r\nPONG\r\n",
        )
        .await;
    raw.send(b"SUB foo 1\r\n").await;
    raw.expect(b"+OK\r\n").await;
    h.stop().await;
}

#[tokio::test]
async fn payload_not_followed_by_crlf_is_unknown_operation() {
    let mut h = Harness::start().await;
    for input in [
        &b"PUB foo 5\r\nhelloXX"[..],
        b"PUB foo 5\r\nhelloX\r\n",
        b"PUB foo 1\r\nx\nPING\r\n",
    ] {
        h.closes(&cat(C, input), &err(UNKNOWN)).await;
    }
    // `\r` in one write, the bad byte in the next.
    let mut raw = h.client(b"PUB foo 5\\r\\nhello\\r + X").await;
    raw.send(cat(C, b"PUB foo 5\r\nhello\r")).await;
    let _ = raw.try_send(b"X").await;
    assert_eq!(raw.expect_closed().await, err(UNKNOWN));
    h.stop().await;
}

#[tokio::test]
async fn payload_followed_by_bare_lf_is_refused_at_once() {
    // nats-server fails on the `\n` where `\r` belongs, without waiting for another byte.
    let mut h = Harness::start().await;
    h.closes(&cat(C, b"PUB foo 5\r\nhello\n"), &err(UNKNOWN))
        .await;
    h.stop().await;
}

#[tokio::test]
async fn a_payload_split_across_writes_is_awaited() {
    let h = Harness::start().await;
    let mut raw = h.client(b"split payload").await;
    raw.send(cat(C, b"SUB foo 1\r\nPUB foo 5\r\nhel")).await;
    raw.send(b"lo\r\nPING\r\n").await;
    raw.expect(b"MSG foo 1 5\r\nhello\r\nPONG\r\n").await;
    raw.assert_open().await;
    h.stop().await;
}

#[tokio::test]
async fn case_tabs_spaces_and_bare_lf() {
    let mut h = Harness::start().await;
    let delivered = b"MSG foo 1 1\r\nx\r\nPONG\r\n";
    for input in [
        &b"sub  foo   1\r\npub\tfoo 1\r\nx\r\nping\r\n"[..],
        b"SuB foo 1\r\nPuB foo 1\r\nx\r\nPiNg\r\n",
        b"SUB\tfoo\t1\r\nPUB foo  1 \r\nx\r\nPING\r\n",
        b"SUB foo 1\nPUB foo 1\nx\r\nPING\n",
    ] {
        h.answers(&cat(C, input), delivered).await;
    }
    // A trailing space after the sid: the UNSUB still works.
    h.answers(
        &cat(C, b"SUB foo 1\r\nUNSUB 1 \r\nPUB foo 1\r\nx\r\nPING\r\n"),
        b"PONG\r\n",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn connect_spelled_in_lower_case_or_with_a_tab() {
    let mut h = Harness::start().await;
    h.answers(
        b"connect {\"verbose\":true}\r\nping\r\n",
        b"+OK\r\nPONG\r\n",
    )
    .await;
    h.answers(
        b"CONNECT\t{\"verbose\":true}\r\nPING\r\n",
        b"+OK\r\nPONG\r\n",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn connect_without_a_space_before_the_json() {
    let mut h = Harness::start().await;
    h.answers(b"CONNECT{\"verbose\":true}\r\nPING\r\n", b"+OK\r\nPONG\r\n")
        .await;
    h.stop().await;
}

#[tokio::test]
async fn client_sent_ok_and_info_are_ignored() {
    let mut h = Harness::start().await;
    h.answers(&cat(C, b"+OK\r\nPING\r\n"), b"PONG\r\n").await;
    h.answers(&cat(C, b"INFO {}\r\nPING\r\n"), b"PONG\r\n")
        .await;
    h.stop().await;
}

#[tokio::test]
async fn client_sent_err_closes_without_an_answer() {
    // nats-server logs `Client Error 'x'` and closes (reason "Parse Error").
    let mut h = Harness::start().await;
    h.closes(&cat(C, b"-ERR 'x'\r\nPING\r\n"), b"").await;
    h.stop().await;
}

#[tokio::test]
async fn client_sent_bad_info_json_closes_without_an_answer() {
    let mut h = Harness::start().await;
    h.closes(&cat(C, b"INFO {bad\r\nPING\r\n"), b"").await;
    h.stop().await;
}
