//! Unit tests of the config file parser: syntax, values, blocks, errors with line numbers.

use super::*;

fn ok(text: &str) -> FileConfig {
    parse(Path::new("test.conf"), text).expect("config should parse")
}

fn err(text: &str) -> ConfigError {
    parse(Path::new("test.conf"), text).expect_err("config should be rejected")
}

#[test]
fn separators_comments_and_quotes() {
    let fc = ok(
        "# top\nPORT: 4333\nhost = 127.0.0.1 // trailing\nserver_name node-a\n\
                 debug: true, trace: on; max_conn 10\n",
    );
    assert_eq!(
        (fc.port, fc.host.as_deref()),
        (Some(4333), Some("127.0.0.1"))
    );
    assert_eq!(fc.server_name.as_deref(), Some("node-a"));
    assert_eq!(
        (fc.debug, fc.trace, fc.max_connections),
        (Some(true), Some(true), Some(10))
    );
    let fc = ok("server_name: \"a \\\"b\\\" # not a comment\"\nhost: 'raw\\n'\n");
    assert_eq!(fc.server_name.as_deref(), Some("a \"b\" # not a comment"));
    assert_eq!(fc.host.as_deref(), Some("raw\\n"));
}

#[test]
fn size_suffixes() {
    let sizes = [
        ("77", 77),
        ("2MB", 2 << 20),
        ("512kib", 512 << 10),
        ("1M", 1_000_000),
    ];
    for (text, bytes) in sizes
        .into_iter()
        .chain([("1GB", 1 << 30), ("4K", 4000), ("3Ki", 3072)])
    {
        assert_eq!(
            ok(&format!("max_pending: {text}")).max_pending,
            Some(bytes),
            "{text}"
        );
    }
    assert!(parse_size("10XB").is_err() && parse_size("99999999999TB").is_err());
}

#[test]
fn durations() {
    let cases = [
        ("\"2m\"", 120.0),
        ("\"500ms\"", 0.5),
        ("\"1h30m\"", 5400.0),
        ("45", 45.0),
    ];
    for (text, secs) in cases.into_iter().chain([("1.5", 1.5), ("\"1.5s\"", 1.5)]) {
        let expected = Some(Duration::from_secs_f64(secs));
        assert_eq!(
            ok(&format!("ping_interval: {text}")).ping_interval,
            expected,
            "{text}"
        );
    }
    let fc = ok("authorization { timeout: \"250ms\" }");
    assert_eq!(fc.auth_timeout, Some(Duration::from_millis(250)));
    assert!(parse_duration("2 weeks").is_err() && parse_duration("").is_err());
}

#[test]
fn listen_and_http() {
    let fc = ok("listen: 10.0.0.1:4300\nhttp: 8300");
    assert_eq!(
        (fc.host.as_deref(), fc.port),
        (Some("10.0.0.1"), Some(4300))
    );
    assert_eq!((fc.http_host, fc.http_port), (None, Some(8300)));
    let fc = ok("host: 1.2.3.4\nlisten: \":4400\"\nhttp: \"[::1]:8222\"\nmonitor_port: 9000");
    assert_eq!((fc.host.as_deref(), fc.port), (Some("1.2.3.4"), Some(4400)));
    assert_eq!(
        (fc.http_host.as_deref(), fc.http_port),
        (Some("::1"), Some(9000))
    );
}

#[test]
fn blocks() {
    let fc = ok(
        "jetstream {\n  store_dir: \"/data/js\"\n  max_mem: 1G\n  cache_bytes: 1MiB\n}\n\
                 authorization: {\n user: alice\n password: 1234\n}\n",
    );
    assert_eq!(
        (fc.jetstream, fc.store_dir, fc.js_cache_bytes),
        (Some(true), Some("/data/js".into()), Some(1 << 20))
    );
    assert_eq!(
        (fc.user.as_deref(), fc.password.as_deref()),
        (Some("alice"), Some("1234"))
    );
    assert_eq!(ok("jetstream { enabled: false }").jetstream, Some(false));
    assert_eq!(ok("jetstream: enabled").jetstream, Some(true));
    assert_eq!(ok("jetstream = off").jetstream, Some(false));
    let fc = ok("authorization { token: \"s3cret\" }");
    assert_eq!(fc.token.as_deref(), Some("s3cret"));
}

