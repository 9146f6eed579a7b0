//! The command line: nats-server's flags (as its users type them), the config file they
//! may name, and the merge of defaults < config file < flags into one [`Config`].
//!
//! nats-server parses flags with Go's `flag` package, where `-port 4222`, `-js` and
//! `-sd /x` are normal. clap wants `--long` names and single-letter shorts, so
//! [`rewrite_args`] first translates, for tokens in flag position only:
//!
//! * `-js` -> `--jetstream`, `-sd` -> `--store_dir` (also `-sd=/x`);
//! * `-DV`, `-VD`, `-DVV` -> `-D -V`, and `-VV` -> `-V` (jetraft has one trace level);
//! * `-<long name>` -> `--<long name>` for jetraft's own long names (`-port=4222` too).
//!
//! A token that is the value of the previous flag (`--pass -js`) is never rewritten, nor
//! is anything after `--`.

use std::ffi::OsString;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use clap::error::ErrorKind::{DisplayHelp, DisplayVersion};
use clap::{ArgAction, Parser};

use super::file::{self, FileConfig};
use super::{Auth, Config, ConfigError, Logging};

/// nats-server's documented ceiling for `max_payload`.
pub const MAX_PAYLOAD_LIMIT: usize = 64 * 1024 * 1024;
/// Above this nats-server warns that large payloads hurt performance (`MAX_PAYLOAD_MAX_SIZE`).
const MAX_PAYLOAD_WARN: usize = 8 * 1024 * 1024;

/// jetraft's flags, spelled as nats-server spells them (long names in snake_case).
#[derive(Debug, Parser)]
#[command(
    name = "jetraft",
    version,
    about = "A NATS-compatible message broker in which every stream is a Raft group",
    rename_all = "snake_case",
    disable_version_flag = true,
    disable_help_flag = true,
    args_override_self = true,
    after_help = "Single-dash nats-server spellings work too: \
                  -js, -sd DIR, -DV, -port 4222, -user NAME, ..."
)]
pub struct Cli {
    /// Host address to bind [default: 0.0.0.0] (nats-server: -a, --addr, --net)
    #[arg(short, long, alias = "net", value_name = "HOST")]
    pub addr: Option<String>,

    /// Client port, 0 = any free port [default: 4222] (nats-server: -p, --port)
    #[arg(short, long)]
    pub port: Option<u16>,

    /// Server name (nats-server: -n, --name, --server_name)
    #[arg(short = 'n', long, alias = "name", value_name = "NAME")]
    pub server_name: Option<String>,

    /// Config file in nats-server format (nats-server: -c, --config)
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// HTTP monitoring port, bound on --addr (nats-server: -m, --http_port)
    #[arg(short = 'm', long, value_name = "PORT")]
    pub http_port: Option<u16>,

    /// This node's cluster address, nats://HOST:PORT or HOST:PORT (nats-server: --cluster)
    #[arg(long, value_name = "URL")]
    pub cluster: Option<String>,

    /// Cluster name [default: jetraft] (nats-server: --cluster_name)
    #[arg(long, value_name = "NAME")]
    pub cluster_name: Option<String>,

    /// Peers, comma-separated: nats-route://HOST:PORT,... (may include this node) (nats-server: --routes)
    #[arg(long, value_name = "URLS")]
    pub routes: Option<String>,

    /// Compact Raft logs every N entries (tests)
    #[arg(long, value_name = "N", hide = true)]
    pub raft_compact_every: Option<u64>,

    /// Enable JetStream (nats-server: -js, --jetstream)
    #[arg(long)]
    pub jetstream: bool,

    /// JetStream dir [default: ./jetraft-data] (nats-server: -sd, --store_dir)
    #[arg(long, value_name = "DIR")]
    pub store_dir: Option<PathBuf>,

    /// Byte budget of the cache of stream message blocks, e.g. 256MB [default: 32MiB] (jetraft only)
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub js_cache_bytes: Option<usize>,

