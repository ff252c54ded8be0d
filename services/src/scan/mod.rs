//! The leak scan (`sweeper scan`): in one (account, region), which cluster names have resources
//! tagged as theirs and no live cluster, with each resource's ownership proof and an estimated
//! monthly cost. **A scan deletes nothing**: another management cluster may own clusters in the
//! same account. The one-shot `sweeper teardown` (src/external/commands/teardown/) runs a scan of the
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

mod candidates;
pub mod claims;
pub mod deleted_by;
pub mod iam;
pub mod join;
pub mod prices;
pub mod sizing;
pub mod targets;

use crate::errors::{ApiFailure, CleanError};
use crate::locate::{eks, tagging};
use crate::model::AwsClients;
use claims::{Claim, ClaimRule};
use deleted_by::{DeletedBy, TeardownClass};
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
    #[error(
        "scan of account {account}, region {region}: confirming the controller-tagged resources in their cluster's VPCs failed, so what a teardown deletes of them is unknown: {source}"
    )]
    Placement {
        account: String,
        region: String,
        source: CleanError,
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

/// A candidate's monthly cost by what recovers it: what a teardown recovers (by default, or with
/// an opt-in task named with `--gc-task`) against what needs a person (report-only tasks, kinds
/// no cleaner deletes, resources the teardown's rules keep: each resource says why).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Recovery {
    pub default_teardown: CostTotal,
    /// By opt-in task name.
    pub opt_in: BTreeMap<String, CostTotal>,
    /// Reported by a task that never deletes (CAPA's S3 bootstrap bucket).
    pub report_only: CostTotal,
    /// No teardown deletes it: no cleaner takes the kind, or its rule keeps the resource.
    pub not_deleted: CostTotal,
    /// What a teardown recovers: `default_teardown` and every `opt_in`.
    pub teardown_recovers: CostTotal,
    /// What needs a person: `report_only` and `not_deleted`.
    pub needs_person: CostTotal,
}

impl Recovery {
    fn add(&mut self, by: &DeletedBy, c: &MonthlyCost) {
        match by.class {
            TeardownClass::Default => self.default_teardown.add(c),
            TeardownClass::OptIn => self.opt_in.entry(by.step.clone()).or_default().add(c),
            TeardownClass::ReportOnly => self.report_only.add(c),
            TeardownClass::NotDeleted => self.not_deleted.add(c),
        }
        if by.recovers() {
            self.teardown_recovers.add(c);
        } else {
            self.needs_person.add(c);
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

/// Scans the session's (account, region): see the module doc. The steps: list every tagged
/// resource, keep the claimed ones (plus the account's IAM in this region), join the names with
/// what is alive, describe the candidates' resources, price them.
#[tracing::instrument(skip_all, fields(account = %account, region = %region))]
pub async fn scan_region(
    c: &AwsClients,
    account: &str,
    region: &str,
    input: &ScanInput,
) -> Result<RegionScan, ScanError> {
    let mut calls: BTreeMap<&'static str, usize> = BTreeMap::new();
    let listed = list_tagged(c, account, region, input.page_size).await?;
    calls.insert("tagging.GetResources", listed.pages);
    // The account's IAM, listed once for all its regions: this region's part joins by name.
    let account_iam = input.iam.get(account).map(|i| &**i);
    let claimed = candidates::claimed(&listed.resources, account_iam, region);
    let eks_live = live_eks_names(c, account, region, &claimed, &mut calls).await?;
    let joined = join::join(
        &claimed,
        &Liveness {
            objects: &input.live,
            eks: &eks_live,
            not_ours: &input.not_ours,
        },
    );
    let sized = sizing::describe(c, &candidates::ids_to_describe(&joined.candidates))
        .await
        .map_err(|source| ScanError::Describe {
            account: account.into(),
            region: region.into(),
            source,
        })?;
    calls.extend(sized.calls.iter().map(|(k, v)| (*k, *v)));
    // What a teardown deletes is its own rules' answer (deleted_by), with the facts it reads:
    // each candidate's teardown names, and the controller-tagged resources its placement
    // confirms in the cluster's VPCs.
    let names = targets::names(&joined.candidates);
    let confirmed = targets::confirm(c, targets::to_confirm(&claimed, &names), &listed.resources)
        .await
        .map_err(|source| ScanError::Placement {
            account: account.into(),
            region: region.into(),
            source,
        })?;
    let judging = candidates::Judging {
        eks_live: &eks_live,
        claimed: claimed.iter().map(|r| (r.arn.as_str(), r)).collect(),
        names: &names,
        confirmed: &confirmed,
    };
    let candidates = joined
        .candidates
        .into_iter()
        .filter_map(|g| candidates::priced(g, account, region, &sized, &judging))
        .collect();
    Ok(RegionScan {
        account: account.into(),
        region: region.into(),
        candidates,
        held: candidates::held_names(joined.held),
        malformed: listed.malformed.iter().map(|e| e.to_string()).collect(),
        unproven: account_iam.map_or_else(Vec::new, |i| iam::unproven_in(i, region)),
        calls,
    })
}

/// Every tagged resource of the session's (account, region), all pages.
async fn list_tagged(
    c: &AwsClients,
    account: &str,
    region: &str,
    page_size: Option<i32>,
) -> Result<tagging::TaggedResources, ScanError> {
    tagging::every_tagged_resource(&c.tagging, Some(page_size.unwrap_or(tagging::MAX_PAGE)))
        .await
        .map_err(|source| ScanError::Tagging {
            account: account.into(),
            region: region.into(),
            source,
        })
}

/// The names of the region's live EKS clusters, asked only when something is claimed (without
/// claims there is nothing to join); the pages read go into `calls`.
async fn live_eks_names(
    c: &AwsClients,
    account: &str,
    region: &str,
    claimed: &[ClaimedResource],
    calls: &mut BTreeMap<&'static str, usize>,
) -> Result<BTreeSet<String>, ScanError> {
    if claimed.is_empty() {
        return Ok(BTreeSet::new());
    }
    let (names, pages) = eks::cluster_names(c)
        .await
        .map_err(|source| ScanError::Eks {
            account: account.into(),
            region: region.into(),
            source,
        })?;
    calls.insert("eks.ListClusters", pages);
    Ok(names)
}

#[cfg(test)]
mod tests;
