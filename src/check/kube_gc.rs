//! Whether kube-controller-manager's garbage collector looks active where the cascade collector
//! is on.
//!
//! The cascade collector is for control planes whose own garbage collector is off or absent
//! (KubeZoo's, say). Beside an active one, both delete the same dependents: nothing is lost, but
//! every delete is raced, sweeper's archive records only the deletes it won, and foreground
//! deletion's ordering is whoever is first. Managed control planes (EKS, GKE, AKS) always run it
//! and do not let it be turned off.
//!
//! What can be seen from the API, most telling first:
//! 1. kube-controller-manager's pod (a static pod labelled `component=kube-controller-manager`,
//!    kubeadm's shape): its flags say whether the garbage collector runs (`--controllers` without
//!    `garbagecollector`, or with `-garbagecollector`, or `--enable-garbage-collector=false`: off).
//! 2. its Lease `kube-controller-manager`, renewed within its duration: a controller manager runs,
//!    with its default controllers as far as anyone can tell (managed control planes show only
//!    this).
//! 3. neither: no sign of one.

use super::{Config, Line, forbidden, kube_message};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

const CATEGORY: &str = "kube-gc";
pub const LEASE: &str = "kube-controller-manager";
pub const POD_LABEL: &str = "component=kube-controller-manager";
const HINT: &str = "the cascade collector is for control planes without a garbage collector of \
     their own: turn it off (--feature-gates=CascadeGC=false; Helm: featureGates.CascadeGC=false), \
     or run kube-controller-manager with --controllers=*,-garbagecollector";

/// Whether a kube-controller-manager command line runs the garbage collector.
pub fn runs_gc(words: &[String]) -> bool {
    let mut controllers: Option<&str> = None;
    let mut it = words.iter().peekable();
    while let Some(w) = it.next() {
        if let Some(v) = w.strip_prefix("--controllers=") {
            controllers = Some(v);
        } else if w == "--controllers" {
            controllers = it.peek().map(|s| s.as_str());
        } else if let Some(v) = w.strip_prefix("--enable-garbage-collector=")
            && v.eq_ignore_ascii_case("false")
        {
            return false;
        }
    }
    let Some(list) = controllers else {
        return true; // the default set has it
    };
    let items: Vec<&str> = list.split(',').map(str::trim).collect();
    if items.contains(&"-garbagecollector") {
        return false;
    }
    items.contains(&"garbagecollector") || items.contains(&"*")
}

/// What was seen of kube-controller-manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KcmSighting {
    /// Its pod and command line (`pod` names it).
    Pod { pod: String, runs_gc: bool },
    /// Its Lease, renewed `age_s` seconds ago, within its duration.
    FreshLease { holder: String, age_s: i64 },
    /// Nothing: no pod, and no Lease or one not renewed within its duration.
    Nothing,
}

pub fn judge(seen: &KcmSighting) -> Line {
    match seen {
        KcmSighting::Pod { pod, runs_gc: true } => Line::fail(
            CATEGORY,
            format!(
                "kube-controller-manager's garbage collector runs ({pod}) beside the cascade collector"
            ),
            HINT,
        ),
        KcmSighting::Pod {
            pod,
            runs_gc: false,
        } => Line::pass(
            CATEGORY,
            format!(
                "kube-controller-manager's garbage collector is off ({pod}): the cascade collector is the only one"
            ),
        ),
        KcmSighting::FreshLease { holder, age_s } => Line::fail(
            CATEGORY,
            format!(
                "kube-controller-manager is active (Lease held by {holder:?}, renewed {age_s}s ago), so its garbage collector most likely runs beside the cascade collector"
            ),
            HINT,
        ),
        KcmSighting::Nothing => Line::pass(
            CATEGORY,
            "no sign of kube-controller-manager's garbage collector (no pod, no fresh Lease): the cascade collector is the only one",
        ),
    }
}

/// Seconds since the Lease was last renewed, if it is still within its duration.
pub fn fresh(lease: &Lease, now: k8s_openapi::jiff::Timestamp) -> Option<(String, i64)> {
    let spec = lease.spec.as_ref()?;
    let (age, duration) = super::lease_age(spec, now)?;
    (age <= duration).then(|| (spec.holder_identity.clone().unwrap_or_default(), age))
}

pub async fn check(client: &kube::Client, cfg: &Config) -> Vec<Line> {
    let ns = &cfg.control_plane_namespace;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    match pods.list(&ListParams::default().labels(POD_LABEL)).await {
        Ok(list) => {
            if let Some(p) = list.items.first() {
                let words: Vec<String> = p
                    .spec
                    .iter()
                    .flat_map(|s| s.containers.iter())
                    .flat_map(|c| c.command.iter().flatten().chain(c.args.iter().flatten()))
                    .cloned()
                    .collect();
                let pod = format!("{ns}/{}", p.metadata.name.as_deref().unwrap_or("?"));
                return vec![judge(&KcmSighting::Pod {
                    pod,
                    runs_gc: runs_gc(&words),
                })];
            }
        }
        // sweeper's role may not list pods in kube-system: the Lease still tells.
        Err(e) if forbidden(&e) => {}
        Err(e) => {
            return vec![Line::warn(
                CATEGORY,
                format!("cannot list {ns}'s pods: {}", kube_message(&e)),
                "retry; the API server answered with an error",
            )];
        }
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    match leases.get_opt(LEASE).await {
        Ok(lease) => {
            let seen = lease
                .as_ref()
                .and_then(|l| fresh(l, k8s_openapi::jiff::Timestamp::now()))
                .map_or(KcmSighting::Nothing, |(holder, age_s)| {
                    KcmSighting::FreshLease { holder, age_s }
                });
            vec![judge(&seen)]
        }
        Err(e) => vec![Line::warn(
            CATEGORY,
            format!(
                "cannot read the Lease {ns}/{LEASE}: {}: cannot tell whether kube-controller-manager's garbage collector runs",
                kube_message(&e)
            ),
            "run `sweeper check` as an identity that may read leases in kube-system",
        )],
    }
}
