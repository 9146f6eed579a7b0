//! The layering of `src/`, checked: a module may name only the modules below it.
//!
//! In one crate the compiler enforces no layers, and every documented boundary of jetraft has
//! drifted once already (the code map, `src/lib.rs`, `src/store/mod.rs`). This test reads every
//! library source file reachable from `src/lib.rs` through `mod` declarations, leaves out what
//! is compiled only for tests (`#[cfg(test)]` modules, whether inline or in their own files, and
//! any other `#[cfg(test)]` item), and fails, naming `file:line`, wherever a top-level module
//! names another one its row in [`LAYERS`] does not list, by a `crate::` path or by `super::`
//! paths that climb out of the module, or names an external crate its row forbids.
//!
//! [`LAYERS`] is the "depends on" column of the code map in ARCHITECTURE.md, one row per
//! module, bottom up: change both together. `src/main.rs` is the binary, outside the library,
//! and may use all of it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One top-level module of the library: the crate modules it may import, and the external
/// crates it must not name.
struct Layer {
    module: &'static str,
    may_import: &'static [&'static str],
    forbidden_crates: &'static [&'static str],
}

/// The pure layers do no I/O of their own: no runtime, no consensus, no storage engine.
const NO_RUNTIME: &[&str] = &["tokio"];
const PURE_CORE: &[&str] = &["tokio", "openraft", "sled", "tonic"];

/// Bottom up: a row may import only rows above it in this list. Mirrored by the code map in
/// ARCHITECTURE.md ("depends on").
#[rustfmt::skip]
const LAYERS: &[Layer] = &[
    //     module        may import (crate modules)                            must not name
    layer("config",    &[],                                                    &[]),
    layer("wire",      &[],                                                    NO_RUNTIME),
    layer("subject",   &[],                                                    NO_RUNTIME),
    layer("store",     &[],                                                    &[]),
    layer("jsapi",     &["subject"],                                           NO_RUNTIME),
    layer("jscore",    &["wire", "subject", "jsapi"],                          PURE_CORE),
    layer("consensus", &["store"],                                             &[]),
    layer("server",    &["config", "wire", "subject"],                         &[]),
    layer("cluster",   &["config", "subject", "consensus", "server"],          &[]),
    layer("jetstream", &["wire", "subject", "store", "jsapi", "jscore",
                         "consensus", "server", "cluster"],                    &[]),
    layer("monitor",   &["jsapi", "server", "cluster", "jetstream"],           &[]),
    // The composition root: starts and wires everything; nothing imports it. It may name any
    // module; the code map's row lists the ones it does.
    layer("node",      &["config", "wire", "subject", "store", "jsapi", "jscore",
                         "consensus", "server", "cluster", "jetstream", "monitor"], &[]),
    // The fuzz targets' bodies (`fuzz/`): reach the decoders of every layer; nothing
    // imports it.
    layer("fuzzing",   &["wire", "subject", "store", "jsapi", "jscore", "consensus",
                         "cluster", "jetstream"],                              &[]),
];

const fn layer(
    module: &'static str,
    may_import: &'static [&'static str],
    forbidden_crates: &'static [&'static str],
) -> Layer {
    Layer {
        module,
        may_import,
        forbidden_crates,
    }
}

