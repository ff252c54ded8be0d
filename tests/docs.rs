//! docs/configuration.md's reference is generated from the CLI definitions (clap's own long help
//! of every subcommand: each flag with its environment variable, default, possible values and
//! range), and this test fails when the page is out of date. `make docs` rewrites it.

use clap::CommandFactory;
use std::path::Path;

const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
const MARKER: &str = "<!-- generated reference below: do not edit by hand -->";

/// Every subcommand's long help, depth first, as clap renders it for `--help`.
fn reference() -> String {
    let mut cmd = hide_env_values(sweeper::cli::Cli::command());
    cmd.build();
    let mut out = String::new();
    section(&mut cmd, "sweeper", &mut out);
    out
}

/// The page names each variable, never the value the generating shell happens to have.
fn hide_env_values(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let mut cmd = cmd.mut_args(|a| a.hide_env_values(true));
    for n in names {
        cmd = cmd.mut_subcommand(n, hide_env_values);
    }
    cmd
}

fn section(cmd: &mut clap::Command, path: &str, out: &mut String) {
    if cmd.is_hide_set() {
        return;
    }
    let help = cmd.render_long_help().to_string();
    let help: String = help
        .lines()
        .map(|l| format!("{}\n", l.trim_end()))
        .collect();
    out.push_str(&format!("\n### `{path}`\n\n```text\n{help}```\n"));
    for sub in cmd.get_subcommands_mut() {
        if sub.get_name() == "help" {
            continue;
        }
        let path = format!("{path} {}", sub.get_name());
        section(sub, &path, out);
    }
}

#[test]
fn configuration_reference_is_up_to_date() {
    let page = std::fs::read_to_string(PAGE).expect("docs/configuration.md");
    let (intro, current) = page
        .split_once(MARKER)
        .unwrap_or_else(|| panic!("docs/configuration.md has no line {MARKER}"));
    let want = reference();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(Path::new(PAGE), format!("{intro}{MARKER}\n{want}")).expect("write page");
        return;
    }
    assert!(
        current.trim() == want.trim(),
        "docs/configuration.md is out of date with the CLI: run `make docs`"
    );
    for must in [
        "SWEEPER_EXTERNAL_DRY_RUN",
        "SWEEPER_CAPA_NAMESPACE",
        "[default: 20]",
    ] {
        assert!(want.contains(must), "the reference shows {must}");
    }
}

/// Every ranged flag says its range in its help (clap does not print a value parser's range).
#[test]
fn ranged_flags_state_their_range() {
    // The flags are defined in the CLI and in the `run` configuration it flattens.
    let src = ["/src/cli.rs", "/src/config/mod.rs"]
        .map(|f| {
            std::fs::read_to_string(format!("{}{f}", env!("CARGO_MANIFEST_DIR")))
                .unwrap_or_else(|e| panic!("{f}: {e}"))
        })
        .concat();
    let ranges: Vec<&str> = src
        .split(".range(")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .collect();
    assert!(!ranges.is_empty());
    let doc = reference();
    for r in ranges {
        let shown = format!("[range: {}]", r.replace("..=", " to "));
        assert!(
            doc.contains(&shown),
            "a flag with range {r} says {shown:?} in its help"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The pages' examples against the code: every `sweeper …` command in a code block parses with the
// real CLI, and every chart value a page names exists in the chart's values.yaml.

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The pages a user reads: the README, docs/ and every README under deploy/.
fn pages() -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![Path::new(ROOT).join("README.md")];
    walk(&Path::new(ROOT).join("docs"), &mut out);
    walk(&Path::new(ROOT).join("deploy"), &mut out);
    out.sort();
    out
}

/// One fenced code block: its info string (`sh`, `yaml`, empty) and its lines, with each
/// backslash-continued line joined to the next.
struct Block {
    page: String,
    lang: String,
    lines: Vec<String>,
}

fn blocks(page: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(page).expect("read page");
    let name = page
        .strip_prefix(ROOT)
        .unwrap_or(page)
        .display()
        .to_string();
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            match current.take() {
                Some(b) => out.push(b),
                None => {
                    current = Some(Block {
                        page: name.clone(),
                        lang: info.trim().to_string(),
                        lines: Vec::new(),
                    })
                }
            }
            continue;
        }
        let Some(b) = current.as_mut() else { continue };
        match trimmed.strip_suffix('\\') {
            Some(head) => pending.push_str(head),
            None => {
                pending.push_str(trimmed);
                b.lines.push(std::mem::take(&mut pending));
            }
        }
    }
    out
}

/// POSIX-shell words of `line` (single and double quotes, backslash escapes), up to an unquoted
/// comment. Enough for the commands the pages show.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '#' if word.is_none() => break,
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    w.push(c);
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => w.extend(chars.next()),
                        c => w.push(c),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

