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
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/cli.rs"))
        .expect("src/cli.rs");
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
