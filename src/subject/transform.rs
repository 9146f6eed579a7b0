//! Subject transforms (nats-server's subject mapping, ADR-30/36): a source pattern and a
//! destination template whose tokens are literals or functions of the source's wildcard
//! tokens: `$n` and `{{wildcard(n)}}`, `{{partition(buckets, n...)}}`,
//! `{{splitFromLeft(n, pos)}}`, `{{splitFromRight(n, pos)}}`, `{{sliceFromLeft(n, size)}}`,
//! `{{sliceFromRight(n, size)}}` and `{{split(n, delimiter)}}` — the set nats-server 2.10's
//! `subject_transform.go` knows; any other function is refused with its "unknown function"
//! error. Used by a stream's `subject_transform` (the stored subject), `republish` (the
//! destination) and the `subject_transforms` of mirrors and sources.
//!
//! Pure: parsed once per config, applied per message. `n` counts the source's `*` tokens
//! from 1; a `>` at the end of both patterns carries the remaining tokens over.

use std::fmt;

use super::pattern::is_subset_match;
use super::validate::{is_valid_literal_subject, is_valid_subject};

/// A parsed transform. One per configured transform (a stream's, a republish's, a
/// source's), rebuilt when the config changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectTransform {
    /// The source pattern; `>` when configured empty.
    src: String,
    dest: String,
    dest_tokens: Vec<DestToken>,
    src_token_count: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DestToken {
    Literal(String),
    /// Source token at this index (0-based position in the subject).
    Wildcard(usize),
    Partition {
        buckets: u32,
        sources: Vec<usize>,
    },
    SplitFromLeft {
        source: usize,
        position: i64,
    },
    SplitFromRight {
        source: usize,
        position: i64,
    },
    SliceFromLeft {
        source: usize,
        size: i64,
    },
    SliceFromRight {
        source: usize,
        size: i64,
    },
    Split {
        source: usize,
        delimiter: String,
    },
}

/// Why a transform is refused, with nats-server's texts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransformError {
    /// Source or destination is not a valid subject, the destination has a `*`, or only
    /// one side ends with `>`.
    #[error("invalid subject")]
    BadSubject,
    #[error("{kind} in {token}")]
    Mapping { kind: MappingError, token: String },
}

/// nats-server's mapping destination errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MappingError {
    WildcardIndexOutOfRange,
    NotEnoughArguments,
    TooManyArguments,
    InvalidArgument,
    UnknownFunction,
}

impl fmt::Display for MappingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MappingError::WildcardIndexOutOfRange => {
                "invalid mapping destination: wildcard index out of range"
            }
            MappingError::NotEnoughArguments => {
                "invalid mapping destination: not enough arguments passed to the function"
            }
            MappingError::TooManyArguments => {
                "invalid mapping destination: too many arguments passed to the function"
            }
            MappingError::InvalidArgument => {
                "invalid mapping destination: function argument is invalid or in the wrong format"
            }
            MappingError::UnknownFunction => "invalid mapping destination: unknown function",
        })
    }
}

fn mapping(kind: MappingError, token: &str) -> TransformError {
    TransformError::Mapping {
        kind,
        token: token.to_owned(),
    }
}

/// A destination token before its wildcard indexes are resolved to source positions.
enum Placeholder {
    None,
    /// Function with 1-based wildcard indexes.
    Function(Function, Vec<usize>),
}

enum Function {
    Wildcard,
    Partition(u32),
    SplitFromLeft(i64),
    SplitFromRight(i64),
    SliceFromLeft(i64),
    SliceFromRight(i64),
    Split(String),
}

