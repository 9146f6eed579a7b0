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
//! `jetstream` (`true`, `enabled`, `disabled`, or a block with `store_dir` and `enabled`),
//! `authorization { user/username, password/pass, token, timeout }`.
//!
//! Other keys (nats-server configs carry many) are logged as warnings and ignored, except
//! those whose silent loss would weaken security — `tls`, `accounts`, `operator`,
//! `resolver`, unknown keys inside `authorization` — which are rejected. Not supported:
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
    pub user: Option<String>,
    pub password: Option<String>,
    pub token: Option<String>,
    pub auth_timeout: Option<Duration>,
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
    let entries = Parser::new(text)
        .document()
        .map_err(|e| ConfigError::Parse {
            path: path_for_errors.to_path_buf(),
            line: e.line,
            message: e.message,
        })?;
    Reader {
        path: path_for_errors,
    }
    .top_level(&entries)
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
    if rest.is_empty() {
        return Err(bad());
    }
    let mut seconds = 0.0_f64;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let unit_end = rest[num_end..]
            .find(|c: char| c.is_ascii_digit())
            .map_or(rest.len(), |i| num_end + i);
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

// ---------------------------------------------------------------------------------------
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
    key: String,
    line: usize,
    value: Value,
}

struct SyntaxError {
    line: usize,
    message: String,
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    line: usize,
}

impl Parser {
    fn new(text: &str) -> Self {
        Parser {
            chars: text.chars().collect(),
            pos: 0,
            line: 1,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) {
        if self.peek() == Some('\n') {
            self.line += 1;
        }
        self.pos += 1;
    }

    fn fail<T>(&self, message: impl fmt::Display) -> Result<T, SyntaxError> {
        Err(SyntaxError {
            line: self.line,
            message: message.to_string(),
        })
    }

    fn at_comment(&self) -> bool {
        self.peek() == Some('#')
            || (self.peek() == Some('/') && self.chars.get(self.pos + 1) == Some(&'/'))
    }

    /// Skips spaces and comments; with `separators` also newlines, `,` and `;`.
    fn skip_blank(&mut self, separators: bool) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r') => self.bump(),
                Some('\n' | ',' | ';') if separators => self.bump(),
                Some(_) if self.at_comment() => {
                    while !matches!(self.peek(), None | Some('\n')) {
                        self.bump();
                    }
                }
                _ => return,
            }
        }
    }

    fn document(&mut self) -> Result<Vec<Entry>, SyntaxError> {
        self.entries(None)
    }

    /// Entries up to end of input (top level) or the `}` closing a block opened on `open`.
    fn entries(&mut self, open: Option<usize>) -> Result<Vec<Entry>, SyntaxError> {
        let mut out = Vec::new();
        loop {
            self.skip_blank(true);
            match (self.peek(), open) {
                (None, None) => return Ok(out),
                (None, Some(line)) => {
                    return self.fail(format!("block opened on line {line} is never closed"))
                }
                (Some('}'), Some(_)) => {
                    self.bump();
                    return Ok(out);
                }
                _ => out.push(self.entry()?),
            }
        }
    }

    fn entry(&mut self) -> Result<Entry, SyntaxError> {
        let line = self.line;
        let key = self.key()?;
        self.skip_blank(false);
        if matches!(self.peek(), Some(':' | '=')) {
            self.bump();
            self.skip_blank(false);
        }
        if key.eq_ignore_ascii_case("include") {
            return self.fail("'include' is not supported; put everything in one file");
        }
        let value = self.value(&key)?;
        self.skip_blank(false);
        match self.peek() {
            None | Some('\n' | ',' | ';' | '}') => Ok(Entry { key, line, value }),
            Some(c) => self.fail(format!(
                "unexpected '{c}' after the value of '{key}' (quote values that contain spaces)"
            )),
        }
    }

    fn key(&mut self) -> Result<String, SyntaxError> {
        if let Some(q @ ('"' | '\'')) = self.peek() {
            return self.quoted(q);
        }
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| !c.is_whitespace() && !":={}[],;#\"'".contains(c))
        {
            self.bump();
        }
        match self.peek() {
            _ if self.pos > start => Ok(self.chars[start..self.pos].iter().collect()),
            Some(c) => self.fail(format!("expected a key, found '{c}'")),
            None => self.fail("expected a key, found end of file"),
        }
    }

    fn value(&mut self, key: &str) -> Result<Value, SyntaxError> {
        let line = self.line;
        match self.peek() {
            None | Some('\n' | ',' | ';' | '}' | ']') => {
                self.fail(format!("missing value for '{key}'"))
            }
            Some('{') => {
                self.bump();
                Ok(Value::Block(self.entries(Some(line))?))
            }
            Some('[') => {
                self.bump();
                let mut items = Vec::new();
                loop {
                    self.skip_blank(true);
                    match self.peek() {
                        Some(']') => break,
                        None => {
                            return self.fail(format!("list opened on line {line} is never closed"))
                        }
                        _ => items.push(self.value(key)?),
                    }
                }
                self.bump();
                Ok(Value::List(items))
            }
            Some(q @ ('"' | '\'')) => Ok(Value::Str(self.quoted(q)?)),
            Some(_) => {
                let start = self.pos;
                while self
                    .peek()
                    .is_some_and(|c| !c.is_whitespace() && !",;}]#".contains(c))
                {
                    self.bump();
                }
                let word: String = self.chars[start..self.pos].iter().collect();
                bare_value(word).or_else(|message| self.fail(message))
            }
        }
    }

    /// A string in `quote`s; double quotes understand `\` escapes, single quotes are raw.
    fn quoted(&mut self, quote: char) -> Result<String, SyntaxError> {
        self.bump();
        let mut out = String::new();
        loop {
            let Some(c) = self.peek().filter(|&c| c != '\n') else {
                return self.fail("unterminated string");
            };
            self.bump();
            match c {
                _ if c == quote => return Ok(out),
                '\\' if quote == '"' => {
                    let escaped = match self.peek() {
                        Some('n') => '\n',
                        Some('t') => '\t',
                        Some('r') => '\r',
                        Some(e @ ('\\' | '"' | '\'')) => e,
                        _ => {
                            return self.fail("unknown escape in string (use \\\\ for a backslash)")
                        }
                    };
                    self.bump();
                    out.push(escaped);
                }
                _ => out.push(c),
            }
        }
    }
}

