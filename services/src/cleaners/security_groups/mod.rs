//! Security groups. Phase 1: CAPA's own groups (tagged
//! `sigs.k8s.io/cluster-api-provider-aws/cluster/<name>=owned`), in whatever VPC, CAPA-managed or
//! brought by the user; phase 2: the groups in the inventory (the EKS cluster group already left
//! out). Never "every group in the VPC": `policy::security_groups` decides. Either way, rules in
//! other groups of the account that reference a group (its VPC's, and any other VPC's that
//! name it, found by the `ip-permission.group-id` filters) are revoked right before that group
//! is deleted: that rule alone, the group holding it kept
//! (`policy::security_groups::referencing_rule`). Each rule revoked is audited as revoked, not
//! deleted (`refs`).

pub mod eks;
pub mod refs;
pub mod revoke;

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::call;
use crate::locate::describe;
use crate::locate::inventory::Inventory;
use crate::locate::placement::VpcSecurityGroups;
use crate::locate::tagging::TaggedResource;
use crate::locate::tags;
use crate::model::{AwsClients, GcTask, Phase};
use crate::policy::{self, Candidate, Ownership};
use async_trait::async_trait;
use aws_sdk_ec2::types::SecurityGroup;
use refs::SgRevoke;
use std::collections::{HashMap, HashSet};

/// Selects phase 2's security groups (and the detached interfaces that would keep them alive).
pub const TASK: GcTask = GcTask::new("security-group");

/// EC2 filters take at most 200 values.
const FILTER_CHUNK: usize = 200;

/// One executor for two phases, its descriptor saying which: [`SecurityGroups::CAPA_OWNED`] or
/// [`SecurityGroups::TAGGED`].
pub struct SecurityGroups(&'static Descriptor);

const IAM_ACTIONS: &[&str] = &[
    "ec2:DescribeSecurityGroups",
    // The rules of other groups naming the group (`refs`).
    "ec2:RevokeSecurityGroupIngress",
    "ec2:RevokeSecurityGroupEgress",
    "ec2:DeleteSecurityGroup",
];

impl SecurityGroups {
    /// Phase 1: the groups carrying CAPA's ownership tag for the cluster, in any VPC; after
    /// phase 1's instances and load balancers, which use them (order 20). They do not hold
    /// phase 2: CAPA's node group may still be held by the cloud provider's network interfaces,
    /// which phase 2 deletes, so waiting for it before phase 2 would wait forever.
    pub const CAPA_OWNED: SecurityGroups = SecurityGroups(&Descriptor {
        holds_next_phase: false,
        iam_actions: IAM_ACTIONS,
        ..Descriptor::new("ec2", KIND, Phase::CapaOwned, 20)
    });
    /// Phase 2: the inventory's groups.
    pub const TAGGED: SecurityGroups = SecurityGroups(&Descriptor {
        task: Some(TASK),
        iam_actions: IAM_ACTIONS,
        ..Descriptor::new("ec2", KIND, Phase::Tagged, 40)
    });
}

const KIND: &str = "security-group";

/// A group to delete and the rules in other groups that reference it, revoked first.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub group_id: String,
    pub revokes: Vec<SgRevoke>,
}

/// Phase 2's groups in the inventory: (report id, group id), the report id being the ARN from
/// the tagging API or the id from Describe.
#[derive(Debug, Default)]
struct TaggedShare(Vec<(String, String)>);

/// The (report id, group id) pairs phase 2's locate step found.
pub fn tagged(inv: &Inventory) -> &[(String, String)] {
    inv.get::<TaggedShare>().map_or(&[], |s| &s.0)
}

#[async_trait]
impl Cleaner for SecurityGroups {
    type Detail = Group;

