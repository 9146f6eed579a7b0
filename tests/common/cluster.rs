//! A cluster of real `jetraft` processes on loopback, for failover tests: nodes are separate
//! processes so `kill -9` is real. Ports are fixed per node for the cluster's lifetime, so a
//! restarted node comes back at the same addresses with its data directory.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::process::JetraftProcess;
use super::proxy::Proxy;
use super::WAIT;

pub struct TestCluster {
    dirs: Vec<tempfile::TempDir>,
    nodes: Vec<Option<JetraftProcess>>,
    client_ports: Vec<u16>,
    http_ports: Vec<u16>,
    cluster_ports: Vec<u16>,
    extra_args: Vec<String>,
    /// `proxies[&(from, to)]` carries node `from`'s connections to node `to`.
    proxies: std::collections::HashMap<(usize, usize), Proxy>,
}

impl TestCluster {
    /// Starts `size` nodes named n0, n1, … and waits until each serves clients.
    pub fn start(size: usize) -> TestCluster {
        Self::start_with(size, &[])
    }

    /// [`start`](Self::start) with more flags for every node.
    pub fn start_with(size: usize, extra_args: &[&str]) -> TestCluster {
        let mut cluster = Self::prepare(size, extra_args);
        cluster.launch_all();
        cluster
    }

    /// A cluster whose node-to-node links each go through a [`Proxy`], so that a node can be
    /// cut off from the others ([`isolate`](Self::isolate)).
    pub async fn start_partitionable(size: usize) -> TestCluster {
        let mut cluster = Self::prepare(size, &[]);
        for from in 0..size {
            for to in (0..size).filter(|to| *to != from) {
                let target = ([127, 0, 0, 1], cluster.cluster_ports[to]).into();
                cluster
                    .proxies
                    .insert((from, to), Proxy::start(target).await);
            }
        }
        tokio::task::block_in_place(|| cluster.launch_all());
        cluster
    }

    /// Cuts every link between node `i` and the others (both directions).
    pub fn isolate(&self, i: usize) {
        for ((from, to), proxy) in &self.proxies {
            if *from == i || *to == i {
                proxy.cut();
            }
        }
    }

    /// Restores node `i`'s links.
    pub fn heal(&self, i: usize) {
        for ((from, to), proxy) in &self.proxies {
            if *from == i || *to == i {
                proxy.heal();
            }
        }
    }

    fn launch_all(&mut self) {
        for i in 0..self.size() {
            self.spawn(i);
        }
        for i in 0..self.size() {
            self.wait_ready(i);
        }
        self.wait_for_meta_leader();
    }

    /// Waits until every running node knows the meta leader (the JetStream API answers).
    pub fn wait_for_meta_leader(&self) {
        self.wait_for("every node to know the meta leader", || {
            (0..self.size())
                .filter(|&i| self.is_running(i))
                .all(|i| {
                    self.jsz(i)["meta_leader"]
                        .as_str()
                        .is_some_and(|l| !l.is_empty())
                })
                .then_some(())
        });
    }

    fn prepare(size: usize, extra_args: &[&str]) -> TestCluster {
        let ports = super::ports::free_ports(3 * size);
        TestCluster {
            proxies: Default::default(),
            extra_args: extra_args.iter().map(|a| a.to_string()).collect(),
            dirs: (0..size).map(|_| tempfile::tempdir().unwrap()).collect(),
            nodes: (0..size).map(|_| None).collect(),
            client_ports: ports[..size].to_vec(),
            http_ports: ports[size..2 * size].to_vec(),
            cluster_ports: ports[2 * size..].to_vec(),
        }
    }

    pub fn size(&self) -> usize {
        self.nodes.len()
    }

    fn spawn(&mut self, i: usize) {
        let routes: Vec<String> = (0..self.size())
            .map(|to| match self.proxies.get(&(i, to)) {
                Some(proxy) => format!("nats-route://{}", proxy.addr),
                None => format!("nats-route://127.0.0.1:{}", self.cluster_ports[to]),
            })
            .collect();
        let args = [
            "-a".to_string(),
            "127.0.0.1".into(),
            "-p".into(),
            self.client_ports[i].to_string(),
            "-m".into(),
            self.http_ports[i].to_string(),
            "-js".into(),
            "-sd".into(),
            self.dirs[i].path().to_str().unwrap().into(),
            "-n".into(),
            format!("n{i}"),
            "--cluster_name".into(),
            "test".into(),
            "--cluster".into(),
            format!("nats://127.0.0.1:{}", self.cluster_ports[i]),
            "--routes".into(),
            routes.join(","),
        ];
        let args: Vec<&str> = args
            .iter()
            .chain(&self.extra_args)
            .map(String::as_str)
            .collect();
        self.nodes[i] = Some(JetraftProcess::spawn(&args));
    }

