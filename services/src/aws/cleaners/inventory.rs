//! Phase 2's single discovery: everything tagged `kubernetes.io/cluster/N=owned` (never `shared`),
//! minus what carries the CAPA-owned tag (phases 1 and 3 own that), sorted into the kinds phase 2
//! cleans. Either one tagging-API scan (all pages) or, with alternative discovery, tag-filtered
//! Describe calls. The cleaners then read this inventory instead of asking AWS again.

use super::tags::{self, EKS_CLUSTER_TAG};
use super::{CleanError, Detail, Target, tag_scan};
use crate::aws::arn::Arn;
use crate::aws::tagging::{TaggedResources, resources_with_tag};
use crate::aws::teardown::AwsClients;

/// What a load balancer ARN says about the API that deletes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LbKind {
    /// `loadbalancer/<name>`: the classic ELB API, by name.
    Classic { name: String },
    /// `loadbalancer/app|net|gwy/<name>/<id>`: the elbv2 API, by ARN. The type segment is not
    /// trusted beyond that (LocalStack reports NLBs as `app/`), elbv2 deletes all three alike.
    V2,
}

/// Decides classic vs v2 from a parsed ARN; `None` when it is not a load balancer ARN we know.
pub fn lb_kind(arn: &Arn) -> Option<LbKind> {
    if arn.service != "elasticloadbalancing" || arn.resource_type() != "loadbalancer" {
        return None;
    }
    let rest = arn.resource_id();
    match rest.split_once('/') {
        None if !rest.is_empty() => Some(LbKind::Classic {
            name: rest.to_string(),
        }),
        Some(("app" | "net" | "gwy", tail)) if !tail.is_empty() => Some(LbKind::V2),
        _ => None,
    }
}

/// Phase 2's resources, by kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inventory {
    /// Targets with `Detail::ClassicLoadBalancer` or `Detail::V2LoadBalancer`.
    pub load_balancers: Vec<Target>,
    /// Target group ARNs.
    pub target_groups: Vec<String>,
    /// (report id, group id): the ARN from the tagging API, or the id from Describe.
    pub security_groups: Vec<(String, String)>,
    /// Resources reported but never touched (malformed or unrecognised ARNs) and discovery failures.
    pub errors: Vec<String>,
}

/// Sorts a tagging-API result into an inventory. Pure, so malformed-ARN handling is unit-tested.
pub fn from_tagged(found: TaggedResources, cluster: &str) -> Inventory {
    let (cloud, capa) = (tags::cloud_key(cluster), tags::capa_key(cluster));
    let mut inv = Inventory::default();
    for bad in found.malformed {
        inv.errors.push(format!("{bad}; not touched"));
    }
    for r in found.resources {
        let pairs = || r.tags.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        // The API filtered on the tag already; checking again costs nothing and guards against
        // a filter that matched more than the exact key and value.
        if !tags::is_owned(pairs(), &cloud) || tags::is_owned(pairs(), &capa) {
            continue;
        }
        let arn = r.arn.to_string();
        match (r.arn.service.as_str(), r.arn.resource_type()) {
            ("elasticloadbalancing", "loadbalancer") => match lb_kind(&r.arn) {
                Some(LbKind::Classic { name }) => inv
                    .load_balancers
                    .push(Target::new(arn, Detail::ClassicLoadBalancer { name })),
                Some(LbKind::V2) => inv
                    .load_balancers
                    .push(Target::new(arn.clone(), Detail::V2LoadBalancer { arn })),
                None => inv.errors.push(format!(
                    "unrecognised load balancer ARN {arn:?}; not touched"
                )),
            },
            ("elasticloadbalancing", "targetgroup") => inv.target_groups.push(arn),
            ("ec2", "security-group") => {
                if !tags::has_key(pairs(), EKS_CLUSTER_TAG) {
                    let id = r.arn.resource_id().to_string();
                    inv.security_groups.push((arn, id));
                }
            }
            _ => {
                tracing::debug!(%arn, "tagged resource of a kind phase 2 does not clean; left alone")
            }
        }
    }
    inv
}