impl SubjectTransform {
    /// Parses `src` (empty means `>`) → `dest`, refusing what nats-server refuses.
    pub fn new(src: &str, dest: &str) -> Result<Self, TransformError> {
        let src = if src.is_empty() { ">" } else { src };
        if !is_valid_subject(src.as_bytes()) || !is_valid_subject(dest.as_bytes()) {
            return Err(TransformError::BadSubject);
        }
        let src_tokens: Vec<&str> = src.split('.').collect();
        let dest_split: Vec<&str> = dest.split('.').collect();
        let src_fwc = src_tokens.last() == Some(&">");
        let dest_fwc = dest_split.last() == Some(&">");
        if dest_split.contains(&"*") || src_fwc != dest_fwc {
            return Err(TransformError::BadSubject);
        }
        // 1-based wildcard ordinal -> position of that `*` in the source.
        let wildcards: Vec<usize> = src_tokens
            .iter()
            .enumerate()
            .filter(|(_, token)| **token == "*")
            .map(|(index, _)| index)
            .collect();
        let mut dest_tokens = Vec::with_capacity(dest_split.len());
        for token in &dest_split {
            let placeholder = parse_placeholder(token)?;
            let (function, indexes) = match placeholder {
                Placeholder::None => {
                    dest_tokens.push(DestToken::Literal((*token).to_owned()));
                    continue;
                }
                Placeholder::Function(function, indexes) => (function, indexes),
            };
            if wildcards.is_empty() {
                return Err(mapping(MappingError::WildcardIndexOutOfRange, token));
            }
            let mut sources = Vec::with_capacity(indexes.len());
            for index in indexes {
                if index == 0 || index > wildcards.len() {
                    return Err(mapping(
                        MappingError::WildcardIndexOutOfRange,
                        &format!("{token}: [{index}]"),
                    ));
                }
                sources.push(wildcards[index - 1]);
            }
            let source = sources[0];
            dest_tokens.push(match function {
                Function::Wildcard => DestToken::Wildcard(source),
                Function::Partition(buckets) => DestToken::Partition { buckets, sources },
                Function::SplitFromLeft(position) => DestToken::SplitFromLeft { source, position },
                Function::SplitFromRight(position) => {
                    DestToken::SplitFromRight { source, position }
                }
                Function::SliceFromLeft(size) => DestToken::SliceFromLeft { source, size },
                Function::SliceFromRight(size) => DestToken::SliceFromRight { source, size },
                Function::Split(delimiter) => DestToken::Split { source, delimiter },
            });
        }
        Ok(Self {
            src: src.to_owned(),
            dest: dest.to_owned(),
            dest_tokens,
            src_token_count: src_tokens.len(),
        })
    }

    /// The transformed subject, or `None` when `subject` is not a literal subject matching
    /// the source pattern (nats-server then leaves the subject as it is).
    pub fn apply(&self, subject: &str) -> Option<String> {
        if self.src == ">" && (self.dest == ">" || self.dest.is_empty()) {
            return Some(subject.to_owned());
        }
        if !is_valid_literal_subject(subject.as_bytes()) {
            return None;
        }
        if self.src != ">" && !is_subset_match(subject, &self.src) {
            return None;
        }
        let tokens: Vec<&str> = subject.split('.').collect();
        Some(self.render(&tokens))
    }

    /// A wildcard pattern covering every subject this transform produces: each function
    /// token becomes `*`, and everything from a function that can yield several tokens (the
    /// split and slice functions) on becomes `>`. Consumers filter on stored subjects, so a
    /// stream's consumers may filter on these.
    pub fn dest_pattern(&self) -> String {
        let mut tokens = Vec::with_capacity(self.dest_tokens.len());
        for token in &self.dest_tokens {
            match token {
                DestToken::Literal(literal) => tokens.push(literal.as_str()),
                DestToken::Wildcard(_) | DestToken::Partition { .. } => tokens.push("*"),
                _ => {
                    tokens.push(">");
                    break;
                }
            }
        }
        tokens.join(".")
    }

    /// `apply`, or the subject unchanged when it does not match.
    pub fn apply_or_keep(&self, subject: &str) -> String {
        self.apply(subject).unwrap_or_else(|| subject.to_owned())
    }

