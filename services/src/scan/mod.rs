//! The leak scan (`sweeper scan`): in one (account, region), which cluster names have resources
//! tagged as theirs and no live cluster, with each resource's ownership proof and an estimated
//! monthly cost. **A scan deletes nothing**: another management cluster may own clusters in the
//! same account. The one-shot `sweeper teardown` (src/external/teardown/) runs a scan of the
//! target's region too, for its refusals and its plan's proofs.
//!
//! Calls per (account, region), whatever the number of clusters, live or not: the tagging API's
//! pages of every tagged resource (`locate::tagging::every_tagged_resource`), the pages of
//! `eks:ListClusters`, and, for the candidates' volumes, snapshots, endpoints, instances and NAT
//! gateways only, chunked describes (`sizing`; a terminated instance or deleted NAT gateway the
//! listing still returns is dropped). No call names a cluster.
//!
//! claims.rs (tags -> names, rules), join.rs (names -> candidates) and prices.rs (cost) are pure
//! and table-tested; this file makes the calls and assembles the report.

pub mod claims;
pub mod deleted_by;
pub mod iam;
pub mod join;
pub mod prices;
pub mod sizing;

use crate::errors::ApiFailure;
use crate::locate::{eks, tagging};
use crate::model::AwsClients;
use claims::{Claim, ClaimRule};
use deleted_by::{DeletedBy, TeardownClass, deleted_by};
use join::{ClaimedResource, HeldBack, Liveness};
use prices::{CostTotal, MonthlyCost, Sizing};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What every report says first.
pub const NOTHING_DELETED: &str = "A scan deletes nothing. Another management cluster may own \
clusters in the same account: check each candidate before tearing anything down \
(docs/operations.md, \"Leaks from before\").";

/// The names the management cluster has alive, and those marked not ours (the same for every
/// (account, region) scanned).
#[derive(Clone, Debug, Default)]
pub struct ScanInput {
    /// Both names (CAPA's and the EKS one) of every live AWSCluster and AWSManagedControlPlane.
    pub live: BTreeSet<String>,
    pub not_ours: BTreeSet<String>,
    /// `ResourcesPerPage` of the tagging listing (`None`: the API's largest, 100).
    pub page_size: Option<i32>,
    /// Each account's IAM, listed once for all its regions ([`iam::account_iam`]); an account
    /// not here has its IAM left out of its regions' scans.
    pub iam: BTreeMap<String, std::sync::Arc<iam::AccountIam>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("scan of account {account}, region {region}: {source}")]
    Tagging {
        account: String,
        region: String,
        source: tagging::TaggingError,
    },
    #[error(
        "scan of account {account}, region {region}: eks:ListClusters failed, so no name there can be told from a live EKS cluster: {source}"
    )]
    Eks {
        account: String,
        region: String,
        source: ApiFailure,
    },
    #[error(
        "scan of account {account}, region {region}: describing the candidates' resources failed: {source}"
    )]
    Describe {
        account: String,
        region: String,
        source: ApiFailure,
    },
}

/// One resource of a candidate, with its proof and cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CandidateResource {
    pub arn: String,
    pub kind: String,
    /// The tags that name the cluster, and by which rule.
    pub proofs: Vec<Proof>,
    /// When AWS says it was created (RFC 3339), where a describe gives it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    pub sizing: Sizing,
    pub monthly: MonthlyCost,
    /// The teardown step that deletes it, and whether a default teardown runs that step.
    pub deleted_by: DeletedBy,
}

/// A candidate's monthly cost by what recovers it: a default teardown, each opt-in task (named
/// with `--gc-task`), or nothing (report-only tasks, kinds no cleaner deletes).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Recovery {
    pub default_teardown: CostTotal,
    /// By opt-in task name.
    pub opt_in: BTreeMap<String, CostTotal>,
    /// Reported by a task that never deletes (CAPA's S3 bootstrap bucket).
    pub report_only: CostTotal,
    /// Kinds no teardown step deletes.
    pub not_deleted: CostTotal,
}

