//! Command-line interface: one typed struct per subcommand. Every `run` flag can also be set from
//! an environment variable (`SWEEPER_*`), so the Deployment and the Helm chart need no args list.

use crate::config::{FeatureGates, LogFormat};
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
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
        /// Base URL of the running service's HTTP port.
        #[arg(long, default_value = "http://127.0.0.1:8080", env = "SWEEPER_SERVER")]
        server: String,
        /// Print the JSON instead of the table.
        #[arg(long)]
        json: bool,
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
    /// Print the version.
    Version,
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
    #[command(flatten)]
    pub switch: SwitchNamespace,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Feature gates, e.g. CascadeGC=true,TenantGC=true,ExternalResourceGC=true,AlternativeGCStrategy=false.
    /// Unset gates keep their defaults (CascadeGC=true, the others false).
    #[arg(long, default_value = "", env = "SWEEPER_FEATURE_GATES", value_parser = parse_gates)]
    pub feature_gates: FeatureGates,

    /// Address of the HTTP server (/healthz, /readyz, /metrics and the query API).
    #[arg(long, default_value = "0.0.0.0:8080", env = "SWEEPER_HTTP_ADDR")]
    pub http_addr: SocketAddr,

    /// How often API discovery is refreshed, so new CRDs are collected without a restart.
    #[arg(long, default_value = "30s", env = "SWEEPER_DISCOVERY_INTERVAL", value_parser = parse_duration)]
    pub discovery_interval: Duration,

    /// Client-side rate limit for API calls (queries per second; 0 = unlimited). Same meaning and
    /// default as kube-controller-manager's --kube-api-qps.
    #[arg(long, default_value_t = 20.0, env = "SWEEPER_KUBE_API_QPS")]
    pub kube_api_qps: f64,

    /// Burst allowed above --kube-api-qps (kube-controller-manager's --kube-api-burst).
    #[arg(long, default_value_t = 30, env = "SWEEPER_KUBE_API_BURST")]
    pub kube_api_burst: u32,

    /// Workers per cascade queue (kube-controller-manager's --concurrent-gc-syncs, 20). Default: 40.
    /// Unthrottled, the API server's own pace is the limit: on 2 cores it takes deletes fastest
    /// with 32 to 64 in flight, and 20 workers keep about 18 in flight. Under --kube-api-qps the
    /// limit is the rate, which 20 workers already fill; there the archive's group commit gathers
    /// one batch of at most a worker each, so 40 halve its writes per delete. See
    /// docs/benchmarks.md, `cascade.limit` and `cascade.archive.qps20`. [range: 1 to 1000]
    #[arg(long, env = "SWEEPER_CASCADE_WORKERS", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub cascade_workers: Option<u32>,

    /// Report what the cascade collector would delete or rewrite; change nothing.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set, env = "SWEEPER_CASCADE_DRY_RUN")]
    pub cascade_dry_run: bool,

    /// How the tenant collector finds a tenant's cluster-scoped objects: `index` (a name index kept
    /// by watches, then one check before release that lists only the kinds the index cannot vouch
    /// for; `label` is an alias) or `scan` (list everything every pass). Both find every object
    /// named `<id>-…`, labelled or not.
    #[arg(long, value_enum, default_value_t = crate::tenant::inventory::Strategy::Index, env = "SWEEPER_TENANT_GC_STRATEGY")]
    pub tenant_gc_strategy: crate::tenant::inventory::Strategy,

    /// Cluster-scoped kinds (plural resource names) listed and scanned by name prefix on every
    /// pass even with the `index` strategy (an escape hatch; the index already covers every
    /// kind). Empty by default.
    #[arg(long, value_delimiter = ',', env = "SWEEPER_TENANT_SCAN_KINDS")]
    pub tenant_scan_kinds: Vec<String>,

    /// Deletes in flight at once during a tenant teardown (the client rate limit still applies). [range: 1 to 256]
    #[arg(long, default_value_t = 16, env = "SWEEPER_TENANT_DELETE_CONCURRENCY", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub tenant_delete_concurrency: u32,

    /// Report what a tenant teardown would delete; delete nothing and add no finalizers.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set, env = "SWEEPER_TENANT_DRY_RUN")]
    pub tenant_dry_run: bool,

    /// Report what each external teardown would delete in AWS (the object's condition, an Event,
    /// `sweeper status`, `sweeper_external_would_delete_total`); delete nothing and add no
    /// finalizers.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set, env = "SWEEPER_EXTERNAL_DRY_RUN")]
    pub external_dry_run: bool,

    /// The external collector takes only the AWSClusters / AWSManagedControlPlanes this label
    /// selector selects (`kubectl -l` syntax; empty: all). One not selected gets no finalizer, and
    /// a finalizer already on it is released with nothing deleted.
    #[arg(long, default_value = "", env = "SWEEPER_EXTERNAL_GC_SELECTOR", value_parser = crate::engine::selector::parse)]
    pub external_gc_selector: crate::engine::selector::LabelFilter,

    /// Snapshot each EBS volume before the opt-in `ebs-volume` task deletes it (the snapshot id is
    /// in an Event on the cluster object). `false` deletes without.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "SWEEPER_EXTERNAL_EBS_SNAPSHOT")]
    pub external_ebs_snapshot: bool,

    /// CAPA's own namespace: where the Secrets of `AWSClusterStaticIdentity` objects live (CAPA's
    /// manager namespace). sweeper reads Secrets only there.
    #[arg(long, default_value = "capa-system", env = "SWEEPER_CAPA_NAMESPACE")]
    pub capa_namespace: String,

    /// Cluster teardowns (AWSCluster / AWSManagedControlPlane) run at once. Each runs in its own
    /// AWS session (region, account, identity), so a slow or throttled account holds up only
    /// its own clusters. [range: 1 to 256]
    #[arg(long, default_value_t = 8, env = "SWEEPER_EXTERNAL_CONCURRENCY", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub external_concurrency: u16,

    /// How long the cascade workers wait for every resource's first list before starting anyway.
    #[arg(long, default_value = "60s", env = "SWEEPER_CASCADE_SYNC_TIMEOUT", value_parser = parse_duration)]
    pub cascade_sync_timeout: Duration,

    /// Which deleted objects are archived first (restorable with `sweeper restore`): `all`,
    /// `none`, or `selector=<label selector>`. Cascade and tenant collectors.
    #[arg(long, default_value = "all", env = "SWEEPER_ARCHIVE")]
    pub archive: crate::archive::Mode,

    /// How long archive records are kept before they are deleted.
    #[arg(long, default_value = "72h", env = "SWEEPER_ARCHIVE_TTL", value_parser = parse_duration)]
    pub archive_ttl: Duration,

    /// An object larger than this (bytes, as JSON) is deleted without a record; a Warning Event
    /// `NotArchived` says so. At most 900 KiB (a record is a ConfigMap or Secret).
    #[arg(long, default_value_t = crate::archive::DEFAULT_MAX_OBJECT_BYTES, env = "SWEEPER_ARCHIVE_MAX_OBJECT_BYTES")]
    pub archive_max_object_bytes: usize,

    /// Sweeper's own namespace: where the pause switch (ConfigMap `sweeper-pause`) and the archive
    /// records of cluster-scoped objects live. Empty = the pod's namespace, else the kubeconfig
    /// context's.
    #[arg(long, default_value = "", env = "SWEEPER_NAMESPACE")]
    pub namespace: String,

    /// Run as one of several replicas: only the holder of a coordination.k8s.io/v1 Lease collects;
    /// the others stand by (kube-controller-manager's --leader-elect). Off by default for a single
    /// local process; the Deployment and the Helm chart turn it on.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set, env = "SWEEPER_LEADER_ELECT")]
    pub leader_elect: bool,

    /// Name of the Lease.
    #[arg(
        long,
        default_value = "sweeper",
        env = "SWEEPER_LEADER_ELECT_LEASE_NAME"
    )]
    pub leader_elect_lease_name: String,

    /// Namespace of the Lease; empty = the pod's own namespace (from the service account mount).
    #[arg(long, default_value = "", env = "SWEEPER_LEADER_ELECT_NAMESPACE")]
    pub leader_elect_namespace: String,

    /// This replica's identity in the Lease; empty = `<hostname>_<random>`. The Deployment uses
    /// the pod name.
    #[arg(long, default_value = "", env = "SWEEPER_LEADER_ELECT_IDENTITY")]
    pub leader_elect_identity: String,

    /// How long a standby waits, after the Lease last changed, before taking it over.
    #[arg(long, default_value = "15s", env = "SWEEPER_LEADER_ELECT_LEASE_DURATION", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps acting without a successful renewal; it stops (and exits) after.
    /// Must be shorter than the lease duration.
    #[arg(long, default_value = "10s", env = "SWEEPER_LEADER_ELECT_RENEW_DEADLINE", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// How often the Lease is renewed or, standing by, tried. Must be shorter than the renew deadline.
    #[arg(long, default_value = "2s", env = "SWEEPER_LEADER_ELECT_RETRY_PERIOD", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,
}

