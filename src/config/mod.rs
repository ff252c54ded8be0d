//! Typed configuration shared by every collector: feature gates and the `run` flags.
//!
//! One struct built by clap (flags + environment variables) and passed down; no global state.
//! This is the bottom of the configuration's layers: it names no collector. The collector
//! interface (crate::collector) hands [`RunConfig`] to each collector's spec; the list of collectors
//! (crate::catalog) supplies the known gates; the CLI (crate::cli) puts them together.
//!
//! Why the `run` flags live here and not in crate::cli: collectors are built from them, and the
//! CLI sits above the list of collectors (it offers their names and gates), so a struct the CLI
//! owned would make every collector import the CLI. Only `--feature-gates` stays in the CLI,
//! whose parser needs the list; it flattens [`RunConfig`] after it, so `sweeper run --help`
//! lists the flags in the same order as before.

pub mod flags;
mod gates;

pub use gates::{FeatureGateError, FeatureGates, Gate};

use clap::Args;
use std::net::SocketAddr;
use std::time::Duration;

// Durations as flags take them (the engine's own parser: failpoints read the same syntax).
use crate::engine::duration::parse as parse_duration;

/// Sweeper's namespace when neither `--namespace` nor a pod's says (every CLI command's `-n`
/// default too).
pub const DEFAULT_NAMESPACE: &str = "sweeper-system";

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// How the tenant collector finds what a tenant owns (`--tenant-gc-strategy`; crate::tenant::inventory).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum TenantGcStrategy {
    /// The watch-fed name index, a list of what it cannot answer, and a freshness-proved last check.
    #[default]
    #[value(alias = "label")]
    Index,
    /// List every cluster-scoped object and match names (slow; needs no index).
    Scan,
}

/// `sweeper run`'s configuration: every `run` flag but `--feature-gates` (which the CLI adds, with
/// the collectors' gates: see crate::run::RunArgs). Collectors are built from it (crate::collector).
#[derive(Args, Debug, Clone)]
pub struct RunConfig {
    /// Address of the HTTP server (/healthz, /readyz, /metrics and the query API). It speaks
    /// HTTPS, and /metrics, /status and /graph answer only a bearer token that the API server
    /// authenticates (TokenReview) and allows `get` on the path (SubjectAccessReview, e.g. by the
    /// sweeper-metrics-reader ClusterRole); /healthz and /readyz stay open.
    #[arg(long, default_value = "0.0.0.0:8080", env = "SWEEPER_HTTP_ADDR")]
    pub http_addr: SocketAddr,

    /// Serve plain HTTP with no authentication on every path (local use only: /status names
    /// clusters, accounts and identities).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set, env = "SWEEPER_HTTP_INSECURE")]
    pub http_insecure: bool,