    fn descriptor(&self) -> &'static Descriptor {
        self.0
    }

    fn claim(&self, r: &TaggedResource, inv: &mut Inventory) -> bool {
        if self.0.phase != Phase::Tagged
            || (r.arn.service.as_str(), r.arn.resource_type()) != ("ec2", "security-group")
        {
            return false;
        }
        let pairs: Vec<_> = r
            .tags
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if policy::security_groups::decide_found(&Candidate::tagged(&pairs)).is_delete() {
            let id = r.arn.resource_id().to_string();
            inv.share_mut::<TaggedShare>()
                .0
                .push((r.arn.to_string(), id));
        }
        true
    }

    async fn describe_owned(
        &self,
        c: &AwsClients,
        own: &Ownership,
        inv: &mut Inventory,
    ) -> Result<(), CleanError> {
        if self.0.phase != Phase::Tagged {
            return Ok(());
        }
        let filter = tags::ec2_tag_filter(own.cloud_key(), tags::OWNED);
        let mut found = Vec::new();
        let ours = |sg: &SecurityGroup| {
            let tags: Vec<_> = tags::ec2_pairs(sg.tags()).collect();
            let vpc = sg.vpc_id();
            policy::security_groups::decide(own, &Candidate { tags: &tags, vpc }).is_delete()
        };
        for sg in describe::security_groups(c, vec![filter]).await? {
            if !ours(&sg) {
                continue;
            }
            if let Some(id) = sg.group_id() {
                found.push((id.to_string(), id.to_string()));
            }
        }
        // The LB controller's groups (its shared backend group included), in the cluster's VPCs.
        if !own.vpcs().is_empty() {
            let filters = vec![
                tags::ec2_filter("vpc-id", own.vpcs()),
                tags::ec2_tag_filter(tags::LBC_CLUSTER_TAG, own.cluster()),
            ];
            for sg in describe::security_groups(c, filters).await? {
                if !ours(&sg) {
                    continue;
                }
                if let Some(id) = sg.group_id()
                    && !found.iter().any(|(_, f)| f == id)
                {
                    found.push((id.to_string(), id.to_string()));
                }
            }
        }
        inv.share_mut::<TaggedShare>().0.extend(found);
        Ok(())
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Group>>, CleanError> {
        // (group id -> report id) of the groups to delete, and every group of the VPCs they live
        // in (the rules that may reference them).
        let (ours, all) = match self.0.phase {
            // Only the two consts exist: anything not phase 1 is `TAGGED`.
            Phase::Tagged | Phase::Network => {
                let wanted: HashMap<String, String> = tagged(ctx.inventory)
                    .iter()
                    .map(|(report, id)| (id.clone(), report.clone()))
                    .collect();
                if wanted.is_empty() {
                    return Ok(Vec::new());
                }
                tagged_groups(ctx, wanted).await?
            }
            Phase::CapaOwned => capa_groups(ctx).await?,
        };
        planned_with_holders(ctx, ours, all).await
    }

    fn also_changes(&self, detail: &Group) -> Vec<crate::model::Audited> {
        refs::planned(&detail.group_id, &detail.revokes)
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<Group>) -> Result<Outcome, CleanError> {
        delete_group(ctx, t).await
    }
}

/// Ours, (group id -> report id), and every group of their VPCs.
type GroupsAndVpcs = (HashMap<String, String>, Vec<SecurityGroup>);

/// Phase 2: the groups locating found (`wanted`, group id -> report id) and every group of the
/// VPCs they live in. The groups of the cluster's VPCs come as locating described them when it
/// confirmed a controller's group there, else described now. Ours are usually all there; only
/// the rest are looked up, by id.
async fn tagged_groups(
    ctx: &CleanCtx<'_>,
    wanted: HashMap<String, String>,
) -> Result<GroupsAndVpcs, CleanError> {
    let described;
    let known = match ctx.inventory.get::<VpcSecurityGroups>() {
        Some(k) => Some(k),
        None if !ctx.cluster_vpcs.is_empty() => {
            let vpcs = ctx.cluster_vpcs.to_vec();
            described = VpcSecurityGroups {
                groups: in_vpcs(ctx, vpcs.iter().cloned().collect()).await?,
                vpcs,
            };
            Some(&described)
        }
        None => None,
    };
    let (mut found, rest) = split_known(wanted, known);
    let known_vpcs = known.map_or(&[][..], |k| &k.vpcs[..]);
    let vpcs = described_by_id(ctx, &rest, known_vpcs, &mut found).await?;
    let mut all = known.map(|k| k.groups.clone()).unwrap_or_default();
    all.extend(in_vpcs(ctx, vpcs).await?);
    Ok((found, all))
}

