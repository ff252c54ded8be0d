//! The layout's rules, checked on the source text (issue #55): the modules form layers and no
//! import goes up one; only main.rs reads the CLI; functions stay short; errors are typed.
//!
//! How it counts (so a reader can redo it): test code is left out: files named `tests.rs`,
//! `*_tests.rs`, anything under a `tests/` or `testing/` folder, and everything from a file's
//! `#[cfg(test)] mod ... {` on. An import is any `crate::<module>` path in code (not comments).
//! A function's length is its lines from the `fn` line to its closing brace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The top-level modules of src/, lowest first: a module may import only those before it.
const LAYERS: &[&str] = &[
    "api",
    "metrics",
    "http_get",
    "exit",
    "engine",
    "archive",
    "config",
    "telemetry",
    "server",
    "collector",
    "cascade",
    "tenant",
    "external",
    "catalog",
    "status",
    "check",
    "uninstall",
    "run",
    "commands",
    "cli",
];

/// The external collector's four parts, lowest first (src/external/mod.rs says why).
const EXTERNAL_PARTS: &[&str] = &["core", "report", "controller", "commands"];

/// Functions over 80 lines allowed at most (each says why in a comment starting `Long:`).
const MAX_OVER_80: usize = 10;

/// `Result<_, String>` outside tests: only clap's value parsers, which hand clap a message to
/// print (the CLI's own printing).
const STRING_ERRORS_ALLOWED: &[(&str, &str)] = &[
    ("src/config/flags.rs", "parse_bytes"),
    ("src/run.rs", "parse_gates"),
    ("src/external/commands/gc.rs", "parse_dns_owner"),
];

struct Source {
    /// Path from the repository root, with `/`.
    path: String,
    /// The code before any `#[cfg(test)] mod`, comments removed line by line.
    code: String,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn is_test_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || rel.contains("/tests/")
        || rel.contains("/testing/")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Cuts the file at its first `#[cfg(test)]` that opens an inline module.
fn without_tests(text: &str) -> &str {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut offset = 0;
    for (i, line) in lines.iter().enumerate() {
        if line.trim() == "#[cfg(test)]" {
            let next = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
            let opens_module = next.starts_with("mod ")
                || next.starts_with("pub mod ")
                || next.starts_with("pub(crate) mod ");
            if opens_module && next.ends_with('{') {
                return &text[..offset];
            }
        }
        offset += line.len();
    }
    text
}

/// Removes `//` comments (outside string literals) so that comments never count as imports.
fn strip_comments(line: &str) -> String {
    let mut out = String::new();
    let mut in_str = false;
    let mut prev = '\0';
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' && prev != '\\' {
            in_str = !in_str;
        }
        if !in_str && c == '/' && chars.get(i + 1) == Some(&'/') {
            break;
        }
        out.push(c);
        prev = if prev == '\\' && c == '\\' { '\0' } else { c };
        i += 1;
    }
    out
}

fn sources(under: &[&str]) -> Vec<Source> {
    let mut files = Vec::new();
    for dir in under {
        walk(&root().join(dir), &mut files);
    }
    files
        .into_iter()
        .filter_map(|p| {
            let rel = p
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if is_test_file(&rel) {
                return None;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let code = without_tests(&text)
                .lines()
                .map(strip_comments)
                .collect::<Vec<_>>()
                .join("\n");
            Some(Source { path: rel, code })
        })
        .collect()
}

/// Every `crate::a::b::...` path in the code, as its segments.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `sweeper_crate::`
        }
        let path: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        out.push(
            path.split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        );
    }
    out
}

/// The module a file of src/ belongs to at `depth` below `base` (`src` or `src/external`).
fn module_of(path: &str, base: &str) -> Option<String> {
    let rest = path.strip_prefix(base)?.strip_prefix('/')?;
    let first = rest.split('/').next()?;
    Some(first.trim_end_matches(".rs").to_string())
}

