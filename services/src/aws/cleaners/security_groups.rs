//! Security groups. Phase 2: the groups in the inventory (the EKS cluster group already left out);
//! phase 3: every non-default group of the CAPA-managed VPC. Either way, rules in other groups of
//! the same VPC that reference a group are revoked right before that group is deleted.

use super::{
    CleanCtx, CleanError, Cleaner, Detail, Outcome, Target, settle, sg_refs, tag_scan, tags,
};
use crate::aws::errors::call;
use crate::aws::teardown::GcTask;
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};

/// EC2 filters take at most 200 values.
const FILTER_CHUNK: usize = 200;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Phase 2: the inventory's groups.
    External,
    /// Phase 3: all non-default groups of the CAPA-managed VPCs.
    Vpc,
}

pub struct SecurityGroups(pub Scope);

const KIND: &str = "security-group";

#[async_trait]
impl Cleaner for SecurityGroups {
    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        match self.0 {
            Scope::External => 40,
            Scope::Vpc => 60,
        }
    }
    fn task(&self) -> Option<GcTask> {
        match self.0 {
            Scope::External => Some(GcTask::SecurityGroup),
            Scope::Vpc => None,
        }
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        // (group id -> report id) of the groups to delete, and the VPCs they live in.
        let (ours, vpcs): (HashMap<String, String>, Vec<String>) = match self.0 {
            Scope::External => {
                let wanted: HashMap<String, String> = ctx
                    .inventory
                    .security_groups
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
                    let groups = tag_scan::security_groups(
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
            Scope::Vpc => (HashMap::new(), ctx.vpc_ids.to_vec()),
        };
        if vpcs.is_empty() {
            return Ok(Vec::new());
        }
        let all =
            tag_scan::security_groups(ctx.clients, vec![tags::ec2_filter("vpc-id", &vpcs)]).await?;
        let ours: HashMap<String, String> = match self.0 {
            Scope::External => ours,
            Scope::Vpc => all
                .iter()
                .filter(|g| g.group_name() != Some("default"))
                .filter_map(|g| g.group_id())
                .map(|id| (id.to_string(), id.to_string()))
                .collect(),
        };
        let ids: HashSet<String> = ours.keys().cloned().collect();
        let mut revokes = sg_refs::plan(&ids, &all);
        let mut out: Vec<Target> = ours
            .into_iter()
            .map(|(group_id, report)| {
                let r = revokes.remove(&group_id).unwrap_or_default();
                Target::new(
                    report,
                    Detail::SecurityGroup {
                        group_id,
                        revokes: r,
                    },
                )
            })
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let Detail::SecurityGroup { group_id, revokes } = &t.detail else {
            return Ok(Outcome::Remaining(format!(
                "internal: security group target with {:?}",
                t.detail
            )));
        };
        if let Some(o) = sg_refs::revoke(ctx.clients, &t.id, revokes).await? {
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