/// Runs phase 2's discovery. A failure is recorded in `errors` (and so keeps the phase open).
pub async fn discover(c: &AwsClients, cluster: &str, alternative: bool) -> Inventory {
    let res = if alternative {
        via_describe(c, cluster).await
    } else {
        resources_with_tag(&c.tagging, &tags::cloud_key(cluster), &[tags::OWNED], None)
            .await
            .map(|found| from_tagged(found, cluster))
            .map_err(|e| e.to_string())
    };
    res.unwrap_or_else(|e| Inventory {
        errors: vec![format!("phase 2 discovery for cluster {cluster}: {e}")],
        ..Default::default()
    })
}

/// Alternative discovery: Describe calls, all pages, filtered by tag on our side (ELB) or by a
/// tag filter (EC2).
async fn via_describe(c: &AwsClients, cluster: &str) -> Result<Inventory, String> {
    let (cloud, capa) = (tags::cloud_key(cluster), tags::capa_key(cluster));
    let ours = |t: &tag_scan::Tagged| {
        tags::is_owned(t.pairs(), &cloud) && !tags::is_owned(t.pairs(), &capa)
    };
    let text = |e: CleanError| e.to_string();
    let mut inv = Inventory::default();
    for lb in tag_scan::classic_load_balancers(c).await.map_err(text)? {
        if ours(&lb) {
            inv.load_balancers.push(Target::new(
                lb.id.clone(),
                Detail::ClassicLoadBalancer { name: lb.id },
            ));
        }
    }
    for lb in tag_scan::v2_load_balancers(c).await.map_err(text)? {
        if ours(&lb) {
            inv.load_balancers.push(Target::new(
                lb.id.clone(),
                Detail::V2LoadBalancer { arn: lb.id },
            ));
        }
    }
    let tg_arns = tag_scan::target_groups(c)
        .await
        .map_err(text)?
        .into_iter()
        .map(|t| t.arn)
        .collect();
    for tg in tag_scan::v2_tags(c, tg_arns, "target-group")
        .await
        .map_err(text)?
    {
        if ours(&tg) {
            inv.target_groups.push(tg.id);
        }
    }
    let sgs = tag_scan::security_groups(c, vec![tags::ec2_tag_filter(&cloud, tags::OWNED)])
        .await
        .map_err(text)?;
    for sg in sgs {
        let pairs = || tags::ec2_pairs(sg.tags());
        if tags::is_owned(pairs(), &capa) || tags::has_key(pairs(), EKS_CLUSTER_TAG) {
            continue;
        }
        if let Some(id) = sg.group_id() {
            inv.security_groups.push((id.to_string(), id.to_string()));
        }
    }
    Ok(inv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::tagging::TaggedResource;
    use std::collections::BTreeMap;

    fn arn(s: &str) -> Arn {
        s.parse().unwrap()
    }

    #[test]
    fn load_balancer_type_comes_from_the_arn() {
        let p = "arn:aws:elasticloadbalancing:us-east-1:000000000000:loadbalancer/";
        assert_eq!(
            lb_kind(&arn(&format!("{p}a1b2"))),
            Some(LbKind::Classic {
                name: "a1b2".into()
            })
        );
        for t in ["app", "net", "gwy"] {
            assert_eq!(
                lb_kind(&arn(&format!("{p}{t}/x/50dc6c495c0c9188"))),
                Some(LbKind::V2)
            );
        }
        assert_eq!(lb_kind(&arn(&format!("{p}weird/x/1"))), None);
        assert_eq!(
            lb_kind(&arn(
                "arn:aws:elasticloadbalancing:us-east-1:0:targetgroup/tg/1"
            )),
            None
        );
        assert_eq!(
            lb_kind(&arn("arn:aws:ec2:us-east-1:0:security-group/sg-1")),
            None
        );
    }

    fn tagged(s: &str, tags: &[(&str, &str)]) -> TaggedResource {
        TaggedResource {
            arn: arn(s),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
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
        let inv = from_tagged(found, "c1");
        assert_eq!(inv.errors.len(), 4, "{:?}", inv.errors);
        assert!(inv.errors.iter().any(|e| e.contains("not-an-arn")));
        assert!(inv.errors.iter().any(|e| e.contains("odd/x/1")));
        assert_eq!(
            inv.security_groups,
            vec![(
                "arn:aws:ec2:us-east-1:0:security-group/sg-1".to_string(),
                "sg-1".to_string()
            )]
        );
        assert_eq!(inv.load_balancers.len(), 2);
        assert_eq!(inv.target_groups.len(), 1);
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
        assert_eq!(from_tagged(found, "c1"), Inventory::default());
    }
}