    /// Max payload, e.g. 512KB, 8MB [default: 1MB] (nats-server: config only)
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub max_payload: Option<usize>,

    /// User required for connections (nats-server: --user)
    #[arg(long, allow_hyphen_values = true)]
    pub user: Option<String>,

    /// Password required for connections (nats-server: --pass)
    #[arg(long, value_name = "PASSWORD", allow_hyphen_values = true)]
    pub pass: Option<String>,

    /// Authorization token required for connections (nats-server: --auth)
    #[arg(long, value_name = "TOKEN", allow_hyphen_values = true)]
    pub auth: Option<String>,

    /// Debug logging; -DV = -D -V (nats-server: -D, --debug)
    #[arg(short = 'D', long)]
    pub debug: bool,

    /// Trace the raw protocol; -DV = -D -V (nats-server: -V, --trace)
    #[arg(short = 'V', long)]
    pub trace: bool,

    /// Print version and exit (nats-server: -v, --version)
    #[arg(short = 'v', long, action = ArgAction::Version)]
    version: Option<bool>,

    /// Print this help (nats-server: -h, --help)
    #[arg(short, long, action = ArgAction::Help)]
    help: Option<bool>,
}

/// Why [`load`] produced no [`Config`].
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Help or version output, or a command-line usage error; `Display` is clap's text.
    #[error(transparent)]
    Clap(#[from] clap::Error),
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl LoadError {
    /// The process exit code: 0 after `--help`/`--version`, 1 for every error.
    pub fn exit_code(&self) -> i32 {
        let done = |e: &clap::Error| matches!(e.kind(), DisplayHelp | DisplayVersion);
        match self {
            LoadError::Clap(e) if done(e) => 0,
            _ => 1,
        }
    }
}

/// Builds the [`Config`] from `args` (including `argv[0]`) and the config file they name.
pub fn load<I, T>(args: I) -> Result<Config, LoadError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::try_parse_from(rewrite_args(args.into_iter().map(Into::into)))?;
    let file = match &cli.config {
        Some(path) => file::load(path)?,
        None => FileConfig::default(),
    };
    Ok(resolve(cli, file)?)
}

/// Long names that take a value; Go-style `-name` is rewritten to `--name`.
const VALUE_LONGS: &[&str] = &[
    "addr",
    "net",
    "port",
    "server_name",
    "name",
    "config",
    "http_port",
    "store_dir",
    "js_cache_bytes",
    "max_payload",
    "user",
    "pass",
    "auth",
    "cluster",
    "cluster_name",
    "routes",
    "raft_compact_every",
];
const FLAG_LONGS: &[&str] = &["jetstream", "debug", "trace", "help", "version"];
const VALUE_SHORTS: &str = "apncm";
const FLAG_SHORTS: &str = "DVhv";

/// Translates nats-server's Go-style flags into clap's spelling (see the module docs).
pub fn rewrite_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args = args.into_iter();
    let mut out: Vec<OsString> = args.next().into_iter().collect(); // argv[0]
    let mut verbatim = false; // after `--`
    let mut value_next = false; // the previous flag wants this token as its value
    for arg in args {
        match arg.to_str() {
            Some(s) if !verbatim && !value_next => {
                verbatim = s == "--";
                let (tokens, wants_value) = rewrite_flag(s);
                value_next = wants_value;
                out.extend(tokens.into_iter().map(OsString::from));
            }
            _ => {
                value_next = false;
                out.push(arg);
            }
        }
    }
    out
}

