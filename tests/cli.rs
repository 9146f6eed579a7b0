//! The `jetraft` binary as a user runs it: nats-server style flags (including the single-dash
//! long forms), config files, bad input exiting with code 1, and clean shutdown on signals.

mod common;

use common::process::{run_to_exit, JetraftProcess};

#[test]
fn help_explains_every_flag() {
    let (status, stdout, _) = run_to_exit(&["--help"]);
    assert!(status.success());
    for flag in [
        "--addr",
        "--port",
        "--server_name",
        "--config",
        "--http_port",
        "--jetstream",
        "-js",
        "--store_dir",
        "-sd",
        "--max_payload",
        "--user",
        "--pass",
        "--auth",
        "--debug",
        "--trace",
        "-DV",
    ] {
        assert!(
            stdout.contains(flag),
            "--help does not mention {flag}:\n{stdout}"
        );
    }
}

#[test]
fn bad_flags_and_values_exit_with_code_1() {
    for args in [
        &["--no-such-flag"][..],
        &["-p", "notaport"],
        &["-p", "70000"],
        &["--max_payload", "0"],
        &["--user", "alice"],
        &["-c", "/nonexistent/jetraft.conf"],
    ] {
        let (status, _, stderr) = run_to_exit(args);
        assert_eq!(status.code(), Some(1), "{args:?}: {stderr}");
        assert!(!stderr.trim().is_empty(), "{args:?} printed no reason");
    }
}

#[test]
fn config_file_syntax_error_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.conf");
    std::fs::write(&path, "port: 4222\nauthorization {\n  user: a\n").unwrap();
    let (status, _, stderr) = run_to_exit(&["-c", path.to_str().unwrap()]);
    assert_eq!(status.code(), Some(1));
    assert!(stderr.contains("line"), "{stderr}");
}

#[tokio::test]
async fn single_dash_forms_start_a_node_and_sigterm_drains_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut node = JetraftProcess::spawn(&[
        "-a",
        "127.0.0.1",
        "-p",
        "0",
        "-n",
        "cli-node",
        "-js",
        "-sd",
        store.to_str().unwrap(),
        "-DV",
        "-m",
        "0",
    ]);
    let addr = node.client_addr();
    node.wait_for_line("Starting http monitor on");
    let client = async_nats::connect(format!("nats://{addr}")).await.unwrap();
    let info = client.server_info();
    assert_eq!(info.server_name, "cli-node");
    assert!(info.headers);
    assert!(store.is_dir(), "-sd created the store directory");
    node.wait_for_line("client connection created");

    node.signal("TERM");
    let status = node.wait_for_exit();
    assert!(status.success(), "exit status {status:?}");
    let log = node.log.join("\n");
    assert!(log.contains("trapped SIGTERM"), "{log}");
    assert!(log.contains("server exited cleanly"), "{log}");
    assert!(log.contains("reason=\"Server Shutdown\""), "{log}");
}

#[tokio::test]
async fn config_file_sets_name_and_auth_and_sigint_stops() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jetraft.conf");
    std::fs::write(
        &path,
        "# a nats-server style config\nlisten: 127.0.0.1:0\nserver_name: from-file\n\
         authorization {\n  user: alice\n  password: s3cret\n}\n",
    )
    .unwrap();
    let mut node = JetraftProcess::spawn(&["-c", path.to_str().unwrap()]);
    let addr = node.client_addr();

    let denied = async_nats::ConnectOptions::new()
        .user_and_password("alice".into(), "wrong".into())
        .max_reconnects(Some(1))
        .connect(format!("nats://{addr}"))
        .await;
    assert!(denied.is_err(), "wrong password must be refused");

    let client = async_nats::ConnectOptions::new()
        .user_and_password("alice".into(), "s3cret".into())
        .connect(format!("nats://{addr}"))
        .await
        .unwrap();
    assert_eq!(client.server_info().server_name, "from-file");
    assert!(client.server_info().auth_required);

    node.signal("INT");
    assert!(node.wait_for_exit().success());
    assert!(node.log.join("\n").contains("trapped SIGINT"));
}