/// Describes the `rest` of our groups (group id -> report id) by id, in chunks, into `found`;
/// returns the VPCs they live in that are not among `known_vpcs` (described already).
async fn described_by_id(
    ctx: &CleanCtx<'_>,
    rest: &HashMap<String, String>,
    known_vpcs: &[String],
    found: &mut HashMap<String, String>,
) -> Result<HashSet<String>, CleanError> {
    let mut vpcs = HashSet::new();
    let ids: Vec<&String> = rest.keys().collect();
    // A filter rather than GroupIds: a group deleted since the scan is simply absent instead of
    // failing the whole batch with InvalidGroup.NotFound.
    for chunk in ids.chunks(FILTER_CHUNK) {
        let chunk: Vec<String> = chunk.iter().map(|s| s.to_string()).collect();
        let groups =
            describe::security_groups(ctx.clients, vec![tags::ec2_filter("group-id", &chunk)])
                .await?;
        for g in groups {
            let (Some(id), Some(vpc)) = (g.group_id(), g.vpc_id()) else {
                continue;
            };
            if let Some(report) = rest.get(id) {
                found.insert(id.to_string(), report.clone());
                if !known_vpcs.iter().any(|k| k == vpc) {
                    vpcs.insert(vpc.to_string());
                }
            }
        }
    }
    Ok(vpcs)
}

/// Phase 1: the groups carrying CAPA's owned tag that CAPA's rule deletes
/// (`policy::security_groups::decide_capa`), and every group of their VPCs.
async fn capa_groups(ctx: &CleanCtx<'_>) -> Result<GroupsAndVpcs, CleanError> {
    if !super::capa_may_hold(ctx, KIND).await? {
        return Ok((HashMap::new(), Vec::new()));
    }
    let filter = tags::ec2_tag_filter(&ctx.capa_key(), tags::OWNED);
    let mut found = HashMap::new();
    let mut vpcs = HashSet::new();
    let capa = ctx.capa_key();
    for g in describe::security_groups(ctx.clients, vec![filter]).await? {
        let tags: Vec<_> = tags::ec2_pairs(g.tags()).collect();
        let verdict =
            policy::security_groups::decide_capa(&Candidate::tagged(&tags), g.group_name(), &capa);
        if !verdict.is_delete() {
            continue;
        }
        if let (Some(id), Some(vpc)) = (g.group_id(), g.vpc_id()) {
            found.insert(id.to_string(), id.to_string());
            vpcs.insert(vpc.to_string());
        }
    }
    Ok((found, in_vpcs(ctx, vpcs).await?))
}

/// The targets for `ours` (group id -> report id), planned from `all` (the groups of their VPCs)
/// and the groups of the account naming them from elsewhere (a peered VPC's): their rules hold
/// ours too.
pub(super) async fn planned_with_holders(
    ctx: &CleanCtx<'_>,
    ours: HashMap<String, String>,
    mut all: Vec<SecurityGroup>,
) -> Result<Vec<Target<Group>>, CleanError> {
    if ours.is_empty() {
        return Ok(Vec::new());
    }
    all.extend(naming(ctx, ours.keys().cloned().collect()).await?);
    let account = ctx.clients.scope.as_ref().map(|s| s.account.as_str());
    Ok(plan_targets(ours, &all, account))
}

/// Revokes the rules of other groups naming the group, then deletes it. Every rule revoked is
/// audited (`Outcome::Also`), whatever becomes of the group.
pub(super) async fn delete_group(
    ctx: &CleanCtx<'_>,
    t: &Target<Group>,
) -> Result<Outcome, CleanError> {
    let Group { group_id, revokes } = &t.detail;
    let mut revoked = Vec::new();
    let res = revoke::revoke(ctx.clients, group_id, revokes, &mut revoked).await;
    let with = |o: Outcome| {
        if revoked.is_empty() {
            o
        } else {
            Outcome::Also(revoked.clone(), Box::new(o))
        }
    };
    if let Some(o) = res? {
        return Ok(with(o));
    }
    let res = call("ec2.DeleteSecurityGroup", || {
        ctx.clients
            .ec2
            .delete_security_group()
            .group_id(group_id)
            .send()
    })
    .await;
    Ok(with(settle(res, KIND, &t.id, "DeleteSecurityGroup")?))
}

/// The groups of the account (the session's region) with an ingress or egress rule naming one
/// of `ids`, whatever their VPC: one Describe per direction and chunk of ids.
async fn naming(ctx: &CleanCtx<'_>, ids: Vec<String>) -> Result<Vec<SecurityGroup>, CleanError> {
    let mut out = Vec::new();
    for chunk in ids.chunks(FILTER_CHUNK) {
        for filter in ["ip-permission.group-id", "egress.ip-permission.group-id"] {
            let f = tags::ec2_filter(filter, chunk);
            out.extend(describe::security_groups(ctx.clients, vec![f]).await?);
        }
    }
    Ok(out)
}