/// One token in flag position -> its clap spelling, and whether the next token is its value.
fn rewrite_flag(token: &str) -> (Vec<String>, bool) {
    let keep = |wants_value| (vec![token.to_string()], wants_value);
    if let Some(long) = token.strip_prefix("--") {
        return keep(!long.contains('=') && VALUE_LONGS.contains(&long));
    }
    let Some(body) = token.strip_prefix('-').filter(|b| !b.is_empty()) else {
        return keep(false);
    };
    let (name, value) = match body.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (body, None),
    };
    let known = |name: &str| VALUE_LONGS.contains(&name) || FLAG_LONGS.contains(&name);
    let long = match name {
        "js" => "jetstream",
        "sd" => "store_dir",
        _ if name.len() > 1 && known(name) => name,
        "DV" | "VD" | "DVV" => return (vec!["-D".into(), "-V".into()], false),
        "VV" => return (vec!["-V".into()], false),
        // Clap's own: a cluster such as `-p` or `-Dc` takes the next token if its last one does.
        _ => {
            let mut shorts = body.chars().rev();
            let last_takes_value = shorts.next().is_some_and(|c| VALUE_SHORTS.contains(c));
            return keep(last_takes_value && shorts.all(|c| FLAG_SHORTS.contains(c)));
        }
    };
    match value {
        Some(v) => (vec![format!("--{long}={v}")], false),
        None => (vec![format!("--{long}")], VALUE_LONGS.contains(&long)),
    }
}

fn parse_size_arg(text: &str) -> Result<usize, String> {
    let n = file::parse_size(text)?;
    usize::try_from(n).map_err(|_| format!("'{text}' must not be negative"))
}

/// Lays the command line over the file over the defaults, then checks the result.
pub fn resolve(cli: Cli, file: FileConfig) -> Result<Config, ConfigError> {
    let defaults = Config::default();
    let host = cli
        .addr
        .or(file.host)
        .unwrap_or_else(|| defaults.listen.ip().to_string());
    let port = cli.port.or(file.port).unwrap_or(defaults.listen.port());
    let http = match cli.http_port.or(file.http_port) {
        Some(p) => Some(socket_addr(
            "http",
            file.http_host.as_deref().unwrap_or(&host),
            p,
        )?),
        None => None,
    };
    // Credentials come whole from one source: flags replace the file's, never mix with them.
    let auth = if cli.user.is_some() || cli.pass.is_some() || cli.auth.is_some() {
        auth(["--user", "--pass", "--auth"], cli.user, cli.pass, cli.auth)?
    } else {
        let keys = [
            "authorization.user",
            "authorization.password",
            "authorization.token",
        ];
        auth(keys, file.user, file.password, file.token)?
    };
    let config = Config {
        listen: socket_addr("addr", &host, port)?,
        server_name: cli.server_name.or(file.server_name),
        http,
        raft_compact_every: cli.raft_compact_every,
        cluster: super::cluster::resolve(
            cli.cluster_name.or(file.cluster_name),
            cli.cluster.or(file.cluster_listen),
            match cli.routes {
                Some(text) => super::cluster::parse_routes(&text)
                    .map_err(|message| invalid("routes", message))?,
                None => file.routes.unwrap_or_default(),
            },
        )?,
        jetstream: cli.jetstream || file.jetstream.unwrap_or(false),
        store_dir: cli
            .store_dir
            .or(file.store_dir)
            .unwrap_or(defaults.store_dir),
        js_cache_bytes: cli
            .js_cache_bytes
            .or(file.js_cache_bytes)
            .map_or(defaults.js_cache_bytes, |bytes| bytes as u64),
        max_payload: cli
            .max_payload
            .or(file.max_payload)
            .unwrap_or(defaults.max_payload),
        max_control_line: file.max_control_line.unwrap_or(defaults.max_control_line),
        max_pending: file.max_pending.unwrap_or(defaults.max_pending),
        max_connections: file.max_connections.unwrap_or(defaults.max_connections),
        ping_interval: file.ping_interval.unwrap_or(defaults.ping_interval),
        ping_max: file.ping_max.unwrap_or(defaults.ping_max),
        auth,
        auth_timeout: file.auth_timeout.unwrap_or(defaults.auth_timeout),
        logging: Logging {
            debug: cli.debug || file.debug.unwrap_or(false),
            trace: cli.trace || file.trace.unwrap_or(false),
        },
    };
    validate(&config)?;
    Ok(config)
}

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    let (key, message) = (key.to_string(), message.into());
    ConfigError::Invalid { key, message }
}