#[test]
fn each_module_imports_only_what_its_row_allows() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = library_files(&src);
    assert!(
        files.len() > 50,
        "found only {} library files under {}",
        files.len(),
        src.display()
    );

    let layers: BTreeMap<&str, &Layer> = LAYERS.iter().map(|layer| (layer.module, layer)).collect();
    let mut violations = Vec::new();
    for file in &files {
        let Some(own) = file.module_path.first() else {
            continue; // lib.rs itself only declares the modules
        };
        let shown = file
            .path
            .strip_prefix(src.parent().unwrap_or(&src))
            .unwrap_or(&file.path);
        let Some(layer) = layers.get(own.as_str()) else {
            violations.push(format!(
                "{}: module `{own}` has no row in tests/layers.rs LAYERS (add it, and to ARCHITECTURE.md's code map)",
                shown.display()
            ));
            continue;
        };
        for named in &file.names {
            let allowed = match &named.target {
                Target::Module(module) => {
                    module == own || layer.may_import.contains(&module.as_str())
                }
                Target::ExternalCrate(krate) => !layer.forbidden_crates.contains(&krate.as_str()),
            };
            if !allowed {
                let what = match &named.target {
                    Target::Module(module) => format!("module `{module}`"),
                    Target::ExternalCrate(krate) => format!("crate `{krate}`"),
                };
                violations.push(format!(
                    "{}:{}: `{own}` must not name {what}",
                    shown.display(),
                    named.line
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "the layering in tests/layers.rs (and ARCHITECTURE.md's code map) is broken; \
         move the code, or change the table if the new dependency is intended:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_layer_table_runs_one_way() {
    let known: BTreeSet<&str> = LAYERS.iter().map(|layer| layer.module).collect();
    assert_eq!(known.len(), LAYERS.len(), "a module has two rows");
    let mut below = BTreeSet::new();
    for layer in LAYERS {
        for dependency in layer.may_import {
            assert!(
                known.contains(dependency),
                "`{}` may import `{dependency}`, which has no row",
                layer.module
            );
            assert!(
                below.contains(dependency),
                "`{}` may import `{dependency}`, which is not below it: the rows are bottom up and may only point down",
                layer.module
            );
        }
        below.insert(layer.module);
    }
}

#[test]
fn the_reader_sees_through_comments_strings_and_test_code() {
    let source = r##"
        //! crate::server in a doc comment
        use crate::jsapi::StreamConfig; // crate::monitor
        use crate::{wire, server::Router};
        use super::super::cluster::Peer;
        const S: &str = "crate::jetstream";
        const R: &str = r#"crate::jetstream " "#;
        fn f<'a>(c: char) -> bool { c == '"' || c == '\'' }
        /* crate::node /* nested */ crate::node */
        #[cfg(test)]
        mod tests { use crate::monitor; fn g() { tokio::spawn(async {}); } }
        #[cfg(test)]
        mod tests_more;
        mod inner { use super::super::super::store::log; }
        fn h() { tokio::spawn(async {}); let _ = $crate::x; }
        pub(super) mod child;
        "##;
    let tokens = lex(source);
    let names = names_in(&tokens, &["jscore".to_owned(), "stream".to_owned()]);
    let found: Vec<(String, usize)> = names
        .names
        .iter()
        .map(|named| match &named.target {
            Target::Module(module) => (module.clone(), named.line),
            Target::ExternalCrate(krate) => (format!("extern {krate}"), named.line),
        })
        .collect();
    let expected: Vec<(String, usize)> = vec![
        ("jsapi".into(), 3),
        ("wire".into(), 4),
        ("server".into(), 4),
        ("cluster".into(), 5),
        ("store".into(), 14),
        ("extern tokio".into(), 15),
    ];
    assert_eq!(found, expected);
    assert_eq!(
        names
            .child_modules
            .iter()
            .map(|child| child.name.as_str())
            .collect::<Vec<_>>(),
        vec!["child"]
    );
}

// ---- walking the module tree --------------------------------------------------------------

/// One library source file, compiled outside tests.
struct SourceFile {
    path: PathBuf,
    /// Its module path from the crate root (`["jetstream", "api", "streams"]`).
    module_path: Vec<String>,
    names: Vec<Named>,
}

/// A path that names a crate module or an external crate, with the line it is on.
struct Named {
    target: Target,
    line: usize,
}

enum Target {
    /// A top-level module of this crate (`crate::wire::…`, or `super::…` climbing to the root).
    Module(String),
    /// An external crate named at the start of a path (`tokio::spawn`).
    ExternalCrate(String),
}

/// A `mod name;` declaration, compiled outside tests, that lives in its own file.
struct ChildModule {
    name: String,
    /// The inline modules it is nested in, inside its declaring file.
    inline_path: Vec<String>,
}

struct FileNames {
    names: Vec<Named>,
    child_modules: Vec<ChildModule>,
}

/// Every file of the library reachable from `lib.rs`, without test-only modules.
fn library_files(src: &Path) -> Vec<SourceFile> {
    let mut files = Vec::new();
    // (file, module path, directory its `mod x;` children live in)
    let mut pending = vec![(src.join("lib.rs"), Vec::<String>::new(), src.to_path_buf())];
    while let Some((path, module_path, child_dir)) = pending.pop() {
        let source = fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
        let found = names_in(&lex(&source), &module_path);
        for child in found.child_modules {
            let mut dir = child_dir.clone();
            dir.extend(child.inline_path.iter());
            let mut child_path = module_path.clone();
            child_path.extend(child.inline_path.iter().cloned());
            child_path.push(child.name.clone());
            let flat = dir.join(format!("{}.rs", child.name));
            let (file, its_children) = if flat.is_file() {
                (flat, dir.join(&child.name))
            } else {
                (dir.join(&child.name).join("mod.rs"), dir.join(&child.name))
            };
            pending.push((file, child_path, its_children));
        }
        files.push(SourceFile {
            path,
            module_path,
            names: found.names,
        });
    }
    files
}

// ---- reading one file ---------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
    /// A string, char or number literal: its content never counts.
    Literal,
}

/// Splits Rust source into tokens with their line, dropping comments and literal contents.
fn lex(source: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        let next = chars.get(at + 1).copied();
        let start_line = line;
        if c == '\n' {
            line += 1;
            at += 1;
        } else if c.is_whitespace() {
            at += 1;
        } else if c == '/' && next == Some('/') {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while at < chars.len() {
                if chars[at] == '/' && chars.get(at + 1) == Some(&'*') {
                    depth += 1;
                    at += 2;
                } else if chars[at] == '*' && chars.get(at + 1) == Some(&'/') {
                    depth -= 1;
                    at += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[at] == '\n');
                    at += 1;
                }
            }
        } else if c == '"' {
            at = skip_quoted(&chars, at, '"', &mut line);
            tokens.push((Token::Literal, start_line));
        } else if c == '\'' {
            // A char literal ('a', '\n', '\'') or a lifetime / label ('a, 'static).
            if next == Some('\\') || chars.get(at + 2) == Some(&'\'') {
                at = skip_quoted(&chars, at, '\'', &mut line);
                tokens.push((Token::Literal, start_line));
            } else {
                at += 1;
                while at < chars.len() && (chars[at].is_alphanumeric() || chars[at] == '_') {
                    at += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let begin = at;
            while at < chars.len() && (chars[at].is_alphanumeric() || chars[at] == '_') {
                at += 1;
            }
            let word: String = chars[begin..at].iter().collect();
            let follows = chars.get(at).copied();
            if (word == "r" || word == "br")
                && matches!(follows, Some('"' | '#'))
                && raw_string_starts(&chars, at)
            {
                at = skip_raw_string(&chars, at, &mut line);
                tokens.push((Token::Literal, start_line));
            } else if word == "b" && matches!(follows, Some('"' | '\'')) {
                at = skip_quoted(&chars, at, chars[at], &mut line);
                tokens.push((Token::Literal, start_line));
            } else {
                tokens.push((Token::Ident(word), start_line));
            }
        } else if c.is_ascii_digit() {
            while at < chars.len() && (chars[at].is_alphanumeric() || chars[at] == '_') {
                at += 1;
            }
            tokens.push((Token::Literal, start_line));
        } else if c == ':' && next == Some(':') {
            tokens.push((Token::PathSep, start_line));
            at += 2;
        } else {
            tokens.push((Token::Punct(c), start_line));
            at += 1;
        }
    }
    tokens
}

/// Skips a literal opened by `quote` at `at` (honouring backslash escapes); returns the index
/// after its closing quote.
fn skip_quoted(chars: &[char], at: usize, quote: char, line: &mut usize) -> usize {
    let mut at = at + 1;
    while at < chars.len() && chars[at] != quote {
        *line += usize::from(chars[at] == '\n');
        at += if chars[at] == '\\' { 2 } else { 1 };
    }
    at + 1
}

/// Whether `#…#"` (or `"`) opens a raw string at `at`.
fn raw_string_starts(chars: &[char], at: usize) -> bool {
    let mut at = at;
    while chars.get(at) == Some(&'#') {
        at += 1;
    }
    chars.get(at) == Some(&'"')
}

/// Skips `#…#"…"#…#` starting at `at`; returns the index after it.
fn skip_raw_string(chars: &[char], at: usize, line: &mut usize) -> usize {
    let mut at = at;
    let mut hashes = 0;
    while chars[at] == '#' {
        hashes += 1;
        at += 1;
    }
    at += 1; // the opening quote
    while at < chars.len() {
        if chars[at] == '"' && (1..=hashes).all(|offset| chars.get(at + offset) == Some(&'#')) {
            return at + 1 + hashes;
        }
        *line += usize::from(chars[at] == '\n');
        at += 1;
    }
    at
}

fn ident(tokens: &[(Token, usize)], at: usize) -> Option<&str> {
    match tokens.get(at) {
        Some((Token::Ident(word), _)) => Some(word),
        _ => None,
    }
}

fn is(tokens: &[(Token, usize)], at: usize, expected: &Token) -> bool {
    tokens.get(at).is_some_and(|(token, _)| token == expected)
}

/// The index of the bracket that closes the one opened at `open`.
fn closing(tokens: &[(Token, usize)], open: usize) -> usize {
    let mut depth = 0usize;
    for (at, (token, _)) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::Punct('{' | '(' | '[') => depth += 1,
            Token::Punct('}' | ')' | ']') => {
                depth -= 1;
                if depth == 0 {
                    return at;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The index after the item starting at `at`: after its closing `;`, or after the `}` that
/// closes its body. Stops before a bracket that closes what encloses the item (a field).
fn skip_item(tokens: &[(Token, usize)], at: usize) -> usize {
    let mut at = at;
    while let Some((token, _)) = tokens.get(at) {
        match token {
            Token::Punct('{') => return closing(tokens, at) + 1,
            Token::Punct('(' | '[') => at = closing(tokens, at),
            Token::Punct('}' | ')' | ']') => return at,
            Token::Punct(';') => return at + 1,
            _ => {}
        }
        at += 1;
    }
    at
}

/// Whether the attribute tokens (between `[` and `]`) are a `cfg` that holds only in tests.
fn is_test_only(attribute: &[(Token, usize)]) -> bool {
    let words: Vec<&str> = attribute
        .iter()
        .filter_map(|(token, _)| match token {
            Token::Ident(word) => Some(word.as_str()),
            _ => None,
        })
        .collect();
    words.first() == Some(&"cfg") && words.contains(&"test") && !words.contains(&"not")
}

/// The crate paths and external crates a file names outside test-only code, and the modules
/// it declares in files of their own. `module_path` is the file's own module path.
fn names_in(tokens: &[(Token, usize)], module_path: &[String]) -> FileNames {
    let mut found = FileNames {
        names: Vec::new(),
        child_modules: Vec::new(),
    };
    // The inline modules we are inside, each with the brace depth its body opened at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut test_only = false;
    // A `#[path = "…"]` on the item being read: the walk does not follow one outside tests.
    let mut path_attribute: Option<usize> = None;
    let mut at = 0;
    while at < tokens.len() {
        let (token, line) = &tokens[at];
        match token {
            Token::Punct('#') if is_attribute(tokens, at) => {
                let inner = is(tokens, at + 1, &Token::Punct('!'));
                let open = at + 1 + usize::from(inner);
                let close = closing(tokens, open);
                let attribute = &tokens[open + 1..close.min(tokens.len())];
                if is_test_only(attribute) {
                    if inner {
                        // `#![cfg(test)]`: the whole file is test code.
                        return FileNames {
                            names: Vec::new(),
                            child_modules: Vec::new(),
                        };
                    }
                    test_only = true;
                } else if ident(attribute, 0) == Some("path") {
                    path_attribute = Some(*line);
                }
                at = close + 1;
                continue;
            }
            _ if test_only => {
                at = skip_item(tokens, at);
                test_only = false;
                path_attribute = None;
                continue;
            }
            Token::Ident(word) if word == "mod" => {
                if let Some(name) = ident(tokens, at + 1) {
                    if is(tokens, at + 2, &Token::Punct(';')) {
                        if let Some(path_line) = path_attribute {
                            panic!("line {path_line}: `#[path]` outside tests: teach tests/layers.rs to follow it");
                        }
                        let inline_path = inline.iter().map(|(name, _)| name.clone()).collect();
                        found.child_modules.push(ChildModule {
                            name: name.to_owned(),
                            inline_path,
                        });
                        at += 3;
                        continue;
                    }
                    if is(tokens, at + 2, &Token::Punct('{')) {
                        depth += 1;
                        inline.push((name.to_owned(), depth));
                        at += 3;
                        continue;
                    }
                }
            }
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                if inline.last().is_some_and(|(_, opened)| *opened == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Token::Ident(word) if starts_a_path(tokens, at) => {
                let here: Vec<String> = module_path
                    .iter()
                    .cloned()
                    .chain(inline.iter().map(|(name, _)| name.clone()))
                    .collect();
                if let Some((roots, end)) = crate_roots(tokens, at, &here) {
                    for (root, root_line) in roots {
                        found.names.push(Named {
                            target: Target::Module(root),
                            line: root_line,
                        });
                    }
                    path_attribute = None;
                    at = end;
                    continue;
                } else if !["self", "super", "crate", "Self"].contains(&word.as_str()) {
                    found.names.push(Named {
                        target: Target::ExternalCrate(word.clone()),
                        line: *line,
                    });
                }
            }
            _ => {}
        }
        path_attribute = None;
        at += 1;
    }
    found
}

/// Whether `#` at `at` opens an attribute (`#[…]` or `#![…]`).
fn is_attribute(tokens: &[(Token, usize)], at: usize) -> bool {
    is(tokens, at + 1, &Token::Punct('['))
        || (is(tokens, at + 1, &Token::Punct('!')) && is(tokens, at + 2, &Token::Punct('[')))
}

/// Whether the identifier at `at` starts a path (`word::…`): not the continuation of one
/// (`a::word`), not a field or method (`x.word`), not a macro variable (`$crate`).
fn starts_a_path(tokens: &[(Token, usize)], at: usize) -> bool {
    let continues = at > 0
        && matches!(
            tokens[at - 1].0,
            Token::PathSep | Token::Punct('$') | Token::Punct('.')
        );
    !continues && is(tokens, at + 1, &Token::PathSep)
}

/// For a path at `at` that starts at the crate root (`crate::…`) or climbs to it
/// (`super::super::…` from a module that deep), the top-level modules it names (several for
/// `crate::{a, b::c}`), each with its line. `here` is the module path of the code at `at`.
fn crate_roots(
    tokens: &[(Token, usize)],
    at: usize,
    here: &[String],
) -> Option<(Vec<(String, usize)>, usize)> {
    let mut cursor = at;
    match ident(tokens, at)? {
        "crate" => cursor += 2,
        "super" => {
            let mut depth_left = here.len();
            while ident(tokens, cursor) == Some("super") && is(tokens, cursor + 1, &Token::PathSep)
            {
                depth_left = depth_left.checked_sub(1)?;
                cursor += 2;
            }
            if depth_left != 0 {
                return None; // stays inside its own top-level module
            }
        }
        _ => return None,
    }
    let mut roots = Vec::new();
    if let Some(root) = ident(tokens, cursor) {
        roots.push((root.to_owned(), tokens[cursor].1));
        return Some((roots, cursor + 1));
    }
    if is(tokens, cursor, &Token::Punct('{')) {
        // The first word of each element at the top of the group.
        let mut nesting = 0usize;
        let mut element_start = true;
        for (token, line) in &tokens[cursor + 1..] {
            match token {
                Token::Punct('{') => nesting += 1,
                Token::Punct('}') if nesting == 0 => break,
                Token::Punct('}') => nesting -= 1,
                Token::Punct(',') if nesting == 0 => element_start = true,
                Token::Ident(name) if element_start && nesting == 0 => {
                    if name != "self" {
                        roots.push((name.clone(), *line));
                    }
                    element_start = false;
                }
                _ => element_start = false,
            }
        }
        return Some((roots, closing(tokens, cursor) + 1));
    }
    Some((roots, cursor))
}
