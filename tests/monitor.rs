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
