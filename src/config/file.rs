//! The config file: a subset of nats-server's configuration format, parsed into a
//! [`FileConfig`] of optional settings that `cli.rs` lays over the defaults.
//!
//! # Format
//!
//! ```text
//! # Comments start with '#' or '//'.
//! listen: 127.0.0.1:4222          # or: host = 127.0.0.1 / port 4222
//! server_name = "node-a"
//! http_port: 8222                  # or: http: "127.0.0.1:8222"
//! max_payload: 2MB                 # sizes: K=1000, KB/KiB=1024, M, MB/MiB, G, GB/GiB
//! ping_interval: "30s"             # durations: quoted "500ms" "2s" "2m" "1h30m", or bare seconds
//! debug: true; trace: off          # booleans: true/false, yes/no, on/off
//!
//! jetstream {
//!   store_dir: "/var/lib/jetraft"
//!   cache_bytes: 256MB             # the message block cache (jetraft's; default 32MiB)
//! }
//! authorization {
//!   user: alice, password: "s3cret"   # or: token: "t0k3n"
//!   timeout: 2                         # seconds, or "1500ms"
//! }
//! ```
//!
//! An entry is `key: value`, `key = value` or `key value`; entries end at a newline, `,`
//! or `;`. Values are quoted strings (`"..."` with `\` escapes, or raw `'...'`), bare
//! words, integers with an optional size suffix, decimals, booleans, `[lists]` or
//! `{ blocks }`. Keys are case-insensitive.
//!
//! Recognised keys: `host`/`net`, `port`, `listen` (`"host:port"` or a port),
//! `server_name`, `http_port`/`monitor_port`, `http` (`"host:port"` or a port),
//! `max_payload`, `max_control_line`, `max_pending`/`max_pending_size`,
//! `max_connections`/`max_conn`, `ping_interval`, `ping_max`, `debug`, `trace`,
//! `jetstream` (`true`, `enabled`, `disabled`, or a block with `store_dir`, `enabled` and
//! `cache_bytes`),
//! `authorization { user/username, password/pass, token, timeout }`,
//! `cluster { name, listen, routes }` (see [`super::cluster`]).
//!
//! Other keys (nats-server configs carry many tuning knobs) are logged as warnings and
//! ignored, except those whose silent loss would weaken security — `tls`, `accounts`,
//! `operator`, `resolver`, unknown keys inside `authorization` — or leave out something the
//! config asks the server to serve — `leafnodes`, `gateway`, `websocket`, `mqtt`, a
//! JetStream `domain` — which are rejected. Not supported:
//! `include`, `$VARIABLE` references, and unquoted durations with a unit: as in
//! nats-server, a bare `2m` is the size 2,000,000, so durations must be quoted.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::ConfigError;

/// Every setting the file may carry; `None` means "not in the file".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileConfig {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub server_name: Option<String>,
    /// Host of the monitoring listener, from `http: "host:port"`.
    pub http_host: Option<String>,
    pub http_port: Option<u16>,
    pub max_payload: Option<usize>,
    pub max_control_line: Option<usize>,
    pub max_pending: Option<usize>,
    pub max_connections: Option<usize>,
    pub ping_interval: Option<Duration>,
    pub ping_max: Option<u32>,
    pub debug: Option<bool>,
    pub trace: Option<bool>,
    pub jetstream: Option<bool>,
    pub store_dir: Option<PathBuf>,
    pub js_cache_bytes: Option<usize>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub token: Option<String>,
    pub auth_timeout: Option<Duration>,
    pub cluster_name: Option<String>,
    /// `cluster { listen }`, as written.
    pub cluster_listen: Option<String>,
    /// `cluster { routes }`, reduced to `host:port`.
    pub routes: Option<Vec<String>>,
}

/// Reads and parses the config file at `path`.
pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