    fn render(&self, tokens: &[&str]) -> String {
        let mut out = String::with_capacity(self.dest.len() + 16);
        let last = self.dest_tokens.len() - 1;
        for (index, token) in self.dest_tokens.iter().enumerate() {
            match token {
                DestToken::Literal(literal) if literal == ">" => break,
                DestToken::Literal(literal) => out.push_str(literal),
                DestToken::Wildcard(source) => out.push_str(tokens[*source]),
                DestToken::Partition { buckets, sources } => {
                    let key: Vec<u8> = sources
                        .iter()
                        .flat_map(|source| tokens[*source].bytes())
                        .collect();
                    out.push_str(&(fnv1a32(&key) % buckets).to_string());
                }
                DestToken::SplitFromLeft { source, position } => {
                    let token = tokens[*source];
                    match usize::try_from(*position) {
                        Ok(at) if at > 0 && at < token.len() => {
                            out.push_str(&token[..at]);
                            out.push('.');
                            out.push_str(&token[at..]);
                        }
                        _ => out.push_str(token),
                    }
                }
                DestToken::SplitFromRight { source, position } => {
                    let token = tokens[*source];
                    match usize::try_from(*position) {
                        Ok(at) if at > 0 && at < token.len() => {
                            out.push_str(&token[..token.len() - at]);
                            out.push('.');
                            out.push_str(&token[token.len() - at..]);
                        }
                        _ => out.push_str(token),
                    }
                }
                DestToken::SliceFromLeft { source, size } => {
                    slice_from_left(&mut out, tokens[*source], *size);
                }
                DestToken::SliceFromRight { source, size } => {
                    slice_from_right(&mut out, tokens[*source], *size);
                }
                DestToken::Split { source, delimiter } => {
                    split(&mut out, tokens[*source], delimiter);
                }
            }
            if index < last {
                out.push('.');
            }
        }
        if matches!(self.dest_tokens.last(), Some(DestToken::Literal(l)) if l == ">") {
            let from = self.src_token_count - 1;
            out.push_str(&tokens[from.min(tokens.len())..].join("."));
        }
        out
    }
}

fn slice_from_left(out: &mut String, token: &str, size: i64) {
    let Some(size) = slice_size(token, size) else {
        out.push_str(token);
        return;
    };
    let mut start = 0;
    while start + size <= token.len() {
        if start != 0 {
            out.push('.');
        }
        out.push_str(&token[start..start + size]);
        if start + size != token.len() && start + 2 * size > token.len() {
            out.push('.');
            out.push_str(&token[start + size..]);
            break;
        }
        start += size;
    }
}

fn slice_from_right(out: &mut String, token: &str, size: i64) {
    let Some(size) = slice_size(token, size) else {
        out.push_str(token);
        return;
    };
    let remainder = token.len() % size;
    if remainder > 0 {
        out.push_str(&token[..remainder]);
        out.push('.');
    }
    let mut start = remainder;
    while start + size <= token.len() {
        out.push_str(&token[start..start + size]);
        if start + size < token.len() {
            out.push('.');
        }
        start += size;
    }
}

fn split(out: &mut String, token: &str, delimiter: &str) {
    let parts: Vec<&str> = token.split(delimiter).collect();
    for (index, part) in parts.iter().enumerate() {
        out.push_str(part);
        if index + 1 < parts.len()
            && !parts[index + 1].is_empty()
            && !(index == 0 && part.is_empty())
        {
            out.push('.');
        }
    }
}

/// FNV-1a, 32 bits (Go's `hash/fnv` `New32a`, what nats-server partitions with).
fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