/// Types an unquoted word: boolean, integer (with size suffix), decimal, or else a string.
fn bare_value(word: String) -> Result<Value, String> {
    match word.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" => return Ok(Value::Bool(true)),
        "false" | "no" | "off" => return Ok(Value::Bool(false)),
        _ => {}
    }
    if word.starts_with('$') {
        return Err(format!(
            "variables such as {word} are not supported; write the value itself"
        ));
    }
    if let Ok(n) = parse_size(&word) {
        return Ok(Value::Int(n, word));
    }
    // A single dot makes a decimal; several (an IP address) stay a string.
    let numeric = word
        .chars()
        .all(|c| c.is_ascii_digit() || c == '.' || c == '-');
    if numeric && word.matches('.').count() == 1 {
        if let Ok(f) = word.parse() {
            return Ok(Value::Float(f));
        }
    }
    Ok(Value::Str(word))
}

// ---------------------------------------------------------------------------------------
// Meaning: entries -> FileConfig.

struct Reader<'a> {
    path: &'a Path,
}

impl Reader<'_> {
    fn top_level(&self, entries: &[Entry]) -> Result<FileConfig, ConfigError> {
        let mut fc = FileConfig::default();
        for e in entries {
            let key = e.key.to_ascii_lowercase();
            let key = key.as_str();
            match key {
                "host" | "net" => fc.host = Some(self.string(key, e)?),
                "port" => fc.port = Some(self.port(key, e)?),
                "listen" => (fc.host, fc.port) = self.host_port(key, e, fc.host.take())?,
                "server_name" => fc.server_name = Some(self.string(key, e)?),
                "http_port" | "monitor_port" => fc.http_port = Some(self.port(key, e)?),
                "http" => {
                    (fc.http_host, fc.http_port) = self.host_port(key, e, fc.http_host.take())?
                }
                "max_payload" => fc.max_payload = Some(self.size(key, e)?),
                "max_control_line" => fc.max_control_line = Some(self.size(key, e)?),
                "max_pending" | "max_pending_size" => fc.max_pending = Some(self.size(key, e)?),
                "max_connections" | "max_conn" => fc.max_connections = Some(self.size(key, e)?),
                "ping_interval" => fc.ping_interval = Some(self.duration(key, e)?),
                "ping_max" => fc.ping_max = Some(self.int(key, e, u32::MAX.into())? as u32),
                "debug" => fc.debug = Some(self.boolean(key, e)?),
                "trace" => fc.trace = Some(self.boolean(key, e)?),
                "jetstream" => self.jetstream(e, &mut fc)?,
                "authorization" => self.authorization(e, &mut fc)?,
                "tls" | "accounts" | "operator" | "resolver" => {
                    return Err(self.invalid(
                        key,
                        e,
                        "is not supported by jetraft (refusing to run without it)",
                    ))
                }
                _ => self.ignore(key, e),
            }
        }
        Ok(fc)
    }

    fn jetstream(&self, e: &Entry, fc: &mut FileConfig) -> Result<(), ConfigError> {
        let on = match &e.value {
            Value::Bool(on) => Some(*on),
            Value::Str(s) => match s.to_ascii_lowercase().as_str() {
                "enabled" | "enable" => Some(true),
                "disabled" | "disable" => Some(false),
                _ => {
                    return Err(self.invalid(
                        "jetstream",
                        e,
                        "expected true, false, enabled, disabled or a block",
                    ))
                }
            },
            _ => None,
        };
        if on.is_some() {
            fc.jetstream = on;
            return Ok(());
        }
        let entries = match &e.value {
            Value::Block(entries) => entries,
            _ => {
                return Err(self.invalid(
                    "jetstream",
                    e,
                    format!("expected a boolean or a block, got {}", e.value.kind()),
                ))
            }
        };
        // A jetstream block enables JetStream unless it says `enabled: false`.
        fc.jetstream = Some(true);
        for sub in entries {
            let key = format!("jetstream.{}", sub.key.to_ascii_lowercase());
            match key.as_str() {
                "jetstream.store_dir" | "jetstream.store" | "jetstream.storedir" => {
                    fc.store_dir = Some(PathBuf::from(self.string(&key, sub)?))
                }
                "jetstream.enabled" | "jetstream.enable" => {
                    fc.jetstream = Some(self.boolean(&key, sub)?)
                }
                _ => self.ignore(&key, sub),
            }
        }
        Ok(())
    }

    fn authorization(&self, e: &Entry, fc: &mut FileConfig) -> Result<(), ConfigError> {
        let Value::Block(entries) = &e.value else {
            return Err(self.invalid(
                "authorization",
                e,
                format!("expected a block, got {}", e.value.kind()),
            ));
        };
        for sub in entries {
            let key = format!("authorization.{}", sub.key.to_ascii_lowercase());
            match key.as_str() {
                "authorization.user" | "authorization.username" => {
                    fc.user = Some(self.string(&key, sub)?)
                }
                "authorization.password" | "authorization.pass" => {
                    fc.password = Some(self.string(&key, sub)?)
                }
                "authorization.token" => fc.token = Some(self.string(&key, sub)?),
                "authorization.timeout" => fc.auth_timeout = Some(self.duration(&key, sub)?),
                // Ignoring e.g. `users` or `permissions` would silently open the server.
                _ => {
                    return Err(self.invalid(
                        &key,
                        sub,
                        "is not supported by jetraft (refusing to run without it)",
                    ))
                }
            }
        }
        Ok(())
    }

    fn invalid(&self, key: &str, e: &Entry, message: impl fmt::Display) -> ConfigError {
        ConfigError::Invalid {
            key: key.to_string(),
            message: format!("{message} (at {}:{})", self.path.display(), e.line),
        }
    }

    fn ignore(&self, key: &str, e: &Entry) {
        tracing::warn!(file = %self.path.display(), line = e.line, key, "ignoring unsupported config key");
    }

    fn string(&self, key: &str, e: &Entry) -> Result<String, ConfigError> {
        match &e.value {
            Value::Str(s) => Ok(s.clone()),
            // Numeric passwords and names are plausible; keep what the user wrote.
            Value::Int(_, raw) => Ok(raw.clone()),
            v => Err(self.invalid(key, e, format!("expected a string, got {}", v.kind()))),
        }
    }

    fn boolean(&self, key: &str, e: &Entry) -> Result<bool, ConfigError> {
        match &e.value {
            Value::Bool(b) => Ok(*b),
            v => Err(self.invalid(key, e, format!("expected true or false, got {}", v.kind()))),
        }
    }

    /// An integer in `0..=max`.
    fn int(&self, key: &str, e: &Entry, max: i64) -> Result<i64, ConfigError> {
        match &e.value {
            Value::Int(n, _) if (0..=max).contains(n) => Ok(*n),
            Value::Int(n, _) => Err(self.invalid(key, e, format!("{n} is out of range 0..={max}"))),
            v => Err(self.invalid(key, e, format!("expected an integer, got {}", v.kind()))),
        }
    }

    fn port(&self, key: &str, e: &Entry) -> Result<u16, ConfigError> {
        Ok(self.int(key, e, u16::MAX.into())? as u16)
    }

    fn size(&self, key: &str, e: &Entry) -> Result<usize, ConfigError> {
        let n = self.int(key, e, i64::MAX)?;
        usize::try_from(n).map_err(|_| self.invalid(key, e, "is too large"))
    }

    /// A quoted duration string, or a plain number of seconds.
    fn duration(&self, key: &str, e: &Entry) -> Result<Duration, ConfigError> {
        match &e.value {
            Value::Str(s) => parse_duration(s).map_err(|m| self.invalid(key, e, m)),
            Value::Int(n, _) if *n < 0 => Err(self.invalid(key, e, "must not be negative")),
            Value::Int(n, raw) if raw.bytes().all(|b| b.is_ascii_digit()) => Ok(Duration::from_secs(*n as u64)),
            Value::Int(_, raw) => Err(self.invalid(key, e, format!(
                "unquoted '{raw}' is a number with a size unit; write durations in quotes, e.g. \"{raw}\""
            ))),
            Value::Float(f) => Duration::try_from_secs_f64(*f).map_err(|_| self.invalid(key, e, "must not be negative")),
            v => Err(self.invalid(key, e, format!("expected a duration, got {}", v.kind()))),
        }
    }

    /// `"host:port"`, `"[::1]:port"` or a bare port; an empty host keeps `host`.
    fn host_port(
        &self,
        key: &str,
        e: &Entry,
        host: Option<String>,
    ) -> Result<(Option<String>, Option<u16>), ConfigError> {
        let text = match &e.value {
            Value::Int(..) => return Ok((host, Some(self.port(key, e)?))),
            Value::Str(s) => s,
            v => {
                return Err(self.invalid(
                    key,
                    e,
                    format!("expected \"host:port\", got {}", v.kind()),
                ))
            }
        };
        let bad = || self.invalid(key, e, format!("expected \"host:port\", got '{text}'"));
        let (h, p) = text.rsplit_once(':').ok_or_else(bad)?;
        let h = h
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(h);
        let port = p.parse::<u16>().map_err(|_| bad())?;
        Ok((
            if h.is_empty() {
                host
            } else {
                Some(h.to_string())
            },
            Some(port),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> FileConfig {
        parse(Path::new("test.conf"), text).expect("config should parse")
    }

    fn err(text: &str) -> ConfigError {
        parse(Path::new("test.conf"), text).expect_err("config should be rejected")
    }

    fn parse_line(text: &str) -> usize {
        match err(text) {
            ConfigError::Parse { line, .. } => line,
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    fn invalid_key(text: &str) -> String {
        match err(text) {
            ConfigError::Invalid { key, .. } => key,
            other => panic!("expected an invalid-value error, got {other:?}"),
        }
    }

    #[test]
    fn separators_and_comments() {
        let fc = ok(
            "# top\nport: 4333\nhost = 127.0.0.1 // trailing\nserver_name node-a\n\
                     debug: true, trace: on; max_conn 10\n",
        );
        assert_eq!(fc.port, Some(4333));
        assert_eq!(fc.host.as_deref(), Some("127.0.0.1"));
        assert_eq!(fc.server_name.as_deref(), Some("node-a"));
        assert_eq!(
            (fc.debug, fc.trace, fc.max_connections),
            (Some(true), Some(true), Some(10))
        );
    }

    #[test]
    fn quoted_strings_and_case_insensitive_keys() {
        let fc = ok("SERVER_NAME: \"a \\\"b\\\" # not a comment\"\nHost: 'raw\\n'\n");
        assert_eq!(fc.server_name.as_deref(), Some("a \"b\" # not a comment"));
        assert_eq!(fc.host.as_deref(), Some("raw\\n"));
    }

    #[test]
    fn size_suffixes() {
        assert_eq!(ok("max_payload: 2MB").max_payload, Some(2 << 20));
        assert_eq!(ok("max_payload: 512kib").max_payload, Some(512 << 10));
        assert_eq!(ok("max_payload = 1M").max_payload, Some(1_000_000));
        assert_eq!(ok("max_pending: 1GB").max_pending, Some(1 << 30));
        assert_eq!(ok("max_control_line: 4K").max_control_line, Some(4000));
        assert_eq!(parse_size("3Ki"), Ok(3072));
        assert!(parse_size("10XB").is_err());
        assert!(parse_size("99999999999TB").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(
            ok("ping_interval: \"2m\"").ping_interval,
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            ok("ping_interval: \"500ms\"").ping_interval,
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            ok("ping_interval: \"1h30m\"").ping_interval,
            Some(Duration::from_secs(5400))
        );
        assert_eq!(
            ok("ping_interval: 45").ping_interval,
            Some(Duration::from_secs(45))
        );
        assert_eq!(
            ok("authorization { timeout: 0.5 }").auth_timeout,
            Some(Duration::from_millis(500))
        );
        assert!(parse_duration("2 weeks").is_err());
        // nats-server reads a bare 2m as 2,000,000; refuse rather than wait 23 days.
        assert_eq!(invalid_key("ping_interval: 2m"), "ping_interval");
        assert_eq!(invalid_key("ping_interval: \"soon\""), "ping_interval");
    }

    #[test]
    fn listen_and_http() {
        let fc = ok("listen: \"10.0.0.1:4300\"\nhttp: 8300");
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
        assert_eq!(invalid_key("listen: \"nowhere\""), "listen");
    }

    #[test]
    fn blocks() {
        let fc = ok("jetstream {\n  store_dir: \"/data/js\"\n  max_mem: 1G\n}\n\
                     authorization: {\n user: alice\n password: 1234\n}\n");
        assert_eq!(fc.jetstream, Some(true));
        assert_eq!(fc.store_dir, Some(PathBuf::from("/data/js")));
        assert_eq!(
            (fc.user.as_deref(), fc.password.as_deref()),
            (Some("alice"), Some("1234"))
        );
        assert_eq!(ok("jetstream { enabled: false }").jetstream, Some(false));
        assert_eq!(ok("jetstream: enabled").jetstream, Some(true));
        assert_eq!(ok("jetstream: false").jetstream, Some(false));
        assert_eq!(
            ok("authorization { token: \"s3cret\" }").token.as_deref(),
            Some("s3cret")
        );
    }

    #[test]
    fn unknown_keys_are_ignored_even_when_nested() {
        let fc = ok("cluster {\n  name: c1\n  routes: [\n    nats://a:6222 // first\n    \"nats://b:6222\"\n  ]\n}\n\
                     lame_duck_duration: \"30s\"\nport: 4999");
        assert_eq!(
            fc,
            FileConfig {
                port: Some(4999),
                ..FileConfig::default()
            }
        );
    }

    #[test]
    fn security_relevant_keys_are_refused() {
        assert_eq!(invalid_key("tls { cert_file: x }"), "tls");
        assert_eq!(
            invalid_key("authorization {\n users: [ {user: a, password: b} ]\n}"),
            "authorization.users"
        );
    }

    #[test]
    fn wrong_types_are_invalid() {
        assert_eq!(invalid_key("port: \"abc\""), "port");
        assert_eq!(invalid_key("port: 70000"), "port");
        assert_eq!(invalid_key("max_payload: -1"), "max_payload");
        assert_eq!(invalid_key("debug: 1"), "debug");
        assert_eq!(invalid_key("authorization: true"), "authorization");
        assert_eq!(
            invalid_key("\n\njetstream { store_dir: [a] }"),
            "jetstream.store_dir"
        );
        match err("\n\nport: abc") {
            ConfigError::Invalid { message, .. } => {
                assert!(message.contains("test.conf:3"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn syntax_errors_carry_line_numbers() {
        assert_eq!(parse_line("port: 1\nhost:\n"), 2);
        assert_eq!(parse_line("a: 1\n\nname: \"unterminated\n"), 3);
        assert_eq!(parse_line("jetstream {\n store_dir: x\n"), 3);
        assert_eq!(parse_line("port: 1\n}\n"), 2);
        assert_eq!(parse_line("x: 1\ny: 2\nserver_name: two words\n"), 3);
        assert_eq!(parse_line("include ./other.conf"), 1);
        assert_eq!(parse_line("\ntoken: $TOKEN"), 2);
        assert_eq!(parse_line("list: [1, 2\n"), 2);
    }

    #[test]
    fn load_reports_missing_file() {
        let missing = Path::new("/nonexistent/jetraft.conf");
        assert!(matches!(load(missing), Err(ConfigError::Read { path, .. }) if path == missing));
    }
}
