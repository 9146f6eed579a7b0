//! Section 5 of the notes: an invalid SUB subject gets `-ERR 'Invalid Subject'` and keeps the
//! connection; PUB subjects are checked only for pedantic clients (`-ERR 'Invalid Publish
//! Subject'`, and the message is still delivered); non-pedantic PUB accepts anything.

use crate::common::raw::Raw;
use crate::{cat, err, Harness, C};

const VERBOSE: &[u8] = b"CONNECT {\"verbose\":true,\"pedantic\":false}\r\n";
const PEDANTIC: &[u8] = b"CONNECT {\"verbose\":false,\"pedantic\":true}\r\n";
const PEDANTIC_HEADERS: &[u8] =
    b"CONNECT {\"verbose\":false,\"pedantic\":true,\"headers\":true}\r\n";

const BAD_SUBS: [&[u8]; 5] = [
    b"SUB foo..bar 1\r\n",
    b"SUB foo.>.bar 1\r\n",
    b"SUB .foo 1\r\n",
    b"SUB foo. 1\r\n",
    b"SUB foo..bar q 1\r\n",
];

/// A client subscribed to `subs` (and synchronised with a PING).
async fn watcher(h: &Harness, subs: &[u8]) -> Raw {
    let mut raw = h.client(b"watcher").await;
    raw.send([C, subs, b"PING\r\n"].concat()).await;
    raw.expect(b"PONG\r\n").await;
    raw
}

/// Publishes `input` (after `C`) from a fresh client and waits until the server has routed
/// it. Unlike `Harness::answers` it does not exercise the bystander, whose messages the
/// catch-all watchers here would see.
async fn publish(h: &Harness, input: &[u8]) {
    let mut raw = h.client(input).await;
    raw.send([C, input, b"PING\r\n"].concat()).await;
    raw.expect(b"PONG\r\n").await;
}

#[tokio::test]
async fn invalid_sub_subject_errs_and_keeps_the_connection() {
    let mut h = Harness::start().await;
    for connect in [C, PEDANTIC] {
        for input in BAD_SUBS {
            let mut raw = h
                .answers(&cat(connect, input), &err("Invalid Subject"))
                .await;
            // Still fully usable.
            raw.send(b"SUB ok 2\r\nPUB ok 1\r\nx\r\n").await;
            raw.expect(b"MSG ok 2 1\r\nx\r\n").await;
        }
    }
    h.stop().await;
}

#[tokio::test]
async fn invalid_sub_subject_in_verbose_mode_gets_no_ok() {
    let mut h = Harness::start().await;
    for input in BAD_SUBS {
        h.answers(
            &cat(VERBOSE, input),
            &cat(b"+OK\r\n", &err("Invalid Subject")),
        )
        .await;
    }
    h.stop().await;
}