fn is_shell(lang: &str) -> bool {
    matches!(lang, "sh" | "bash" | "shell" | "console" | "")
}

/// The commands of a shell line: split at `&&`, `||`, `;` and `|` (outside quotes, which the
/// pages' commands do not need there).
fn commands(words: Vec<String>) -> Vec<Vec<String>> {
    words
        .split(|w| matches!(w.as_str(), "&&" | "||" | ";" | "|"))
        .map(<[String]>::to_vec)
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn commands_in_the_pages_parse_with_the_cli() {
    use clap::Parser;
    let mut checked = 0;
    let mut problems = Vec::new();
    for page in pages() {
        for block in blocks(&page) {
            if !is_shell(&block.lang) {
                continue;
            }
            for line in &block.lines {
                for mut argv in commands(shell_words(line)) {
                    // `kubectl sweeper …` is the same binary as a kubectl plugin.
                    if argv.len() > 1 && argv[0] == "kubectl" && argv[1] == "sweeper" {
                        argv.remove(0);
                    }
                    // A line of `sweeper run` flags alone (a flag's examples).
                    if block.lang == "sh" && argv[0].starts_with("--") {
                        argv.splice(0..0, ["sweeper".to_string(), "run".to_string()]);
                    }
                    if argv[0] != "sweeper" {
                        continue;
                    }
                    checked += 1;
                    if let Err(e) = sweeper::cli::Cli::try_parse_from(&argv) {
                        problems.push(format!(
                            "{}: `{line}`: {}",
                            block.page,
                            e.to_string().lines().next().unwrap_or_default()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "commands in the pages that the CLI refuses:\n  {}",
        problems.join("\n  ")
    );
    assert!(checked >= 20, "only {checked} commands found in the pages");
}

/// The chart's values.yaml as JSON.
fn chart_values() -> serde_json::Value {
    let text = std::fs::read_to_string(Path::new(ROOT).join("deploy/helm/sweeper/values.yaml"))
        .expect("values.yaml");
    serde_yaml::from_str(&text).expect("values.yaml is YAML")
}

/// Maps under which any key is a user's own (labels, annotations, scheduling, resources).
const FREE_FORM: [&str; 9] = [
    "labels",
    "annotations",
    "podAnnotations",
    "nodeSelector",
    "affinity",
    "resources",
    "podSecurityContext",
    "securityContext",
    "tolerations",
];

/// Whether `path` (segments) names a value of the chart.
fn value_exists(values: &serde_json::Value, path: &[String]) -> bool {
    let mut node = values;
    for (i, seg) in path.iter().enumerate() {
        match node.get(seg) {
            Some(next) => node = next,
            None => return false,
        }
        if FREE_FORM.contains(&seg.as_str()) && i + 1 < path.len() {
            return true;
        }
    }
    true
}

/// Splits a `--set` key into its segments: `a.b."c\.d/e"` -> `a`, `b`, `c.d/e`.
fn set_key_segments(key: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = key.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.last_mut().unwrap().extend(chars.next()),
            '.' => out.push(String::new()),
            '"' => {}
            c => out.last_mut().unwrap().push(c),
        }
    }
    out
}

/// The keys a `--set` argument sets (`a=1,b.c=2`; a comma inside `{…}` or escaped is a value's).
fn set_keys(arg: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let (mut depth, mut start, mut escaped) = (0, 0, false);
    let bytes = arg.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            b',' if depth == 0 => {
                keys.push(&arg[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    keys.push(&arg[start..]);
    keys.iter()
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_string()))
        .collect()
}

/// Every chart value a page names: `--set` keys in shell blocks, the keys of a YAML block that is
/// a values file (all its top-level keys are the chart's), and inline code spans that start with
/// one of the chart's top-level keys (`featureGates.TenantGC=false`, `crds.capa`), where a span
/// after `/` in the same table cell or sentence that is a bare name (`TenantGC`) or starts with
/// `.` (`.labels`) names a sibling of the span before it.
#[test]
fn chart_values_named_in_the_pages_exist() {
    let values = chart_values();
    let top: Vec<String> = values.as_object().expect("a map").keys().cloned().collect();
    let mut checked = 0;
    let mut problems = Vec::new();
    let mut check = |page: &str, shown: &str, path: Vec<String>| {
        checked += 1;
        if !value_exists(&values, &path) {
            problems.push(format!("{page}: `{shown}` is not a value of the chart"));
        }
    };
    for page in pages() {
        let name = page
            .strip_prefix(ROOT)
            .unwrap_or(&page)
            .display()
            .to_string();
        for block in blocks(&page) {
            if is_shell(&block.lang) {
                for line in &block.lines {
                    let mut words = shell_words(line).into_iter();
                    while let Some(w) = words.next() {
                        // `ARGS='--set …'` (make helm-template) holds its own words.
                        let inner = w.strip_prefix("ARGS=").map(shell_words);
                        let mut ws: Box<dyn Iterator<Item = String>> = match inner {
                            Some(inner) => Box::new(inner.into_iter()),
                            None => Box::new(std::iter::once(w)),
                        };
                        while let Some(w) = ws.next() {
                            let arg = match w.as_str() {
                                "--set" | "--set-string" => ws.next().or_else(|| words.next()),
                                _ => w
                                    .strip_prefix("--set=")
                                    .or_else(|| w.strip_prefix("--set-string="))
                                    .map(str::to_string),
                            };
                            for key in set_keys(&arg.unwrap_or_default()) {
                                check(&name, &key, set_key_segments(&key));
                            }
                        }
                    }
                }
            } else if block.lang == "yaml" {
                let text = block.lines.join("\n");
                let Ok(serde_json::Value::Object(doc)) = serde_yaml::from_str(&text) else {
                    continue;
                };
                if doc.is_empty() || !doc.keys().all(|k| top.contains(k)) {
                    continue;
                }
                let mut stack: Vec<(Vec<String>, &serde_json::Value)> =
                    doc.iter().map(|(k, v)| (vec![k.clone()], v)).collect();
                while let Some((path, v)) = stack.pop() {
                    match v.as_object() {
                        Some(m) if !FREE_FORM.contains(&path.last().unwrap().as_str()) => {
                            for (k, v) in m {
                                let mut p = path.clone();
                                p.push(k.clone());
                                stack.push((p, v));
                            }
                        }
                        _ => check(&name, &path.join("."), path.clone()),
                    }
                }
            }
        }
        // Inline spans, outside code blocks.
        let text = std::fs::read_to_string(&page).expect("read page");
        let mut in_block = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
                continue;
            }
            if in_block {
                continue;
            }
            let mut last: Option<Vec<String>> = None;
            let spans: Vec<&str> = line.split('`').collect();
            for (i, span) in spans.iter().enumerate().skip(1).step_by(2) {
                let between = spans[i - 1];
                let key = span.split('=').next().unwrap_or_default();
                if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') {
                    last = None;
                    continue;
                }
                let segs: Vec<String> = key.split('.').map(str::to_string).collect();
                let full = segs.len() > 1 && top.contains(&segs[0]);
                let sibling = !full && between.trim().ends_with('/') && last.is_some();
                let path = if sibling {
                    let mut p = last.clone().unwrap();
                    p.pop();
                    p.extend(segs.into_iter().filter(|s| !s.is_empty()));
                    p
                } else if full {
                    segs
                } else {
                    last = None;
                    continue;
                };
                check(&name, span, path.clone());
                last = Some(path);
            }
        }
    }
    assert!(
        problems.is_empty(),
        "chart values the pages name that values.yaml lacks:\n  {}",
        problems.join("\n  ")
    );
    assert!(
        checked >= 40,
        "only {checked} chart values found in the pages"
    );
}

/// docs/operations.md's command table lists every subcommand, and says how many there are.
#[test]
fn the_command_table_lists_every_subcommand() {
    let page = std::fs::read_to_string(Path::new(ROOT).join("docs/operations.md"))
        .expect("docs/operations.md");
    let cli = sweeper::cli::Cli::command();
    let names: Vec<&str> = cli
        .get_subcommands()
        .map(|s| s.get_name())
        .filter(|n| *n != "help")
        .collect();
    for n in &names {
        assert!(
            page.contains(&format!("| `sweeper {n}")),
            "docs/operations.md's command table lacks `sweeper {n}`"
        );
    }
    let words = [
        "", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen",
    ];
    let said = format!("`sweeper` has {} subcommands", words[names.len()]);
    assert!(page.contains(&said), "docs/operations.md says {said:?}");
}

/// The values a row of the chart README's `## Values` table names: the code spans of its first
/// cell, where a span after the first that starts with `.` or is not one of the chart's top-level
/// keys names a sibling of the span before it (`monitoring.podMonitor.enabled` / `.labels`,
/// `leaderElection.leaseDuration` / `renewDeadline`).
fn documented_chart_values(top: &[String]) -> std::collections::BTreeSet<String> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("deploy/helm/sweeper/README.md"))
        .expect("the chart's README");
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Values\n"))
        .expect("a `## Values` section in the chart's README");
    let mut out = std::collections::BTreeSet::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let cell = row.split('|').nth(1).unwrap_or_default();
        let mut last: Option<Vec<String>> = None;
        for span in cell.split('`').skip(1).step_by(2) {
            let segs: Vec<String> = span
                .trim_start_matches('.')
                .split('.')
                .map(str::to_string)
                .collect();
            let path = match &last {
                Some(prev) if span.starts_with('.') || !top.contains(&segs[0]) => {
                    let mut p = prev.clone();
                    p.pop();
                    p.extend(segs);
                    p
                }
                _ => segs,
            };
            out.insert(path.join("."));
            last = Some(path);
        }
    }
    out
}