impl Recovery {
    fn add(&mut self, by: &DeletedBy, c: &MonthlyCost) {
        match by.class {
            TeardownClass::Default => self.default_teardown.add(c),
            TeardownClass::OptIn => self.opt_in.entry(by.step.clone()).or_default().add(c),
            TeardownClass::ReportOnly => self.report_only.add(c),
            TeardownClass::NotDeleted => self.not_deleted.add(c),
        }
    }
}

/// One ownership proof: the tag as carried and the rule it satisfies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Proof {
    pub tag: String,
    pub rule: ClaimRule,
    pub rule_label: &'static str,
}

impl From<&Claim> for Proof {
    fn from(c: &Claim) -> Self {
        Proof {
            tag: c.tag.clone(),
            rule: c.rule,
            rule_label: c.rule.label(),
        }
    }
}

/// A cluster name with resources in the account and region and no live cluster.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OrphanCandidate {
    pub cluster: String,
    pub account: String,
    pub region: String,
    pub resources_by_kind: BTreeMap<String, usize>,
    /// The oldest creation time AWS gave for its resources (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest: Option<String>,
    pub cost: CostTotal,
    /// The same cost by what recovers it.
    pub recovery: Recovery,
    /// Other candidate names on the same resources (an EKS cluster's two names).
    pub also_named: BTreeSet<String>,
    pub resources: Vec<CandidateResource>,
}

/// A name with resources that is not a candidate, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HeldName {
    pub cluster: String,
    pub why: HeldBack,
    pub resources: usize,
}

/// One (account, region)'s scan.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegionScan {
    pub account: String,
    pub region: String,
    pub candidates: Vec<OrphanCandidate>,
    pub held: Vec<HeldName>,
    /// ARNs the tagging API returned that do not parse: never candidates.
    pub malformed: Vec<String>,
    /// Resources found that no rule can prove any cluster's (IRSA OIDC providers): never
    /// candidates, reported so they are checked by hand.
    pub unproven: Vec<iam::Unproven>,
    /// AWS calls by operation.
    pub calls: BTreeMap<&'static str, usize>,
}

/// RFC 3339 of `secs` since the epoch.
fn rfc3339(secs: i64) -> String {
    aws_smithy_types::DateTime::from_secs(secs)
        .fmt(aws_smithy_types::date_time::Format::DateTime)
        .unwrap_or_else(|_| secs.to_string())
}

