//! `sweeper run`: connect, start the HTTP server, keep discovery fresh, run the enabled
//! collectors, and shut down cleanly on SIGTERM / Ctrl-C.

use crate::cascade::context::CascadeConfig;
use crate::cascade::metrics::CascadeMetrics;
use crate::cli::RunArgs;
use crate::engine::client::{self, ApiCallCounter, ClientSettings};
use crate::engine::discovery::{self, DiscoveryReport};
use crate::metrics::{GroupLabels, Metrics};
use crate::server::{self, AppState};
use std::sync::Arc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot build a Kubernetes client from kubeconfig or in-cluster config: {0}")]
    Client(#[source] kube::Error),
    #[error("cannot reach the API server: {0}")]
    Connect(#[source] kube::Error),
    #[error(transparent)]
    Server(#[from] server::ServerError),
}

pub async fn run(args: RunArgs) -> Result<(), RunError> {
    tracing::info!(feature_gates = %args.feature_gates, "starting sweeper {}", env!("CARGO_PKG_VERSION"));
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

    let config = kube::Config::infer()
        .await
        .map_err(|e| RunError::Client(kube::Error::InferConfig(e)))?;
    let settings = ClientSettings {
        qps: args.kube_api_qps,
        burst: args.kube_api_burst,
    };
    let client = client::build_client(config, &settings, api_calls).map_err(RunError::Client)?;
    let version = client
        .apiserver_version()
        .await
        .map_err(RunError::Connect)?;
    tracing::info!(server = %version.git_version, qps = settings.qps, burst = settings.burst, "connected to the API server");

    let state = AppState::new(metrics);
    state.expect("discovery");
    let shutdown = CancellationToken::new();
    tokio::spawn(signal_shutdown(shutdown.clone()));

    let (disc_tx, disc_rx) = watch::channel(None);
    let discovery = tokio::spawn(discovery_loop(
        client.clone(),
        state.clone(),
        args.discovery_interval,
        disc_tx,
        shutdown.clone(),
    ));

    let mut app =
        server::router(state.clone()).merge(crate::status::router(crate::status::StatusSources {
            app: state.clone(),
            cascade: cascade_metrics.clone(),
            tenant: tenant_metrics.clone(),
            external: external_metrics.clone(),
        }));
    let mut collectors = Vec::new();
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
        state.expect("cascade");
        collectors.push(tokio::spawn(crate::cascade::collector::run(
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
        ));
        collectors.push(tokio::spawn(crate::tenant::controller::run(
            ctx,
            shutdown.clone(),
        )));
    }

    if args.feature_gates.external_resource_gc {
        use crate::api::capa::{AWSCluster, AWSManagedControlPlane};
        use crate::external::controller::{self as ext, ExternalCtx};
        let aws = sweeper_services::aws::teardown::AwsClients::new(
            &sweeper_services::aws::load_config().await,
        );
        let ctx = Arc::new(ExternalCtx::new(
            client.clone(),
            aws,
            external_metrics,
            args.feature_gates.alternative_gc_strategy,
        ));
        collectors.push(tokio::spawn(ext::run::<AWSCluster>(
            ctx.clone(),
            shutdown.clone(),
        )));
        collectors.push(tokio::spawn(ext::run::<AWSManagedControlPlane>(
            ctx,
            shutdown.clone(),
        )));
    }

    let served = server::serve(args.http_addr, app, shutdown.clone()).await;
    // The server only returns on shutdown or failure; either way stop everything else.
    shutdown.cancel();
    state.set_all_unready();
    let _ = discovery.await;
    for c in collectors {
        let _ = c.await;
    }
    tracing::info!("sweeper stopped");
    served.map_err(Into::into)
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