/// `$n`, `{{function(args)}}` or a literal token.
fn parse_placeholder(token: &str) -> Result<Placeholder, TransformError> {
    if token.len() > 1 && token.starts_with('$') {
        return Ok(match token[1..].parse::<usize>() {
            Ok(index) => Placeholder::Function(Function::Wildcard, vec![index]),
            // Other things use tokens starting with `$`: a literal.
            Err(_) => Placeholder::None,
        });
    }
    if !(token.len() > 4 && token.starts_with("{{") && token.ends_with("}}")) {
        return Ok(Placeholder::None);
    }
    let inner = token[2..token.len() - 2].trim();
    let (Some(open), Some(close)) = (inner.find('('), inner.rfind(')')) else {
        return Err(mapping(MappingError::UnknownFunction, token));
    };
    if close < open || !inner[close + 1..].trim().is_empty() {
        return Err(mapping(MappingError::UnknownFunction, token));
    }
    let name = inner[..open].trim().to_ascii_lowercase();
    let args: Vec<&str> = inner[open + 1..close]
        .split(',')
        .map(|arg| arg.trim_start())
        .collect();
    let int = |arg: &str| -> Result<i64, TransformError> {
        arg.trim()
            .parse::<i64>()
            .map_err(|_| mapping(MappingError::InvalidArgument, token))
    };
    let index = |arg: &str| -> Result<usize, TransformError> {
        usize::try_from(int(arg)?).map_err(|_| mapping(MappingError::InvalidArgument, token))
    };
    let two_args = || -> Result<(usize, i64), TransformError> {
        match args.len() {
            0 | 1 => Err(mapping(MappingError::NotEnoughArguments, token)),
            2 => Ok((index(args[0])?, int(args[1])?)),
            _ => Err(mapping(MappingError::TooManyArguments, token)),
        }
    };
    let function = |function, index| Ok(Placeholder::Function(function, vec![index]));
    match name.as_str() {
        "wildcard" => match args.as_slice() {
            [""] => Err(mapping(MappingError::NotEnoughArguments, token)),
            [arg] => function(Function::Wildcard, index(arg)?),
            _ => Err(mapping(MappingError::TooManyArguments, token)),
        },
        "partition" => {
            if args.len() < 2 {
                return Err(mapping(MappingError::NotEnoughArguments, token));
            }
            let buckets = u32::try_from(int(args[0])?)
                .ok()
                .filter(|buckets| *buckets > 0)
                .ok_or_else(|| mapping(MappingError::InvalidArgument, token))?;
            let indexes = args[1..]
                .iter()
                .map(|arg| index(arg))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Placeholder::Function(Function::Partition(buckets), indexes))
        }
        "splitfromleft" => {
            let (source, position) = two_args()?;
            function(Function::SplitFromLeft(position), source)
        }
        "splitfromright" => {
            let (source, position) = two_args()?;
            function(Function::SplitFromRight(position), source)
        }
        "slicefromleft" => {
            let (source, size) = two_args()?;
            function(Function::SliceFromLeft(size), source)
        }
        "slicefromright" => {
            let (source, size) = two_args()?;
            function(Function::SliceFromRight(size), source)
        }
        "split" => match args.as_slice() {
            [] | [_] => Err(mapping(MappingError::NotEnoughArguments, token)),
            [source, delimiter] => {
                if delimiter.contains(' ') || delimiter.contains('.') || delimiter.is_empty() {
                    return Err(mapping(MappingError::InvalidArgument, token));
                }
                function(Function::Split((*delimiter).to_owned()), index(source)?)
            }
            _ => Err(mapping(MappingError::TooManyArguments, token)),
        },
        _ => Err(mapping(MappingError::UnknownFunction, token)),
    }
}

#[cfg(test)]
#[path = "transform_tests.rs"]
mod tests;

/// The slice size of a `SplitFromLeft`/`SplitFromRight` over `token`, or `None` when the
/// token stays whole (a size that is negative, zero or not smaller than the token).
fn slice_size(token: &str, size: i64) -> Option<usize> {
    usize::try_from(size)
        .ok()
        .filter(|&size| size != 0 && size < token.len())
}