/// Parses config text; `path_for_errors` only labels error messages.
pub fn parse(path_for_errors: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    let path = path_for_errors;
    let mut parser = Parser {
        chars: text.chars().collect(),
        pos: 0,
        line: 1,
    };
    let entries = parser
        .entries("", None)
        .map_err(|(line, message)| ConfigError::Parse {
            path: path.to_path_buf(),
            line,
            message,
        })?;
    let mut fc = FileConfig::default();
    for e in &entries {
        apply(&mut fc, e, path).map_err(|bad| ConfigError::Invalid {
            key: bad.key,
            message: format!("{} (at {}:{})", bad.message, path.display(), bad.line),
        })?;
    }
    Ok(fc)
}

/// Parses a size such as `1048576`, `512KB`, `1MiB` or `1M` with nats-server's units:
/// `K`/`M`/`G`/`T` are powers of 1000, `KB`/`KiB`/`Ki` (etc.) powers of 1024.
pub fn parse_size(text: &str) -> Result<i64, String> {
    let digits_end = text
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(text.len(), |(i, _)| i);
    let (digits, suffix) = text.split_at(digits_end);
    let number: i64 = digits
        .parse()
        .map_err(|_| format!("'{text}' is not a number"))?;
    let multiplier: i64 = match suffix.to_ascii_lowercase().as_str() {
        "" => 1,
        "k" => 1000,
        "kb" | "ki" | "kib" => 1 << 10,
        "m" => 1_000_000,
        "mb" | "mi" | "mib" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" | "gi" | "gib" => 1 << 30,
        "t" => 1_000_000_000_000,
        "tb" | "ti" | "tib" => 1 << 40,
        _ => return Err(format!("'{text}' has an unknown size unit '{suffix}'")),
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("'{text}' is too large"))
}

/// Parses a Go-style duration: one or more `<number><unit>` with units ns, us, ms, s, m, h.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("'{text}' is not a duration (use e.g. \"500ms\", \"2s\", \"1h30m\")");
    let mut rest = text.trim();
    let mut seconds = if rest.is_empty() {
        return Err(bad());
    } else {
        0.0
    };
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let unit_len = rest[num_end..].find(|c: char| c.is_ascii_digit());
        let unit_end = unit_len.map_or(rest.len(), |len| num_end + len);
        let number: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        let scale = match &rest[num_end..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        seconds += number * scale;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| bad())
}

// Meaning: entries -> FileConfig. Keys arrive lowercased and dotted (`authorization.user`).

const REFUSED: &str = "is not supported by jetraft (refusing to run without it)";

fn apply(fc: &mut FileConfig, e: &Entry, path: &Path) -> Result<(), Bad> {
    match e.key.as_str() {
        "host" | "net" => fc.host = Some(e.string()?),
        "port" => fc.port = Some(e.port()?),
        "listen" => e.host_port(&mut fc.host, &mut fc.port)?,
        "server_name" => fc.server_name = Some(e.string()?),
        "http_port" | "monitor_port" => fc.http_port = Some(e.port()?),
        "http" => e.host_port(&mut fc.http_host, &mut fc.http_port)?,
        "max_payload" => fc.max_payload = Some(e.size()?),
        "max_control_line" => fc.max_control_line = Some(e.size()?),
        "max_pending" | "max_pending_size" => fc.max_pending = Some(e.size()?),
        "max_connections" | "max_conn" => fc.max_connections = Some(e.size()?),
        "ping_interval" => fc.ping_interval = Some(e.duration()?),
        "ping_max" => fc.ping_max = Some(e.int(u32::MAX.into())? as u32),
        "debug" => fc.debug = Some(e.boolean()?),
        "trace" => fc.trace = Some(e.boolean()?),
        "jetstream" => jetstream(fc, e, path)?,
        "jetstream.store_dir" | "jetstream.store" => fc.store_dir = Some(e.string()?.into()),
        "jetstream.enabled" | "jetstream.enable" => fc.jetstream = Some(e.boolean()?),
        "jetstream.cache_bytes" => fc.js_cache_bytes = Some(e.size()?),
        "cluster" => e.block()?.iter().try_for_each(|sub| apply(fc, sub, path))?,
        "cluster.name" => fc.cluster_name = Some(e.string()?),
        "cluster.listen" => fc.cluster_listen = Some(e.string()?),
        "cluster.host" | "cluster.port" => {
            return Err(e.bad("use cluster { listen: \"host:port\" }"))
        }
        "cluster.routes" => fc.routes = Some(e.routes()?),
        "authorization" => e.block()?.iter().try_for_each(|sub| apply(fc, sub, path))?,
        "authorization.user" | "authorization.username" => fc.user = Some(e.string()?),
        "authorization.password" | "authorization.pass" => fc.password = Some(e.string()?),
        "authorization.token" => fc.token = Some(e.string()?),
        "authorization.timeout" => fc.auth_timeout = Some(e.duration()?),
        // Dropping these would run the server more open than its config says.
        "tls" | "accounts" | "operator" | "resolver" => return Err(e.bad(REFUSED)),
        // Dropping these would serve less than the config says: listeners and links nobody
        // would open, a JetStream domain no API prefix would answer for.
        "leafnodes" | "gateway" | "websocket" | "mqtt" | "jetstream.domain" => {
            return Err(e.bad(REFUSED))
        }
        key if key.starts_with("authorization.") => return Err(e.bad(REFUSED)),
        key => {
            tracing::warn!(file = %path.display(), line = e.line, key, "ignoring unsupported config key")
        }
    }
    Ok(())
}