#[tokio::test]
async fn wildcards_and_literal_wildcard_characters_are_valid_sub_subjects() {
    let mut h = Harness::start().await;
    for input in [
        &b"SUB * 1\r\n"[..],
        b"SUB > 1\r\n",
        b"SUB foo.*bar 1\r\n",
        b"SUB foo.b>r 1\r\n",
    ] {
        h.answers(&cat(C, input), b"").await;
    }
    // `*` or `>` inside a longer token is an ordinary character.
    h.answers(
        &cat(
            C,
            b"SUB foo.*bar 1\r\nSUB foo.b>r 2\r\nPUB foo.xbar 1\r\na\r\n\
              PUB foo.*bar 1\r\nb\r\nPUB foo.b>r 1\r\nc\r\n",
        ),
        b"MSG foo.*bar 1 1\r\nb\r\nMSG foo.b>r 2 1\r\nc\r\n",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn pedantic_pub_to_a_non_literal_subject_errs_and_keeps_the_connection() {
    let mut h = Harness::start().await;
    for input in [
        &b"PUB foo.* 0\r\n\r\n"[..],
        b"PUB foo.> 0\r\n\r\n",
        b"PUB foo..bar 0\r\n\r\n",
        b"PUB > 0\r\n\r\n",
        b"PUB .foo 0\r\n\r\n",
    ] {
        h.answers(&cat(PEDANTIC, input), &err("Invalid Publish Subject"))
            .await;
    }
    h.answers(
        &cat(
            PEDANTIC_HEADERS,
            b"HPUB foo.* 12 12\r\nNATS/1.0\r\n\r\n\r\n",
        ),
        &err("Invalid Publish Subject"),
    )
    .await;
    // The reply subject is not checked.
    h.answers(&cat(PEDANTIC, b"PUB foo.bar reply.* 0\r\n\r\n"), b"")
        .await;
    h.stop().await;
}

#[tokio::test]
async fn pedantic_pub_warning_still_delivers_the_message() {
    let h = Harness::start().await;
    let mut all = watcher(&h, b"SUB > 1\r\n").await;
    let mut raw = h.client(b"pedantic PUB foo.*").await;
    raw.send(cat(PEDANTIC, b"PUB foo.* 2\r\nhi\r\nPING\r\n"))
        .await;
    raw.expect(cat(&err("Invalid Publish Subject"), b"PONG\r\n"))
        .await;
    all.expect(b"MSG foo.* 1 2\r\nhi\r\n").await;
    all.assert_open().await;
    h.stop().await;
}

#[tokio::test]
async fn non_pedantic_pub_accepts_any_subject() {
    let mut h = Harness::start().await;
    for input in [
        &b"PUB foo.* 0\r\n\r\n"[..],
        b"PUB foo.> 0\r\n\r\n",
        b"PUB foo..bar 0\r\n\r\n",
        b"PUB > 0\r\n\r\n",
        b"PUB .foo 0\r\n\r\n",
        b"PUB foo. 0\r\n\r\n",
    ] {
        h.answers(&cat(C, input), b"").await;
    }
    h.stop().await;
}

#[tokio::test]
async fn non_pedantic_literal_wildcard_subject_matches_wildcard_subs() {
    let h = Harness::start().await;
    let mut subs = watcher(&h, b"SUB foo.* 1\r\nSUB foo.> 2\r\n").await;
    publish(&h, b"PUB foo.* 1\r\nx\r\n").await;
    // Delivery order across subs is not defined: compare as a set.
    let mut frames = Vec::new();
    for _ in 0..2 {
        let mut frame = subs.read_line().await;
        frame.extend(subs.read_line().await);
        frames.push(String::from_utf8(frame).unwrap());
    }
    frames.sort();
    assert_eq!(frames, ["MSG foo.* 1 1\r\nx\r\n", "MSG foo.* 2 1\r\nx\r\n"]);
    subs.assert_open().await;
    h.stop().await;
}

#[tokio::test]
async fn non_pedantic_malformed_subject_matches_nobody() {
    let h = Harness::start().await;
    let mut subs = watcher(&h, b"SUB > 1\r\nSUB * 2\r\nSUB foo.> 3\r\n").await;
    publish(
        &h,
        b"PUB foo..bar 1\r\nx\r\nPUB .x 1\r\nx\r\nPUB x. 1\r\nx\r\n",
    )
    .await;
    // The publisher's PONG came after routing; the watcher's PONG is next in its stream.
    subs.assert_open().await;
    h.stop().await;
}

#[tokio::test]
async fn non_pedantic_system_looking_subjects_are_delivered() {
    let h = Harness::start().await;
    let mut all = watcher(&h, b"SUB > 1\r\n").await;
    publish(&h, b"PUB _SYS.x 2\r\nhi\r\nPUB $SYS.x 2\r\nhi\r\n").await;
    all.expect(b"MSG _SYS.x 1 2\r\nhi\r\nMSG $SYS.x 1 2\r\nhi\r\n")
        .await;
    all.assert_open().await;
    h.stop().await;
}
