//! `sweeper run`: connect, start the HTTP server, keep discovery fresh, run the enabled
//! collectors, and shut down cleanly on SIGTERM / Ctrl-C.

use crate::cascade::context::CascadeConfig;
use crate::cascade::metrics::CascadeMetrics;
use crate::cli::RunArgs;
use crate::engine::client::{self, ApiCallCounter, ClientSettings};
use crate::engine::discovery::{self, DiscoveryReport};
use crate::engine::leader::{Elector, Fence, Role};
use crate::metrics::{GroupLabels, Metrics};
use crate::server::{self, AppState};
use std::sync::Arc;
use tokio::sync::watch;
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

type Collector = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

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
    let cascade_metrics = CascadeMetrics::default();
    cascade_metrics.register(metrics.registry_mut());
    let tenant_metrics = crate::tenant::metrics::TenantMetrics::default();
    tenant_metrics.register(metrics.registry_mut());
    let external_metrics = crate::external::metrics::ExternalMetrics::default();
    external_metrics.register(metrics.registry_mut());
    let fenced = metrics.service.leader_fenced_requests.clone();
    let is_leader = metrics.service.leader_is_leader.clone();

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
    let client = client::build_client(
        config.clone(),
        &settings,
        api_calls.clone(),
        fence.clone(),
        fenced,
    )
    .map_err(RunError::Client)?;
    let version = client
        .apiserver_version()
        .await
        .map_err(RunError::Connect)?;
    tracing::info!(server = %version.git_version, qps = settings.qps, burst = settings.burst, "connected to the API server");

    let state = AppState::new(metrics);
    let shutdown = CancellationToken::new();
    tokio::spawn(signal_shutdown(shutdown.clone()));

    // Leader election runs on its own unthrottled, unfenced client, and is stopped only after the
    // collectors have stopped, so the lease is released when nothing acts any more.
    let elector_stop = CancellationToken::new();
    let (role_tx, mut role_rx) = watch::channel(if args.leader_elect {
        Role::Starting
    } else {
        Role::Leading
    });
    let leader_cfg = args.leader_elect.then(|| args.leader_config());
    let elector = match &leader_cfg {
        Some(cfg) => {
            let le_client = client::build_client(
                config,
                &ClientSettings { qps: 0.0, burst: 1 },
                api_calls,
                Fence::open(),
                Default::default(),
            )
            .map_err(RunError::Client)?;
            state.expect("leader-election");
            tracing::info!(lease = %format!("{}/{}", cfg.namespace, cfg.lease_name), identity = %cfg.identity, "leader election on");
            Some(tokio::spawn(
                Elector::new(le_client, cfg.clone(), fence.clone())
                    .run(role_tx, elector_stop.clone()),
            ))
        }
        None => None,
    };

    let (disc_tx, disc_rx) = watch::channel(None);
    let teardowns = crate::engine::progress::Teardowns::default();
    let leader_status = crate::status::LeaderSource {
        enabled: args.leader_elect,
        identity: leader_cfg.as_ref().map(|c| c.identity.clone()),
        role: role_rx.clone(),
    };
    let mut app =
        server::router(state.clone()).merge(crate::status::router(crate::status::StatusSources {
            app: state.clone(),
            cascade: cascade_metrics.clone(),
            tenant: tenant_metrics.clone(),
            external: external_metrics.clone(),
            leader: leader_status,
            teardowns: teardowns.clone(),
        }));
    // Collectors are built now (their query routes must be in the router) but started only once
    // this replica leads.
    let mut components: Vec<&'static str> = vec!["discovery"];
    let mut pending: Vec<Collector> = Vec::new();
    if args.feature_gates.cascade_gc {
        let cfg = CascadeConfig {
            workers: args.cascade_workers as usize,
            dry_run: args.cascade_dry_run,
            sync_timeout: args.cascade_sync_timeout,
            ..Default::default()
        };
        let (ctx, absent_rx) =
            crate::cascade::collector::context(client.clone(), cfg, cascade_metrics);
        app = app.merge(crate::cascade::query::router(ctx.clone()));
        components.push("cascade");
        pending.push(Box::pin(crate::cascade::collector::run(
            ctx,
            absent_rx,
            disc_rx.clone(),
            state.clone(),
            shutdown.clone(),
        )));
    }

    if args.feature_gates.tenant_gc {
        let settings = crate::tenant::teardown::TeardownSettings {
            strategy: args.tenant_gc_strategy,
            scan_kinds: args.tenant_scan_kinds.clone(),
            dry_run: args.tenant_dry_run,
            delete_concurrency: args.tenant_delete_concurrency as usize,
        };
        let ctx = Arc::new(crate::tenant::controller::TenantCtx::new(
            client.clone(),
            settings,
            tenant_metrics,
            disc_rx.clone(),
            teardowns.clone(),
            state.metrics.service.invalid_objects.clone(),
        ));
        components.push(crate::tenant::controller::COMPONENT);
        pending.push(Box::pin(crate::tenant::controller::run(
            ctx,
            state.clone(),
            shutdown.clone(),
        )));
    }

    if args.feature_gates.external_resource_gc {
        use crate::api::capa::{AWSCluster, AWSManagedControlPlane};
        use crate::external::controller::{self as ext, ExternalCtx};
        let gate_fence = fence.clone();
        let aws = sweeper_services::aws::teardown::AwsClients::gated(
            &sweeper_services::aws::load_config().await,
            sweeper_services::aws::gate::Gate(Arc::new(move || gate_fence.permits())),
        );
        let ctx = Arc::new(ExternalCtx::new(
            client.clone(),
            aws,
            external_metrics,
            args.feature_gates.alternative_gc_strategy,
            teardowns,
            state.metrics.service.invalid_objects.clone(),
        ));
        use ext::GcKind;
        components.extend([AWSCluster::COMPONENT, AWSManagedControlPlane::COMPONENT]);
        pending.push(Box::pin(ext::run::<AWSCluster>(
            ctx.clone(),
            state.clone(),
            shutdown.clone(),
        )));
        pending.push(Box::pin(ext::run::<AWSManagedControlPlane>(
            ctx,
            state.clone(),
            shutdown.clone(),
        )));
    }

    // A server that cannot bind (or fails) stops the process, as before leader election.
    let server = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let r = server::serve(args.http_addr, app, shutdown.clone()).await;
            shutdown.cancel();
            r
        })
    };

    // Stand by until leading (at once without leader election).
    let mut lost = loop {
        let role = role_rx.borrow_and_update().clone();
        match role {
            Role::Leading => break None,
            Role::Lost { reason } => break Some(reason),
            Role::Starting => {}
            Role::Standby { .. } => state.set_ready("leader-election", true),
        }
        tokio::select! {
            _ = shutdown.cancelled() => break None,
            changed = role_rx.changed() => if changed.is_err() { break None },
        }
    };

    let mut running = Vec::new();
    if lost.is_none() && !shutdown.is_cancelled() {
        is_leader.set(1);
        if args.leader_elect {
            state.set_ready("leader-election", true);
        }
        for c in &components {
            state.expect(c);
        }
        running.push(tokio::spawn(discovery_loop(
            client.clone(),
            state.clone(),
            args.discovery_interval,
            disc_tx,
            shutdown.clone(),
        )));
        running.extend(pending.into_iter().map(tokio::spawn));
        // Lead until shutdown or until the lease is lost.
        lost = loop {
            tokio::select! {
                _ = shutdown.cancelled() => break None,
                changed = role_rx.changed() => {
                    if changed.is_err() {
                        break None;
                    }
                    if let Role::Lost { reason } = role_rx.borrow_and_update().clone() {
                        break Some(reason);
                    }
                }
            }
        };
    }
    if lost.is_some() {
        is_leader.set(0);
    }
    // Stop everything, then release the lease (the fence closed already if it was lost).
    shutdown.cancel();
    state.set_all_unready();
    stop_within(running, STOP_GRACE, "collectors").await;
    elector_stop.cancel();
    if let Some(e) = elector {
        let _ = e.await;
    }
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