/// `jetstream: true|enabled|disabled`, or a block that enables it unless `enabled: false`.
fn jetstream(fc: &mut FileConfig, e: &Entry, path: &Path) -> Result<(), Bad> {
    let word = match &e.value {
        Value::Str(s) => s.to_ascii_lowercase(),
        _ => String::new(),
    };
    fc.jetstream = Some(match (&e.value, word.as_str()) {
        (Value::Bool(on), _) => *on,
        (_, "enabled" | "enable") => true,
        (_, "disabled" | "disable") => false,
        (Value::Block(entries), _) => {
            fc.jetstream = Some(true);
            return entries.iter().try_for_each(|sub| apply(fc, sub, path));
        }
        _ => return Err(e.wrong("true, false, enabled, disabled or a block")),
    });
    Ok(())
}

/// A value of the wrong type or range; `parse` adds the file name.
struct Bad {
    key: String,
    line: usize,
    message: String,
}

impl Entry {
    fn bad(&self, message: impl fmt::Display) -> Bad {
        Bad {
            key: self.key.clone(),
            line: self.line,
            message: message.to_string(),
        }
    }

    fn wrong(&self, expected: &str) -> Bad {
        self.bad(format!("expected {expected}, got {}", self.value.kind()))
    }

    fn string(&self) -> Result<String, Bad> {
        match &self.value {
            Value::Str(s) => Ok(s.clone()),
            // Numeric passwords and names are plausible; keep what the user wrote.
            Value::Int(_, raw) => Ok(raw.clone()),
            _ => Err(self.wrong("a string")),
        }
    }

    fn routes(&self) -> Result<Vec<String>, Bad> {
        let items: Vec<String> = match &self.value {
            Value::List(items) => items
                .iter()
                .map(|v| match v {
                    Value::Str(s) => Ok(s.clone()),
                    other => Err(self.bad(format!("expected route URLs, got {}", other.kind()))),
                })
                .collect::<Result<_, _>>()?,
            Value::Str(s) => vec![s.clone()],
            _ => return Err(self.wrong("a list of route URLs")),
        };
        items
            .iter()
            .map(|url| super::cluster::route_address(url).map_err(|m| self.bad(m)))
            .collect()
    }

    fn boolean(&self) -> Result<bool, Bad> {
        match self.value {
            Value::Bool(b) => Ok(b),
            _ => Err(self.wrong("true or false")),
        }
    }

    fn block(&self) -> Result<&[Entry], Bad> {
        match &self.value {
            Value::Block(entries) => Ok(entries),
            _ => Err(self.wrong("a block")),
        }
    }

    /// An integer in `0..=max`.
    fn int(&self, max: i64) -> Result<i64, Bad> {
        match self.value {
            Value::Int(n, _) if (0..=max).contains(&n) => Ok(n),
            Value::Int(n, _) => Err(self.bad(format!("{n} is out of range 0..={max}"))),
            _ => Err(self.wrong("an integer")),
        }
    }

