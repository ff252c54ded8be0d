//! `sweeper run` only wires: build the clients and the enabled collectors, serve HTTP, wait for
//! leadership, lead (discovery plus every collector) until shut down or the lease is lost, then
//! stop in order. What each collector does lives in its own module behind collector::built.

use crate::archive::hub::ArchiveHub;
use crate::collector::built::{Collector, RunEnv};
use crate::collector::{BuildEnv, Registered};
use crate::config::{FeatureGates, RunConfig};
use crate::engine::client::{self, ApiCallCounter, ClientSettings};
use crate::engine::discovery::{self, DiscoveryReport};
use crate::engine::leader::{Elector, Fence, Role};
use crate::engine::pause::Switch;
use crate::engine::teardown_registry::TeardownRegistry;
use crate::external::commands::scan::metrics::ScanMetrics;
use crate::external::commands::scan::schedule::ScanSchedule;
use crate::external::commands::scan::status::LastScan;
use crate::metrics::Metrics;
use crate::server::{self, AppState};
use clap::Args;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("invalid configuration: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("cannot build a Kubernetes client from kubeconfig or in-cluster config: {0}")]
    Client(#[source] kube::Error),
    #[error("cannot reach the API server: {0}")]
    Connect(#[source] kube::Error),
    #[error(transparent)]
    Server(#[from] server::ServerError),
    #[error(transparent)]
    Pause(#[from] crate::engine::pause::SwitchError),
    /// The process exits non-zero so its pod restarts as a standby, like client-go's
    /// `OnStoppedLeading` (rebuilding every collector's state in place is not worth the risk).
    #[error("lost leadership: {0}")]
    LostLease(String),
}

pub async fn run(args: RunArgs) -> Result<(), RunError> {
    // Bad configuration fails before anything connects or starts.
    args.config.validate()?;
    tracing::info!(feature_gates = %args.feature_gates, leader_elect = args.config.leader_elect, "starting sweeper {}", env!("CARGO_PKG_VERSION"));
    let mut metrics = Metrics::new();
    let api_calls = ApiCallCounter::default();
    let (registered, archive_metrics, scan_metrics) =
        register_metrics(&mut metrics, api_calls.clone());
    let conn = connect(&args, &metrics, api_calls.clone()).await?;
    let parts = build(&args, &conn, &registered, &metrics, archive_metrics).await?;
    let state = AppState::new(metrics);
    let shutdown = CancellationToken::new();
    tokio::spawn(signal_shutdown(shutdown.clone()));
    let election = Election::start(&args, &conn, api_calls, &state, &parts.last_scan)?;
    // Every replica follows the pause switch, leader or not, so a standby that takes over starts
    // paused if the leader was.
    state.expect(PAUSE_COMPONENT);
    let pause_task = follow_pause(&conn, &state, &shutdown);
    let server = serve(
        &args, &conn, &state, &parts, registered, &election, &shutdown,
    )?;
    let mut role = election.role.clone();
    let (lost, running) = match stand_by(&mut role, &state, &shutdown).await {
        Some(reason) => (Some(reason), Vec::new()),
        None if shutdown.is_cancelled() => (None, Vec::new()),
        None => {
            let running = start_leading(&args, &conn, &state, parts, scan_metrics, &shutdown);
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
    let served = stop_server(server).await;
    tracing::info!("sweeper stopped");
    if let Some(reason) = lost {
        return Err(RunError::LostLease(reason));
    }
    served.map_err(Into::into)
}

/// What every replica builds before it knows whether it leads: the collectors (built, not
/// started), the archive, and what the leader's background work and `/status` share.
struct Parts {
    collectors: Vec<Named>,
    archive_hub: ArchiveHub,
    teardowns: TeardownRegistry,
    scan_schedule: Option<ScanSchedule>,
    last_scan: LastScan,
    discovery: (watch::Sender<Option<Arc<DiscoveryReport>>>, Discovery),
}

async fn build(
    args: &RunArgs,
    conn: &Connection,
    registered: &RegisteredCollectors,
    metrics: &Metrics,
    archive_metrics: crate::archive::store::ArchiveMetrics,
) -> Result<Parts, RunError> {
    let archive_hub = ArchiveHub::new(
        crate::archive::Settings {
            mode: args.config.archive.clone(),
            ttl: args.config.archive_ttl,
            max_object_bytes: args.config.archive_max_object_bytes,
            namespace: conn.namespace.clone(),
        },
        archive_metrics,
    );
    let teardowns = TeardownRegistry::default();
    let scan_schedule = ScanSchedule::from_config(&args.config, &conn.namespace);
    let last_scan = scan_schedule
        .as_ref()
        .map_or_else(LastScan::default, |s| LastScan::scheduled(s.interval));
    let (disc_tx, disc_rx) = watch::channel(None);
    let collectors = build_collectors(
        registered,
        args,
        conn,
        &teardowns,
        &disc_rx,
        metrics,
        &archive_hub,
    )
    .await?;
    Ok(Parts {
        collectors,
        archive_hub,
        teardowns,
        scan_schedule,
        last_scan,
        discovery: (disc_tx, disc_rx),
    })
}

/// Serves the HTTP port (health, metrics, status, the collectors' routes) until `shutdown`; a
/// server that cannot bind (or fails) stops the process.
fn serve(
    args: &RunArgs,
    conn: &Connection,
    state: &AppState,
    parts: &Parts,
    registered: RegisteredCollectors,
    election: &Election,
    shutdown: &CancellationToken,
) -> Result<JoinHandle<Result<(), server::ServerError>>, RunError> {
    let (cert, reviewer) = http_security(args, conn)?;
    let app = router(
        state,
        &parts.collectors,
        registered.into_iter().map(|(_, r)| r).collect(),
        election,
        parts.teardowns.clone(),
        conn.switch.clone(),
        parts.last_scan.clone(),
        reviewer,
    );
    if let Some(cert) = &cert {
        tokio::spawn(server::tls::watch(cert.clone(), shutdown.clone()));
    }
    let shutdown = shutdown.clone();
    let addr = args.config.http_addr;
    Ok(tokio::spawn(async move {
        let r = server::serve(addr, app, cert, shutdown.clone()).await;
        shutdown.cancel();
        r
    }))
}

/// The collectors the feature gates enable, built (each with its own client and fence) but not
/// started, each under its spec's name.
async fn build_collectors(
    registered: &RegisteredCollectors,
    args: &RunArgs,
    conn: &Connection,
    teardowns: &TeardownRegistry,
    discovery: &watch::Receiver<Option<Arc<DiscoveryReport>>>,
    metrics: &Metrics,
    archive_hub: &ArchiveHub,
) -> Result<Vec<Named>, RunError> {
    // The one read of the failpoint variable, at start-up: handed down as a value from here.
    let failpoints = crate::engine::failpoint::Failpoints::from_env();
    let mut collectors: Vec<Named> = Vec::new();
    for (spec, reg) in registered {
        if !args.feature_gates.enabled(spec.gate().name) {
            continue;
        }
        let (client, fence) = conn.for_collector(spec.name())?;
        collectors.push((
            spec.name(),
            reg.build(BuildEnv {
                config: &args.config,
                sweeper_namespace: &conn.namespace,
                gates: &args.feature_gates,
                client,
                fence,
                teardowns,
                discovery,
                invalid_objects: &metrics.service.invalid_objects,
                archive_hub,
                failpoints: &failpoints,
            })
            .await,
        ));
    }
    Ok(collectors)
}

/// The pause switch's watch, reporting its health as [`PAUSE_COMPONENT`].
fn follow_pause(
    conn: &Connection,
    state: &AppState,
    shutdown: &CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(conn.switch.clone().run(
        conn.client.clone(),
        conn.namespace.clone(),
        crate::engine::events::Publisher::new(conn.client.clone(), "sweeper", "Pause"),
        crate::engine::guard::WatchHealth {
            state: state.health.clone(),
            component: PAUSE_COMPONENT,
        },
        shutdown.clone(),
    ))
}

/// Waits for the HTTP server to stop, at most [`STOP_GRACE`]; its own failure is the result.
async fn stop_server(
    server: JoinHandle<Result<(), server::ServerError>>,
) -> Result<(), server::ServerError> {
    match tokio::time::timeout(STOP_GRACE, server).await {
        Ok(joined) => joined.unwrap_or(Ok(())),
        Err(_) => {
            tracing::warn!("HTTP server did not stop in time; exiting anyway");
            Ok(())
        }
    }
}

/// A built collector under its spec's name (the one name a collector has).
type Named = (&'static str, Box<dyn Collector>);

/// Every collector with its metrics registered, in the list's order.
pub type RegisteredCollectors = Vec<(
    &'static dyn crate::collector::CollectorDescriptor,
    Arc<dyn Registered>,
)>;

/// Registers every metric family sweeper exports beyond the service's own (which
/// [`Metrics::new`] holds): the API call counter, every collector's (enabled or not: dashboards
/// see zeros, not gaps), the archive's, the leak scan's (its schedule on or off). Public so a
/// test can check the dashboard and the alerts against the families really registered.
pub fn register_metrics(
    metrics: &mut Metrics,
    api_calls: ApiCallCounter,
) -> (
    RegisteredCollectors,
    crate::archive::store::ArchiveMetrics,
    ScanMetrics,
) {
    metrics.registry_mut().register(
        "kube_api_calls",
        "Requests sent to the Kubernetes API server, by verb",
        api_calls,
    );
    let registered = crate::catalog::ALL
        .iter()
        .map(|spec| (*spec, spec.register(metrics.registry_mut())))
        .collect();
    let archive_metrics = crate::archive::store::ArchiveMetrics::default();
    archive_metrics.register(metrics.registry_mut());
    let scan_metrics = ScanMetrics::default();
    scan_metrics.register(metrics.registry_mut());
    (registered, archive_metrics, scan_metrics)
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
        let fence = self.fence.paused_by(self.switch.flag(collector)?);
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
        qps: args.config.kube_api_qps,
        burst: args.config.kube_api_burst,
    };
    // Without leader election this process is the only writer by configuration: the fence stays
    // open. With it, the fence opens only while the lease is held (see engine::leader).
    let fence = if args.config.leader_elect {
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
    // Discovery takes its calls from the same rate limit as the collectors, not a budget of its
    // own (decided for issue #52): --kube-api-qps is what this process promises the API server in
    // total, as kube-controller-manager's flag is read, and a second bucket would let it exceed
    // that. What made discovery costly was its number of calls, not whose budget paid for them:
    // aggregated discovery (engine::discovery) asks two a refresh, 0.07 qps at the default 30 s
    // interval and 1 qps at the tests' 2 s; group by group (servers before 1.26) about 30. And
    // the first discovery gates every collector's first pass, so a separate budget would not
    // bring the first delete forward.
    let discovery = client::build_client_with(no_retry, &limit, fence.clone(), refused.clone())
        .map_err(RunError::Client)?;
    let namespace = args.config.sweeper_namespace();
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
        switch: Switch::new(&crate::catalog::names(), metrics.service.paused.clone()),
        namespace,
    })
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
        last_scan: &LastScan,
    ) -> Result<Election, RunError> {
        let (role_tx, role) = watch::channel(if args.config.leader_elect {
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
            enabled: args.config.leader_elect,
            identity: None,
        };
        if !args.config.leader_elect {
            election._fixed_role = Some(role_tx);
            return Ok(election);
        }
        let cfg = args.config.leader_config();
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
        // The scheduled scan's state rides on the Lease, for `sweeper check` (check::scan).
        let elector = Elector::new(le_client, cfg, conn.fence.clone())
            .noting(crate::check::scan::publisher(last_scan.clone()));
        election.task = Some(tokio::spawn(elector.run(role_tx, stop)));
        Ok(election)
    }

    async fn stop(self) {
        self.stop.cancel();
        if let Some(task) = self.task {
            let _ = task.await;
        }
    }
}

/// The HTTP port's certificate and token reviewer; neither with `--http-insecure`.
type HttpSecurity = (
    Option<Arc<server::tls::Certificate>>,
    Option<server::auth::Reviewer>,
);

fn http_security(args: &RunArgs, conn: &Connection) -> Result<HttpSecurity, RunError> {
    let c = &args.config;
    if c.http_insecure {
        tracing::warn!(
            "--http-insecure: /metrics, /status and /graph are served to anyone, over plain HTTP"
        );
        return Ok((None, None));
    }
    let source = match (&c.http_tls_cert_file, &c.http_tls_key_file) {
        (Some(cert), Some(key)) => server::tls::CertSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        _ => server::tls::CertSource::SelfSigned,
    };
    let cert = server::tls::Certificate::load(source).map_err(server::ServerError::from)?;
    // Reviews write nothing: neither the lease's fence nor a pause may hold them back (a standby
    // answers scrapes too), and they do not count against the collectors' rate limit.
    let client = kube::Client::try_from(conn.config.clone()).map_err(RunError::Client)?;
    Ok((Some(cert), Some(server::auth::Reviewer::new(client))))
}

/// The HTTP routes: health, metrics, /status and every collector's queries; all but health
/// behind `reviewer` when there is one.
#[allow(clippy::too_many_arguments)]
fn router(
    state: &AppState,
    collectors: &[Named],
    registered: Vec<Arc<dyn Registered>>,
    election: &Election,
    teardowns: TeardownRegistry,
    pause: Switch,
    scan: LastScan,
    reviewer: Option<server::auth::Reviewer>,
) -> axum::Router {
    let status = crate::status::StatusSources {
        app: state.clone(),
        collectors: registered,
        leader: crate::status::LeaderSource {
            enabled: election.enabled,
            identity: election.identity.clone(),
            role: election.role.clone(),
        },
        teardowns,
        pause,
        scan,
    };
    let protected = collectors.iter().filter_map(|(_, c)| c.routes()).fold(
        server::metrics_router(state.clone()).merge(crate::status::router(status)),
        axum::Router::merge,
    );
    server::app(state.clone(), protected, reviewer)
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

/// Starts what only the leader runs: discovery, every collector, the archive's background work
/// (pending settles, retries, expiry), the oldest-teardown gauge and the leak scan.
fn start_leading(
    args: &RunArgs,
    conn: &Connection,
    state: &AppState,
    parts: Parts,
    scan_metrics: ScanMetrics,
    shutdown: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let mut running = start_collectors(
        args,
        conn,
        state,
        parts.collectors,
        parts.discovery,
        shutdown,
    );
    running.extend(parts.archive_hub.start(shutdown));
    running.push(tokio::spawn(report_oldest_teardowns(
        parts.teardowns,
        state.metrics.clone(),
        shutdown.clone(),
    )));
    // The leak scan, on the leader only (see external::commands::scan::schedule).
    if let Some(schedule) = parts.scan_schedule {
        running.push(tokio::spawn(schedule.run(
            conn.client.clone(),
            conn.fence.clone(),
            scan_metrics,
            parts.last_scan,
            shutdown.clone(),
        )));
    }
    running
}

/// Starts discovery and every collector.
fn start_collectors(
    args: &RunArgs,
    conn: &Connection,
    state: &AppState,
    collectors: Vec<Named>,
    (disc_tx, disc_rx): (watch::Sender<Option<Arc<DiscoveryReport>>>, Discovery),
    shutdown: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    state.metrics.service.leader_is_leader.set(1);
    if args.config.leader_elect {
        state.set_ready("leader-election", true);
    }
    state.expect("discovery");
    let refresh_discovery = discovery::RefreshNow::default();
    let mut running = vec![tokio::spawn(discovery::refresh_loop(
        conn.discovery.clone(),
        state.health.clone(),
        state.metrics.clone(),
        args.config.discovery_interval,
        refresh_discovery.clone(),
        disc_tx,
        shutdown.clone(),
    ))];
    // An enabled collector whose kind is not served (its CRD missing) is named, with its gate.
    let needs = crate::catalog::served_needs(collectors.iter().map(|(name, _)| *name));
    if !needs.is_empty() {
        state.expect(crate::engine::served::COMPONENT);
        // Its own Pod, not an object a collector acts on: the fence (and a pause) need not hold
        // this Event back.
        let pod_events = kube::Client::try_from(conn.config.clone())
            .ok()
            .and_then(crate::engine::served::PodEvents::of_this_pod);
        running.push(tokio::spawn(crate::engine::served::check(
            disc_rx.clone(),
            state.health.clone(),
            needs,
            pod_events,
            shutdown.clone(),
        )));
    }
    let env = RunEnv {
        discovery: disc_rx,
        refresh_discovery,
        state: state.health.clone(),
        shutdown: shutdown.clone(),
    };
    for (name, c) in collectors {
        c.components().into_iter().for_each(|n| state.expect(n));
        tracing::info!(collector = name, "starting");
        running.push(tokio::spawn(c.run(env.clone())));
    }
    running
}

/// Keeps `sweeper_teardown_oldest_seconds{collector}` current while leading (every 10 s: the
/// alert on it counts in hours).
async fn report_oldest_teardowns(
    teardowns: TeardownRegistry,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(10));
    loop {
        for name in crate::catalog::names() {
            let age = teardowns.oldest(name).as_secs();
            metrics
                .service
                .teardown_oldest_seconds
                .get_or_create(&crate::metrics::CollectorLabels {
                    collector: name.to_string(),
                })
                .set(i64::try_from(age).unwrap_or(i64::MAX));
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
    }
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

/// `--feature-gates` over every gate the collectors declare.
fn parse_gates(s: &str) -> Result<FeatureGates, String> {
    FeatureGates::parse(s, &crate::catalog::gates()).map_err(|e| e.to_string())
}
