//! Command-line interface: one typed struct per subcommand. Every `run` flag can also be set from
//! an environment variable (`SWEEPER_*`), so the Deployment and the Helm chart need no args list.

use crate::config::{FeatureGates, LogFormat, RunConfig};
use clap::{Args, Parser, Subcommand};
use std::time::Duration;

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
    Status {
        /// Base URL of the running service's HTTP port (`http://` for one run with
        /// --http-insecure).
        #[arg(long, default_value = "https://127.0.0.1:8080", env = "SWEEPER_SERVER")]
        server: String,
        /// Print the JSON instead of the table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        access: crate::http_get::Credentials,
    },
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

#[derive(Args, Debug, Clone)]
pub struct ScanArgs {
    /// `table` or `json`.
    #[arg(short = 'o', long, value_enum, default_value_t = CheckOutput::Table)]
    pub output: CheckOutput,
    /// Also scan this region with sweeper's own identity (its default region always is);
    /// comma-separated or repeated.
    #[arg(long = "region", value_delimiter = ',')]
    pub regions: Vec<String>,
    /// A cluster name that is not this management cluster's (another one owns it): reported
    /// apart, never a candidate; comma-separated or repeated. Adds to the names on sweeper's
    /// namespace's annotation sweeper.dev/scan-not-ours.
    #[arg(long = "not-ours", value_delimiter = ',')]
    pub not_ours: Vec<String>,
    /// CAPA's namespace, where static identities' Secrets live.
    #[arg(long, default_value = "capa-system", env = "SWEEPER_CAPA_NAMESPACE")]
    pub capa_namespace: String,
    #[command(flatten)]
    pub namespace: SwitchNamespace,
}

#[derive(Args, Debug, Clone)]
pub struct TeardownArgs {
    /// The cluster's name as CAPA tagged its own resources (the Cluster API Cluster's name;
    /// `sigs.k8s.io/cluster-api-provider-aws/cluster/<name>`). With `--from-scan`, selects that
    /// scan candidate (repeatable there, comma-separated).
    #[arg(long = "cluster-name", value_delimiter = ',')]
    pub cluster_names: Vec<String>,
    /// The region it lived in. With `--from-scan`, selects the file's candidates of that region.
    #[arg(long)]
    pub region: Option<String>,
    /// An EKS cluster: the EKS name the cloud provider tagged with (`kubernetes.io/cluster/<eks>`).
    /// Its IRSA OIDC provider is kept: the proof needs the issuer CAPA recorded on the object.
    #[arg(long)]
    pub eks_name: Option<String>,
    /// The CAPA identity to act as, `KIND/NAME` (AWSClusterControllerIdentity,
    /// AWSClusterRoleIdentity or AWSClusterStaticIdentity), followed as CAPA does. Without it:
    /// sweeper's own identity (its environment), or with `--from-scan` the identity the scan
    /// reached the candidate's account and region with.
    #[arg(long, value_name = "KIND/NAME")]
    pub identity: Option<String>,
    /// The namespace the cluster lived in: the identity's `allowedNamespaces` must allow it, as
    /// CAPA requires for a cluster there.
    #[arg(long, default_value = "default")]
    pub cluster_namespace: String,
    /// Refuse unless the session acts in this AWS account.
    #[arg(long)]
    pub account: Option<String>,
    /// The cluster's bring-your-own VPC ids (`spec.network.vpc.id` it had): they confirm what the
    /// AWS Load Balancer Controller and the VPC CNI tagged, as the object would have. CAPA's own
    /// VPCs need no flag.
    #[arg(long = "vpc-id", value_delimiter = ',')]
    pub vpc_ids: Vec<String>,
    /// A `sweeper scan -o json` report: tear down its candidates named by `--cluster-name` (or
    /// every candidate with `--all`), each in its account and region, after checking again
    /// that it is still an orphan.
    #[arg(long, value_name = "FILE")]
    pub from_scan: Option<std::path::PathBuf>,
    /// With `--from-scan`: every candidate of the file (narrowed by `--region`).
    #[arg(long, requires = "from_scan")]
    pub all: bool,
    /// Phase-2 tasks to run besides the default set, with the grammar of `sweeper.dev/gc-tasks`
    /// (comma-separated task names; repeatable), e.g. the opt-ins `ebs-volume`, `ebs-snapshot`,
    /// `eks-log-group` that `sweeper scan` prices apart. Without it: the default set.
    #[arg(long = "gc-task", value_name = "TASKS")]
    pub gc_tasks: Vec<String>,
    /// Delete. Without it nothing is deleted: the plan is printed and the command stops.
    #[arg(long)]
    pub yes: bool,
    /// Passes at most (each pass retries what AWS refused for now, e.g. a dependency).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_passes: u32,
    /// A name that is not this management cluster's: refused. Adds to sweeper's namespace's
    /// annotation sweeper.dev/scan-not-ours.
    #[arg(long = "not-ours", value_delimiter = ',')]
    pub not_ours: Vec<String>,
    /// How long the audit record is kept (the service's `--archive-ttl`).
    #[arg(long, default_value = "72h", value_parser = parse_duration)]
    pub audit_ttl: Duration,
    /// CAPA's namespace, where static identities' Secrets live.
    #[arg(long, default_value = "capa-system", env = "SWEEPER_CAPA_NAMESPACE")]
    pub capa_namespace: String,
    /// Sweeper's namespace: its not-ours annotation, and where the audit record is written.
    #[command(flatten)]
    pub namespace: SwitchNamespace,
}