    /// The HTTPS certificate (PEM chain; e.g. a mounted cert-manager Secret's tls.crt), read
    /// again when it changes. Without it a self-signed certificate is generated at start.
    #[arg(
        long,
        env = "SWEEPER_HTTP_TLS_CERT_FILE",
        requires = "http_tls_key_file",
        conflicts_with = "http_insecure"
    )]
    pub http_tls_cert_file: Option<std::path::PathBuf>,

    /// The private key of --http-tls-cert-file (PEM).
    #[arg(
        long,
        env = "SWEEPER_HTTP_TLS_KEY_FILE",
        requires = "http_tls_cert_file"
    )]
    pub http_tls_key_file: Option<std::path::PathBuf>,

    /// How often API discovery is refreshed, so new CRDs are collected without a restart.
    #[arg(long, default_value = "30s", env = "SWEEPER_DISCOVERY_INTERVAL", value_parser = parse_duration)]
    pub discovery_interval: Duration,

    /// Client-side rate limit for API calls (queries per second; 0 = unlimited), for the whole
    /// process. The default is kube-controller-manager's --kube-api-qps, which its garbage
    /// collector doubles (v1.36: `config.QPS *= 2`); sweeper's cascade sends one call per
    /// deletion, so 20 here deletes as fast as its 40 (docs/benchmarks.md, equal request budgets).
    #[arg(long, default_value_t = 20.0, env = "SWEEPER_KUBE_API_QPS")]
    pub kube_api_qps: f64,

    /// Burst allowed above --kube-api-qps (kube-controller-manager's --kube-api-burst).
    #[arg(long, default_value_t = 30, env = "SWEEPER_KUBE_API_BURST")]
    pub kube_api_burst: u32,

    /// Workers per cascade queue (kube-controller-manager's --concurrent-gc-syncs, 20). Default: 80.
    /// Unthrottled, the API server's own pace is the limit: on 2 cores a plain client deletes
    /// fastest with about 50 in flight, and a worker spends a fifth of its time outside its
    /// request, so 40 workers keep about 33 in flight and 80 about 65. Under --kube-api-qps the
    /// limit is the rate, which 20 workers already fill; more only wait at the limiter, and let the
    /// archive's group commit gather bigger batches. See docs/benchmarks.md, `cascade.limit` and
    /// `cascade.archive.qps20`. [range: 1 to 1000]
    #[arg(long, env = "SWEEPER_CASCADE_WORKERS", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub cascade_workers: Option<u32>,

    /// Report what the cascade collector would delete or rewrite; change nothing.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set, env = "SWEEPER_CASCADE_DRY_RUN")]
    pub cascade_dry_run: bool,

    /// How the tenant collector finds a tenant's cluster-scoped objects: `index` (a name index kept
    /// by watches, then one check before release that lists only the kinds the index cannot vouch
    /// for; `label` is an alias) or `scan` (list everything every pass). Both find every object
    /// named `<id>-…`, labelled or not.
    #[arg(long, value_enum, default_value_t = TenantGcStrategy::Index, env = "SWEEPER_TENANT_GC_STRATEGY")]
    pub tenant_gc_strategy: TenantGcStrategy,

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

    /// The namespaces the external collector acts in (comma list; empty: every namespace). One
    /// namespaced watch per namespace, never a cluster-wide one: an AWSCluster or
    /// AWSManagedControlPlane elsewhere is never seen, so never gets or loses a finalizer and
    /// its AWS resources are never touched (unlike --external-gc-selector, which releases what
    /// it no longer selects). For one sweeper per team. Cluster API's Clusters are watched in
    /// the same namespaces. The tenant collector is not scoped by it: KubeZoo's Tenant is
    /// cluster-scoped (see --tenant-scope-selector).
    #[arg(long, value_delimiter = ',', env = "SWEEPER_SCOPE_NAMESPACES")]
    pub scope_namespaces: Vec<String>,

    /// The Tenants the tenant collector acts on, by label (`kubectl -l` syntax; empty: all).
    /// Asked of the server: a Tenant not selected is never seen, so never gets or loses a
    /// finalizer and nothing of it is deleted. Tenants are cluster-scoped, so this, not
    /// --scope-namespaces, is the tenant collector's scope.
    #[arg(long, default_value = "", env = "SWEEPER_TENANT_SCOPE_SELECTOR", value_parser = crate::engine::selector::parse)]
    pub tenant_scope_selector: crate::engine::selector::LabelFilter,

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

    /// AWS requests per second each AWS account's teardowns may make, all its regions and
    /// services together: every AWS call of a teardown waits for a token. The default stays
    /// under EC2's per-account, per-region refill rate (20/s for each non-mutating API); 0: no
    /// budget (only AWS's own throttling slows sweeper). See docs/capa.md, "Where each cluster is torn down".
    #[arg(long, default_value_t = sweeper_aws::budget::AccountBudget::DEFAULT.qps, env = "SWEEPER_AWS_ACCOUNT_QPS")]
    pub aws_account_qps: u32,

    /// Requests an AWS account's teardowns may make at once before --aws-account-qps paces them
    /// (in any one second at most burst + qps go). [range: 1 to 1000]
    #[arg(long, default_value_t = sweeper_aws::budget::AccountBudget::DEFAULT.burst, env = "SWEEPER_AWS_ACCOUNT_BURST", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub aws_account_burst: u32,

    /// Run the leak scan (`sweeper scan`) on this schedule inside the service: it sets
    /// `sweeper_orphan_resources`, `sweeper_orphan_cost_dollars_per_month` and `sweeper_scan_*`,
    /// and `sweeper status` shows its summary. It deletes nothing. Only the leader scans, at once
    /// and then every interval; a scan still running after one interval is stopped and counts as
    /// failed. 0 (the default): off; otherwise at least 1m.
    #[arg(long, default_value = "0s", env = "SWEEPER_SCAN_INTERVAL", value_parser = parse_duration)]
    pub scan_interval: Duration,

    /// Regions the scheduled scan also covers with sweeper's own identity (its default region
    /// always is, and every live cluster's region with that cluster's identity); comma list.
    #[arg(
        long = "scan-region",
        value_delimiter = ',',
        env = "SWEEPER_SCAN_REGIONS"
    )]
    pub scan_regions: Vec<String>,

    /// Cluster names that are not this management cluster's (another one owns them): the
    /// scheduled scan reports them apart, never as orphans; comma list. Adds to the names on
    /// sweeper's namespace's annotation `sweeper.dev/scan-not-ours`, read at every scan.
    #[arg(
        long = "scan-not-ours",
        value_delimiter = ',',
        env = "SWEEPER_SCAN_NOT_OURS"
    )]
    pub scan_not_ours: Vec<String>,

    /// How long the cascade workers wait for every resource's first list before starting anyway.
    #[arg(long, default_value = "60s", env = "SWEEPER_CASCADE_SYNC_TIMEOUT", value_parser = parse_duration)]
    pub cascade_sync_timeout: Duration,

    /// Which deleted objects are archived first (restorable with `sweeper restore`): `all`,
    /// `none`, or `selector=<label selector>`. Cascade and tenant collectors.
    #[arg(long, default_value = "all", env = "SWEEPER_ARCHIVE")]
    pub archive: crate::archive::ArchiveMode,

    /// How long archive records are kept before they are deleted.
    #[arg(long, default_value = "72h", env = "SWEEPER_ARCHIVE_TTL", value_parser = parse_duration)]
    pub archive_ttl: Duration,

    /// An object larger than this (bytes, as JSON) is deleted without a record; a Warning Event
    /// `NotArchived` says so. At most 900 KiB (a record is a ConfigMap or Secret).
    #[arg(long, default_value_t = crate::archive::DEFAULT_MAX_OBJECT_BYTES, env = "SWEEPER_ARCHIVE_MAX_OBJECT_BYTES")]
    pub archive_max_object_bytes: usize,

    /// Sweeper's own namespace: where the pause switch (ConfigMap `sweeper-pause`) and the archive
    /// records of cluster-scoped objects live. Empty = the pod's namespace, else `sweeper-system`
    /// (as `pause`, `resume` and `uninstall` default to), never the kubeconfig context's.
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
    #[error(
        "--scope-namespaces: {0:?} is not a namespace name (lowercase letters, digits and '-', at most 63)"
    )]
    ScopeNamespace(String),
    #[error("--scan-interval must be 0 (off) or at least 1m, got {0:?}")]
    ScanInterval(Duration),
    #[error("--archive-ttl must be at least 1m, got {0:?}")]
    ArchiveTtl(Duration),
    #[error("--archive-max-object-bytes must be between 1 and {max}, got {got}")]
    ArchiveMaxObjectBytes { got: usize, max: usize },
    #[error(transparent)]
    Leader(#[from] crate::engine::leader::LeaderConfigError),
}