/// Refreshes discovery every `interval` and publishes each report. Readiness means "connected
/// and discovered at least once".
async fn discovery_loop(
    client: kube::Client,
    state: AppState,
    interval: std::time::Duration,
    publish: watch::Sender<Option<Arc<DiscoveryReport>>>,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        match discovery::discover_deletable(&client).await {
            Ok(report) => {
                record(&state, &report);
                let changed = publish
                    .borrow()
                    .as_ref()
                    .is_none_or(|old| !same_resources(old, &report));
                if changed {
                    publish.send_replace(Some(Arc::new(report)));
                }
                state.set_ready("discovery", true);
            }
            Err(e) => tracing::warn!(error = %e, "discovery failed; retrying at the next refresh"),
        }
    }
}

/// Whether two reports say the same thing (same resources, same failed groups): an unchanged
/// report is not republished, so watches are not reconciled for nothing.
fn same_resources(a: &DiscoveryReport, b: &DiscoveryReport) -> bool {
    let key = |r: &DiscoveryReport| {
        let mut v: Vec<String> = r
            .resources
            .iter()
            .map(|d| format!("{}/{}", d.gvk_string(), d.resource.plural))
            .chain(
                r.failed
                    .iter()
                    .map(|f| format!("failed:{}", f.group_version)),
            )
            .collect();
        v.sort();
        v
    };
    key(a) == key(b)
}

fn record(state: &AppState, report: &DiscoveryReport) {
    let m = &state.metrics.service;
    m.discovered_resources.set(report.resources.len() as i64);
    m.discovery_refreshes.inc();
    for failed in &report.failed {
        m.discovery_failures
            .get_or_create(&GroupLabels {
                group: failed.group_version.clone(),
            })
            .inc();
    }
    let namespaced = report.resources.iter().filter(|r| r.namespaced).count();
    tracing::debug!(
        resources = report.resources.len(),
        namespaced,
        cluster_scoped = report.resources.len() - namespaced,
        failed_groups = report.failed.len(),
        "discovered deletable resources"
    );
}