/// How `sweeper check` prints its report.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckOutput {
    Table,
    Json,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// `table` (one line per check) or `json`.
    #[arg(short = 'o', long, value_enum, default_value_t = CheckOutput::Table)]
    pub output: CheckOutput,
    /// The archive's budget: records over this size in all fail the check (bytes, or with Ki, Mi,
    /// Gi). etcd's own quota is 2 GiB by default.
    #[arg(long, default_value = "256Mi", env = "SWEEPER_CHECK_ARCHIVE_BUDGET", value_parser = parse_bytes)]
    pub archive_budget: u64,
    /// Where the control plane's own pods and Leases are (kube-controller-manager's).
    #[arg(long, default_value = "kube-system")]
    pub control_plane_namespace: String,
    /// Check only the cluster objects of this namespace for their AWS identity (empty: all).
    #[arg(long, default_value = "")]
    pub cluster_namespace: String,
    /// Do not build AWS sessions (no AWS call at all).
    #[arg(long)]
    pub skip_aws: bool,
    /// Check as this user (impersonation, like kubectl's --as), e.g.
    /// system:serviceaccount:sweeper-system:sweeper: the rbac section then shows what sweeper's
    /// own service account may do.
    #[arg(long = "as")]
    pub as_user: Option<String>,
    #[command(
        flatten,
        next_help_heading = "Service configuration (sweeper run's flags and variables)"
    )]
    pub run: RunArgs,
}

/// `256Mi`, `1Gi`, `4096`: a byte count.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, ""), |i| s.split_at(i));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or a number with Ki, Mi, Gi)"))?;
    let mult: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        other => return Err(format!("{s:?}: unknown unit {other:?} (use Ki, Mi or Gi)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// `-n`: sweeper's namespace, where the pause switch lives (`pause`, `resume`, `uninstall`).
#[derive(Args, Debug, Clone)]
pub struct SwitchNamespace {
    /// Sweeper's namespace, where the pause switch (ConfigMap sweeper-pause) lives.
    #[arg(
        short = 'n',
        long,
        default_value = "sweeper-system",
        env = "SWEEPER_NAMESPACE"
    )]
    pub namespace: String,
}

#[derive(Args, Debug, Clone)]
pub struct UninstallArgs {
    #[command(flatten)]
    pub switch: SwitchNamespace,
    /// Leave `kubezoo.io/tenant` on Tenants (KubeZoo's own controller runs and owns it).
    #[arg(long)]
    pub keep_tenant_finalizer: bool,
    /// List the finalizers that would be removed; pause nothing and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Release only these collectors' finalizers, and read only the kinds they finalize
    /// (external: AWSCluster, AWSManagedControlPlane; tenant: Tenant; cascade: every kind), so
    /// the identity needs no more than those collectors' role. Repeat it or separate with commas.
    /// Default: every collector. The Helm chart's pre-delete hook names the collectors it enabled.
    #[arg(long = "collector", value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(crate::collectors::names()))]
    pub collectors: Vec<String>,
    /// CAPA's namespace: its manager's Deployment says whether CAPA's own ExternalResourceGC is
    /// on, which the uninstall reports (with the external collector's finalizers released).
    /// Empty: not read (an identity that may not read Deployments there), the report says what
    /// to check.
    #[arg(long, default_value = "capa-system", env = "SWEEPER_CAPA_NAMESPACE")]
    pub capa_namespace: String,
}

