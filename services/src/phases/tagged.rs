//! Phase 2 (`Phase::Tagged`), the tagged phase: what the Resource Groups Tagging API finds by the
//! cluster's owned tag (`kubernetes.io/cluster/<name>=owned`). One locate step for what the cloud
//! provider created for the cluster, then the selected cleaners. The locate step is kind-agnostic: the tagging-API scan (or, with
//! alternative discovery, each cleaner's Describe scan) is sorted by asking every phase-2 cleaner
//! to claim its own.

use super::registry;
use super::request::PassRequest;
use super::runner::{AnyCleaner, run_phase};
use crate::cleaners::{CleanCtx, CleanError, vpcs};
use crate::locate::inventory::{Inventory, owned_tagged};
use crate::locate::placement;
use crate::locate::tagging::{
    MAX_PAGE, TaggedResource, resources_of_types_with_tag, resources_with_tag,
};
use crate::locate::tags;
use crate::locate::view::PassView;
use crate::model::{AwsClients, Failure, GcTask, Phase, PhaseReport};
use crate::policy::Ownership;
use std::collections::HashSet;

/// Phase 2 alone (ignores `external_gc`): one locate step, then the selected cleaners. Used by
/// `teardown_pass` and by the benchmark.
pub async fn phase2_pass(clients: &AwsClients, req: &PassRequest) -> PhaseReport {
    let capa_vpcs = vpcs::capa_vpcs(clients, &req.capa_name).await;
    phase2_in(clients, req, &capa_vpcs, &PassView::default()).await
}

/// Phase 2 with the cluster's CAPA-tagged VPCs already looked up (`teardown_pass` looks once
/// for phases 2 and 3).
pub(crate) async fn phase2_in(
    clients: &AwsClients,
    req: &PassRequest,
    capa_vpcs: &Result<Vec<String>, CleanError>,
    view: &PassView,
) -> PhaseReport {
    let cluster = req.cluster_name.as_str();
    let own = match capa_vpcs {
        Ok(capa) => ownership(req, capa),
        Err(e) => {
            let mut p2 = PhaseReport::started(Phase::Tagged);
            p2.errors.push(Failure::of(e));
            return p2;
        }
    };
    let inv = discover(clients, &own, req.alternative_discovery).await;
    let steps = registry::phase2(req.tasks.as_deref());
    let tasks: Vec<GcTask> = steps.iter().filter_map(|c| c.descriptor().task).collect();
    let ctx = CleanCtx {
        clients,
        cluster,
        capa_cluster: &req.capa_name,
        inventory: &inv,
        vpc_ids: &[],
        byo_vpcs: &[],
        cluster_vpcs: own.vpcs(),
        snapshot_volumes: req.ebs_snapshot,
        eks: req.eks.as_ref(),
        tasks: &tasks,
        external_dns_owner: req.external_dns_owner.as_deref(),
        s3_bucket: req.s3_bucket.as_deref(),
        view,
        alternative_discovery: req.alternative_discovery,
    };
    let mut p2 = run_phase(Phase::Tagged, &steps, &ctx, req.dry_run)
        .await
        .report;
    p2.errors.extend(inv.failures());
    p2.foreign.extend(inv.foreign.iter().cloned());
    p2
}

/// Phase 2's ownership rule for the request's cluster, with its VPCs: those its object names
/// and the CAPA-tagged ones.
fn ownership(req: &PassRequest, capa_vpcs: &[String]) -> Ownership {
    let mut vpcs = req.vpc_ids.clone();
    for v in capa_vpcs {
        if !vpcs.contains(v) {
            vpcs.push(v.clone());
        }
    }
    Ownership::of(&req.cluster_name)
        .with_capa_name(&req.capa_name)
        .with_vpcs(vpcs)
}

/// Runs phase 2's locate step for every phase-2 kind, selected or not (the task selection limits
/// what is deleted, not what is looked at). A failure is recorded as the inventory's `failure`
/// (and so keeps the phase open).
pub async fn discover(c: &AwsClients, own: &Ownership, alternative: bool) -> Inventory {
    let kinds = registry::phase2(None);
    let res = if alternative {
        via_describe(c, own, &kinds).await
    } else {
        via_tagging(c, own, &kinds).await
    };
    res.unwrap_or_else(|e| {
        Inventory::failed(Failure {
            message: format!("phase 2 discovery for cluster {}: {e}", own.cluster()),
            ..e
        })
    })
}

