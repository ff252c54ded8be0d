//! Command-line interface: the subcommands, each with the arguments struct its handler defines
//! (crate::commands, external::commands). Every `run` flag can also be set from
//! an environment variable (`SWEEPER_*`), so the Deployment and the Helm chart need no args list.

use crate::commands::archive::{ArchiveCommand, RestoreArgs};
use crate::commands::check::CheckArgs;
use crate::commands::graph::GraphArgs;
use crate::commands::pause::PauseArgs;
use crate::commands::status::StatusArgs;
use crate::commands::uninstall::UninstallArgs;
use crate::config::LogFormat;
use crate::external::commands::gc::GcCommand;
use crate::external::commands::scan::command::ScanArgs;
use crate::external::commands::teardown::command::TeardownArgs;
use crate::run::RunArgs;
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "sweeper",
    version,
    about = "Garbage-collects what Kubernetes-managed systems leave behind"
)]
pub struct Cli {
    /// Log output format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "SWEEPER_LOG_FORMAT")]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process: the size of the `run` variant costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the service: connect to the cluster, run the enabled collectors, serve HTTP.
    Run(RunArgs),
    /// Print the CustomResourceDefinitions sweeper ships, as YAML.
    Crds,
    /// Query the dependency graph of a running `sweeper run`.
    Graph(GraphArgs),
    /// What each collector of a running `sweeper run` is doing.
    Status(StatusArgs),
    /// Per-cluster external resource GC settings (like clusterawsadm's gc commands).
    #[command(subcommand)]
    Gc(GcCommand),
    /// Stop collectors from deleting anything, on every replica, within about a second. Work in
    /// progress is kept and done after `sweeper resume`.
    Pause(PauseArgs),
    /// Lift `sweeper pause` (for one collector, or all).
    Resume(PauseArgs),
    /// Bring back what sweeper deleted, from its archive: objects are created anew (owners first,
    /// dependents re-pointed to their owners' new uids) as your identity; what exists again is
    /// skipped, never overwritten.
    Restore(RestoreArgs),
    /// Read the archive of deleted objects.
    #[command(subcommand)]
    Archive(ArchiveCommand),
    /// Before removing sweeper: pause every collector and remove every finalizer sweeper owns
    /// (`sweeper.dev/*`, and `kubezoo.io/tenant` on Tenants) from live objects, so objects deleted
    /// afterwards go at once. Deletes nothing and keeps the archive.
    Uninstall(UninstallArgs),
    /// Preflight and health check (like `linkerd check`): one line per check, a hint for each
    /// failure, exit 1 when one fails. Takes `sweeper run`'s flags and environment, so it checks
    /// the configuration the service runs with (the chart's `helm test` runs it in a pod).
    Check(Box<CheckArgs>),
    /// The leaks from before: list the AWS resources tagged for clusters that no longer exist
    /// (no live AWSCluster or AWSManagedControlPlane here, no live EKS cluster), per account and
    /// region the CAPA identities and sweeper's own reach, with the proof per resource and an
    /// estimated monthly cost. Deletes nothing: another management cluster may own clusters in
    /// the same account.
    Scan(ScanArgs),
    /// Tear down a cluster that has no object here (the leaks from before): the same three
    /// phases, with the same rules, as the service's teardown. Refuses a name a live
    /// AWSCluster/AWSManagedControlPlane or EKS cluster has, or one marked not ours. Prints the
    /// plan with the proof per resource first; a dry run unless `--yes`. Writes the same audit
    /// record as a service teardown.
    Teardown(Box<TeardownArgs>),
    /// Print the version.
    Version,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::graph::GraphQuery;
    use crate::config::flags::parse_duration;
    use crate::config::{FeatureGates, RunConfig};
    use clap::CommandFactory;
    use std::time::Duration;