type Secret = Option<String>;

/// One of user+password or token; `keys` name the three settings in errors.
fn auth(keys: [&str; 3], user: Secret, pass: Secret, token: Secret) -> Result<Auth, ConfigError> {
    let [user_key, pass_key, token_key] = keys;
    for (key, value) in [(user_key, &user), (pass_key, &pass), (token_key, &token)] {
        if value.as_deref() == Some("") {
            return Err(invalid(key, "must not be empty"));
        }
    }
    let mixed = format!("cannot be combined with {user_key}/{pass_key}");
    match (user, pass, token) {
        (None, None, None) => Ok(Auth::None),
        (Some(user), Some(pass), None) => Ok(Auth::UserPass { user, pass }),
        (None, None, Some(token)) => Ok(Auth::Token(token)),
        (_, _, Some(_)) => Err(invalid(token_key, mixed)),
        (Some(_), None, None) => Err(invalid(user_key, format!("requires {pass_key}"))),
        (None, Some(_), None) => Err(invalid(pass_key, format!("requires {user_key}"))),
    }
}

/// Resolves `host` (an IP address, `[v6]`, or a name such as `localhost`) with `port`.
fn socket_addr(key: &str, host: &str, port: u16) -> Result<SocketAddr, ConfigError> {
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    let bare = bare.unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let mut addrs = (bare, port).to_socket_addrs().into_iter().flatten();
    addrs
        .next()
        .ok_or_else(|| invalid(key, format!("cannot resolve host '{host}'")))
}

