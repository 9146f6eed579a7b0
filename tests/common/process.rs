//! Running the real `jetraft` binary as a child process, for tests of the command line,
//! signals and logging. The child is killed on drop, so a failing test leaves nothing behind.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::WAIT;

pub struct JetraftProcess {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Every stderr line seen so far.
    pub log: Vec<String>,
}

pub fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_jetraft"))
}

/// Runs `jetraft <args>` to completion and returns its exit status and output.
pub fn run_to_exit(args: &[&str]) -> (ExitStatus, String, String) {
    let output = binary().args(args).output().expect("jetraft binary runs");
    (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

impl JetraftProcess {
    pub fn spawn(args: &[&str]) -> Self {
        let mut child = binary()
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("jetraft binary starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        JetraftProcess {
            child,
            lines,
            log: Vec::new(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether a log line read so far contains `needle` (takes in what the process wrote
    /// since the last look, without waiting for more).
    pub fn has_logged(&mut self, needle: &str) -> bool {
        while let Ok(line) = self.lines.try_recv() {
            self.log.push(line);
        }
        self.log.iter().any(|l| l.contains(needle))
    }

    /// Waits for a log line containing `needle` and returns it.
    pub fn wait_for_line(&mut self, needle: &str) -> String {
        if let Some(line) = self.log.iter().find(|l| l.contains(needle)) {
            return line.clone();
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.log.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no log line with {needle:?}; log so far:\n{}",
                    self.log.join("\n")
                ),
            }
        }
    }

    /// The client address from the "Listening for client connections on" line.
    pub fn client_addr(&mut self) -> SocketAddr {
        let line = self.wait_for_line("Listening for client connections on ");
        let addr = line.rsplit(' ').next().expect("address at line end");
        addr.parse().expect("socket address")
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits for the process to exit, then drains the rest of its log.
    pub fn wait_for_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(1)) {
                    self.log.push(line);
                }
                return status;
            }
            assert!(Instant::now() < deadline, "jetraft did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// How many of its last log lines a node prints when the test that ran it fails.
const LOG_TAIL_ON_FAILURE: usize = 300;

impl Drop for JetraftProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            // The test failed: its output (shown on failure) carries what the node logged.
            while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                self.log.push(line);
            }
            let skip = self.log.len().saturating_sub(LOG_TAIL_ON_FAILURE);
            eprintln!("---- jetraft pid {} log (last lines) ----", self.pid());
            for line in &self.log[skip..] {
                eprintln!("{line}");
            }
        }
    }
}
