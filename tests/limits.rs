//! Per-connection resource limits, black-box over raw TCP, against what nats-server 2.15.1 was
//! observed to do (`/work/notes/protocol-behaviour.md`, sections 9 and 10):
//! * a slow consumer (outbound bytes over `max_pending`) is cut off with no `-ERR`, after only
//!   whole MSG frames, while the publisher and other clients carry on and the server's memory
//!   stays bounded;
//! * a client that leaves `ping_max` PINGs unanswered gets `PING`, `PING`, then
//!   `-ERR 'Stale Connection'` and EOF, while a client that answers stays connected;
//! * a connection over `max_connections` gets `-ERR 'maximum connections exceeded'`.

mod common;

use std::time::{Duration, Instant};

use common::raw::{show, Raw};
use common::{start, wait_until};
use jetraft::config::Config;

const C: &[u8] = b"CONNECT {\"verbose\":false,\"pedantic\":false}\r\n";

/// Resident set size of this process (the server runs in-process), from `/proc/self/status`.
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|n| n.trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

/// A connected client (CONNECT sent and acknowledged by a PONG) with `subs` in place.
async fn client(addr: std::net::SocketAddr, name: &str, subs: &[u8]) -> Raw {
    let mut raw = Raw::connect_to(addr).await.named(name);
    raw.send([C, subs, b"PING\r\n"].concat()).await;
    raw.expect(b"PONG\r\n").await;
    raw
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_consumer_is_cut_off_without_disturbing_others() {
    const MAX_PENDING: usize = 256 * 1024;
    const PAYLOAD: usize = 10_000;
    const COUNT: usize = 10_000; // 100 MB in all
    const BATCH: usize = 10;
    // Loose on purpose: RSS is process-wide, so it also counts the test's own buffers, other
    // tests running in parallel, and memory the allocator keeps after freeing. Buffering the
    // undeliverable messages would have grown it by ~100 MB.
    const MAX_GROWTH: u64 = 64 * 1024 * 1024;

    let server = start(Config {
        max_pending: MAX_PENDING,
        max_payload: 16 * 1024,
        ..Config::loopback()
    })
    .await;
    let addr = server.client_addr();
    // A small receive buffer, and it never reads until the end.
    let mut slow = Raw::connect_with_recv_buffer(addr, 4096)
        .await
        .named("slow consumer");
    slow.send([C, b"SUB foo 1\r\nPING\r\n"].concat()).await;
    slow.expect(b"PONG\r\n").await;
    let mut other = client(addr, "other subscriber", b"SUB bar 1\r\n").await;
    let mut publisher = client(addr, "publisher", b"").await;

    let rss_before = rss_bytes();
    let payload = vec![b'x'; PAYLOAD];
    let frame = [
        format!("PUB foo {PAYLOAD}\r\n").as_bytes(),
        &payload,
        b"\r\n",
    ]
    .concat();
    let batch = frame.repeat(BATCH);
    for _ in 0..COUNT / BATCH {
        publisher.send(&batch).await;
    }
    // Every PUB was taken without an -ERR, and the publisher still works.
    publisher.send(b"PUB bar 2\r\nhi\r\nPING\r\n").await;
    publisher.expect(b"PONG\r\n").await;
    let stats = &server.shared().stats;
    wait_until("the slow consumer to be detected", || {
        stats.snapshot().slow_consumers >= 1
    })
    .await;
    let growth = rss_bytes().saturating_sub(rss_before);
    assert!(
        growth < MAX_GROWTH,
        "server memory grew by {} MiB while publishing {} MiB to a slow consumer",
        growth >> 20,
        (COUNT * PAYLOAD) >> 20
    );

    other.expect(b"MSG bar 1 2\r\nhi\r\n").await;
    other.assert_open().await;

    // The slow consumer gets whole MSG frames only, then EOF: no -ERR.
    let received = slow.expect_closed().await;
    let msg = [
        format!("MSG foo 1 {PAYLOAD}\r\n").as_bytes(),
        &payload,
        b"\r\n",
    ]
    .concat();
    let mut rest = &received[..];
    let mut frames = 0;
    while let Some(tail) = rest.strip_prefix(&msg[..]) {
        rest = tail;
        frames += 1;
    }
    assert!(
        rest.is_empty(),
        "after {frames} whole MSG frames the slow consumer got {}",
        show(rest)
    );
    assert!(
        frames < COUNT,
        "the slow consumer got all {frames} messages"
    );

    publisher.assert_open().await;
    other.assert_open().await;
    assert!(stats.snapshot().slow_consumers >= 1);
    server.shutdown().await;
}

#[tokio::test]
async fn unanswered_pings_close_a_stale_connection() {
    let interval = Duration::from_millis(200);
    let server = start(Config {
        ping_interval: interval,
        ping_max: 2,
        ..Config::loopback()
    })
    .await;
    let addr = server.client_addr();

    let silent = |connect: &'static [u8], name: &'static str| async move {
        let mut raw = Raw::connect_to(addr).await.named(name);
        let started = Instant::now();
        raw.send(connect).await;
        raw.expect(b"PING\r\n").await;
        raw.expect(b"PING\r\n").await;
        let rest = raw.expect_closed().await;
        assert!(
            rest == b"-ERR 'Stale Connection'\r\n",
            "{name}: after two PINGs got {} then close",
            show(&rest)
        );
        // Three ticks: PING, PING, then the close.
        let took = started.elapsed();
        assert!(took >= interval * 2, "{name}: closed after only {took:?}");
    };
    let answering = async {
        let mut raw = Raw::connect_to(addr).await.named("answering client");
        raw.send(C).await;
        for _ in 0..6 {
            raw.expect(b"PING\r\n").await;
            raw.send(b"PONG\r\n").await;
        }
        raw.assert_open().await;
    };
    tokio::join!(
        silent(C, "client that never answers"),
        silent(b"", "client that never sends CONNECT"),
        answering,
    );
    assert_eq!(server.shared().stats.snapshot().stale_connections, 2);
    server.shutdown().await;
}

#[tokio::test]
async fn connection_over_max_connections_is_refused() {
    let server = start(Config {
        max_connections: 2,
        ..Config::loopback()
    })
    .await;
    let addr = server.client_addr();
    let mut first = client(addr, "first", b"").await;
    let second = client(addr, "second", b"").await;

    // The INFO comes first (nats-server sends it before checking), then the refusal.
    let mut third = Raw::connect_to(addr).await.named("third");
    let got = third.expect_closed().await;
    assert!(
        got == b"-ERR 'maximum connections exceeded'\r\n",
        "over the limit got {} then close",
        show(&got)
    );
    first.assert_open().await;

    // A freed slot can be used again.
    drop(second);
    let stats = &server.shared().stats;
    wait_until("the closed connections to be released", || {
        stats.snapshot().connections < 2
    })
    .await;
    let mut fourth = client(addr, "fourth", b"").await;
    fourth.assert_open().await;
    first.assert_open().await;
    server.shutdown().await;
}