    #[test]
    fn an_overlong_duration_is_an_error_not_a_panic() {
        assert!(
            parse_duration("99999999999999999h")
                .unwrap_err()
                .to_string()
                .contains("too long")
        );
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    fn run_config(args: &[&str]) -> RunConfig {
        let mut argv = vec!["sweeper", "run"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Run(a) => a.config,
            other => panic!("{other:?}"),
        }
    }

    /// Outside a pod, every command looks for sweeper's namespace in the same place: `check`
    /// and `run` as `pause -n`, `resume -n` and `uninstall -n`, never the kubeconfig's context.
    #[test]
    fn the_sweeper_namespace_defaults_as_every_commands_does() {
        if crate::engine::leader::default_namespace().is_some() {
            return; // in a pod: its namespace wins, as it should
        }
        assert_eq!(run_config(&[]).sweeper_namespace(), "sweeper-system");
        assert_eq!(
            run_config(&["--namespace", "ops"]).sweeper_namespace(),
            "ops"
        );
        let check = match Cli::try_parse_from(["sweeper", "check"]).unwrap().command {
            Command::Check(a) => a.run.config.sweeper_namespace(),
            other => panic!("{other:?}"),
        };
        let pause = match Cli::try_parse_from(["sweeper", "pause"]).unwrap().command {
            Command::Pause(a) => a.switch.namespace,
            other => panic!("{other:?}"),
        };
        assert_eq!(check, pause);
    }

    /// The HTTP port's security flags: HTTPS with token review unless `--http-insecure`; a
    /// certificate needs its key, and an insecure port takes no certificate.
    #[test]
    fn http_security_flags_go_together() {
        let c = run_config(&[]);
        assert!(!c.http_insecure && c.http_tls_cert_file.is_none());
        assert!(run_config(&["--http-insecure"]).http_insecure);
        let parse = |extra: &[&str]| {
            let mut argv = vec!["sweeper", "run"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv)
        };
        assert!(
            parse(&["--http-tls-cert-file", "c.pem"]).is_err(),
            "a cert without its key"
        );
        assert!(parse(&["--http-tls-cert-file", "c", "--http-tls-key-file", "k"]).is_ok());
        assert!(
            parse(&[
                "--http-insecure",
                "--http-tls-cert-file",
                "c",
                "--http-tls-key-file",
                "k"
            ])
            .is_err(),
            "plain HTTP with a certificate"
        );
    }

    #[test]
    fn defaults_validate() {
        assert_eq!(run_config(&[]).validate(), Ok(()));
        let le = run_config(&["--leader-elect", "--leader-elect-namespace", "ns"]);
        assert_eq!(le.validate(), Ok(()));
    }

    /// kube-controller-manager's boolean flags take `--flag`, `--flag=true` and `--flag=false`
    /// (Go's flag package); so do ours, which the README and the chart's users write both ways.
    #[test]
    fn boolean_run_flags_take_an_optional_value() {
        for (args, want) in [
            (&[][..], false),
            (&["--leader-elect"][..], true),
            (&["--leader-elect=true"][..], true),
            (&["--leader-elect=false"][..], false),
        ] {
            assert_eq!(run_config(args).leader_elect, want, "{args:?}");
        }
        let a = run_config(&[
            "--cascade-dry-run=true",
            "--tenant-dry-run",
            "--external-dry-run=false",
        ]);
        assert!(a.cascade_dry_run && a.tenant_dry_run && !a.external_dry_run);
        // A bare flag followed by another flag takes no value from it.
        let a = run_config(&["--leader-elect", "--leader-elect-namespace", "ns"]);
        assert!(a.leader_elect);
        assert_eq!(a.leader_elect_namespace, "ns");
        for bad in [
            &["run", "--leader-elect=yes"][..],
            &["run", "--leader-elect", "false"],
        ] {
            let argv = std::iter::once("sweeper").chain(bad.iter().copied());
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?} is refused");
        }
    }

