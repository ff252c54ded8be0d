//! `sweeper run` only wires: build the clients and the enabled collectors, serve HTTP, wait for
//! leadership, lead (discovery plus every collector) until shut down or the lease is lost, then
//! stop in order. What each collector does lives in its own module behind engine::collector.

use crate::cascade::context::CascadeConfig;
use crate::cascade::metrics::CascadeMetrics;
use crate::cli::RunArgs;
use crate::engine::client::{self, ApiCallCounter, ClientSettings};
use crate::engine::collector::{Collector, RunEnv};
use crate::engine::discovery::{self, DiscoveryReport};
use crate::engine::leader::{Elector, Fence, Role};
use crate::engine::pause::Switch;
use crate::engine::progress::Teardowns;
use crate::external::metrics::ExternalMetrics;
use crate::metrics::Metrics;
use crate::server::{self, AppState};
use crate::tenant::metrics::TenantMetrics;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("invalid configuration: {0}")]
    Config(#[from] crate::cli::ConfigError),
    #[error("cannot build a Kubernetes client from kubeconfig or in-cluster config: {0}")]
    Client(#[source] kube::Error),
    #[error("cannot reach the API server: {0}")]
    Connect(#[source] kube::Error),
    #[error(transparent)]
    Server(#[from] server::ServerError),
    /// The process exits non-zero so its pod restarts as a standby, like client-go's
    /// `OnStoppedLeading` (rebuilding every collector's state in place is not worth the risk).
    #[error("lost leadership: {0}")]
    LostLease(String),
}

pub async fn run(args: RunArgs) -> Result<(), RunError> {
    // Bad configuration fails before anything connects or starts.
    args.validate()?;
    tracing::info!(feature_gates = %args.feature_gates, leader_elect = args.leader_elect, "starting sweeper {}", env!("CARGO_PKG_VERSION"));
    let mut metrics = Metrics::new();
    let api_calls = ApiCallCounter::default();
    metrics.registry_mut().register(
        "kube_api_calls",
        "Requests sent to the Kubernetes API server, by verb",
        api_calls.clone(),
    );
    let conn = connect(&args, &metrics, api_calls.clone()).await?;
    let sources = CollectorMetrics::register(&mut metrics);
    let archive_metrics = crate::archive::store::ArchiveMetrics::default();
    archive_metrics.register(metrics.registry_mut());
    let teardowns = Teardowns::default();
    let (disc_tx, disc_rx) = watch::channel(None);
    let (collectors, archivers) = build_collectors(
        &args,
        &conn,
        &metrics,
        &sources,
        &teardowns,
        &disc_rx,
        &archive_metrics,
    )
    .await?;
    let state = AppState::new(metrics);
    let shutdown = CancellationToken::new();
    tokio::spawn(signal_shutdown(shutdown.clone()));
    let election = Election::start(&args, &conn, api_calls, &state)?;
    // Every replica follows the pause switch, leader or not, so a standby that takes over starts
    // paused if the leader was.
    state.expect(PAUSE_COMPONENT);
    let pause_task = tokio::spawn(conn.switch.clone().run(
        conn.client.clone(),
        conn.namespace.clone(),
        crate::engine::events::Publisher::new(conn.client.clone(), "sweeper", "Pause"),
        crate::engine::guard::WatchHealth {
            state: state.health.clone(),
            component: PAUSE_COMPONENT,
        },
        shutdown.clone(),
    ));
    let app = router(
        &state,
        &collectors,
        sources,
        &election,
        teardowns,
        conn.switch.clone(),
    );
    let server = {
        // A server that cannot bind (or fails) stops the process.
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let r = server::serve(args.http_addr, app, shutdown.clone()).await;
            shutdown.cancel();
            r
        })
    };
    let mut role = election.role.clone();
    let (lost, running) = match stand_by(&mut role, &state, &shutdown).await {
        Some(reason) => (Some(reason), Vec::new()),
        None if shutdown.is_cancelled() => (None, Vec::new()),
        None => {
            let mut running = start_leading(
                &args,
                &conn,
                &state,
                collectors,
                (disc_tx, disc_rx),
                &shutdown,
            );
            // Expired archive and audit records go while leading: every ttl/10 (at most every
            // 5 minutes), on the first archiver's client.
            if let Some(archiver) = archivers.first() {
                let every = (args.archive_ttl / 10).clamp(
                    std::time::Duration::from_secs(1),
                    std::time::Duration::from_secs(300),
                );
                running.push(tokio::spawn(
                    archiver.clone().expire_loop(every, shutdown.clone()),
                ));
            }
            // A record whose settle failed (refused while paused, a lost answer) is settled
            // again soon, not only before the next batch, which may never come.
            for archiver in &archivers {
                running.push(tokio::spawn(
                    archiver
                        .clone()
                        .settle_loop(std::time::Duration::from_secs(5), shutdown.clone()),
                ));
            }
            (lead(&mut role, &shutdown).await, running)
        }
    };
    if lost.is_some() {
        state.metrics.service.leader_is_leader.set(0);
    }
    // Stop everything, then release the lease (the fence closed already if it was lost).
    shutdown.cancel();
    state.set_all_unready();
    stop_within(running, STOP_GRACE, "collectors").await;
    pause_task.abort();
    election.stop().await;
    let served = match tokio::time::timeout(STOP_GRACE, server).await {
        Ok(joined) => joined.unwrap_or(Ok(())),
        Err(_) => {
            tracing::warn!("HTTP server did not stop in time; exiting anyway");
            Ok(())
        }
    };
    tracing::info!("sweeper stopped");
    if let Some(reason) = lost {
        return Err(RunError::LostLease(reason));
    }
    served.map_err(Into::into)
}

/// The readiness component of the pause switch: ready once it has been read.
const PAUSE_COMPONENT: &str = "pause-switch";

/// Each discovery refresh, as collectors receive it.
type Discovery = watch::Receiver<Option<Arc<DiscoveryReport>>>;

/// The Kubernetes connection every collector shares: one rate limit, and writes that pass the
/// leader-election fence. The service's own client (discovery, pause Events) is fenced by the
/// lease alone; each collector has its own client whose fence also carries its pause flag.
struct Connection {
    config: kube::Config,
    client: kube::Client,
    /// The service's client without kube's own retry, for discovery: kube retries a 503 up to
    /// 15 times with a backoff growing towards 1000 s, so one API group whose aggregated server
    /// is down would stall every discovery pass (readiness, new kinds) for minutes. Without it
    /// such a group is a failed group of this pass, asked again at the next refresh.
    discovery: kube::Client,
    fence: Fence,
    limit: client::LimitLayer,
    refused: prometheus_client::metrics::counter::Counter,
    switch: Switch,
    /// Sweeper's own namespace (pause switch, archive of cluster-scoped objects).
    namespace: String,
}

impl Connection {
    /// A collector's client and fence: the shared rate limit, the lease, and its pause switch.
    /// Fails rather than fall back to the shared client: that one has no pause flag, and a
    /// pause must never silently not apply.
    fn for_collector(&self, collector: &'static str) -> Result<(kube::Client, Fence), RunError> {
        let fence = self.fence.paused_by(self.switch.flag(collector));
        let client = client::build_client_with(
            self.config.clone(),
            &self.limit,
            fence.clone(),
            self.refused.clone(),
        )
        .map_err(RunError::Client)?;
        Ok((client, fence))
    }
}

async fn connect(
    args: &RunArgs,
    metrics: &Metrics,
    api_calls: ApiCallCounter,
) -> Result<Connection, RunError> {
    let config = kube::Config::infer()
        .await
        .map_err(|e| RunError::Client(kube::Error::InferConfig(e)))?;
    let settings = ClientSettings {
        qps: args.kube_api_qps,
        burst: args.kube_api_burst,
    };
    // Without leader election this process is the only writer by configuration: the fence stays
    // open. With it, the fence opens only while the lease is held (see engine::leader).
    let fence = if args.leader_elect {
        Fence::closed()
    } else {
        Fence::open()
    };
    let limit = client::LimitLayer::new(settings.qps, settings.burst, api_calls);
    let refused = metrics.service.leader_fenced_requests.clone();
    let client = client::build_client_with(config.clone(), &limit, fence.clone(), refused.clone())
        .map_err(RunError::Client)?;
    let mut no_retry = config.clone();
    no_retry.default_retry = false;
    let discovery = client::build_client_with(no_retry, &limit, fence.clone(), refused.clone())
        .map_err(RunError::Client)?;
    let namespace = if !args.namespace.is_empty() {
        args.namespace.clone()
    } else {
        crate::engine::leader::default_namespace()
            .unwrap_or_else(|| config.default_namespace.clone())
    };
    let version = client
        .apiserver_version()
        .await
        .map_err(RunError::Connect)?;
    tracing::info!(server = %version.git_version, qps = settings.qps, burst = settings.burst, "connected to the API server");
    Ok(Connection {
        config,
        client,
        discovery,
        fence,
        limit,
        refused,
        switch: Switch::new(metrics.service.paused.clone()),
        namespace,
    })
}

/// Every collector's metrics, registered whether or not it is enabled (dashboards see zeros, not
/// gaps), and read by /status.
#[derive(Clone)]
struct CollectorMetrics {
    cascade: CascadeMetrics,
    tenant: TenantMetrics,
    external: ExternalMetrics,
}

impl CollectorMetrics {
    fn register(metrics: &mut Metrics) -> Self {
        let m = CollectorMetrics {
            cascade: CascadeMetrics::default(),
            tenant: TenantMetrics::default(),
            external: ExternalMetrics::default(),
        };
        m.cascade.register(metrics.registry_mut());
        m.tenant.register(metrics.registry_mut());
        m.external.register(metrics.registry_mut());
        m
    }
}

/// The collectors the feature gates enable, built but not started.
async fn build_collectors(
    args: &RunArgs,
    conn: &Connection,
    metrics: &Metrics,
    sources: &CollectorMetrics,
    teardowns: &Teardowns,
    discovery: &Discovery,
    archive_metrics: &crate::archive::store::ArchiveMetrics,
) -> Result<
    (
        Vec<Box<dyn Collector>>,
        Vec<Arc<crate::archive::store::Archiver>>,
    ),
    RunError,
> {
    let invalid_objects = metrics.service.invalid_objects.clone();
    let mut out: Vec<Box<dyn Collector>> = Vec::new();
    let archive_settings = crate::archive::Settings {
        mode: args.archive.clone(),
        ttl: args.archive_ttl,
        max_object_bytes: args.archive_max_object_bytes,
        namespace: conn.namespace.clone(),
    };
    let archiver = |client: &kube::Client, collector: &'static str| {
        args.archive.is_on().then(|| {
            Arc::new(crate::archive::store::Archiver::new(
                client.clone(),
                archive_settings.clone(),
                collector,
                archive_metrics.clone(),
            ))
        })
    };
    // Every archiving collector's archiver; the first also runs the expiry (on its client, under
    // its pause).
    let mut archivers: Vec<Arc<crate::archive::store::Archiver>> = Vec::new();
    if args.feature_gates.cascade_gc {
        let cfg = CascadeConfig {
            workers: args.cascade_workers as usize,
            dry_run: args.cascade_dry_run,
            sync_timeout: args.cascade_sync_timeout,
            ..Default::default()
        };
        let (client, fence) = conn.for_collector("cascade")?;
        let cfg = CascadeConfig { fence, ..cfg };
        let archive = archiver(&client, "cascade");
        archivers.extend(archive.clone());
        let batcher = archive
            .map(|a| crate::archive::batch::Batcher::start(a, args.cascade_workers as usize));
        out.push(Box::new(crate::cascade::collector::CascadeCollector::new(
            client,
            cfg,
            sources.cascade.clone(),
            batcher,
        )));
    }
    if args.feature_gates.tenant_gc {
        let settings = crate::tenant::teardown::TeardownSettings {
            strategy: args.tenant_gc_strategy,
            scan_kinds: args.tenant_scan_kinds.clone(),
            dry_run: args.tenant_dry_run,
            delete_concurrency: args.tenant_delete_concurrency as usize,
            archive: None,
        };
        let (client, fence) = conn.for_collector("tenant")?;
        let archive = archiver(&client, "tenant");
        archivers.extend(archive.clone());
        let settings = crate::tenant::teardown::TeardownSettings {
            archive,
            ..settings
        };
        out.push(Box::new(crate::tenant::controller::TenantCollector::new(
            client,
            settings,
            sources.tenant.clone(),
            discovery.clone(),
            teardowns.clone(),
            invalid_objects.clone(),
            fence,
        )));
    }
    if args.feature_gates.external_resource_gc {
        // AWS calls pass the same fence as the collector's Kubernetes writes.
        let (client, fence) = conn.for_collector("external")?;
        // Its audit records expire too, even with no archiving collector (`--archive=none`, or
        // the external collector alone): then an archiver of its own runs the expiry only.
        if archivers.is_empty() {
            archivers.push(Arc::new(crate::archive::store::Archiver::new(
                client.clone(),
                archive_settings.clone(),
                "external",
                archive_metrics.clone(),
            )));
        }
        let gate = fence.clone();
        // sweeper's own configuration is only the base (endpoint, default region, its own
        // credentials): each cluster gets a session of its own region and identity.
        let sessions = Arc::new(sweeper_services::aws::session::SessionCache::new(
            sweeper_services::aws::load_config().await,
            Some(sweeper_services::aws::gate::Gate(Arc::new(move || {
                gate.permits()
            }))),
        ));
        let ctx = crate::external::controller::ExternalCtx::new(
            client,
            sessions,
            sources.external.clone(),
            args.feature_gates.alternative_gc_strategy,
            invalid_objects,
        )
        .with_selector(args.external_gc_selector.clone())
        .with_ebs_snapshot(args.external_ebs_snapshot)
        .with_dry_run(args.external_dry_run)
        .with_audit_ttl(args.archive_ttl)
        .with_capa_namespace(args.capa_namespace.clone())
        .with_concurrency(args.external_concurrency);
        out.push(Box::new(
            crate::external::controller::ExternalCollector::new(ctx, teardowns.clone(), fence),
        ));
    }
    Ok((out, archivers))
}