/// The tagging API, all pages, three times: the cluster tag (`owned`), and the two controller
/// tags that name the cluster (the LB controller's, the VPC CNI's), whose finds must be in the
/// cluster's VPC.
async fn via_tagging(
    c: &AwsClients,
    own: &Ownership,
    kinds: &[Box<dyn AnyCleaner>],
) -> Result<Inventory, Failure> {
    // The three queries are independent: they run at once (one round trip's wait, not three).
    // Each on the heap: the SDK's futures are large, and three side by side in one frame
    // overflow a worker thread's stack in a debug build.
    let (mut found, lbc, cni) = futures::future::try_join3(
        Box::pin(resources_with_tag(
            &c.tagging,
            own.cloud_key(),
            &[tags::OWNED],
            Some(MAX_PAGE),
        )),
        // Only the kinds a controller's finds can be taken as: the cluster tag's query must see
        // every kind (a new cleaner claims from it), these two need not.
        Box::pin(resources_of_types_with_tag(
            &c.tagging,
            tags::CONTROLLER_TAGGED_TYPES,
            tags::LBC_CLUSTER_TAG,
            &[own.cluster()],
            Some(MAX_PAGE),
        )),
        Box::pin(resources_of_types_with_tag(
            &c.tagging,
            tags::CONTROLLER_TAGGED_TYPES,
            tags::CNI_CLUSTER_TAG,
            &[own.cluster()],
            Some(MAX_PAGE),
        )),
    )
    .await
    .map_err(|e| Failure::new(e.kind(), e.to_string()))?;
    for more in [lbc, cni] {
        let seen: HashSet<String> = found.resources.iter().map(|r| r.arn.to_string()).collect();
        found.resources.extend(
            more.resources
                .into_iter()
                .filter(|r| !seen.contains(&r.arn.to_string())),
        );
        found.malformed.extend(more.malformed);
        found.pages += more.pages;
    }
    let foreign = c
        .scope
        .as_ref()
        .map(|scope| drop_foreign(&mut found, scope))
        .unwrap_or_default();
    let (mut ours, candidates, errors) = owned_tagged(found, own);
    let confirmed = placement::confirm(c, own, candidates)
        .await
        .map_err(|e| Failure::of(&e))?;
    ours.extend(confirmed.kept);
    let mut inv = claim_all(ours, errors, kinds);
    inv.foreign = foreign;
    // The groups of the cluster's VPCs, described to confirm the controller's: the
    // security-group cleaner plans from them rather than describing those VPCs again.
    if let Some(groups) = confirmed.groups {
        inv.put(groups);
    }
    Ok(inv)
}

/// Defence in depth: the tagging API answers for the session's account and region, so an ARN
/// naming another is not the cluster's whatever its tags say (a misrouted endpoint, a
/// resource shared into the account). Removed from `found`, returned with why.
fn drop_foreign(
    found: &mut crate::locate::tagging::TaggedResources,
    scope: &crate::scope::Scope,
) -> Vec<String> {
    let mut foreign = Vec::new();
    found.resources.retain(|r| match scope.foreign(&r.arn) {
        Some(why) => {
            tracing::warn!(arn = %r.arn, %why, "discovered resource outside the cluster's session: ignored");
            foreign.push(format!("{}: {why}", r.arn));
            false
        }
        None => true,
    });
    foreign
}

/// Offers each resource to the kinds; the first that claims it keeps it.
fn claim_all(
    ours: Vec<TaggedResource>,
    errors: Vec<String>,
    kinds: &[Box<dyn AnyCleaner>],
) -> Inventory {
    let mut inv = Inventory::default();
    inv.errors = errors;
    for r in &ours {
        if kinds.iter().any(|k| k.claim(r, &mut inv)) {
            inv.record_tags(r);
        } else {
            tracing::debug!(arn = %r.arn, "tagged resource of a kind phase 2 does not clean; left alone");
        }
    }
    inv
}

/// Sorts a tagging-API result into an inventory as far as it needs no AWS call (the cluster
/// tag only). Pure, so malformed-ARN handling is unit-tested.
#[cfg(test)]
fn sort(
    found: crate::locate::tagging::TaggedResources,
    own: &Ownership,
    kinds: &[Box<dyn AnyCleaner>],
) -> Inventory {
    let (ours, _candidates, errors) = owned_tagged(found, own);
    claim_all(ours, errors, kinds)
}

