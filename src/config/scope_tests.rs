//! The scope flags: `--scope-namespaces` (a list, also from its environment variable) and
//! `--tenant-scope-selector`.

use super::*;
use clap::{CommandFactory, Parser};

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    config: RunConfig,
}

fn parse(args: &[&str]) -> Result<RunConfig, clap::Error> {
    Flags::try_parse_from(std::iter::once("run").chain(args.iter().copied())).map(|f| f.config)
}

#[test]
fn scope_namespaces_is_a_list_and_empty_means_every_namespace() {
    assert!(parse(&[]).unwrap().scope_namespaces.is_empty());
    let c = parse(&["--scope-namespaces", "team-a,team-b"]).unwrap();
    assert_eq!(c.scope_namespaces, ["team-a", "team-b"]);
    assert_eq!(c.validate(), Ok(()));
    let twice = parse(&["--scope-namespaces", "a", "--scope-namespaces", "b"]).unwrap();
    assert_eq!(twice.scope_namespaces, ["a", "b"]);
    // Sweeper's own namespace is another flag, unchanged.
    let own = parse(&["--namespace", "sweeper-system", "--scope-namespaces", "a"]).unwrap();
    assert_eq!(own.namespace, "sweeper-system");
    assert_eq!(own.scope_namespaces, ["a"]);
}

#[test]
fn scope_namespaces_refuses_what_is_not_a_namespace_name() {
    for bad in ["Team-A", "a,,b", "a-", "a_b", &"x".repeat(64)] {
        let c = parse(&[&format!("--scope-namespaces={bad}")]).unwrap();
        let err = c.validate().unwrap_err();
        assert!(
            matches!(err, ConfigError::ScopeNamespace(_)),
            "{bad}: {err}"
        );
        assert!(err.to_string().contains("--scope-namespaces"), "{err}");
    }
}

#[test]
fn both_scopes_read_their_environment_variables() {
    let cmd = Flags::command();
    let env = |id: &str| {
        cmd.get_arguments()
            .find(|a| a.get_id() == id)
            .and_then(|a| a.get_env())
            .map(|e| e.to_string_lossy().into_owned())
    };
    assert_eq!(
        env("scope_namespaces").as_deref(),
        Some("SWEEPER_SCOPE_NAMESPACES")
    );
    assert_eq!(
        env("tenant_scope_selector").as_deref(),
        Some("SWEEPER_TENANT_SCOPE_SELECTOR")
    );
}

#[test]
fn tenant_scope_selector_is_a_label_selector() {
    let all = parse(&[]).unwrap().tenant_scope_selector;
    assert!(all.selects_all());
    let c = parse(&["--tenant-scope-selector", "team=a"]).unwrap();
    let labels = |v: &str| [("team".to_string(), v.to_string())].into();
    assert!(c.tenant_scope_selector.matches(&labels("a")));
    assert!(!c.tenant_scope_selector.matches(&labels("b")));
    assert_eq!(c.tenant_scope_selector.to_string(), "team=a");
    assert!(parse(&["--tenant-scope-selector", "a in (x"]).is_err());
}
