//! CAPA's own external resource gc is off where sweeper's external collector is on.
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
const TURN_OFF: &str = "turn CAPA's off: EXTERNAL_RESOURCE_GC=false for clusterctl (CAPA v2.9+), i.e. \
     --feature-gates=…,ExternalResourceGC=false on its manager; or turn sweeper's external \
     collector off";

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

/// The line, from CAPA's Deployment (None: not found).
pub fn judge(namespace: &str, d: Option<&Deployment>) -> Line {
    let Some(d) = d else {
        return Line::warn(
            CATEGORY,
            format!(
                "CAPA's Deployment was not found in {namespace}: cannot tell whether CAPA's own external resource gc is on"
            ),
            "set --capa-namespace (Helm: external.capaNamespace) to CAPA's namespace",
        );
    };
    let name = format!(
        "{namespace}/{}",
        d.metadata.name.as_deref().unwrap_or(DEPLOYMENT)
    );
    match gate_value(d) {
        Some(true) => Line::fail(
            CATEGORY,
            format!(
                "CAPA's own external resource gc is on ({name}: {GATE}=true): two collectors would delete the same resources"
            ),
            TURN_OFF,
        ),
        Some(false) => Line::pass(
            CATEGORY,
            format!("CAPA's own external resource gc is off ({name}: {GATE}=false)"),
        ),
        // The gate is Beta in CAPA and on by default: a manager that does not mention it runs it.
        None => Line::fail(
            CATEGORY,
            format!(
                "CAPA's own external resource gc is on ({name}: {GATE} not set; it is Beta and on by default)"
            ),
            TURN_OFF,
        ),
    }
}

pub async fn check(client: &kube::Client, cfg: &Config) -> Vec<Line> {
    let ns = &cfg.capa_namespace;
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let found = match api
        .list(&ListParams::default().labels(PROVIDER_LABEL))
        .await
    {
        Ok(list) if !list.items.is_empty() => Ok(list.items.into_iter().next()),
        Ok(_) => api.get_opt(DEPLOYMENT).await,
        Err(e) => Err(e),
    };
    match found {
        Ok(d) => vec![judge(ns, d.as_ref())],
        Err(e) if forbidden(&e) => vec![Line::warn(
            CATEGORY,
            format!(
                "cannot read CAPA's Deployment in {ns}: {}",
                kube_message(&e)
            ),
            "sweeper's own role does not read Deployments; run `sweeper check` as yourself to see CAPA's gate",
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