/// A `sweeper run` setting that parses but cannot work; the message names the flag.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("--kube-api-qps must be a finite number >= 0 (0 = unlimited), got {0}")]
    Qps(f64),
    #[error("--kube-api-burst must be at least 1")]
    Burst,
    #[error("--discovery-interval must be at least 1s, got {0:?}")]
    DiscoveryInterval(Duration),
    #[error("--cascade-sync-timeout must be more than 0s")]
    SyncTimeout,
    #[error(
        "--tenant-scan-kinds: {0:?} is not a plural resource name (lowercase, e.g. namespaces)"
    )]
    ScanKind(String),
    #[error("--archive-ttl must be at least 1m, got {0:?}")]
    ArchiveTtl(Duration),
    #[error("--archive-max-object-bytes must be between 1 and {max}, got {got}")]
    ArchiveMaxObjectBytes { got: usize, max: usize },
    #[error(transparent)]
    Leader(#[from] crate::engine::leader::LeaderConfigError),
}

impl RunArgs {
    /// Workers per cascade queue: as given, else 40 (see the flag).
    pub fn cascade_workers(&self) -> u32 {
        self.cascade_workers.unwrap_or(40)
    }

    /// Checks what clap's per-flag parsers cannot: ranges and relations between flags. `sweeper
    /// run` calls it before connecting to anything, so bad configuration fails at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.kube_api_qps.is_finite() || self.kube_api_qps < 0.0 {
            return Err(ConfigError::Qps(self.kube_api_qps));
        }
        if self.kube_api_burst == 0 {
            return Err(ConfigError::Burst);
        }
        if self.discovery_interval < Duration::from_secs(1) {
            return Err(ConfigError::DiscoveryInterval(self.discovery_interval));
        }
        if self.cascade_sync_timeout.is_zero() {
            return Err(ConfigError::SyncTimeout);
        }
        if let Some(bad) = self.tenant_scan_kinds.iter().find(|k| {
            k.is_empty()
                || !k
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        }) {
            return Err(ConfigError::ScanKind(bad.clone()));
        }
        if self.archive_ttl < Duration::from_secs(60) {
            return Err(ConfigError::ArchiveTtl(self.archive_ttl));
        }
        if self.archive_max_object_bytes == 0
            || self.archive_max_object_bytes > crate::archive::RECORD_BYTES
        {
            return Err(ConfigError::ArchiveMaxObjectBytes {
                got: self.archive_max_object_bytes,
                max: crate::archive::RECORD_BYTES,
            });
        }
        if self.leader_elect {
            self.leader_config().validate()?;
        }
        Ok(())
    }

    /// Sweeper's own namespace: `--namespace`, else the pod's (from the service account mount),
    /// else `kubeconfig_default` (the kubeconfig context's). `run` and `check` resolve it alike.
    pub fn sweeper_namespace(&self, kubeconfig_default: &str) -> String {
        if !self.namespace.is_empty() {
            return self.namespace.clone();
        }
        crate::engine::leader::default_namespace().unwrap_or_else(|| kubeconfig_default.to_string())
    }

    /// The leader-election settings, with the empty defaults filled in.
    pub fn leader_config(&self) -> crate::engine::leader::LeaderConfig {
        use crate::engine::leader;
        let namespace = if self.leader_elect_namespace.is_empty() {
            leader::default_namespace().unwrap_or_default()
        } else {
            self.leader_elect_namespace.clone()
        };
        let identity = if self.leader_elect_identity.is_empty() {
            leader::default_identity()
        } else {
            self.leader_elect_identity.clone()
        };
        leader::LeaderConfig {
            namespace,
            lease_name: self.leader_elect_lease_name.clone(),
            identity,
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
        }
    }
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
    /// Limit external GC to these tasks; no --gc-task removes the limit (all tasks).
    Configure {
        #[command(flatten)]
        cluster: GcCluster,
        /// dns-record (external-dns records: reported, deleted only under the
        /// sweeper.dev/external-dns-owner-id annotation), load-balancer, target-group, instance,
        /// launch-template, instance-profile, oidc-provider, security-group, eks-security-group
        /// or the opt-ins ebs-volume, ebs-snapshot and eks-log-group; repeat for several.
        #[arg(long = "gc-task")]
        tasks: Vec<sweeper_aws::teardown::GcTask>,
    },
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
    /// Base URL of the running service's HTTP port.
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080",
        env = "SWEEPER_SERVER",
        global = true
    )]
    pub server: String,
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

