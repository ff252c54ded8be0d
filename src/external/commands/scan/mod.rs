//! `sweeper scan`: the leaks from before. Which cluster names have AWS resources tagged as theirs
//! in the accounts and regions this management cluster's CAPA identities (and sweeper's own)
//! reach, and no live cluster; priced, with the proof per resource. **Deletes nothing**: another
//! management cluster may own clusters in the same account. The per-(account, region) work is
//! `sweeper_aws::scan`; this file reads the live objects, builds the sessions and renders.
//!
//! Calls: one list of each kind (all namespaces), then per (account, region) the scan's own
//! pages. Nothing is asked per cluster, so the time does not grow with the live clusters.

use crate::api::capa::{AWSCluster, AWSManagedControlPlane, IdentityRef};
use crate::external::core::cluster::{CLUSTER_NAME_LABEL, owning_cluster};
use crate::external::core::identity::{self, Placement};
use crate::external::core::kind::GcKind;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use sweeper_aws::scan::iam::{AccountIam, account_iam};
use sweeper_aws::scan::prices::{CostTotal, PRICES_AS_OF, PRICES_SOURCE};
use sweeper_aws::scan::{NOTHING_DELETED, RegionScan, ScanInput, scan_region};
use sweeper_aws::session::{SessionCache, SessionSpec};

pub mod command;
pub mod metrics;
pub mod render;
pub mod schedule;
pub mod status;

/// An annotation on sweeper's namespace: a comma-separated list of cluster names that are not
/// this management cluster's (another one owns them). The scan reports them apart, as `not ours`,
/// and `sweeper teardown` refuses them.
pub const NOT_OURS_ANNOTATION: &str = "sweeper.dev/scan-not-ours";

/// What the live objects of the management cluster say: every name they go by, and where
/// their sessions are.
#[derive(Debug, Default)]
pub struct LiveObjects {
    pub names: BTreeSet<String>,
    /// One session each, deduplicated.
    pub placements: BTreeSet<ObjectPlacement>,
    /// Objects read without their typed shape (bad input): their raw names count as live.
    pub undecoded: Vec<String>,
}

/// Where a live object's session is: its namespace, `spec.region`, `spec.identityRef` (kind,
/// name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectPlacement {
    pub namespace: String,
    pub region: Option<String>,
    pub identity: Option<(String, String)>,
}

/// Every name an object of `kind` (as JSON) could be tagged with: its typed names when it
/// decodes, else every name it carries (conservative: a name that might be live is live).
fn names_of<K: GcKind>(o: &DynamicObject, live: &mut LiveObjects) {
    let value = serde_json::to_value(o).unwrap_or_default();
    // The EKS name, read from the JSON whether or not the object decodes (the claims' rule).
    live.names
        .extend(crate::external::core::claims::listed_eks_name::<K>(
            o, &value,
        ));
    match serde_json::from_value::<K>(value) {
        Ok(typed) => {
            // CAPA never tags with the object's own name; it counts as live anyway, as the
            // cheapest guard against a name read wrongly.
            live.names.insert(typed.name_any());
            // The label is no proof of a name (cluster.rs), but a name it carries might be live:
            // here a wrong guess only keeps something.
            live.names
                .extend(typed.labels().get(CLUSTER_NAME_LABEL).cloned());
            match typed.names() {
                Ok(n) => {
                    live.names.insert(n.capi);
                    live.names.insert(n.tag);
                }
                Err(_) => {
                    // No owning Cluster or no EKS name yet: what it may still be tagged with
                    // (its own name is in already).
                    live.names.extend(owning_cluster(&typed));
                }
            }
            let (region, identity) = typed.placement();
            live.placements.insert(ObjectPlacement {
                namespace: typed.namespace().unwrap_or_default(),
                region: region.map(str::to_string),
                identity: identity.map(|i| {
                    (
                        i.kind.clone().unwrap_or_default(),
                        i.name.clone().unwrap_or_default(),
                    )
                }),
            });
        }
        Err(e) => {
            live.names.insert(o.name_any());
            if let Some(n) = o.labels().get(CLUSTER_NAME_LABEL) {
                live.names.insert(n.clone());
            }
            live.names
                .extend(o.owner_references().iter().map(|r| r.name.clone()));
            live.undecoded.push(format!(
                "{} {}/{}: {e}",
                o.types.as_ref().map_or("?", |t| t.kind.as_str()),
                o.namespace().unwrap_or_default(),
                o.name_any()
            ));
        }
    }
}