/// Scans the session's (account, region): see the module doc.
#[tracing::instrument(skip_all, fields(account = %account, region = %region))]
pub async fn scan_region(
    c: &AwsClients,
    account: &str,
    region: &str,
    input: &ScanInput,
) -> Result<RegionScan, ScanError> {
    let mut calls: BTreeMap<&'static str, usize> = BTreeMap::new();
    let listed = tagging::every_tagged_resource(
        &c.tagging,
        Some(input.page_size.unwrap_or(tagging::MAX_PAGE)),
    )
    .await
    .map_err(|source| ScanError::Tagging {
        account: account.into(),
        region: region.into(),
        source,
    })?;
    calls.insert("tagging.GetResources", listed.pages);
    let mut claimed: Vec<ClaimedResource> = listed
        .resources
        .iter()
        .filter_map(|r| {
            let found = claims::claims(r.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            (!found.is_empty()).then(|| ClaimedResource {
                arn: r.arn.to_string(),
                kind: prices::kind_of(&r.arn.service, &r.arn.resource),
                claims: found,
            })
        })
        .collect();
    // The account's IAM, listed once for all its regions: this region's part joins by name.
    let account_iam = input.iam.get(account);
    if let Some(i) = account_iam {
        // Once, should the tagging listing return a profile too.
        let listed: BTreeSet<String> = claimed.iter().map(|r| r.arn.clone()).collect();
        claimed.extend(
            iam::claimed_in(i, region)
                .into_iter()
                .filter(|r| !listed.contains(&r.arn)),
        );
    }
    // Asked even when nothing is claimed? No: without claims there is nothing to join.
    let eks_live = if claimed.is_empty() {
        BTreeSet::new()
    } else {
        let (names, pages) = eks::cluster_names(c)
            .await
            .map_err(|source| ScanError::Eks {
                account: account.into(),
                region: region.into(),
                source,
            })?;
        calls.insert("eks.ListClusters", pages);
        names
    };
    let joined = join::join(
        &claimed,
        &Liveness {
            objects: &input.live,
            eks: &eks_live,
            not_ours: &input.not_ours,
        },
    );
    let ids_of = |kind: &str| -> Vec<String> {
        let ids: BTreeSet<String> = joined
            .candidates
            .iter()
            .flat_map(|g| &g.resources)
            .filter(|r| r.kind == kind)
            .filter_map(|r| r.arn.parse::<crate::arn::Arn>().ok())
            .map(|a| a.resource_id().to_string())
            .collect();
        ids.into_iter().collect()
    };
    let sized = sizing::describe(
        c,
        &sizing::Ids {
            volumes: ids_of("ec2:volume"),
            snapshots: ids_of("ec2:snapshot"),
            endpoints: ids_of("ec2:vpc-endpoint"),
            instances: ids_of("ec2:instance"),
            nat_gateways: ids_of("ec2:natgateway"),
        },
    )
    .await
    .map_err(|source| ScanError::Describe {
        account: account.into(),
        region: region.into(),
        source,
    })?;
    calls.extend(sized.calls.iter().map(|(k, v)| (*k, *v)));
    let id_of = |arn: &str| {
        arn.parse::<crate::arn::Arn>()
            .map(|a| a.resource_id().to_string())
            .unwrap_or_default()
    };
    // Terminated instances and deleted NAT gateways are still listed for a while: not leaks.
    let is_gone = |arn: &str| sized.by_id.get(&id_of(arn)).is_some_and(|d| d.gone);
    let candidates = joined
        .candidates
        .into_iter()
        .filter_map(|mut g| {
            g.resources.retain(|r| !is_gone(&r.arn));
            (!g.resources.is_empty()).then_some(g)
        })
        .map(|g| {
            let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
            let mut cost = CostTotal::default();
            let mut recovery = Recovery::default();
            let mut oldest: Option<i64> = None;
            let resources = g
                .resources
                .iter()
                .map(|r| {
                    let d = sized.by_id.get(&id_of(&r.arn)).cloned().unwrap_or_default();
                    let monthly = prices::monthly(&r.kind, region, &d.sizing);
                    cost.add(&monthly);
                    let by = deleted_by(&r.kind, &r.claims);
                    recovery.add(&by, &monthly);
                    *by_kind.entry(r.kind.clone()).or_default() += 1;
                    if let Some(t) = d.created {
                        oldest = Some(oldest.map_or(t, |o| o.min(t)));
                    }
                    CandidateResource {
                        arn: r.arn.clone(),
                        kind: r.kind.clone(),
                        proofs: r.claims.iter().map(Proof::from).collect(),
                        created: d.created.map(rfc3339),
                        sizing: d.sizing,
                        monthly,
                        deleted_by: by,
                    }
                })
                .collect();
            OrphanCandidate {
                cluster: g.cluster,
                account: account.into(),
                region: region.into(),
                resources_by_kind: by_kind,
                oldest: oldest.map(rfc3339),
                cost,
                recovery,
                also_named: g.also,
                resources,
            }
        })
        .collect();
    Ok(RegionScan {
        account: account.into(),
        region: region.into(),
        candidates,
        held: joined
            .held
            .into_iter()
            .map(|(cluster, (why, resources))| HeldName {
                cluster,
                why,
                resources,
            })
            .collect(),
        malformed: listed.malformed.iter().map(|e| e.to_string()).collect(),
        unproven: account_iam.map_or_else(Vec::new, |i| iam::unproven_in(i, region)),
        calls,
    })
}

#[cfg(test)]
mod tests;