    fn port(&self) -> Result<u16, Bad> {
        Ok(self.int(u16::MAX.into())? as u16)
    }

    fn size(&self) -> Result<usize, Bad> {
        usize::try_from(self.int(i64::MAX)?).map_err(|_| self.bad("is too large"))
    }

    /// A quoted duration string, or a plain number of seconds.
    fn duration(&self) -> Result<Duration, Bad> {
        let negative = || self.bad("must not be negative");
        match &self.value {
            Value::Str(s) => parse_duration(s).map_err(|m| self.bad(m)),
            Value::Int(n, _) if *n < 0 => Err(negative()),
            Value::Int(n, raw) if raw.bytes().all(|b| b.is_ascii_digit()) => {
                Ok(Duration::from_secs(*n as u64))
            }
            // nats-server reads a bare `2m` as 2,000,000 seconds: refuse the trap.
            Value::Int(_, raw) => Err(self.bad(format!("bare {raw} is a size; write \"{raw}\""))),
            Value::Float(f) => Duration::try_from_secs_f64(*f).map_err(|_| negative()),
            _ => Err(self.wrong("a duration such as \"2s\"")),
        }
    }

    /// Sets the port, and the host unless empty, from `"host:port"`, `"[::1]:port"` or a port.
    fn host_port(&self, host: &mut Option<String>, port: &mut Option<u16>) -> Result<(), Bad> {
        let text = match &self.value {
            Value::Str(s) => s,
            Value::Int(..) => {
                *port = Some(self.port()?);
                return Ok(());
            }
            _ => return Err(self.wrong("\"host:port\"")),
        };
        let bad = || self.bad(format!("expected \"host:port\", got '{text}'"));
        let (h, p) = text.rsplit_once(':').ok_or_else(bad)?;
        *port = Some(p.parse().map_err(|_| bad())?);
        let h = h
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(h);
        if !h.is_empty() {
            *host = Some(h.to_string());
        }
        Ok(())
    }
}

// Syntax: text -> entries. Knows nothing about what the keys mean.

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Str(String),
    /// An integer with its source text, kept so that `2m` can be told apart from `2000000`.
    Int(i64, String),
    Float(f64),
    Bool(bool),
    List(Vec<Value>),
    Block(Vec<Entry>),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Str(_) => "a string",
            Value::Int(..) => "an integer",
            Value::Float(_) => "a decimal number",
            Value::Bool(_) => "a boolean",
            Value::List(_) => "a list",
            Value::Block(_) => "a block",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    /// Lowercased, prefixed with the enclosing blocks' keys: `authorization.user`.
    key: String,
    line: usize,
    value: Value,
}

/// A syntax error: line and message.
type Syntax<T> = Result<T, (usize, String)>;