/// A kind whose objects could not be listed: the scan (or teardown) stops.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot list {kind} in all namespaces: {source}; without the live clusters no name can be called an orphan"
)]
pub struct LiveListError {
    kind: String,
    source: kube::Error,
}

/// Lists both kinds in every namespace (one list each). A kind not served has no objects; any
/// other failure fails the scan: without the live names no name can be called an orphan.
pub async fn live_objects(client: &Client) -> Result<LiveObjects, LiveListError> {
    let mut live = LiveObjects::default();
    for (ar, decode) in [
        (
            ApiResource::erase::<AWSCluster>(&()),
            names_of::<AWSCluster> as fn(&DynamicObject, &mut LiveObjects),
        ),
        (
            ApiResource::erase::<AWSManagedControlPlane>(&()),
            names_of::<AWSManagedControlPlane>,
        ),
    ] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for mut o in list.items {
                    o.types = Some(kube::api::TypeMeta {
                        api_version: ar.api_version.clone(),
                        kind: ar.kind.clone(),
                    });
                    decode(&o, &mut live);
                }
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(source) => {
                return Err(LiveListError {
                    kind: ar.kind.clone(),
                    source,
                });
            }
        }
    }
    Ok(live)
}

/// The names on `namespace`'s [`NOT_OURS_ANNOTATION`] (none when it is absent or unreadable;
/// the second value says why it could not be read).
pub async fn annotated_not_ours(
    client: &Client,
    namespace: &str,
) -> (BTreeSet<String>, Option<String>) {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    match api.get_opt(namespace).await {
        Ok(Some(ns)) => (
            parse_not_ours(
                ns.annotations()
                    .get(NOT_OURS_ANNOTATION)
                    .map(String::as_str),
            ),
            None,
        ),
        Ok(None) => (BTreeSet::new(), None),
        Err(e) => (
            BTreeSet::new(),
            Some(format!(
                "cannot read namespace {namespace}'s {NOT_OURS_ANNOTATION}: {e}"
            )),
        ),
    }
}

/// The annotation's value: comma-separated names, blanks ignored.
pub fn parse_not_ours(value: Option<&str>) -> BTreeSet<String> {
    value
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect()
}

/// The whole scan's report.
#[derive(Debug, Serialize)]
pub struct LeakReport {
    pub notice: &'static str,
    pub prices_as_of: &'static str,
    pub prices_source: &'static str,
    pub regions: Vec<RegionScan>,
    pub not_ours: BTreeSet<String>,
    /// Sessions that could not be built, regions that could not be scanned, objects not
    /// decoded: each one a part of the accounts this report does not cover.
    pub errors: Vec<String>,
    pub total: CostTotal,
    /// Of `total`, what `sweeper teardown` recovers (by default or with the opt-ins named).
    pub teardown_recovers: CostTotal,
    /// Of `total`, what needs a person: each such resource's `deleted_by.why` says why.
    pub needs_person: CostTotal,
}

/// What to scan beyond the live objects' placements.
#[derive(Debug, Default, Clone)]
pub struct ScanTargets {
    /// Regions to scan with sweeper's own identity too (its default region always is).
    pub regions: Vec<String>,
    pub capa_namespace: String,
    pub not_ours: BTreeSet<String>,
}

/// The sessions a scan acts in: one per (account, region) reached, the first session reaching
/// it (the live objects' placements first, then sweeper's own identity in its default region and
/// in `targets.regions`); with what could not be reached, and why.
pub struct Reach {
    pub sessions: BTreeMap<(String, String), std::sync::Arc<sweeper_aws::session::Session>>,
    pub errors: Vec<String>,
}