/// Splits the wanted groups (group id -> report id) into those `known` describes, which exist
/// as of locating and whose VPC it covered whole, and the rest, still to be described.
fn split_known(
    wanted: HashMap<String, String>,
    known: Option<&VpcSecurityGroups>,
) -> (HashMap<String, String>, HashMap<String, String>) {
    let described: HashSet<&str> = known
        .map(|k| k.groups.iter().filter_map(|g| g.group_id()).collect())
        .unwrap_or_default();
    wanted
        .into_iter()
        .partition(|(id, _)| described.contains(id.as_str()))
}

/// Every group of `vpcs` (none when there are none).
async fn in_vpcs(
    ctx: &CleanCtx<'_>,
    vpcs: HashSet<String>,
) -> Result<Vec<SecurityGroup>, CleanError> {
    if vpcs.is_empty() {
        return Ok(Vec::new());
    }
    let vpcs: Vec<String> = vpcs.into_iter().collect();
    describe::security_groups(ctx.clients, vec![tags::ec2_filter("vpc-id", &vpcs)]).await
}

/// The targets for `ours` (group id -> report id), each with the revokes its deletion needs in
/// the other groups of `all` and its tags as `all` shows them. Sorted by report id.
fn plan_targets(
    ours: HashMap<String, String>,
    all: &[SecurityGroup],
    account: Option<&str>,
) -> Vec<Target<Group>> {
    let ids: HashSet<String> = ours.keys().cloned().collect();
    let mut revokes = refs::plan(&ids, all, account);
    let tags_of: HashMap<&str, &[aws_sdk_ec2::types::Tag]> = all
        .iter()
        .filter_map(|g| Some((g.group_id()?, g.tags())))
        .collect();
    let mut out: Vec<Target<Group>> = ours
        .into_iter()
        .map(|(group_id, report)| {
            let r = revokes.remove(&group_id).unwrap_or_default();
            let tags = tags::ec2_pairs(tags_of.get(group_id.as_str()).copied().unwrap_or_default());
            Target::new(
                report,
                Group {
                    group_id: group_id.clone(),
                    revokes: r,
                },
            )
            .with_tags(tags)
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{IpPermission, Tag, UserIdGroupPair};

    fn group(id: &str, vpc: &str, referencing: &[&str], tags: &[(&str, &str)]) -> SecurityGroup {
        let mut b = SecurityGroup::builder().group_id(id).vpc_id(vpc);
        for r in referencing {
            b = b.ip_permissions(
                IpPermission::builder()
                    .ip_protocol("tcp")
                    .from_port(443)
                    .to_port(443)
                    .user_id_group_pairs(UserIdGroupPair::builder().group_id(*r).build())
                    .build(),
            );
        }
        for (k, v) in tags {
            b = b.tags(Tag::builder().key(*k).value(*v).build());
        }
        b.build()
    }

    fn wanted(ids: &[&str]) -> HashMap<String, String> {
        ids.iter()
            .map(|id| {
                (
                    id.to_string(),
                    format!("arn:aws:ec2:r:0:security-group/{id}"),
                )
            })
            .collect()
    }

    #[test]
    fn groups_discovery_described_are_not_described_again() {
        let known = VpcSecurityGroups {
            vpcs: vec!["vpc-1".into()],
            groups: vec![
                group("sg-ours", "vpc-1", &[], &[]),
                group("sg-other", "vpc-1", &[], &[]),
            ],
        };
        let (found, rest) = split_known(wanted(&["sg-ours", "sg-elsewhere"]), Some(&known));
        assert_eq!(found, wanted(&["sg-ours"]));
        assert_eq!(
            rest,
            wanted(&["sg-elsewhere"]),
            "outside the described VPCs"
        );
        let (found, rest) = split_known(wanted(&["sg-ours"]), None);
        assert!(
            found.is_empty(),
            "nothing described: everything is looked up"
        );
        assert_eq!(rest, wanted(&["sg-ours"]));
    }

    #[test]
    fn only_our_groups_are_targets_and_rules_naming_them_are_revoked_elsewhere() {
        // A VPC as locating described it: our group, another cluster's group whose rule
        // names ours, and a shared group naming another cluster's.
        let all = [
            group(
                "sg-ours",
                "vpc-1",
                &["sg-ours"],
                &[("kubernetes.io/cluster/c1", "owned")],
            ),
            group(
                "sg-theirs",
                "vpc-1",
                &["sg-ours"],
                &[("kubernetes.io/cluster/c2", "owned")],
            ),
            group(
                "sg-shared",
                "vpc-1",
                &["sg-theirs"],
                &[("kubernetes.io/cluster/c1", "shared")],
            ),
        ];
        let targets = plan_targets(wanted(&["sg-ours"]), &all, None);
        assert_eq!(targets.len(), 1, "{targets:?}");
        let t = &targets[0];
        assert_eq!(t.detail.group_id, "sg-ours");
        assert_eq!(t.id, "arn:aws:ec2:r:0:security-group/sg-ours");
        assert_eq!(
            t.detail
                .revokes
                .iter()
                .map(|r| r.group_id.as_str())
                .collect::<Vec<_>>(),
            ["sg-theirs"],
            "the rule naming ours is revoked in the group holding it; its own rule goes with it"
        );
        assert_eq!(
            t.tags
                .as_ref()
                .and_then(|t| t.get("kubernetes.io/cluster/c1")),
            Some(&"owned".to_string())
        );
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::tags::EKS_CLUSTER_TAG;
    use crate::mocked::{self, CAPA_KEY, CLOUD_KEY, assert_calls, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::delete_security_group::DeleteSecurityGroupOutput;
    use aws_sdk_ec2::operation::describe_security_groups::DescribeSecurityGroupsOutput;
    use aws_sdk_ec2::operation::revoke_security_group_egress::RevokeSecurityGroupEgressOutput;
    use aws_sdk_ec2::operation::revoke_security_group_ingress::RevokeSecurityGroupIngressOutput;
    use aws_sdk_ec2::types::{IpPermission, UserIdGroupPair};

    fn sg(id: &str, name: &str, refers_to: Option<&str>, tags: &[(&str, &str)]) -> SecurityGroup {
        let mut b = SecurityGroup::builder()
            .group_id(id)
            .group_name(name)
            .vpc_id("vpc-1");
        if let Some(r) = refers_to {
            b = b.ip_permissions(
                IpPermission::builder()
                    .ip_protocol("tcp")
                    .from_port(443)
                    .to_port(443)
                    .user_id_group_pairs(UserIdGroupPair::builder().group_id(r).build())
                    .build(),
            );
        }
        for (k, v) in tags {
            b = b.tags(tag(k, v));
        }
        b.build()
    }

    /// Sequential rules: a DescribeSecurityGroups would find no rule and fail the discover.
    #[tokio::test]
    async fn phase_one_describes_no_group_when_its_query_found_none_of_capas() {
        let query = mocked::capa_tagged_query(&[(
            "arn:aws:ec2:us-east-1:0:instance/i-1",
            CAPA_KEY,
            "owned",
        )]);
        let c = mocked::in_order(&[&query]);
        let inv = Inventory::default();
        let found = SecurityGroups::CAPA_OWNED
            .discover(&ctx(&c, &inv))
            .await
            .unwrap();
        assert!(found.is_empty(), "{found:?}");
        assert_calls(&query, 1, "GetResources");
    }

    #[tokio::test]
    async fn phase_one_deletes_capas_group_after_revoking_the_rule_a_foreign_group_holds() {
        let capa = mock!(Client::describe_security_groups)
            .match_requests(|r| {
                filter_is(r.filters(), &format!("tag:{CAPA_KEY}"), &["owned"])
                    && r.filters().len() == 1
            })
            .then_output(|| {
                DescribeSecurityGroupsOutput::builder()
                    .security_groups(sg("sg-node", "c1-node", None, &[(CAPA_KEY, "owned")]))
                    // Never deleted, whatever its tags.
                    .security_groups(sg("sg-default", "default", None, &[(CAPA_KEY, "owned")]))
                    .build()
            });
        let vpc = mock!(Client::describe_security_groups)
            .match_requests(|r| filter_is(r.filters(), "vpc-id", &["vpc-1"]))
            .then_output(|| {
                DescribeSecurityGroupsOutput::builder()
                    .security_groups(sg("sg-node", "c1-node", None, &[(CAPA_KEY, "owned")]))
                    .security_groups(sg("sg-default", "default", None, &[]))
                    // A foreign group in the VPC naming ours: its rule goes, the group stays.
                    .security_groups(sg("sg-app", "app", Some("sg-node"), &[]))
                    .build()
            });
        let revoke = mock!(Client::revoke_security_group_ingress)
            .match_requests(|r| {
                r.group_id() == Some("sg-app")
                    && r.ip_permissions().len() == 1
                    && r.ip_permissions()[0].user_id_group_pairs()[0].group_id() == Some("sg-node")
            })
            .then_output(|| RevokeSecurityGroupIngressOutput::builder().build());
        let delete = mock!(Client::delete_security_group)
            .match_requests(|r| r.group_id() == Some("sg-node"))
            .then_output(|| DeleteSecurityGroupOutput::builder().build());
        // The account's groups naming ours, whatever their VPC: sg-app again (planned once), and
        // a peered VPC's group whose egress rule names ours; its rule naming a group that stays
        // is kept.
        let naming_in = mock!(Client::describe_security_groups)
            .match_requests(|r| {
                filter_is(r.filters(), "ip-permission.group-id", &["sg-node"])
                    && r.filters().len() == 1
            })
            .then_output(|| {
                DescribeSecurityGroupsOutput::builder()
                    .security_groups(sg("sg-app", "app", Some("sg-node"), &[]))
                    .build()
            });
        let naming_out = mock!(Client::describe_security_groups)
            .match_requests(|r| {
                filter_is(r.filters(), "egress.ip-permission.group-id", &["sg-node"])
                    && r.filters().len() == 1
            })
            .then_output(|| {
                let to = |g: &str| {
                    IpPermission::builder()
                        .ip_protocol("-1")
                        .user_id_group_pairs(UserIdGroupPair::builder().group_id(g).build())
                        .build()
                };
                DescribeSecurityGroupsOutput::builder()
                    .security_groups(
                        SecurityGroup::builder()
                            .group_id("sg-peer")
                            .vpc_id("vpc-2")
                            .ip_permissions_egress(to("sg-node"))
                            .ip_permissions_egress(to("sg-stays"))
                            .build(),
                    )
                    .build()
            });
        let revoke_out = mock!(Client::revoke_security_group_egress)
            .match_requests(|r| {
                r.group_id() == Some("sg-peer")
                    && r.ip_permissions().len() == 1
                    && r.ip_permissions()[0].user_id_group_pairs().len() == 1
                    && r.ip_permissions()[0].user_id_group_pairs()[0].group_id() == Some("sg-node")
            })
            .then_output(|| RevokeSecurityGroupEgressOutput::builder().build());
        // The holders described again: neither shows its rule naming ours any more.
        let proven = mock!(Client::describe_security_groups)
            .match_requests(|r| filter_is(r.filters(), "group-id", &["sg-app", "sg-peer"]))
            .then_output(|| {
                DescribeSecurityGroupsOutput::builder()
                    .security_groups(sg("sg-app", "app", None, &[]))
                    .build()
            });
        let query = mocked::capa_tagged_query(&[(
            "arn:aws:ec2:us-east-1:0:security-group/sg-node",
            CAPA_KEY,
            "owned",
        )]);
        let c = mocked::in_order(&[
            &query,
            &capa,
            &vpc,
            &naming_in,
            &naming_out,
            &revoke,
            &revoke_out,
            &proven,
            &delete,
        ]);
        let inv = Inventory::default();
        let cx = ctx(&c, &inv);
        let cleaner = SecurityGroups::CAPA_OWNED;
        let found = cleaner.discover(&cx).await.unwrap();
        assert_eq!(
            found.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["sg-node"]
        );
        let planned: Vec<_> = cleaner
            .also_changes(&found[0].detail)
            .into_iter()
            .map(|a| (a.resource.id, a.action))
            .collect();
        let revoked = |rule: &str| crate::model::AuditAction::Revoked { rule: rule.into() };
        let want = vec![
            (
                "sg-app".to_string(),
                revoked("ingress tcp port 443 from sg-node"),
            ),
            ("sg-peer".to_string(), revoked("egress all to sg-node")),
        ];
        assert_eq!(planned, want, "the plan lists each rule to revoke");
        match cleaner.delete(&cx, &found[0]).await.unwrap() {
            Outcome::Also(audited, then) => {
                assert_eq!(*then, Outcome::Deleted);
                let got: Vec<_> = audited
                    .into_iter()
                    .map(|a| (a.resource.id, a.action))
                    .collect();
                assert_eq!(got, want, "each revoked rule is audited as revoked");
            }
            o => panic!("{o:?}"),
        }
        assert_calls(&revoke, 1, "RevokeSecurityGroupIngress in sg-app");
        assert_calls(&revoke_out, 1, "RevokeSecurityGroupEgress in sg-peer");
        assert_calls(&delete, 1, "DeleteSecurityGroup sg-node");
    }

    #[tokio::test]
    async fn phase_two_plans_from_the_groups_discovery_described_without_asking_again() {
        let mut inv = Inventory::default();
        inv.share_mut::<TaggedShare>().0.push((
            "arn:aws:ec2:us-east-1:0:security-group/sg-lb".into(),
            "sg-lb".into(),
        ));
        inv.put(VpcSecurityGroups {
            vpcs: vec!["vpc-1".into()],
            groups: vec![
                sg("sg-lb", "k8s-elb", None, &[(CLOUD_KEY, "owned")]),
                sg("sg-node", "c1-node", Some("sg-lb"), &[(CAPA_KEY, "owned")]),
            ],
        });
        // The VPC is not described again; only who names sg-lb, account-wide, is asked.
        let naming = |filter: &'static str| {
            mock!(Client::describe_security_groups)
                .match_requests(move |r| filter_is(r.filters(), filter, &["sg-lb"]))
                .then_output(|| DescribeSecurityGroupsOutput::builder().build())
        };
        let (naming_in, naming_out) = (
            naming("ip-permission.group-id"),
            naming("egress.ip-permission.group-id"),
        );
        let c = mocked::in_order(&[&naming_in, &naming_out]);
        let found = SecurityGroups::TAGGED
            .discover(&ctx(&c, &inv))
            .await
            .unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].detail.group_id, "sg-lb");
        assert_eq!(found[0].detail.revokes[0].group_id, "sg-node");
    }

    #[tokio::test]
    async fn alternative_discovery_leaves_capas_and_ekss_groups_and_twins_in_other_vpcs() {
        let cloud = mock!(Client::describe_security_groups)
            .match_requests(|r| filter_is(r.filters(), &format!("tag:{CLOUD_KEY}"), &["owned"]))
            .then_output(|| {
                DescribeSecurityGroupsOutput::builder()
                    .security_groups(sg("sg-lb", "k8s-elb", None, &[(CLOUD_KEY, "owned")]))
                    .security_groups(sg(
                        "sg-capa",
                        "c1-node",
                        None,
                        &[(CLOUD_KEY, "owned"), (CAPA_KEY, "owned")],
                    ))
                    .security_groups(sg(
                        "sg-eks",
                        "eks-cluster-sg",
                        None,
                        &[(CLOUD_KEY, "owned"), (EKS_CLUSTER_TAG, "c1")],
                    ))
                    .build()
            });
        let lbc = mock!(Client::describe_security_groups)
            .match_requests(|r| {
                filter_is(r.filters(), "vpc-id", &["vpc-1"])
                    && filter_is(
                        r.filters(),
                        &format!("tag:{}", tags::LBC_CLUSTER_TAG),
                        &["c1"],
                    )
            })
            .then_output(|| {
                DescribeSecurityGroupsOutput::builder()
                    .security_groups(sg(
                        "sg-shared-backend",
                        "k8s-traffic",
                        None,
                        &[(tags::LBC_CLUSTER_TAG, "c1")],
                    ))
                    .security_groups(
                        SecurityGroup::builder()
                            .group_id("sg-twin")
                            .vpc_id("vpc-2")
                            .tags(tag(tags::LBC_CLUSTER_TAG, "c1"))
                            .build(),
                    )
                    .build()
            });
        let c = mocked::in_order(&[&cloud, &lbc]);
        let mut inv = Inventory::default();
        let own = Ownership::of("c1").with_vpcs(vec!["vpc-1".into()]);
        SecurityGroups::TAGGED
            .describe_owned(&c, &own, &mut inv)
            .await
            .unwrap();
        let ids: Vec<&str> = tagged(&inv).iter().map(|(_, id)| id.as_str()).collect();
        assert_eq!(ids, ["sg-lb", "sg-shared-backend"]);
    }
}
