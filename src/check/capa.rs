//! Which step of the hand-over from CAPA's own external resource gc to sweeper's external collector
//! the management cluster is at (docs/capa.md): 1, sweeper in dry run beside CAPA's gc; 2, CAPA's
//! gate off; 3, sweeper live. CAPA's gc on while sweeper deletes fails.
//!
//! Both would delete the same load balancers and security groups, each on its own schedule, and
//! CAPA's would do it without sweeper's opt-outs, dry run, audit record or Cluster API contract.
//! CAPA turns it on with its manager's `--feature-gates=…,ExternalResourceGC=true` (clusterctl
//! fills that from the `EXTERNAL_RESOURCE_GC` variable at install time, so the flag is what the
//! running manager has; the gate is Beta and on by default, so a manager that does not mention it
//! runs it). The Deployment is found by clusterctl's provider label, else by CAPA's
//! own name.

use super::{Config, Line, forbidden, kube_message};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};

const CATEGORY: &str = "capa";
/// The label clusterctl puts on everything of the AWS infrastructure provider.
pub const PROVIDER_LABEL: &str = "cluster.x-k8s.io/provider=infrastructure-aws";
/// CAPA's manager Deployment, as its release manifests name it.
pub const DEPLOYMENT: &str = "capa-controller-manager";
const GATE: &str = "ExternalResourceGC";
/// The exact change for a clusterctl-installed CAPA: the variable for the next `clusterctl init`
/// or `upgrade`, and the running manager's flag (docs/capa.md, "Handing over").
const TURN_OFF: &str = "step 2: turn CAPA's gate off: EXTERNAL_RESOURCE_GC=false for clusterctl (CAPA v2.9+), and on the \
     running manager --feature-gates=…,ExternalResourceGC=false (docs/capa.md#handing-over-from-capas-gc-to-sweeper)";
const GO_LIVE: &str = "step 3: turn sweeper live: helm upgrade … --reuse-values --set external.dryRun=false \
     (or drop SWEEPER_EXTERNAL_DRY_RUN)";

/// What CAPA's Deployment says of its gate: the value given in a container's `--feature-gates`
/// (args or command) or in its `EXTERNAL_RESOURCE_GC` env var, if any.
pub fn gate_value(d: &Deployment) -> Option<bool> {
    let spec = d.spec.as_ref()?.template.spec.as_ref()?;
    let mut found = None;
    for c in &spec.containers {
        let words = c.command.iter().flatten().chain(c.args.iter().flatten());
        let mut prev_was_flag = false;
        for w in words {
            let value = if let Some(v) = w.strip_prefix("--feature-gates=") {
                Some(v)
            } else if prev_was_flag {
                Some(w.as_str())
            } else {
                None
            };
            prev_was_flag = w == "--feature-gates";
            for entry in value.into_iter().flat_map(|v| v.split(',')) {
                if let Some((name, on)) = entry.split_once('=')
                    && name.trim() == GATE
                {
                    found = Some(on.trim().eq_ignore_ascii_case("true"));
                }
            }
        }
        for e in c.env.iter().flatten() {
            if e.name == "EXTERNAL_RESOURCE_GC"
                && let Some(v) = &e.value
            {
                // The flag, when given, is what the manager reads; the variable only fills it.
                found = found.or(Some(v.trim().eq_ignore_ascii_case("true")));
            }
        }
    }
    found
}

/// The line, from CAPA's Deployment (None: not found) and whether sweeper's external collector
/// runs in dry run: which step of the hand-over the management cluster is at.
/// 1. sweeper in dry run beside CAPA's gc (gate on): read the plans;
/// 2. CAPA's gate off (sweeper still in dry run: nobody deletes phase-2 resources meanwhile);
/// 3. sweeper live, CAPA's gate off: handed over.
///
/// Sweeper live with CAPA's gate on fails: two collectors delete the same resources.
pub fn judge(namespace: &str, d: Option<&Deployment>, dry_run: bool) -> Line {
    let Some(d) = d else {
        return Line::warn(
            CATEGORY,
            format!(
                "CAPA's Deployment was not found in {namespace}: cannot tell whether CAPA's own external resource gc is on, so not which hand-over step this is"
            ),
            "set --capa-namespace (Helm: external.capaNamespace) to CAPA's namespace",
        );
    };
    let name = format!(
        "{namespace}/{}",
        d.metadata.name.as_deref().unwrap_or(DEPLOYMENT)
    );
    // The gate is Beta in CAPA and on by default: a manager that does not mention it runs it.
    let (on, how) = match gate_value(d) {
        Some(on) => (on, format!("{name}: {GATE}={on}")),
        None => (
            true,
            format!("{name}: {GATE} not set; it is Beta and on by default"),
        ),
    };
    match (on, dry_run) {
        (true, true) => Line {
            // Next step, once the plans are what you expect.
            hint: Some(TURN_OFF.into()),
            ..Line::pass(
                CATEGORY,
                format!(
                    "hand-over step 1 of 3: sweeper plans in dry run beside CAPA's own gc ({how}); read the plans (sweeper status, the clusters' Events, sweeper gc plan)"
                ),
            )
        },
        (false, true) => Line::warn(
            CATEGORY,
            format!(
                "hand-over step 2 of 3: CAPA's own gc is off ({how}) and sweeper is still in dry run: nobody deletes a deleted cluster's load balancers now, and its VPC deletion waits on them"
            ),
            GO_LIVE,
        ),
        (false, false) => Line::pass(
            CATEGORY,
            format!(
                "hand-over step 3 of 3, done: CAPA's own gc is off ({how}) and sweeper deletes"
            ),
        ),
        (true, false) => Line::fail(
            CATEGORY,
            format!(
                "CAPA's own external resource gc is on ({how}) and sweeper deletes: two collectors would delete the same resources"
            ),
            format!("{TURN_OFF}; or go back to step 1 (external.dryRun=true)"),
        ),
    }
}

/// CAPA's manager Deployment in `ns`: the one clusterctl's provider label marks, else the one
/// CAPA's release manifests name; None when neither exists. `sweeper check` and `sweeper
/// uninstall` both read CAPA's gate from it.
pub async fn find_deployment(
    client: &kube::Client,
    ns: &str,
) -> Result<Option<Deployment>, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let listed = api
        .list(&ListParams::default().labels(PROVIDER_LABEL))
        .await?;
    match listed.items.into_iter().next() {
        Some(d) => Ok(Some(d)),
        None => api.get_opt(DEPLOYMENT).await,
    }
}

pub async fn check(client: &kube::Client, cfg: &Config) -> Vec<Line> {
    let ns = &cfg.capa_namespace;
    match find_deployment(client, ns).await {
        Ok(d) => vec![judge(ns, d.as_ref(), cfg.external_dry_run)],
        Err(e) if forbidden(&e) => vec![Line::warn(
            CATEGORY,
            format!(
                "cannot read CAPA's Deployment in {ns}: {}",
                kube_message(&e)
            ),
            "sweeper's own role does not read Deployments (the chart's check.capaDeploymentRead grants it); run `sweeper check` as yourself to see CAPA's gate and the hand-over step",
        )],
        Err(e) => vec![Line::warn(
            CATEGORY,
            format!(
                "cannot read CAPA's Deployment in {ns}: {}",
                kube_message(&e)
            ),
            "retry; the API server answered with an error",
        )],
    }
}