/// Builds the sessions of every placement of `live`, and sweeper's own (see [`Reach`]).
pub async fn reach(
    client: &Client,
    sessions: &SessionCache,
    targets: &ScanTargets,
    live: &LiveObjects,
) -> Reach {
    let mut errors = Vec::new();
    let mut specs: Vec<SessionSpec> = Vec::new();
    for ObjectPlacement {
        namespace,
        region,
        identity,
    } in &live.placements
    {
        let identity_ref = identity.as_ref().map(|(kind, name)| IdentityRef {
            kind: Some(kind.clone()).filter(|k| !k.is_empty()),
            name: Some(name.clone()).filter(|n| !n.is_empty()),
        });
        let at = Placement {
            namespace,
            region: region.as_deref(),
            identity_ref: identity_ref.as_ref(),
        };
        match identity::resolve(client, &targets.capa_namespace, &at).await {
            Ok(spec) => specs.push(spec),
            Err(e) => errors.push(format!("namespace {namespace}: {e}")),
        }
    }
    specs.push(SessionSpec::controller(None));
    specs.extend(
        targets
            .regions
            .iter()
            .map(|r| SessionSpec::controller(Some(r.clone()))),
    );
    let mut seen: std::collections::HashSet<SessionSpec> = std::collections::HashSet::new();
    let mut reached = BTreeMap::new();
    for spec in specs {
        if !seen.insert(spec.clone()) {
            continue;
        }
        match sessions.session(&spec).await {
            Ok(s) => {
                reached
                    .entry((s.scope.account.clone(), s.scope.region.clone()))
                    .or_insert(s);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    Reach {
        sessions: reached,
        errors,
    }
}

/// What `sweeper scan` and the scheduled scan run: [`scan`] with `targets.not_ours` plus the
/// names on `namespace`'s [`NOT_OURS_ANNOTATION`] (read anew each time); an annotation that
/// cannot be read is a part the report says it does not cover.
pub async fn scan_with_annotation(
    client: &Client,
    sessions: &SessionCache,
    namespace: &str,
    mut targets: ScanTargets,
) -> Result<LeakReport, LiveListError> {
    let (annotated, unread) = annotated_not_ours(client, namespace).await;
    targets.not_ours.extend(annotated);
    let mut report = scan(client, sessions, &targets).await?;
    report.errors.extend(unread);
    Ok(report)
}

/// Runs the scan: the live objects, one session per placement, one scan per (account, region)
/// reached (the first session reaching it scans it).
pub async fn scan(
    client: &Client,
    sessions: &SessionCache,
    targets: &ScanTargets,
) -> Result<LeakReport, LiveListError> {
    let live = live_objects(client).await?;
    let mut errors = live
        .undecoded
        .iter()
        .map(|u| format!("{u} (its names all count as live)"))
        .collect::<Vec<_>>();
    let Reach {
        sessions: reached,
        errors: unreached,
    } = reach(client, sessions, targets, &live).await;
    errors.extend(unreached);
    let mut input = ScanInput {
        live: live.names,
        not_ours: targets.not_ours.clone(),
        page_size: None,
        iam: BTreeMap::new(),
    };
    let (iam, iam_errors) = accounts_iam(&reached, &input).await;
    errors.extend(iam_errors);
    input.iam = iam;
    let scans = futures::future::join_all(reached.iter().map(|((account, region), s)| {
        let input = &input;
        async move { scan_region(&s.clients, account, region, input).await }
    }))
    .await;
    let mut regions: Vec<RegionScan> = Vec::new();
    let mut total = CostTotal::default();
    let (mut teardown_recovers, mut needs_person) = (CostTotal::default(), CostTotal::default());
    for r in scans {
        match r {
            Ok(mut r) => {
                // The account's IAM calls, counted once: with its first region's.
                if !regions.iter().any(|o| o.account == r.account)
                    && let Some(i) = input.iam.get(&r.account)
                {
                    r.calls.extend(i.calls.iter().map(|(k, v)| (*k, *v)));
                }
                for c in &r.candidates {
                    total.sum(&c.cost);
                    teardown_recovers.sum(&c.recovery.teardown_recovers);
                    needs_person.sum(&c.recovery.needs_person);
                }
                regions.push(r);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    Ok(LeakReport {
        notice: NOTHING_DELETED,
        prices_as_of: PRICES_AS_OF,
        prices_source: PRICES_SOURCE,
        regions,
        not_ours: targets.not_ours.clone(),
        errors,
        total,
        teardown_recovers,
        needs_person,
    })
}

/// Each reached account's IAM, listed once with the first session reaching it (IAM is global);
/// an account whose listing fails has its IAM left out, and the report says so.
async fn accounts_iam(
    reached: &BTreeMap<(String, String), std::sync::Arc<sweeper_aws::session::Session>>,
    input: &ScanInput,
) -> (BTreeMap<String, std::sync::Arc<AccountIam>>, Vec<String>) {
    let skip: BTreeSet<String> = input.live.union(&input.not_ours).cloned().collect();
    let mut firsts = BTreeMap::new();
    for ((account, _), s) in reached {
        firsts.entry(account.clone()).or_insert(s);
    }
    let listed = futures::future::join_all(firsts.into_iter().map(|(account, s)| {
        let skip = &skip;
        async move { (account, account_iam(&s.clients, skip).await) }
    }))
    .await;
    let (mut ok, mut errors) = (BTreeMap::new(), Vec::new());
    for (account, r) in listed {
        match r {
            Ok(i) => {
                ok.insert(account, std::sync::Arc::new(i));
            }
            Err(e) => errors.push(format!(
                "account {account}: IAM (Karpenter's instance profiles, OIDC providers) not scanned: {e}"
            )),
        }
    }
    (ok, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(kind: &str, name: &str, label: &str, spec: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "labels": {CLUSTER_NAME_LABEL: label}},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn every_name_a_live_object_may_be_tagged_with_is_live() {
        let mut live = LiveObjects::default();
        names_of::<AWSCluster>(
            &object(
                "AWSCluster",
                "c1-x",
                "c1",
                serde_json::json!({"region": "eu-west-1"}),
            ),
            &mut live,
        );
        names_of::<AWSManagedControlPlane>(
            &object(
                "AWSManagedControlPlane",
                "c2-cp",
                "c2",
                serde_json::json!({"eksClusterName": "ns_c2"}),
            ),
            &mut live,
        );
        // No EKS name stated (created past CAPA's defaulting webhook): the one CAPA derives is
        // live, so a scan never offers its resources as an orphan's.
        names_of::<AWSManagedControlPlane>(
            &object(
                "AWSManagedControlPlane",
                "c4.cp",
                "c4",
                serde_json::json!({"region": "eu-west-1"}),
            ),
            &mut live,
        );
        // Bad input: a spec that is not an object. Its raw names still count as live.
        names_of::<AWSCluster>(
            &object("AWSCluster", "c3-x", "c3", serde_json::json!("bad")),
            &mut live,
        );
        let want: BTreeSet<String> = [
            "c1", "c1-x", "c2", "c2-cp", "ns_c2", "c3", "c3-x", "c4", "c4.cp", "ns_c4_cp",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(live.names, want);
        assert_eq!(live.undecoded.len(), 1, "{:?}", live.undecoded);
        assert!(live.placements.contains(&ObjectPlacement {
            namespace: "ns".into(),
            region: Some("eu-west-1".into()),
            identity: None,
        }));
    }

    #[test]
    fn the_annotation_is_a_comma_list() {
        let want: BTreeSet<String> = ["a".to_string(), "b-c".to_string()].into();
        assert_eq!(parse_not_ours(Some(" a, ,b-c,")), want);
        assert!(parse_not_ours(None).is_empty());
    }
}