/// Leader election, when on: the elector runs on its own unthrottled, unfenced client (a busy
/// collector cannot starve renewals) and is stopped only after the collectors, so the lease is
/// released when nothing acts any more.
struct Election {
    role: watch::Receiver<Role>,
    /// Without leader election nothing ever changes the role, but the sender must live as long
    /// as the receiver: a closed channel reads as "stop leading".
    _fixed_role: Option<watch::Sender<Role>>,
    task: Option<JoinHandle<()>>,
    stop: CancellationToken,
    enabled: bool,
    identity: Option<String>,
}

impl Election {
    fn start(
        args: &RunArgs,
        conn: &Connection,
        api_calls: ApiCallCounter,
        state: &AppState,
    ) -> Result<Election, RunError> {
        let (role_tx, role) = watch::channel(if args.leader_elect {
            Role::Starting
        } else {
            Role::Leading
        });
        let stop = CancellationToken::new();
        let mut election = Election {
            role,
            _fixed_role: None,
            task: None,
            stop: stop.clone(),
            enabled: args.leader_elect,
            identity: None,
        };
        if !args.leader_elect {
            election._fixed_role = Some(role_tx);
            return Ok(election);
        }
        let cfg = args.leader_config();
        let le_client = client::build_client(
            conn.config.clone(),
            &ClientSettings { qps: 0.0, burst: 1 },
            api_calls,
            Fence::open(),
            Default::default(),
        )
        .map_err(RunError::Client)?;
        state.expect("leader-election");
        tracing::info!(lease = %format!("{}/{}", cfg.namespace, cfg.lease_name), identity = %cfg.identity, "leader election on");
        election.identity = Some(cfg.identity.clone());
        election.task = Some(tokio::spawn(
            Elector::new(le_client, cfg, conn.fence.clone()).run(role_tx, stop),
        ));
        Ok(election)
    }