#[derive(Args, Debug, Clone)]
pub struct RestoreArgs {
    /// group/version/kind of one object, e.g. apps/v1/Deployment (v1/ConfigMap for the core
    /// group), then [namespace] name.
    #[arg(num_args = 0..=3)]
    pub object: Vec<String>,
    /// Restore this owner (if it was archived) and every dependent collected because of it.
    #[arg(long, conflicts_with_all = ["object", "tenant"])]
    pub cascade_of: Option<String>,
    /// Restore everything the teardown of this tenant deleted.
    #[arg(long, conflicts_with_all = ["object", "cascade_of"])]
    pub tenant: Option<String>,
    /// Print the plan; create nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Read records only in this namespace (default: all the namespaces you may list).
    #[arg(long)]
    pub records_namespace: Option<String>,
    /// Sweeper's namespace: the only place records of cluster-scoped objects and tenant
    /// teardowns are trusted from.
    #[arg(long, default_value = "sweeper-system", env = "SWEEPER_NAMESPACE")]
    pub sweeper_namespace: String,
}

impl RestoreArgs {
    /// The selection the arguments name.
    pub fn selection(&self) -> Result<crate::archive::restore::Selection, String> {
        use crate::archive::restore::Selection;
        match (&self.cascade_of, &self.tenant, self.object.as_slice()) {
            (Some(uid), None, []) => Ok(Selection::CascadeOf(uid.clone())),
            (None, Some(id), []) => Ok(Selection::Tenant(id.clone())),
            (None, None, [gvk, name]) => Ok(Selection::Object {
                gvk: gvk.clone(),
                namespace: None,
                name: name.clone(),
            }),
            (None, None, [gvk, ns, name]) => Ok(Selection::Object {
                gvk: gvk.clone(),
                namespace: Some(ns.clone()),
                name: name.clone(),
            }),
            _ => Err(
                "say what to restore: <group/version/kind> [namespace] <name>, --cascade-of <owner uid> or --tenant <id>"
                    .into(),
            ),
        }
    }
}

#[derive(Subcommand, Debug, Clone)]
pub enum ArchiveCommand {
    /// What can be restored: every archived object you may read, oldest first.
    List {
        /// Only records in this namespace.
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// Only objects archived within this long (e.g. 1h, 30m).
        #[arg(long, value_parser = parse_duration)]
        since: Option<Duration>,
        /// Sweeper's namespace (see `restore --sweeper-namespace`).
        #[arg(long, default_value = "sweeper-system", env = "SWEEPER_NAMESPACE")]
        sweeper_namespace: String,
    },
}

#[derive(Args, Debug, Clone)]
pub struct PauseArgs {
    /// One collector; none: every collector.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(crate::collectors::names()))]
    pub collector: Option<String>,
    /// Why (recorded with the switch, shown by `sweeper status` and in the Event).
    #[arg(long)]
    pub reason: Option<String>,
    /// `resume` only: resume just the collectors `sweeper uninstall` paused, leaving any other
    /// pause as it is (the Helm chart's post-install hook, so a reinstall does not start paused).
    #[arg(long, conflicts_with_all = ["collector", "reason"])]
    pub after_uninstall: bool,
    #[command(flatten)]
    pub switch: SwitchNamespace,
}

/// `sweeper run`'s flags: the feature gates, whose known names come from the list of collectors,
/// then the rest of the configuration (crate::config, below the collectors, which are built
/// from it).
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Feature gates, e.g. CascadeGC=true,TenantGC=true,ExternalResourceGC=true,AlternativeGCStrategy=false.
    /// Unset gates keep their defaults (CascadeGC=true, the others false).
    #[arg(long, default_value = "", env = "SWEEPER_FEATURE_GATES", value_parser = parse_gates)]
    pub feature_gates: FeatureGates,

    #[command(flatten)]
    pub config: RunConfig,
}

