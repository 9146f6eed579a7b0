//! The `jetraft` binary: command line → `Config`, tracing, run the node until SIGINT/SIGTERM,
//! then drain and exit.

use anyhow::Context;
use jetraft::config::{cli, Logging};
use jetraft::node::Node;
use tracing_subscriber::EnvFilter;

/// jemalloc instead of glibc's malloc (ADR 0036, which replaced ADR 0012's mimalloc): the
/// publish and fetch paths allocate and free small buffers on several threads, and glibc spent
/// ~10 % of a node's CPU in malloc/free and consolidation. Its options are [`MALLOC_CONF`].
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its start (the crate's prefixed symbol; a `_RJEM_MALLOC_CONF`
/// variable in the environment is read after it and wins): a background thread purges what
/// was freed, and freed pages go back to the kernel within about a second (no muzzy stage). A
/// 2 GiB publish over 1000 R3 streams peaked 30–40 MB lower per node than under mimalloc and
/// held 107–109 MB 15 s after instead of 148–163 (`bench/HISTORY.md`, stop 46).
#[export_name = "_rjem_malloc_conf"]
pub static MALLOC_CONF: &[u8; 60] =
    b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

fn main() {
    let config = match cli::load(std::env::args_os()) {
        Ok(config) => config,
        Err(err) => {
            let code = err.exit_code();
            match err {
                cli::LoadError::Clap(clap_err) => {
                    let _ = clap_err.print();
                }
                other => eprintln!("jetraft: {other}"),
            }
            std::process::exit(code);
        }
    };
    init_tracing(config.logging);
    if let Err(err) = run(config) {
        tracing::error!("{err:#}");
        eprintln!("jetraft: {err:#}");
        std::process::exit(1);
    }
}

/// Threads of tokio's blocking pool (its default: 512). Its tasks are short file and sled
/// calls; when the log's budget asked hundreds of groups to snapshot at once, a pool thread
/// each grew the pool to 250–420 threads, each keeping its allocator cache until it exited
/// (`bench/HISTORY.md`, "a thread per waiter"). Past this many, calls queue.
const MAX_BLOCKING_THREADS: usize = 32;
/// How long an idle thread of the blocking pool stays (tokio's default: 10 s).
const BLOCKING_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(2);

fn run(config: jetraft::config::Config) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let listen = config.listen;
        let node = Node::start(config)
            .await
            .with_context(|| format!("cannot start listening on {listen}"))?;
        wait_for_signal().await?;
        node.shutdown().await;
        Ok(())
    })
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    tokio::select! {
        _ = interrupt.recv() => tracing::info!("trapped SIGINT"),
        _ = terminate.recv() => tracing::info!("trapped SIGTERM"),
    }
    Ok(())
}

/// `-D` → debug, `-V` → trace; `RUST_LOG` overrides both. openraft's own info lines (each
/// log purge, snapshot and command of every group: most of a node's log with 1000 busy streams,
/// ~2,000 lines a second) are left out unless `-D` or `-V` asks for more.
fn init_tracing(logging: Logging) {
    let level = match (logging.debug, logging.trace) {
        (_, true) => "jetraft=trace,info",
        (true, false) => "jetraft=debug,info",
        _ => "info,openraft=warn",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