    #[test]
    fn invalid_configuration_names_the_flag() {
        let cases: &[(&[&str], &str)] = &[
            (&["--kube-api-qps=-1"], "--kube-api-qps"),
            (&["--kube-api-burst", "0"], "--kube-api-burst"),
            (&["--discovery-interval", "0s"], "--discovery-interval"),
            (&["--cascade-sync-timeout", "0s"], "--cascade-sync-timeout"),
            (
                &["--tenant-scan-kinds", "Namespaces"],
                "--tenant-scan-kinds",
            ),
            (
                &[
                    "--leader-elect",
                    "--leader-elect-namespace",
                    "ns",
                    "--leader-elect-renew-deadline",
                    "20s",
                ],
                "--leader-elect-renew-deadline",
            ),
            (
                &[
                    "--leader-elect",
                    "--leader-elect-namespace",
                    "ns",
                    "--leader-elect-retry-period",
                    "10s",
                ],
                "--leader-elect-retry-period",
            ),
        ];
        for (args, flag) in cases {
            let err = run_config(args).validate().unwrap_err().to_string();
            assert!(err.contains(flag), "{args:?}: {err}");
        }
        // Leader election settings are only checked when it is on.
        assert_eq!(
            run_config(&["--leader-elect-renew-deadline", "20s"]).validate(),
            Ok(())
        );
    }