/// Alternative discovery: each kind's Describe calls, in registry order.
async fn via_describe(
    c: &AwsClients,
    own: &Ownership,
    kinds: &[Box<dyn AnyCleaner>],
) -> Result<Inventory, Failure> {
    let mut inv = Inventory::default();
    for k in kinds {
        k.describe_owned(c, own, &mut inv)
            .await
            .map_err(|e| Failure::of(&e))?;
    }
    Ok(inv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arn::Arn;
    use crate::cleaners::{load_balancers, security_groups, target_groups};
    use crate::locate::tagging::TaggedResources;
    use crate::locate::tags::EKS_CLUSTER_TAG;
    use std::collections::BTreeMap;

    fn tagged(s: &str, tags: &[(&str, &str)]) -> TaggedResource {
        TaggedResource {
            arn: s.parse().unwrap(),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    fn sorted(found: TaggedResources, cluster: &str) -> Inventory {
        sort(found, &Ownership::of(cluster), &registry::phase2(None))
    }

    #[test]
    fn malformed_arns_are_reported_and_the_rest_still_sorted() {
        let owned = ("kubernetes.io/cluster/c1", "owned");
        let malformed = ["arn:aws:ec2", "not-an-arn", "arn::ec2:r:1:x"]
            .iter()
            .map(|s| s.parse::<Arn>().unwrap_err())
            .collect();
        let found = TaggedResources {
            resources: vec![
                tagged("arn:aws:ec2:us-east-1:0:security-group/sg-1", &[owned]),
                tagged(
                    "arn:aws:elasticloadbalancing:us-east-1:0:loadbalancer/classic1",
                    &[owned],
                ),
                tagged(
                    "arn:aws:elasticloadbalancing:us-east-1:0:loadbalancer/net/n/1",
                    &[owned],
                ),
                tagged(
                    "arn:aws:elasticloadbalancing:us-east-1:0:targetgroup/t/1",
                    &[owned],
                ),
                // CAPA-owned: phases 1/3; EKS group: EKS's; unknown kind: ignored.
                tagged(
                    "arn:aws:ec2:us-east-1:0:security-group/sg-capa",
                    &[
                        owned,
                        ("sigs.k8s.io/cluster-api-provider-aws/cluster/c1", "owned"),
                    ],
                ),
                tagged(
                    "arn:aws:ec2:us-east-1:0:security-group/sg-eks",
                    &[owned, (EKS_CLUSTER_TAG, "c1")],
                ),
                tagged("arn:aws:ec2:us-east-1:0:volume/vol-1", &[owned]),
                tagged(
                    "arn:aws:elasticloadbalancing:us-east-1:0:loadbalancer/odd/x/1",
                    &[owned],
                ),
            ],
            malformed,
            pages: 1,
        };
        let inv = sorted(found, "c1");
        assert_eq!(inv.errors.len(), 4, "{:?}", inv.errors);
        assert!(inv.errors.iter().any(|e| e.contains("not-an-arn")));
        assert!(inv.errors.iter().any(|e| e.contains("odd/x/1")));
        assert_eq!(
            security_groups::tagged(&inv),
            [(
                "arn:aws:ec2:us-east-1:0:security-group/sg-1".to_string(),
                "sg-1".to_string()
            )]
        );
        assert_eq!(load_balancers::tagged(&inv).len(), 2);
        assert_eq!(target_groups::tagged(&inv).len(), 1);
    }

    #[test]
    fn shared_and_other_clusters_are_skipped() {
        let found = TaggedResources {
            resources: vec![
                tagged(
                    "arn:aws:ec2:us-east-1:0:security-group/sg-1",
                    &[("kubernetes.io/cluster/c1", "shared")],
                ),
                tagged(
                    "arn:aws:ec2:us-east-1:0:security-group/sg-2",
                    &[("kubernetes.io/cluster/c1-b", "owned")],
                ),
            ],
            ..Default::default()
        };
        assert!(sorted(found, "c1").is_empty());
    }

    #[tokio::test]
    async fn a_failed_discovery_keeps_its_kind_and_its_words() {
        use crate::mocked::{RuleMode, clients, code, mock};
        use aws_sdk_resourcegroupstagging::operation::get_resources::GetResourcesError;
        let expired = mock!(aws_sdk_resourcegroupstagging::Client::get_resources)
            .then_error(|| GetResourcesError::generic(code("ExpiredTokenException")));
        let c = clients(RuleMode::MatchAny, &[&expired]);
        let inv = discover(&c, &Ownership::of("c1"), false).await;
        let failures: Vec<Failure> = inv.failures().collect();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert_eq!(failures[0].kind, crate::model::FailureKind::Credential);
        assert!(
            failures[0]
                .to_string()
                .starts_with("phase 2 discovery for cluster c1: tagging API GetResources for tag "),
            "{}",
            failures[0]
        );
    }
}