fn parse_gates(s: &str) -> Result<FeatureGates, String> {
    s.parse()
        .map_err(|e: crate::config::FeatureGateError| e.to_string())
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
                .contains("too long")
        );
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    fn run_args(args: &[&str]) -> RunArgs {
        let mut argv = vec!["sweeper", "run"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Run(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_validate() {
        assert_eq!(run_args(&[]).validate(), Ok(()));
        let le = run_args(&["--leader-elect", "--leader-elect-namespace", "ns"]);
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
            assert_eq!(run_args(args).leader_elect, want, "{args:?}");
        }
        let a = run_args(&[
            "--cascade-dry-run=true",
            "--tenant-dry-run",
            "--external-dry-run=false",
        ]);
        assert!(a.cascade_dry_run && a.tenant_dry_run && !a.external_dry_run);
        // A bare flag followed by another flag takes no value from it.
        let a = run_args(&["--leader-elect", "--leader-elect-namespace", "ns"]);
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
            let err = run_args(args).validate().unwrap_err().to_string();
            assert!(err.contains(flag), "{args:?}: {err}");
        }
        // Leader election settings are only checked when it is on.
        assert_eq!(
            run_args(&["--leader-elect-renew-deadline", "20s"]).validate(),
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
        let Command::Gc(GcCommand::Configure { cluster, tasks }) = cli.command else {
            panic!("expected gc configure")
        };
        assert_eq!(
            (cluster.cluster_name.as_str(), cluster.namespace.as_str()),
            ("c1", "default")
        );
        assert_eq!(tasks.len(), 2);
        let err = Cli::try_parse_from([
            "sweeper",
            "gc",
            "configure",
            "--cluster-name",
            "c1",
            "--gc-task",
            "nat",
        ])
        .unwrap_err();
        assert!(err.to_string().contains("nat"), "{err}");
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
        let a = run_args(&["--archive", "selector=app=web", "--archive-ttl", "24h"]);
        assert!(matches!(a.archive, crate::archive::Mode::Selector(_)));
        assert_eq!(a.validate(), Ok(()));
        assert_eq!(run_args(&[]).archive, crate::archive::Mode::All);
        let err = Cli::try_parse_from(["sweeper", "run", "--archive", "some"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--archive"), "{err}");
        let short = run_args(&["--archive-ttl", "30s"]).validate().unwrap_err();
        assert!(short.to_string().contains("--archive-ttl"));
        let big = run_args(&["--archive-max-object-bytes", "2000000"])
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
        assert_eq!(args.feature_gates, FeatureGates::default());
        assert_eq!(args.discovery_interval, Duration::from_secs(30));
    }
}