    #[test]
    fn every_run_flag_has_an_environment_variable_and_a_help_text() {
        let cmd = Cli::command();
        let run = cmd.find_subcommand("run").unwrap();
        for arg in run.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "log_format" {
                continue; // log_format is global and has SWEEPER_LOG_FORMAT on the top level
            }
            let env = arg
                .get_env()
                .unwrap_or_else(|| panic!("--{id} has no env var"));
            let expected = format!("SWEEPER_{}", id.to_uppercase());
            assert_eq!(env.to_str(), Some(expected.as_str()), "--{id}");
            assert!(arg.get_help().is_some(), "--{id} has no help text");
        }
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("7").unwrap(), Duration::from_secs(7));
        assert!(parse_duration("7d").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn unknown_feature_gate_fails_parsing_with_its_name() {
        let err = Cli::try_parse_from(["sweeper", "run", "--feature-gates", "Bogus=true"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("Bogus"), "{err}");
    }

    #[test]
    fn graph_takes_optional_namespace() {
        let cli =
            Cli::try_parse_from(["sweeper", "graph", "dependents", "v1/ConfigMap", "ns", "a"])
                .unwrap();
        let Command::Graph(GraphArgs {
            query: GraphQuery::Dependents(o),
            ..
        }) = cli.command
        else {
            panic!("expected graph dependents")
        };
        assert_eq!((o.namespace(), o.name()), (Some("ns"), "a"));
        let cli =
            Cli::try_parse_from(["sweeper", "graph", "dependencies", "v1/Namespace", "a"]).unwrap();
        let Command::Graph(GraphArgs {
            query: GraphQuery::Dependencies(o),
            ..
        }) = cli.command
        else {
            panic!("expected graph dependencies")
        };
        assert_eq!((o.namespace(), o.name()), (None, "a"));
    }

    #[test]
    fn gc_configure_validates_tasks() {
        let cli = Cli::try_parse_from([
            "sweeper",
            "gc",
            "configure",
            "--cluster-name",
            "c1",
            "--gc-task",
            "load-balancer",
            "--gc-task",
            "target-group",
        ])
        .unwrap();
        let Command::Gc(GcCommand::Configure {
            cluster,
            tasks,
            external_dns_owner_id,
        }) = cli.command
        else {
            panic!("expected gc configure")
        };
        assert_eq!(external_dns_owner_id, None, "not given: left as it is");
        assert_eq!(
            (cluster.cluster_name.as_str(), cluster.namespace.as_str()),
            ("c1", "default")
        );
        assert_eq!(tasks.len(), 2);
        let tasks = |arg: &str| {
            Cli::try_parse_from([
                "sweeper",
                "gc",
                "configure",
                "--cluster-name",
                "c1",
                "--gc-task",
                arg,
            ])
            .map(|c| match c.command {
                Command::Gc(GcCommand::Configure { tasks, .. }) => {
                    tasks.iter().map(|t| t.to_string()).collect::<Vec<_>>()
                }
                other => panic!("{other:?}"),
            })
            .map_err(|e| e.to_string())
        };
        assert_eq!(
            tasks("ebs-volume,load-balancer"),
            Ok(vec!["ebs-volume".to_string(), "load-balancer".to_string()]),
            "a comma list is the same as repeating the flag"
        );
        assert!(tasks("ebs-volume,,load-balancer").is_err(), "an empty task");
        assert!(tasks("ebs-volume,nat").is_err_and(|e| e.contains("nat")));
        assert!(tasks("nat").is_err_and(|e| e.contains("nat")));
        let owner = |id: &str| {
            Cli::try_parse_from([
                "sweeper",
                "gc",
                "configure",
                "--cluster-name",
                "c1",
                "--external-dns-owner-id",
                id,
            ])
            .map(|c| match c.command {
                Command::Gc(GcCommand::Configure {
                    external_dns_owner_id,
                    ..
                }) => external_dns_owner_id,
                other => panic!("{other:?}"),
            })
            .map_err(|e| e.to_string())
        };
        assert_eq!(owner("prod-eu-1"), Ok(Some("prod-eu-1".into())));
        assert_eq!(owner(""), Ok(Some(String::new())), "\"\" removes it");
        for bad in ["default", "Default", "a,b"] {
            assert!(owner(bad).is_err(), "{bad} must be refused");
        }
    }

    #[test]
    fn restore_takes_one_of_its_three_forms() {
        use crate::archive::restore::Selection;
        let sel = |args: &[&str]| {
            let mut argv = vec!["sweeper", "restore"];
            argv.extend_from_slice(args);
            match Cli::try_parse_from(argv).map(|c| c.command) {
                Ok(Command::Restore(r)) => r.selection().map_err(|e| e.to_string()),
                Ok(other) => panic!("{other:?}"),
                Err(e) => Err(e.to_string()),
            }
        };
        assert!(matches!(
            sel(&["apps/v1/Deployment", "shop", "web"]),
            Ok(Selection::Object { namespace: Some(ns), name, .. }) if ns == "shop" && name == "web"
        ));
        assert!(matches!(
            sel(&["v1/Namespace", "team-a"]),
            Ok(Selection::Object {
                namespace: None,
                ..
            })
        ));
        assert!(matches!(sel(&["--cascade-of", "u1"]), Ok(Selection::CascadeOf(u)) if u == "u1"));
        assert!(matches!(sel(&["--tenant", "abc123"]), Ok(Selection::Tenant(t)) if t == "abc123"));
        assert!(sel(&[]).is_err(), "nothing named");
        assert!(sel(&["--cascade-of", "u1", "--tenant", "t"]).is_err());
        assert!(sel(&["v1/ConfigMap"]).is_err(), "a kind without a name");
    }

    #[test]
    fn archive_flags_parse_and_validate() {
        let a = run_config(&["--archive", "selector=app=web", "--archive-ttl", "24h"]);
        assert!(matches!(
            a.archive,
            crate::archive::ArchiveMode::Selector(_)
        ));
        assert_eq!(a.validate(), Ok(()));
        assert_eq!(run_config(&[]).archive, crate::archive::ArchiveMode::All);
        let err = Cli::try_parse_from(["sweeper", "run", "--archive", "some"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--archive"), "{err}");
        let short = run_config(&["--archive-ttl", "30s"])
            .validate()
            .unwrap_err();
        assert!(short.to_string().contains("--archive-ttl"));
        let big = run_config(&["--archive-max-object-bytes", "2000000"])
            .validate()
            .unwrap_err();
        assert!(big.to_string().contains("--archive-max-object-bytes"));
    }

    #[test]
    fn run_defaults() {
        let cli = Cli::try_parse_from(["sweeper", "run"]).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("expected run")
        };
        assert_eq!(
            args.feature_gates,
            FeatureGates::defaults(&crate::catalog::gates())
        );
        assert_eq!(args.config.discovery_interval, Duration::from_secs(30));
    }
}
