//! Section 6 of the notes: with user/password or token auth, anything but a CONNECT with the
//! right credentials gets `-ERR 'Authorization Violation'` and a close; a client that sends
//! nothing gets `-ERR 'Authentication Timeout'` after `auth_timeout`.

use std::time::{Duration, Instant};

use jetraft::config::{Auth, Config};

use crate::{cat, err, Harness};

const VIOLATION: &str = "Authorization Violation";

fn user_pass() -> Config {
    Config {
        auth: Auth::UserPass {
            user: "a".into(),
            pass: "b".into(),
        },
        ..Config::loopback()
    }
}

fn token() -> Config {
    Config {
        auth: Auth::Token("s3cr3t".into()),
        ..Config::loopback()
    }
}

const USER_PASS_GOOD: &[u8] = b"CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"b\"}\r\n";
const TOKEN_GOOD: &[u8] = b"CONNECT {\"verbose\":false,\"auth_token\":\"s3cr3t\"}\r\n";

/// The rows both kinds of auth share. `good` is a non-verbose CONNECT with the right
/// credentials, `wrong` one with wrong credentials.
async fn check_auth(config: Config, good: &[u8], wrong: &[u8]) {
    let mut h = Harness::with_connect(config, good).await;

    let raw = h.client(b"INFO").await;
    assert_eq!(raw.info["auth_required"], true, "INFO: {}", raw.info);

    // Anything before CONNECT.
    for input in [&b"PUB foo 2\r\nhi\r\n"[..], b"SUB foo 1\r\n", b"PING\r\n"] {
        h.closes(input, &err(VIOLATION)).await;
    }
    // Wrong or missing credentials.
    h.closes(wrong, &err(VIOLATION)).await;
    h.closes(b"CONNECT {\"verbose\":false}\r\n", &err(VIOLATION))
        .await;
    // Bad JSON is a protocol violation, not an auth failure: no -ERR.
    h.closes(b"CONNECT {bad\r\n", b"").await;

    // The right credentials work, quietly or verbosely.
    h.answers(&cat(good, b"PING\r\n"), b"PONG\r\n").await;
    let verbose = String::from_utf8(good.to_vec())
        .unwrap()
        .replace("\"verbose\":false", "\"verbose\":true");
    h.answers(&cat(verbose.as_bytes(), b"PING\r\n"), b"+OK\r\nPONG\r\n")
        .await;
    h.stop().await;
}

#[tokio::test]
async fn user_password_auth() {
    check_auth(
        user_pass(),
        USER_PASS_GOOD,
        b"CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"WRONG\"}\r\n",
    )
    .await;
}

#[tokio::test]
async fn token_auth() {
    check_auth(
        token(),
        TOKEN_GOOD,
        b"CONNECT {\"verbose\":false,\"auth_token\":\"nope\"}\r\n",
    )
    .await;
}

#[tokio::test]
async fn unknown_operation_before_connect_is_an_authorization_violation() {
    // With auth, any first byte other than `C`/`c` is an auth violation, even an unknown op.
    for (config, good) in [(user_pass(), USER_PASS_GOOD), (token(), TOKEN_GOOD)] {
        let mut h = Harness::with_connect(config, good).await;
        h.closes(b"FOO bar\r\n", &err(VIOLATION)).await;
        h.stop().await;
    }
}

#[tokio::test]
async fn no_info_auth_required_without_auth() {
    let h = Harness::start().await;
    let raw = h.client(b"INFO").await;
    assert!(
        raw.info.get("auth_required").is_none(),
        "INFO: {}",
        raw.info
    );
    h.stop().await;
}

#[tokio::test]
async fn silent_client_gets_authentication_timeout() {
    let timeout = Duration::from_millis(500);
    let mut h = Harness::with_connect(
        Config {
            auth_timeout: timeout,
            ..user_pass()
        },
        USER_PASS_GOOD,
    )
    .await;
    // Connected before the silent one, so it has been open longer than the timeout by the
    // time the silent one is cut off.
    let mut good = h.client(b"good CONNECT").await;
    good.send(cat(USER_PASS_GOOD, b"PING\r\n")).await;
    good.expect(b"PONG\r\n").await;

    let started = Instant::now();
    let mut silent = h.client(b"silent client").await;
    assert_eq!(
        silent.expect_closed().await,
        err("Authentication Timeout"),
        "silent client"
    );
    let waited = started.elapsed();
    assert!(
        waited >= timeout - Duration::from_millis(50),
        "timed out after only {waited:?}"
    );
    // A PING instead of CONNECT is refused at once, not at the timeout.
    h.closes(b"PING\r\n", &err(VIOLATION)).await;

    good.assert_open().await;
    h.stop().await;
}
