//! A fault-injecting TCP proxy for the links between cluster nodes: while "cut", it drops every
//! connection it carries and refuses new ones, as a network partition would.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Proxy {
    pub addr: SocketAddr,
    cut: watch::Sender<bool>,
    is_cut: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `target`.
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, cut_watch) = watch::channel(false);
        let is_cut = Arc::new(AtomicBool::new(false));
        let refusing = is_cut.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else {
                    return;
                };
                if refusing.load(Ordering::Acquire) {
                    drop(inbound);
                    continue;
                }
                let mut cut_watch = cut_watch.clone();
                tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (mut in_read, mut in_write) = inbound.into_split();
                    let (mut out_read, mut out_write) = outbound.into_split();
                    let forward = tokio::io::copy(&mut in_read, &mut out_write);
                    let backward = tokio::io::copy(&mut out_read, &mut in_write);
                    tokio::select! {
                        _ = cut_watch.wait_for(|cut| *cut) => {}
                        _ = forward => {}
                        _ = backward => {}
                    }
                });
            }
        });
        Proxy {
            addr,
            cut,
            is_cut,
            task,
        }
    }

    /// Drops every carried connection and refuses new ones until [`heal`](Self::heal).
    pub fn cut(&self) {
        self.is_cut.store(true, Ordering::Release);
        self.cut.send_replace(true);
    }

    pub fn heal(&self) {
        self.is_cut.store(false, Ordering::Release);
        self.cut.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