    async fn stop(self) {
        self.stop.cancel();
        if let Some(task) = self.task {
            let _ = task.await;
        }
    }
}

/// The HTTP routes: health, metrics, /status and every collector's queries.
fn router(
    state: &AppState,
    collectors: &[Box<dyn Collector>],
    sources: CollectorMetrics,
    election: &Election,
    teardowns: Teardowns,
    pause: Switch,
) -> axum::Router {
    let status = crate::status::StatusSources {
        app: state.clone(),
        cascade: sources.cascade,
        tenant: sources.tenant,
        external: sources.external,
        leader: crate::status::LeaderSource {
            enabled: election.enabled,
            identity: election.identity.clone(),
            role: election.role.clone(),
        },
        teardowns,
        pause,
    };
    collectors.iter().filter_map(|c| c.routes()).fold(
        server::router(state.clone()).merge(crate::status::router(status)),
        axum::Router::merge,
    )
}

/// Stands by until this replica leads (at once without leader election). Returns the reason if
/// the lease was lost first; `None` when leading or shutting down.
async fn stand_by(
    role: &mut watch::Receiver<Role>,
    state: &AppState,
    shutdown: &CancellationToken,
) -> Option<String> {
    loop {
        let current = role.borrow_and_update().clone();
        match current {
            Role::Leading => return None,
            Role::Lost { reason } => return Some(reason),
            Role::Starting => {}
            Role::Standby { .. } => state.set_ready("leader-election", true),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            changed = role.changed() => if changed.is_err() { return None },
        }
    }
}

