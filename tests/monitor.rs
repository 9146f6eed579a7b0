//! Monitoring endpoints on `-m/--http_port`: `/healthz`, `/varz` and `/metrics` report what
//! the clients actually did.

mod common;

use std::net::SocketAddr;

use common::{connect, within};
use futures::StreamExt;
use jetraft::config::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A plain HTTP/1.1 GET; returns (status line, body).
async fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    within("http response", stream.read_to_string(&mut response))
        .await
        .unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("http response");
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

async fn monitored_server() -> jetraft::node::RunningNode {
    let mut config = Config::loopback();
    config.http = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    common::start(config).await
}

#[tokio::test]
async fn healthz_answers_ok() {
    let server = monitored_server().await;
    let (status, body) = get(server.http_addr().unwrap(), "/healthz").await;
    assert!(status.contains("200"), "{status}");
    assert_eq!(body, r#"{"status":"ok"}"#);
    server.shutdown().await;
}

#[tokio::test]
async fn varz_and_metrics_count_connections_subscriptions_and_traffic() {
    let server = monitored_server().await;
    let http = server.http_addr().unwrap();
    let client = connect(&server).await;
    let mut sub = client.subscribe("m.x").await.unwrap();
    client.flush().await.unwrap();
    for _ in 0..5 {
        client.publish("m.x", "12345".into()).await.unwrap();
    }
    client.flush().await.unwrap();
    for _ in 0..5 {
        within("message", sub.next()).await.unwrap();
    }

    let (status, body) = get(http, "/varz").await;
    assert!(status.contains("200"), "{status}");
    let varz: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(varz["connections"], 1);
    assert_eq!(varz["subscriptions"], 1);
    assert_eq!(varz["in_msgs"], 5);
    assert_eq!(varz["in_bytes"], 25);
    assert_eq!(varz["out_msgs"], 5);
    assert_eq!(varz["out_bytes"], 25);
    assert_eq!(varz["slow_consumers"], 0);
    assert_eq!(varz["max_payload"], 1024 * 1024);
    assert_eq!(varz["port"], server.client_addr().port());
    assert!(varz["mem"].as_u64().unwrap() > 0);
    assert!(varz["server_id"].as_str().unwrap().starts_with('N'));
    for field in ["start", "now", "uptime", "version", "cores"] {
        assert!(!varz[field].is_null(), "varz lacks {field}");
    }

    let (status, metrics) = get(http, "/metrics").await;
    assert!(status.contains("200"), "{status}");
    assert!(
        metrics.contains("# TYPE jetraft_in_msgs counter"),
        "{metrics}"
    );
    let in_msgs = metrics
        .lines()
        .find(|l| l.starts_with("jetraft_in_msgs{"))
        .expect("in_msgs sample");
    assert!(in_msgs.ends_with(" 5"), "{in_msgs}");
    assert!(metrics.contains("jetraft_connections{"));
    server.shutdown().await;
}

/// `/jsz` and `/varz` report the bytes of file and memory streams apart, as nats-server's
/// `storage` and `memory`, and the block cache at work: with a 64 KiB cache and 256 KiB of
/// file stream bodies, reading the oldest message again misses the cache, and the cache stays
/// within its budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jsz_and_varz_report_store_bytes_and_the_block_cache() {
    const CACHE: u64 = 64 << 10;
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::loopback();
    config.http = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    config.jetstream = true;
    config.store_dir = dir.path().to_path_buf();
    config.js_cache_bytes = CACHE;
    let server = common::start(config).await;
    let http = server.http_addr().unwrap();
    let js = async_nats::jetstream::new(connect(&server).await);
    let mut streams = Vec::new();
    for (name, storage) in [
        ("F", async_nats::jetstream::stream::StorageType::File),
        ("M", async_nats::jetstream::stream::StorageType::Memory),
    ] {
        let config = async_nats::jetstream::stream::Config {
            name: name.into(),
            subjects: vec![format!("{name}.>")],
            storage,
            allow_direct: true,
            ..Default::default()
        };
        streams.push(
            within("stream create", js.create_stream(config))
                .await
                .unwrap(),
        );
    }
    // 256 file messages of 1 KiB (four times the cache), 10 memory ones.
    for (prefix, count) in [("F", 256), ("M", 10)] {
        for i in 0..count {
            let ack = within(
                "publish",
                js.publish(format!("{prefix}.{i}"), vec![7u8; 1024].into()),
            )
            .await
            .unwrap();
            within("PubAck", std::future::IntoFuture::into_future(ack))
                .await
                .unwrap();
        }
    }
    let mut bytes = Vec::new();
    for stream in &mut streams {
        bytes.push(within("info", stream.info()).await.unwrap().state.bytes);
    }
    let before = jsz(http).await;
    let oldest = within("direct get", streams[0].direct_get(1))
        .await
        .unwrap();
    assert_eq!(oldest.payload.len(), 1024);
    let after = jsz(http).await;

    assert_eq!(after["storage"], bytes[0], "{after}");
    assert_eq!(after["memory"], bytes[1], "{after}");
    let cache = &after["jetraft_cache"];
    assert_eq!(cache["max_bytes"], CACHE, "{after}");
    assert!(cache["bytes"].as_u64().unwrap() <= CACHE, "{after}");
    let reads = |jsz: &serde_json::Value| {
        jsz["jetraft_cache"]["hits"].as_u64().unwrap()
            + jsz["jetraft_cache"]["misses"].as_u64().unwrap()
    };
    assert!(
        reads(&after) > reads(&before),
        "the read went through the cache: {after}"
    );
    assert!(
        cache["misses"].as_u64().unwrap() > 0,
        "the oldest block was no longer cached: {after}"
    );

    let (status, body) = get(http, "/varz").await;
    assert!(status.contains("200"), "{status}");
    let varz: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(varz["jetstream"]["storage"], bytes[0], "{varz}");
    assert_eq!(varz["jetstream"]["memory"], bytes[1], "{varz}");
    server.shutdown().await;
}

async fn jsz(http: SocketAddr) -> serde_json::Value {
    let (status, body) = get(http, "/jsz").await;
    assert!(status.contains("200"), "{status}");
    serde_json::from_str(&body).unwrap()
}