/// Every value of the chart has a row in its README's values table (issue 42: `helmTest.enabled`
/// had none): a map a row names (`resources`, `serviceAccount.annotations`) counts as one value,
/// as does any free-form map; other maps stand for their keys. (The other way, a row naming a
/// value the chart lacks, is `chart_values_named_in_the_pages_exist`.)
#[test]
fn every_chart_value_has_a_row_in_the_chart_readme() {
    let values = chart_values();
    let top: Vec<String> = values.as_object().expect("a map").keys().cloned().collect();
    let documented = documented_chart_values(&top);
    let mut missing = Vec::new();
    let mut stack: Vec<(String, &serde_json::Value)> = values
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v))
        .collect();
    let mut seen = 0;
    while let Some((path, v)) = stack.pop() {
        let last = path.rsplit('.').next().unwrap_or(&path);
        match v.as_object() {
            Some(m)
                if !m.is_empty() && !documented.contains(&path) && !FREE_FORM.contains(&last) =>
            {
                for (k, v) in m {
                    stack.push((format!("{path}.{k}"), v));
                }
            }
            _ => {
                seen += 1;
                if !documented.contains(&path) {
                    missing.push(path);
                }
            }
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "chart values without a row in deploy/helm/sweeper/README.md's values table:\n  {}",
        missing.join("\n  ")
    );
    assert!(seen >= 50, "only {seen} chart values");
}