fn layer_violations(
    sources: &[Source],
    base: &str,
    prefix: &[&str],
    layers: &[&str],
) -> Vec<String> {
    let rank = |m: &str| layers.iter().position(|l| *l == m);
    let mut bad = Vec::new();
    for s in sources {
        let Some(me) = module_of(&s.path, base) else {
            continue;
        };
        let Some(my_rank) = rank(&me) else {
            continue; // lib.rs, main.rs, mod.rs of the base, testing/
        };
        for path in crate_paths(&s.code) {
            if path.len() <= prefix.len() || path[..prefix.len()] != *prefix {
                continue;
            }
            let target = &path[prefix.len()];
            if target == &me {
                continue;
            }
            match rank(target) {
                Some(r) if r > my_rank => bad.push(format!(
                    "{} ({me}) imports crate::{} ({target} is a higher layer)",
                    s.path,
                    path.join("::")
                )),
                _ => {}
            }
        }
    }
    bad
}

#[test]
fn no_module_imports_a_higher_layer() {
    let all = sources(&["src"]);
    let mut bad = layer_violations(&all, "src", &[], LAYERS);
    bad.extend(layer_violations(
        &all,
        "src/external",
        &["external"],
        EXTERNAL_PARTS,
    ));
    // Every top-level module has its layer, so a new one is placed deliberately.
    let mut unplaced = std::collections::BTreeSet::new();
    for s in &all {
        if let Some(m) = module_of(&s.path, "src")
            && !LAYERS.contains(&m.as_str())
            && !["lib", "main", "testing"].contains(&m.as_str())
        {
            unplaced.insert(m);
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules without a layer in tests/layout.rs LAYERS: {unplaced:?}"
    );
    assert!(
        bad.is_empty(),
        "imports that go up a layer:\n{}",
        bad.join("\n")
    );
}

#[test]
fn only_main_reads_the_command_line() {
    let bad: Vec<String> = sources(&["src"])
        .iter()
        .filter(|s| s.path != "src/main.rs" && s.path != "src/cli.rs")
        .filter(|s| {
            crate_paths(&s.code)
                .iter()
                .any(|p| p.first().is_some_and(|m| m == "cli"))
        })
        .map(|s| s.path.clone())
        .collect();
    assert!(bad.is_empty(), "files that import crate::cli: {bad:?}");
}

/// Each function's name, first line (1-based) and length in lines.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        let t = t.strip_prefix("async ").unwrap_or(t);
        let t = t.strip_prefix("const ").unwrap_or(t);
        let Some(rest) = t.strip_prefix("fn ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let mut depth = 0i32;
        let mut opened = false;
        for (j, l) in lines.iter().enumerate().skip(i) {
            let code = without_literals(l);
            if !opened && code.trim_end().ends_with(';') && !code.contains('{') {
                break; // a declaration without a body
            }
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                out.push((name.clone(), i + 1, j - i + 1));
                break;
            }
        }
    }
    out
}

