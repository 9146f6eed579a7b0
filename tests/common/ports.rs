//! Loopback ports for test nodes, taken below the kernel's ephemeral range.
//!
//! A port the kernel hands out for `bind(0)` lies in `ip_local_port_range`, the same range it
//! draws outgoing connections' local ports from. Released and then bound again by a node a
//! moment later, such a port may meanwhile have become the local end of some client's
//! connection, and the node's start fails with "Address already in use" (seen in CI). Ports
//! below that range are never used for outgoing connections, so only another listener can
//! take them; each test process walks its own stretch of them from a start derived from its
//! pid, and skips any port that does not bind.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The range walked: below Linux's default ephemeral range (32768–60999) and above the
/// well-known and commonly configured service ports.
const LOW: u32 = 20_000;
const HIGH: u32 = 32_000;

static NEXT: AtomicU32 = AtomicU32::new(0);

fn next_candidate() -> u16 {
    let span = HIGH - LOW;
    let offset = (std::process::id().wrapping_mul(2_654_435_761) % span)
        .wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed));
    (LOW + offset % span) as u16
}

/// `count` distinct free loopback ports. The listeners are held until all are bound, so
/// none repeats; a node's client port equal to another's cluster port would fail its start.
pub fn free_ports(count: usize) -> Vec<u16> {
    let mut listeners = Vec::with_capacity(count);
    let mut tries = 0;
    while listeners.len() < count {
        tries += 1;
        assert!(
            tries < 10 * (HIGH - LOW),
            "no free loopback port below the ephemeral range"
        );
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", next_candidate())) {
            listeners.push(listener);
        }
    }
    listeners
        .iter()
        .map(|listener| listener.local_addr().expect("bound").port())
        .collect()
}