/// Literals of the external collector's code that are names but not reasons: its condition type,
/// condition statuses, feature gates, the keys of a static identity's Secret, and the kinds it
/// reads (CAPA's are all `AWS…`).
const NOT_REASONS: [&str; 9] = [
    "ExternalResourcesDeleted",
    "True",
    "False",
    "Cluster",
    "ExternalResourceGC",
    "AlternativeGCStrategy",
    "AccessKeyID",
    "SecretAccessKey",
    "SessionToken",
];

/// The CamelCase string literals of the external collector's code, tests left out: the reasons
/// of its condition and Events (issue 42: `DryRun`, `DryRunPlan`, `IdentityUnreadable` and
/// `InvalidRegion` were undocumented).
fn external_reasons_in_code() -> std::collections::BTreeSet<String> {
    let mut files = Vec::new();
    for dir in [
        "src/external/core",
        "src/external/controller",
        "src/external/report",
        "src/external/commands",
    ] {
        for e in std::fs::read_dir(Path::new(ROOT).join(dir)).expect("src/external") {
            let p = e.expect("entry").path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.extension().is_some_and(|x| x == "rs") && !name.ends_with("tests.rs") {
                files.push(p);
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for lit in code.split('"').skip(1).step_by(2) {
            let camel = lit.len() > 3
                && lit.starts_with(|c: char| c.is_ascii_uppercase())
                && lit.chars().all(|c| c.is_ascii_alphanumeric())
                && lit.chars().skip(1).any(|c| c.is_ascii_lowercase());
            if camel
                && !lit.starts_with("AWS")
                && !NOT_REASONS.contains(&lit)
                && !["Error", "Warning", "Info"].contains(&lit)
            {
                out.insert(lit.to_string());
            }
        }
    }
    out
}

/// docs/capa.md's "Errors, retries, conditions and Events" names every reason the external
/// collector sets on its condition or Events, and names none the code does not have.
#[test]
fn external_reasons_in_the_docs_are_the_codes() {
    let code = external_reasons_in_code();
    assert!(
        code.len() >= 20,
        "only {} reasons found: {code:?}",
        code.len()
    );
    let text = std::fs::read_to_string(Path::new(ROOT).join("docs/capa.md")).expect("capa.md");
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Errors, retries, conditions and Events"))
        .expect("the section");
    let documented: std::collections::BTreeSet<String> = section
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            s.len() > 3
                && s.starts_with(|c: char| c.is_ascii_uppercase())
                && s.chars().all(|c| c.is_ascii_alphanumeric())
        })
        .map(str::to_string)
        .collect();
    let undocumented: Vec<&String> = code.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "reasons the external collector sets that docs/capa.md does not name: {undocumented:?}"
    );
    let unknown: Vec<&String> = documented
        .iter()
        .filter(|d| !code.contains(*d) && !NOT_REASONS.contains(&d.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "reasons docs/capa.md names that the external collector does not set: {unknown:?}"
    );
}