    fn wait_ready(&mut self, i: usize) {
        self.nodes[i]
            .as_mut()
            .expect("node running")
            .wait_for_line("Server is ready");
    }

    pub fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.client_ports[i])
    }

    /// Every node's URL, for clients that should fail over on their own.
    pub fn urls(&self) -> Vec<String> {
        (0..self.size()).map(|i| self.url(i)).collect()
    }

    /// `kill -9` node `i`.
    pub fn kill(&mut self, i: usize) {
        let node = self.nodes[i].take().expect("node running");
        node.signal("KILL");
        drop(node);
    }

    /// `kill -9` of every node at once (no shutdown, no flush), then every node started
    /// again on its store.
    pub fn kill_all_and_restart(&mut self) {
        for i in 0..self.size() {
            self.kill(i);
        }
        for i in 0..self.size() {
            self.restart(i);
        }
    }

    /// Stops node `i` cleanly (SIGTERM, waits for the exit): its groups persist their
    /// committed index, so a restart re-applies everything committed it holds.
    pub fn stop(&mut self, i: usize) {
        let mut node = self.nodes[i].take().expect("node running");
        node.signal("TERM");
        node.wait_for_exit();
    }

    /// Starts node `i` again with its data and waits until it serves clients.
    pub fn restart(&mut self, i: usize) {
        assert!(self.nodes[i].is_none(), "node {i} is running");
        self.spawn(i);
        self.wait_ready(i);
    }

    /// Waits for a line containing `needle` in node `i`'s log.
    pub fn wait_for_log(&mut self, i: usize, needle: &str) -> String {
        self.nodes[i]
            .as_mut()
            .expect("node running")
            .wait_for_line(needle)
    }

    /// Whether running node `i` has logged a line containing `needle` so far.
    pub fn has_logged(&mut self, i: usize, needle: &str) -> bool {
        self.nodes[i]
            .as_mut()
            .expect("node running")
            .has_logged(needle)
    }

    /// Node `i`'s store directory (its data survives a kill and a restart).
    pub fn dir(&self, i: usize) -> &std::path::Path {
        self.dirs[i].path()
    }

    pub fn is_running(&self, i: usize) -> bool {
        self.nodes[i].is_some()
    }

    /// `/jsz` of node `i`, parsed.
    pub fn jsz(&self, i: usize) -> serde_json::Value {
        self.monitor(i, "/jsz")
    }

    /// `/routez` of node `i`, parsed.
    pub fn routez(&self, i: usize) -> serde_json::Value {
        self.monitor(i, "/routez")
    }

    /// The JSON body of node `i`'s monitoring endpoint `path`.
    fn monitor(&self, i: usize, path: &str) -> serde_json::Value {
        let mut stream = TcpStream::connect(("127.0.0.1", self.http_ports[i])).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|e| panic!("bad {path} body {body:?}: {e}"))
    }

    /// Index of the meta leader, as a running node's `/jsz` names it, waiting until one does.
    pub fn meta_leader(&self) -> usize {
        self.wait_for("a meta leader", || {
            let i = (0..self.size()).find(|&i| self.is_running(i))?;
            let name = self.jsz(i)["meta_leader"].as_str()?.to_string();
            name.strip_prefix('n')?.parse().ok()
        })
    }

    /// Node `at`'s route to node `peer`, from `/routez`; `None` if it lists none.
    pub fn route(&self, at: usize, peer: usize) -> Option<serde_json::Value> {
        self.routez(at)["routes"]
            .as_array()?
            .iter()
            .find(|route| route["remote_name"] == format!("n{peer}").as_str())
            .cloned()
    }

    /// Node `i`'s local replica of `stream`, from `/jsz`.
    pub fn replica(&self, i: usize, stream: &str) -> Option<serde_json::Value> {
        self.jsz(i)["streams"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == stream)
            .cloned()
    }

    /// Index of the node leading `stream`, waiting until some running node does.
    pub fn leader_of(&self, stream: &str) -> usize {
        self.wait_for("a leader of the stream", || {
            (0..self.size()).find(|&i| {
                self.is_running(i) && self.replica(i, stream).is_some_and(|r| r["leader"] == true)
            })
        })
    }

    /// Polls `probe` until it returns `Some`, failing with `what` after the test deadline.
    /// Waits until every node's replica of `stream` holds exactly `messages` messages, the
    /// last at sequence `messages` (all replicas agree after a failover or a heal).
    pub fn wait_until_all_hold(&self, stream: &str, messages: u64) {
        self.wait_for("every replica to hold the acknowledged messages", || {
            (0..self.size())
                .all(|i| {
                    self.replica(i, stream)
                        .is_some_and(|r| r["messages"] == messages && r["last_seq"] == messages)
                })
                .then_some(())
        });
    }

    pub fn wait_for<T>(&self, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT * 3;
        loop {
            if let Some(value) = probe() {
                return value;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