/// The line without its string and char literals (their braces are not code).
fn without_literals(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let mut escaped = false;
                for d in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if d == '\\' {
                        escaped = true;
                    } else if d == '"' {
                        break;
                    }
                }
            }
            '\'' => {
                // '{' or '\'' style literals; a lifetime has no closing quote within 3 chars.
                let ahead: String = chars.clone().take(3).collect();
                if ahead.chars().nth(1) == Some('\'') {
                    chars.nth(1);
                } else if ahead.starts_with('\\') && ahead.chars().nth(2) == Some('\'') {
                    chars.nth(2);
                } else {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

#[test]
fn functions_are_short() {
    let all = sources(&["src", "services/src"]);
    let mut over_100 = Vec::new();
    let mut over_80 = Vec::new();
    for s in &all {
        let raw = std::fs::read_to_string(root().join(&s.path)).unwrap();
        let raw_lines: Vec<&str> = raw.lines().collect();
        for (name, line, len) in functions(&s.code) {
            let at = format!("{}:{line} {name} ({len} lines)", s.path);
            if len > 100 {
                over_100.push(at);
            } else if len > 80 {
                // The reason sits in the comments right above the function (or its attributes).
                let reasoned = raw_lines[..line - 1]
                    .iter()
                    .rev()
                    .take_while(|l| {
                        let t = l.trim_start();
                        t.starts_with("//") || t.starts_with("#[")
                    })
                    .any(|l| l.contains("Long:"));
                over_80.push((at, reasoned));
            }
        }
    }
    assert!(
        over_100.is_empty(),
        "functions over 100 lines:\n{}",
        over_100.join("\n")
    );
    let unreasoned: Vec<_> = over_80.iter().filter(|(_, r)| !r).map(|(a, _)| a).collect();
    assert!(
        unreasoned.is_empty(),
        "functions over 80 lines without a `Long:` comment saying why:\n{unreasoned:#?}"
    );
    assert!(
        over_80.len() <= MAX_OVER_80,
        "{} functions over 80 lines (at most {MAX_OVER_80}):\n{:#?}",
        over_80.len(),
        over_80
    );
}

#[test]
fn errors_are_typed() {
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut still: Vec<(String, String)> = Vec::new();
    for s in sources(&["src", "services/src"]) {
        for (name, line, _) in functions(&s.code) {
            let signature: String = s
                .code
                .lines()
                .skip(line - 1)
                .take_while(|l| !l.contains('{') && !l.trim_end().ends_with(';'))
                .chain(s.code.lines().skip(line - 1).find(|l| l.contains('{')))
                .collect::<Vec<_>>()
                .join(" ");
            let compact: String = signature.split_whitespace().collect::<Vec<_>>().join(" ");
            let returns = compact.split("->").nth(1).unwrap_or("");
            if result_error(returns) == Some("String") {
                let at = (s.path.as_str(), name.as_str());
                if STRING_ERRORS_ALLOWED.contains(&at) {
                    still.push((s.path.clone(), name.clone()));
                    continue;
                }
                found.entry(s.path.clone()).or_default().push(name);
            }
        }
    }
    assert!(
        found.is_empty(),
        "functions returning Result<_, String> (give the layer a thiserror enum naming the \
         object):\n{found:#?}"
    );
    let stale: Vec<_> = STRING_ERRORS_ALLOWED
        .iter()
        .filter(|(p, n)| !still.iter().any(|(sp, sn)| sp == p && sn == n))
        .collect();
    assert!(
        stale.is_empty(),
        "gone or typed since (remove from STRING_ERRORS_ALLOWED): {stale:?}"
    );
}

#[test]
fn the_counters_see_what_they_count() {
    // The counters above must find what they look for, or every check would pass vacuously.
    let f = functions(
        "pub async fn a(x: u8) -> Result<(), String> {\n    let s = \"{\";\n    if x > 0 {\n    }\n}\nfn b();\n",
    );
    assert_eq!(f, vec![("a".to_string(), 1, 5)]);
    assert_eq!(
        crate_paths("use crate::external::core::kind; // crate::cli"),
        vec![
            vec!["external".to_string(), "core".into(), "kind".into()],
            vec!["cli".to_string()]
        ]
    );
    assert_eq!(
        strip_comments("let a = \"//\"; // note"),
        "let a = \"//\"; "
    );
    assert!(without_tests("fn a() {}\n#[cfg(test)]\nmod tests {\n}\n").ends_with("{}\n"));
    assert!(is_test_file("src/engine/graph/tests.rs"));
    assert_eq!(
        module_of("src/external/core/kind.rs", "src/external").as_deref(),
        Some("core")
    );
}

/// The error type of the first `Result<T, E>` in a return type, as written (`None`: no
/// two-argument `Result`). `Result<BTreeMap<String, String>, E>` is `E`, not `String`.
fn result_error(returns: &str) -> Option<&str> {
    let start = returns.find("Result<")? + "Result<".len();
    let rest = &returns[start..];
    let mut depth = 0usize;
    let mut comma = None;
    for (i, c) in rest.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            '>' if depth == 0 => return comma.map(|c: usize| rest[c + 1..i].trim()),
            '>' => depth -= 1,
            ',' if depth == 0 => comma = Some(i),
            _ => {}
        }
    }
    None
}

#[test]
fn result_error_reads_the_error_type_at_the_top_level() {
    for (returns, want) in [
        (" Result<Scope, String> {", Some("String")),
        (
            " Result<BTreeMap<String, String>, IdentityError> {",
            Some("IdentityError"),
        ),
        (
            " Result<(String, Option<String>), ResolveError> {",
            Some("ResolveError"),
        ),
        (" Result<Vec<u8>, String> {", Some("String")),
        (" io::Result<String> {", None),
        (" Option<String> {", None),
    ] {
        assert_eq!(result_error(returns), want, "{returns}");
    }
}