#[derive(Subcommand, Debug, Clone)]
pub enum GcCommand {
    /// Collect the cluster's external AWS resources on deletion (annotation "true").
    Enable(GcCluster),
    /// Opt the cluster out of external resource GC (annotation "false"); phases 1 and 3 still run.
    Disable(GcCluster),
    /// Print, per phase and cleaner, what a teardown would delete; delete nothing. Runs in the
    /// cluster's own session, as the teardown would: its `spec.region` and the identity chain of
    /// its `spec.identityRef`, on top of the environment's endpoint and credentials (AWS_REGION,
    /// AWS_ENDPOINT_URL, ...).
    Plan {
        #[command(flatten)]
        cluster: GcCluster,
        /// Discover with describe calls instead of the Resource Groups Tagging API.
        #[arg(long)]
        alternative_discovery: bool,
        /// CAPA's namespace, where static identities' Secrets live.
        #[arg(long, default_value = "capa-system", env = "SWEEPER_CAPA_NAMESPACE")]
        capa_namespace: String,
    },
    /// Limit external GC to these tasks (annotation sweeper.dev/gc-tasks, and CAPA's tasks
    /// annotation for CAPA's three); no --gc-task removes both (the default tasks).
    Configure {
        #[command(flatten)]
        cluster: GcCluster,
        /// dns-record (external-dns records: reported, deleted only under the
        /// sweeper.dev/external-dns-owner-id annotation), load-balancer, target-group, instance,
        /// launch-template, instance-profile, oidc-provider, instance-state-queue (CAPA's
        /// EventBridgeInstanceState queue and rule), bootstrap-data (CAPA's machines' bootstrap
        /// secrets and parameters), bootstrap-data-s3 (CAPA's bootstrap bucket and objects:
        /// reported, never deleted), security-group, eks-security-group,
        /// shared-tag (a bring-your-own network's shared tag removed, nothing deleted) or the
        /// opt-ins ebs-volume, ebs-snapshot and eks-log-group; comma-separated or repeated.
        /// All go to sweeper.dev/gc-tasks; CAPA's load-balancer, target-group and security-group
        /// also to aws.cluster.x-k8s.io/external-resource-tasks-gc, which is removed when none is
        /// named (CAPA refuses other names there).
        #[arg(long = "gc-task", value_delimiter = ',')]
        tasks: Vec<sweeper_aws::phases::GcTask>,
        /// The cluster's external-dns owner id (its --txt-owner-id): the dns-record task then
        /// deletes the records external-dns owns under exactly this id that point at a load
        /// balancer the teardown deletes. "" removes it (records only reported). Not given: left
        /// as it is; unlike --gc-task, a delete permission is never changed by omission.
        /// `default` is refused: every external-dns that kept the default shares it.
        #[arg(long, value_name = "ID", value_parser = parse_dns_owner)]
        external_dns_owner_id: Option<String>,
    },
}

/// An owner id `gc configure` may write: one the teardown would accept, or "" to remove it.
fn parse_dns_owner(s: &str) -> Result<String, String> {
    match sweeper_aws::cleaners::dns_records::owner_id_problem(s) {
        Some(why) if !s.is_empty() => Err(why),
        _ => Ok(s.to_string()),
    }
}

#[derive(Args, Debug, Clone)]
pub struct GcCluster {
    /// The CAPI Cluster's name.
    #[arg(long)]
    pub cluster_name: String,
    /// The CAPI Cluster's namespace.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
}

#[derive(Args, Debug, Clone)]
pub struct GraphArgs {
    /// Base URL of the running service's HTTP port (`http://` for one run with
    /// --http-insecure).
    #[arg(
        long,
        default_value = "https://127.0.0.1:8080",
        env = "SWEEPER_SERVER",
        global = true
    )]
    pub server: String,
    #[command(flatten)]
    pub access: crate::http_get::Credentials,
    #[command(subcommand)]
    pub query: GraphQuery,
}

#[derive(Subcommand, Debug, Clone)]
pub enum GraphQuery {
    /// Objects that name the given object as an owner.
    Dependents(ObjectArgs),
    /// The owners of the given object.
    Dependencies(ObjectArgs),
    /// The whole graph.
    Dump {
        /// json or dot (Graphviz).
        #[arg(long, default_value = "json")]
        format: String,
    },
}

#[derive(Args, Debug, Clone)]
pub struct ObjectArgs {
    /// group/version/kind, e.g. apps/v1/Deployment (v1/ConfigMap for the core group).
    pub gvk: String,
    /// [namespace] name: give the namespace for namespaced objects.
    #[arg(num_args = 1..=2, required = true)]
    pub namespace_and_name: Vec<String>,
    /// Follow edges all the way (all descendants or all ancestors).
    #[arg(long)]
    pub transitive: bool,
}

impl ObjectArgs {
    pub fn namespace(&self) -> Option<&str> {
        (self.namespace_and_name.len() == 2).then(|| self.namespace_and_name[0].as_str())
    }
    pub fn name(&self) -> &str {
        self.namespace_and_name
            .last()
            .map(String::as_str)
            .unwrap_or("")
    }
}

/// `--feature-gates` over every gate the collectors declare.
fn parse_gates(s: &str) -> Result<FeatureGates, String> {
    FeatureGates::parse(s, &crate::collectors::gates()).map_err(|e| e.to_string())
}

/// Durations as flags take them (the engine's own parser: failpoints read the same syntax).
pub use crate::engine::duration::parse as parse_duration;

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

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
                Ok(Command::Restore(r)) => r.selection(),
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
            FeatureGates::defaults(&crate::collectors::gates())
        );
        assert_eq!(args.config.discovery_interval, Duration::from_secs(30));
    }
}