/// Starts discovery and every collector.
fn start_leading(
    args: &RunArgs,
    conn: &Connection,
    state: &AppState,
    collectors: Vec<Box<dyn Collector>>,
    (disc_tx, disc_rx): (watch::Sender<Option<Arc<DiscoveryReport>>>, Discovery),
    shutdown: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    state.metrics.service.leader_is_leader.set(1);
    if args.leader_elect {
        state.set_ready("leader-election", true);
    }
    state.expect("discovery");
    let mut running = vec![tokio::spawn(discovery::refresh_loop(
        conn.discovery.clone(),
        state.health.clone(),
        state.metrics.clone(),
        args.discovery_interval,
        disc_tx,
        shutdown.clone(),
    ))];
    let env = RunEnv {
        discovery: disc_rx,
        state: state.health.clone(),
        shutdown: shutdown.clone(),
    };
    for c in collectors {
        c.components().into_iter().for_each(|n| state.expect(n));
        tracing::info!(collector = c.name(), "starting");
        running.push(tokio::spawn(c.run(env.clone())));
    }
    running
}

/// Leads until shutdown (None) or until the lease is lost (its reason).
async fn lead(role: &mut watch::Receiver<Role>, shutdown: &CancellationToken) -> Option<String> {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            changed = role.changed() => {
                if changed.is_err() {
                    return None;
                }
                if let Role::Lost { reason } = role.borrow_and_update().clone() {
                    return Some(reason);
                }
            }
        }
    }
}

/// How long stopping collectors (and then the HTTP server) may take after SIGTERM before they
/// are aborted. Every teardown is idempotent and re-derived from the world, so aborting one
/// mid-pass loses nothing. Twice this plus the Lease release stays well inside the default
/// `terminationGracePeriodSeconds` (30 s): the process always exits before the kubelet's SIGKILL,
/// whatever state a watch or a reconcile is in.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits for `tasks` to end, at most `grace`; aborts the rest.
async fn stop_within(
    tasks: Vec<tokio::task::JoinHandle<()>>,
    grace: std::time::Duration,
    what: &str,
) {
    let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
    if tokio::time::timeout(grace, futures::future::join_all(tasks))
        .await
        .is_err()
    {
        tracing::warn!(
            grace_seconds = grace.as_secs(),
            "{what} did not stop in time; aborting them"
        );
        aborts.iter().for_each(|a| a.abort());
    }
}

/// Cancels `token` on SIGTERM (Kubernetes' stop signal) or Ctrl-C.
async fn signal_shutdown(token: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
                    _ = tokio::signal::ctrl_c() => tracing::info!("interrupt received, shutting down"),
                    _ = token.cancelled() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot install the SIGTERM handler; only Ctrl-C stops sweeper");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    token.cancel();
}