impl RunConfig {
    /// Each AWS account's request budget (`--aws-account-qps`, `--aws-account-burst`).
    pub fn aws_budget(&self) -> sweeper_aws::budget::AccountBudget {
        sweeper_aws::budget::AccountBudget {
            qps: self.aws_account_qps,
            burst: self.aws_account_burst,
        }
    }

    /// Workers per cascade queue: as given, else 80 (see the flag).
    pub fn cascade_workers(&self) -> u32 {
        self.cascade_workers.unwrap_or(80)
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
        if let Some(bad) = self
            .scope_namespaces
            .iter()
            .find(|n| !crate::engine::meta::is_dns_label(n))
        {
            return Err(ConfigError::ScopeNamespace(bad.clone()));
        }
        // Every scan pages through every tagged resource of every (account, region) reached:
        // more often than once a minute is a cost with no use.
        if !self.scan_interval.is_zero() && self.scan_interval < Duration::from_secs(60) {
            return Err(ConfigError::ScanInterval(self.scan_interval));
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
    /// else [`DEFAULT_NAMESPACE`]. `run` and `check` resolve it alike, and a `sweeper check` run
    /// from a laptop looks where `sweeper pause -n` and `sweeper uninstall -n` do by default, not
    /// in whatever namespace the kubeconfig context happens to name.
    pub fn sweeper_namespace(&self) -> String {
        if !self.namespace.is_empty() {
            return self.namespace.clone();
        }
        crate::engine::leader::default_namespace().unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())
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

#[cfg(test)]
mod scope_tests;