fn validate(config: &Config) -> Result<(), ConfigError> {
    let (payload, pending) = (config.max_payload, config.max_pending);
    if payload == 0 || payload > MAX_PAYLOAD_LIMIT {
        let message = format!("{payload} is outside 1..={MAX_PAYLOAD_LIMIT} (64MiB)");
        return Err(invalid("max_payload", message));
    }
    if payload > pending {
        let message = format!("{payload} cannot exceed max_pending ({pending})");
        return Err(invalid("max_payload", message));
    }
    if payload > MAX_PAYLOAD_WARN {
        tracing::warn!(
            max_payload = payload,
            "payloads over 8MiB may hurt performance"
        );
    }
    if config.ping_interval.is_zero() {
        return Err(invalid("ping_interval", "must be greater than zero"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// argv for a command line written as one string (no argument contains a space).
    fn argv(line: &str) -> Vec<&str> {
        std::iter::once("jetraft")
            .chain(line.split_whitespace())
            .collect()
    }

    fn load_ok(line: &str) -> Config {
        load(argv(line)).unwrap_or_else(|e| panic!("{line:?} should load: {e}"))
    }

    fn rewritten(line: &str) -> String {
        let out = rewrite_args(argv(line).into_iter().map(OsString::from));
        let out: Vec<_> = out.iter().skip(1).map(|s| s.to_string_lossy()).collect();
        out.join(" ")
    }

    fn invalid_key(args: Vec<&str>) -> String {
        match load(args.clone()) {
            Err(LoadError::Config(ConfigError::Invalid { key, .. })) => key,
            other => panic!("{args:?}: expected an invalid value, got {other:?}"),
        }
    }

    fn with_file(text: &str, line: &str) -> Result<Config, LoadError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("jetraft.conf");
        std::fs::write(&path, text).expect("write config");
        let mut args = argv(line);
        args.extend(["-c", path.to_str().expect("utf-8 path")]);
        load(args)
    }

    #[test]
    fn defaults() {
        let c = load_ok("");
        assert_eq!(c.listen, SocketAddr::from(([0, 0, 0, 0], 4222)));
        assert_eq!((c.http, c.jetstream, c.auth), (None, false, Auth::None));
        assert_eq!(c.store_dir, Config::default().store_dir);
        assert_eq!(c.logging, Logging::default());
    }

    #[test]
    fn rewrite_translates_only_flag_positions() {
        let cases = [
            ("-js -sd /tmp/x -DV", "--jetstream --store_dir /tmp/x -D -V"),
            ("-port 4222 -sd=/x -VV", "--port 4222 --store_dir=/x -V"),
            ("--pass -js -user -DV", "--pass -js --user -DV"),
            ("-p -js -Dc -sd -DVV", "-p -js -Dc -sd -D -V"),
            ("-D -- -js", "-D -- -js"),
        ];
        for (line, expected) in cases {
            assert_eq!(rewritten(line), expected, "{line}");
        }
    }

    #[test]
    fn nats_server_spellings() {
        let c = load_ok("-js -sd /tmp/x -DV -port 4333 -addr 127.0.0.1");
        assert!(c.jetstream && c.logging.debug && c.logging.trace);
        assert_eq!(c.js_cache_bytes, crate::config::DEFAULT_JS_CACHE_BYTES);
        assert_eq!(load_ok("-js_cache_bytes 2MB").js_cache_bytes, 2 << 20);
        assert_eq!(c.store_dir, PathBuf::from("/tmp/x"));
        assert_eq!(c.listen, SocketAddr::from(([127, 0, 0, 1], 4333)));
        let c = load_ok("--store_dir=/y -p 1 --net ::1 -n n1 -m 8222");
        assert_eq!(
            (c.store_dir, c.server_name),
            ("/y".into(), Some("n1".into()))
        );
        assert_eq!(
            c.listen,
            SocketAddr::new([0, 0, 0, 0, 0, 0, 0, 1].into(), 1)
        );
        assert_eq!(c.http, Some(SocketAddr::new(c.listen.ip(), 8222)));
        assert_eq!(load_ok("-sd=/z -VD").store_dir, PathBuf::from("/z"));
        let c = load_ok(
            "-cluster nats://127.0.0.1:6222 --cluster_name c1 -routes nats-route://a:1,b:2",
        );
        let cluster = c.cluster.expect("cluster config");
        assert_eq!(cluster.name, "c1");
        assert_eq!(cluster.routes, vec!["a:1".to_string(), "b:2".to_string()]);
        let c = load_ok("-server_name=a --name b");
        assert_eq!(c.server_name.as_deref(), Some("b"));
    }

    #[test]
    fn hyphen_values_stay_values() {
        let c = load_ok("--user -js -pass -DV");
        let expected = Auth::UserPass {
            user: "-js".into(),
            pass: "-DV".into(),
        };
        assert_eq!(c.auth, expected);
        assert!(!c.jetstream && !c.logging.debug);
        assert_eq!(load_ok("-auth -sd").auth, Auth::Token("-sd".into()));
    }

    #[test]
    fn max_payload_sizes_and_limits() {
        let cases = [
            ("1MB", 1 << 20),
            ("512KB", 512 << 10),
            ("1MiB", 1 << 20),
            ("2000", 2000),
        ];
        for (size, bytes) in cases
            .into_iter()
            .chain([("64MB", 64 << 20), ("1M", 1_000_000)])
        {
            assert_eq!(load_ok(&format!("--max_payload {size}")).max_payload, bytes);
            assert_eq!(load_ok(&format!("-max_payload={size}")).max_payload, bytes);
        }
        assert_eq!(invalid_key(argv("--max_payload 65MB")), "max_payload");
        assert_eq!(invalid_key(argv("--max_payload 0")), "max_payload");
        let e = load(argv("--max_payload lots")).expect_err("not a size");
        assert!(matches!(e, LoadError::Clap(_)), "{e:?}");
    }

    #[test]
    fn auth_must_be_complete_and_single() {
        assert_eq!(invalid_key(argv("--user a")), "--user");
        assert_eq!(invalid_key(argv("--pass b")), "--pass");
        assert_eq!(invalid_key(argv("--user a --pass b --auth t")), "--auth");
        assert_eq!(invalid_key(vec!["jetraft", "--auth", ""]), "--auth");
        assert_eq!(load_ok("--auth t").auth, Auth::Token("t".into()));
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for line in ["-p 70000", "-p x", "--bogus", "-js=maybe", "-sd", "stray"] {
            let e = load(argv(line)).expect_err("should fail");
            assert!(matches!(e, LoadError::Clap(_)), "{line}: {e:?}");
            assert_eq!(e.exit_code(), 1, "{line}");
        }
    }

    #[test]
    fn help_and_version_exit_zero() {
        for line in ["--help", "-h", "-help", "--version", "-v", "-version"] {
            let e = load(argv(line)).expect_err("help/version stop the load");
            assert_eq!(e.exit_code(), 0, "{line}");
        }
        let help = load(argv("--help")).expect_err("help").to_string();
        for flag in "--addr --net -js --store_dir --max_payload --user --pass --auth -DV".split(' ')
        {
            assert!(help.contains(flag), "help lacks {flag}:\n{help}");
        }
    }

    #[test]
    fn flags_override_file_over_defaults() {
        let text = "listen: 127.0.0.1:5000\nserver_name: from-file\nhttp_port: 8000\n\
                    max_payload: 2MB\nping_interval: \"5s\"\njetstream { store_dir: /file/js }\n\
                    debug: true\nauthorization { token: file-token, timeout: 3 }\n";
        let c = with_file(text, "").expect("file only");
        assert_eq!(c.listen, SocketAddr::from(([127, 0, 0, 1], 5000)));
        assert_eq!(c.http, Some(SocketAddr::from(([127, 0, 0, 1], 8000))));
        assert_eq!(
            (c.max_payload, c.ping_interval),
            (2 << 20, Duration::from_secs(5))
        );
        assert!(c.jetstream && c.logging.debug && !c.logging.trace);
        assert_eq!(c.store_dir, PathBuf::from("/file/js"));
        assert_eq!(c.auth, Auth::Token("file-token".into()));
        assert_eq!(c.auth_timeout, Duration::from_secs(3));
        assert_eq!(c.max_control_line, Config::default().max_control_line);

        let c = with_file(
            text,
            "-p 6000 -n from-flag -m 9000 -sd /flag/js --user u --pass p",
        )
        .expect("file and flags");
        assert_eq!(c.listen, SocketAddr::from(([127, 0, 0, 1], 6000)));
        assert_eq!(c.http, Some(SocketAddr::from(([127, 0, 0, 1], 9000))));
        assert_eq!(c.server_name.as_deref(), Some("from-flag"));
        assert_eq!(c.store_dir, PathBuf::from("/flag/js"));
        assert_eq!(
            c.auth,
            Auth::UserPass {
                user: "u".into(),
                pass: "p".into()
            }
        );
        assert_eq!(c.max_payload, 2 << 20);
    }

    #[test]
    fn file_errors_surface_as_config_errors() {
        let e = with_file("port: 1\nport 2 3\n", "").expect_err("syntax error");
        assert!(
            matches!(e, LoadError::Config(ConfigError::Parse { line: 2, .. })),
            "{e:?}"
        );
        assert_eq!(e.exit_code(), 1);
        let e = with_file("authorization { user: a }", "").expect_err("user without password");
        assert!(e.to_string().contains("authorization.user"), "{e}");
        let e = with_file("max_payload: 2MB\nmax_pending: 1MB", "").expect_err("over pending");
        assert!(e.to_string().contains("max_pending"), "{e}");
        let e = load(argv("-c /nonexistent/jetraft.conf")).expect_err("missing file");
        assert!(
            matches!(e, LoadError::Config(ConfigError::Read { .. })),
            "{e:?}"
        );
    }

    #[test]
    fn hostnames_resolve() {
        assert!(load_ok("-a localhost").listen.ip().is_loopback());
        assert_eq!(invalid_key(vec!["jetraft", "-a", "no such host"]), "addr");
    }
}