#[test]
fn unknown_keys_are_ignored_even_when_nested() {
    let fc = ok(
        "write_deadline: \"2s\"\nlimits {\n  routes: [\n    nats://a:6222 // first\n    \
                 \"nats://b:6222\"\n  ]\n}\nlame_duck_duration: \"30s\"\nport: 4999",
    );
    assert_eq!(
        fc,
        FileConfig {
            port: Some(4999),
            ..FileConfig::default()
        }
    );
}

#[test]
fn bad_values_are_invalid_with_their_key() {
    let cases = [
        ("port: \"abc\"", "port"),
        ("port: 70000", "port"),
        ("listen: \"nowhere\"", "listen"),
        ("max_payload: -1", "max_payload"),
        ("debug: 1", "debug"),
        ("authorization: true", "authorization"),
        ("jetstream { store_dir: [a] }", "jetstream.store_dir"),
        // nats-server reads a bare 2m as 2,000,000 seconds; refuse instead.
        ("ping_interval: 2m", "ping_interval"),
        ("ping_interval: \"soon\"", "ping_interval"),
        // Security settings jetraft cannot honour are refused, not ignored.
        ("tls { cert_file: x }", "tls"),
        // So is what it would not serve.
        ("leafnodes { port: 7422 }", "leafnodes"),
        ("gateway { name: c1 }", "gateway"),
        ("websocket { port: 8080 }", "websocket"),
        ("mqtt { port: 1883 }", "mqtt"),
        ("jetstream { domain: LEAF }", "jetstream.domain"),
        (
            "authorization {\n users: [ {user: a, password: b} ]\n}",
            "authorization.users",
        ),
    ];
    for (text, expected) in cases {
        match err(text) {
            ConfigError::Invalid { key, .. } => assert_eq!(key, expected, "{text}"),
            other => panic!("{text}: expected an invalid value, got {other:?}"),
        }
    }
    let message = err("\n\nport: abc").to_string();
    assert!(
        message.contains("port") && message.contains("test.conf:3"),
        "{message}"
    );
}

#[test]
fn syntax_errors_carry_line_numbers() {
    let cases = [
        ("port: 1\nhost:\n", 2),
        ("a: 1\n\nname: \"unterminated\n", 3),
        ("jetstream {\n store_dir: x\n", 3),
        ("port: 1\n}\n", 2),
        ("x: 1\ny: 2\nserver_name: two words\n", 3),
        ("include ./other.conf", 1),
        ("\ntoken: $TOKEN", 2),
        ("list: [1, 2\n", 2),
        ("a: \"bad \\q escape\"", 1),
    ];
    for (text, expected) in cases {
        match err(text) {
            ConfigError::Parse { line, .. } => assert_eq!(line, expected, "{text}"),
            other => panic!("{text}: expected a parse error, got {other:?}"),
        }
    }
}

#[test]
fn load_reads_files_and_reports_missing_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("a.conf");
    std::fs::write(&path, "port: 4001").expect("write");
    assert_eq!(load(&path).expect("load").port, Some(4001));
    let missing = dir.path().join("missing.conf");
    assert!(matches!(load(&missing), Err(ConfigError::Read { path, .. }) if path == missing));
}

#[test]
fn cluster_block_with_routes() {
    let fc = parse(
        Path::new("t.conf"),
        "cluster {\n  name: c1\n  listen: 127.0.0.1:6222\n  routes: [\n    nats-route://127.0.0.1:6222\n    \"nats://127.0.0.1:6223\"\n  ]\n}\n",
    )
    .unwrap();
    assert_eq!(fc.cluster_name.as_deref(), Some("c1"));
    assert_eq!(fc.cluster_listen.as_deref(), Some("127.0.0.1:6222"));
    assert_eq!(
        fc.routes,
        Some(vec![
            "127.0.0.1:6222".to_string(),
            "127.0.0.1:6223".to_string()
        ])
    );
    assert!(parse(Path::new("t.conf"), "cluster { routes: [ 5 ] }").is_err());
}