struct Parser {
    chars: Vec<char>,
    pos: usize,
    line: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) {
        self.line += usize::from(self.peek() == Some('\n'));
        self.pos += 1;
    }

    fn fail<T>(&self, message: impl fmt::Display) -> Syntax<T> {
        Err((self.line, message.to_string()))
    }

    /// Consumes characters up to one of `stops` or whitespace.
    fn word(&mut self, stops: &str) -> String {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| !c.is_whitespace() && !stops.contains(c))
        {
            self.bump();
        }
        self.chars[start..self.pos].iter().collect()
    }

    /// Skips spaces and comments; with `separators` also newlines, `,` and `;`.
    fn skip_blank(&mut self, separators: bool) {
        loop {
            let next = self.chars.get(self.pos + 1).copied();
            let comment =
                self.peek() == Some('#') || (self.peek() == Some('/') && next == Some('/'));
            match self.peek() {
                Some(' ' | '\t' | '\r') => self.bump(),
                Some('\n' | ',' | ';') if separators => self.bump(),
                Some(_) if comment => {
                    while !matches!(self.peek(), None | Some('\n')) {
                        self.bump();
                    }
                }
                _ => return,
            }
        }
    }

    /// Entries up to end of input (top level) or the `}` closing a block opened on `open`.
    fn entries(&mut self, prefix: &str, open: Option<usize>) -> Syntax<Vec<Entry>> {
        let mut out = Vec::new();
        loop {
            self.skip_blank(true);
            match (self.peek(), open) {
                (None, None) => return Ok(out),
                (None, Some(line)) => {
                    return self.fail(format!("block from line {line} never ends"))
                }
                (Some('}'), Some(_)) => {
                    self.bump();
                    return Ok(out);
                }
                _ => out.push(self.entry(prefix)?),
            }
        }
    }

    fn entry(&mut self, prefix: &str) -> Syntax<Entry> {
        let line = self.line;
        let name = match self.peek() {
            Some(q @ ('"' | '\'')) => self.quoted(q)?,
            _ => self.word(":={}[],;#\"'"),
        };
        if name.is_empty() {
            return self.fail(format!(
                "expected a key, found {:?}",
                self.peek().unwrap_or(' ')
            ));
        }
        let key = format!("{prefix}{}", name.to_ascii_lowercase());
        self.skip_blank(false);
        if matches!(self.peek(), Some(':' | '=')) {
            self.bump();
            self.skip_blank(false);
        }
        if key == "include" {
            return self.fail("'include' is not supported; put everything in one file");
        }
        let value = self.value(&key)?;
        self.skip_blank(false);
        match self.peek() {
            None | Some('\n' | ',' | ';' | '}') => Ok(Entry { key, line, value }),
            Some(c) => self.fail(format!(
                "unexpected '{c}' after the value of '{name}' (quote values with spaces)"
            )),
        }
    }

    fn value(&mut self, key: &str) -> Syntax<Value> {
        let line = self.line;
        match self.peek() {
            None | Some('\n' | ',' | ';' | '}' | ']') => {
                self.fail(format!("missing value for '{key}'"))
            }
            Some('{') => {
                self.bump();
                Ok(Value::Block(self.entries(&format!("{key}."), Some(line))?))
            }
            Some('[') => {
                self.bump();
                let mut items = Vec::new();
                loop {
                    self.skip_blank(true);
                    match self.peek() {
                        Some(']') => break,
                        None => return self.fail(format!("list from line {line} never ends")),
                        _ => items.push(self.value(key)?),
                    }
                }
                self.bump();
                Ok(Value::List(items))
            }
            Some(q @ ('"' | '\'')) => Ok(Value::Str(self.quoted(q)?)),
            Some(_) => {
                let word = self.word(",;}]#");
                bare_value(word).or_else(|message| self.fail(message))
            }
        }
    }

    /// A string in `quote`s; double quotes understand `\` escapes, single quotes are raw.
    fn quoted(&mut self, quote: char) -> Syntax<String> {
        self.bump();
        let mut out = String::new();
        loop {
            let Some(c) = self.peek().filter(|&c| c != '\n') else {
                return self.fail("unterminated string");
            };
            self.bump();
            if c == quote {
                return Ok(out);
            }
            if c != '\\' || quote == '\'' {
                out.push(c);
                continue;
            }
            out.push(match self.peek() {
                Some('n') => '\n',
                Some('t') => '\t',
                Some('r') => '\r',
                Some(e @ ('\\' | '"' | '\'')) => e,
                _ => return self.fail("unknown escape in string (write \\\\ for a backslash)"),
            });
            self.bump();
        }
    }
}

/// Types an unquoted word: boolean, integer (with size suffix), decimal, or else a string.
fn bare_value(word: String) -> Result<Value, String> {
    match word.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" => return Ok(Value::Bool(true)),
        "false" | "no" | "off" => return Ok(Value::Bool(false)),
        _ if word.starts_with('$') => return Err(format!("variables ({word}) are not supported")),
        _ => {}
    }
    if let Ok(n) = parse_size(&word) {
        return Ok(Value::Int(n, word));
    }
    // A single dot makes a decimal; several (an IP address) stay a string.
    let numeric = word
        .chars()
        .all(|c| c.is_ascii_digit() || c == '.' || c == '-');
    match word.parse() {
        Ok(f) if numeric && word.matches('.').count() == 1 => Ok(Value::Float(f)),
        _ => Ok(Value::Str(word)),
    }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
