//! Security groups. Phase 1: CAPA's own groups (tagged
//! `sigs.k8s.io/cluster-api-provider-aws/cluster/<name>=owned`), in whatever VPC, CAPA-managed or
//! brought by the user; phase 2: the groups in the inventory (the EKS cluster group already left
//! out). Never "every group in the VPC": ownership decides. Either way, rules in other groups of
//! the same VPC that reference a group are revoked right before that group is deleted (a rule
//! naming a group that is going away; the group holding the rule is kept).

pub mod refs;

use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, settle};
use crate::aws::discovery::describe;
use crate::aws::discovery::inventory::{Inventory, Ownership};
use crate::aws::discovery::tagging::TaggedResource;
use crate::aws::discovery::tags::{self, EKS_CLUSTER_TAG};
use crate::aws::errors::call;
use crate::aws::model::{AwsClients, GcTask};
use async_trait::async_trait;
use refs::SgRevoke;
use std::collections::{HashMap, HashSet};

/// Selects phase 2's security groups (and the detached interfaces that would keep them alive).
pub const TASK: GcTask = GcTask::new("security-group");

/// EC2 filters take at most 200 values.
const FILTER_CHUNK: usize = 200;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Phase 2: the inventory's groups.
    External,
    /// Phase 1: the groups carrying CAPA's ownership tag for the cluster, in any VPC.
    CapaOwned,
}

pub struct SecurityGroups(pub Scope);

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
struct ExternalShare(Vec<(String, String)>);

/// The (report id, group id) pairs phase 2's discovery found.
pub fn external(inv: &Inventory) -> &[(String, String)] {
    inv.get::<ExternalShare>().map_or(&[], |s| &s.0)
}

#[async_trait]
impl Cleaner for SecurityGroups {
    type Detail = Group;

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        match self.0 {
            Scope::External => 40,
            // After phase 1's instances and load balancers, which use them.
            Scope::CapaOwned => 20,
        }
    }
    fn task(&self) -> Option<GcTask> {
        match self.0 {
            Scope::External => Some(TASK),
            Scope::CapaOwned => None,
        }
    }
    /// CAPA's node group may still be held by the cloud provider's network interfaces, which
    /// phase 2 deletes: waiting for it before phase 2 would wait forever.
    fn holds_next_phase(&self) -> bool {
        self.0 != Scope::CapaOwned
    }

    fn claim(&self, r: &TaggedResource, inv: &mut Inventory) -> bool {
        if self.0 != Scope::External
            || (r.arn.service.as_str(), r.arn.resource_type()) != ("ec2", "security-group")
        {
            return false;
        }
        let pairs = r.tags.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        // EKS's own cluster group: EKS deletes it, not us.
        if !tags::has_key(pairs, EKS_CLUSTER_TAG) {
            let id = r.arn.resource_id().to_string();
            inv.share_mut::<ExternalShare>()
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
        if self.0 != Scope::External {
            return Ok(());
        }
        let filter = tags::ec2_tag_filter(own.cloud_key(), tags::OWNED);
        let mut found = Vec::new();
        for sg in describe::security_groups(c, vec![filter]).await? {
            let pairs = || tags::ec2_pairs(sg.tags());
            if own.capa_owned(pairs()) || tags::has_key(pairs(), EKS_CLUSTER_TAG) {
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
                let pairs = || tags::ec2_pairs(sg.tags());
                if !own.accepts(pairs(), sg.vpc_id()) || tags::has_key(pairs(), EKS_CLUSTER_TAG) {
                    continue;
                }
                if let Some(id) = sg.group_id()
                    && !found.iter().any(|(_, f)| f == id)
                {
                    found.push((id.to_string(), id.to_string()));
                }
            }
        }
        inv.share_mut::<ExternalShare>().0.extend(found);
        Ok(())
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Group>>, CleanError> {
        // (group id -> report id) of the groups to delete, and the VPCs they live in.
        let (ours, vpcs): (HashMap<String, String>, Vec<String>) = match self.0 {
            Scope::External => {
                let wanted: HashMap<String, String> = external(ctx.inventory)
                    .iter()
                    .map(|(report, id)| (id.clone(), report.clone()))
                    .collect();
                if wanted.is_empty() {
                    return Ok(Vec::new());
                }
                let ids: Vec<String> = wanted.keys().cloned().collect();
                let mut found = HashMap::new();
                let mut vpcs = HashSet::new();
                // A filter rather than GroupIds: a group deleted since the scan is simply absent
                // instead of failing the whole batch with InvalidGroup.NotFound.
                for chunk in ids.chunks(FILTER_CHUNK) {
                    let groups = describe::security_groups(
                        ctx.clients,
                        vec![tags::ec2_filter("group-id", chunk)],
                    )
                    .await?;
                    for g in groups {
                        let (Some(id), Some(vpc)) = (g.group_id(), g.vpc_id()) else {
                            continue;
                        };
                        if let Some(report) = wanted.get(id) {
                            found.insert(id.to_string(), report.clone());
                            vpcs.insert(vpc.to_string());
                        }
                    }
                }
                (found, vpcs.into_iter().collect())
            }
            Scope::CapaOwned => {
                let filter = tags::ec2_tag_filter(&ctx.capa_key(), tags::OWNED);
                let mut found = HashMap::new();
                let mut vpcs = HashSet::new();
                for g in describe::security_groups(ctx.clients, vec![filter]).await? {
                    // A VPC's default group cannot be deleted, whatever its tags.
                    if g.group_name() == Some("default") {
                        continue;
                    }
                    if let (Some(id), Some(vpc)) = (g.group_id(), g.vpc_id()) {
                        found.insert(id.to_string(), id.to_string());
                        vpcs.insert(vpc.to_string());
                    }
                }
                (found, vpcs.into_iter().collect())
            }
        };
        if vpcs.is_empty() {
            return Ok(Vec::new());
        }
        let all =
            describe::security_groups(ctx.clients, vec![tags::ec2_filter("vpc-id", &vpcs)]).await?;
        let ids: HashSet<String> = ours.keys().cloned().collect();
        let mut revokes = refs::plan(&ids, &all);
        let tags_of: HashMap<&str, &[aws_sdk_ec2::types::Tag]> = all
            .iter()
            .filter_map(|g| Some((g.group_id()?, g.tags())))
            .collect();
        let mut out: Vec<Target<Group>> = ours
            .into_iter()
            .map(|(group_id, report)| {
                let r = revokes.remove(&group_id).unwrap_or_default();
                let tags =
                    tags::ec2_pairs(tags_of.get(group_id.as_str()).copied().unwrap_or_default());
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
        Ok(out)
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<Group>) -> Result<Outcome, CleanError> {
        let Group { group_id, revokes } = &t.detail;
        if let Some(o) = refs::revoke(ctx.clients, &t.id, revokes).await? {
            return Ok(o);
        }
        let res = call("ec2.DeleteSecurityGroup", || {
            ctx.clients
                .ec2
                .delete_security_group()
                .group_id(group_id)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteSecurityGroup")
    }
}
