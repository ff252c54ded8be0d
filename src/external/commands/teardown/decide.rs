//! What a one-shot teardown may act on: which clusters a command line or a scan's report names
//! ([`targets_from_scan`]), and whether one of them must be refused ([`refusal`]). Pure; the
//! reads that feed it (live objects, `eks:ListClusters`, the region's scan) stay in mod.rs.
//!
//! A name is refused, before anything is deleted, when:
//! - it is not a name a cluster can have (empty, too long, a character no Cluster API or EKS
//!   name has): bad input never reaches a tag filter;
//! - a live AWSCluster or AWSManagedControlPlane of this management cluster has it (its own
//!   teardown is the collector's business, under Cluster API's contract);
//! - a live EKS cluster of the region has it;
//! - it is marked not ours (`--not-ours`, the annotation on sweeper's namespace);
//! - one of its resources is also claimed for a live or not-ours name (the scan's hold);
//! - the session acts in another account than the one asked for (`--account`, or the account
//!   the scan found the candidate in).

use serde::Deserialize;
use std::collections::BTreeSet;
use sweeper_aws::scan::HeldName;
use sweeper_aws::scan::claims::ClaimRule;
use sweeper_aws::scan::join::HeldBack;

/// One cluster to tear down, and where.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OrphanTarget {
    /// CAPA's name (its own tags; phases 1 and 3).
    pub capa: String,
    /// The EKS name (the cloud provider's tags; phase 2), for an EKS cluster.
    pub eks: Option<String>,
    pub region: String,
    /// The account the session must act in, when known.
    pub account: Option<String>,
}

impl OrphanTarget {
    /// Every name the target goes by.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.capa.as_str()).chain(self.eks.as_deref())
    }

    pub fn label(&self) -> String {
        match &self.eks {
            Some(e) => format!("{} (EKS {e}) in {}", self.capa, self.region),
            None => format!("{} in {}", self.capa, self.region),
        }
    }
}

/// Why a target is not torn down.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum TeardownRefusal {
    #[error("{name:?} is not a cluster name: {why}")]
    InvalidName { name: String, why: &'static str },
    #[error(
        "a live AWSCluster/AWSManagedControlPlane of this management cluster has the name {0:?}: deleting its object tears it down"
    )]
    LiveObject(String),
    #[error("a live EKS cluster in {region} has the name {name:?}")]
    LiveEks { name: String, region: String },
    #[error("{0:?} is marked not ours (--not-ours or sweeper.dev/scan-not-ours)")]
    NotOurs(String),
    #[error(
        "resources of {name:?} are also tagged for {other:?}, which is live or not ours: a teardown would delete what it still claims"
    )]
    SharesWithLive { name: String, other: String },
    #[error("the session acts in account {got}, not {want}")]
    AccountMismatch { want: String, got: String },
    #[error("the session acts in region {got}, not {want}")]
    RegionMismatch { want: String, got: String },
}

/// Whether `name` could be a cluster's (Cluster API names are DNS-1123 subdomains, EKS names
/// letters, digits, `-` and `_`; CAPA's EKS default joins namespace and name with `_`).
pub fn check_name(name: &str) -> Result<(), TeardownRefusal> {
    let bad = |why| {
        Err(TeardownRefusal::InvalidName {
            name: name.to_string(),
            why,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > 253 {
        return bad("longer than 253 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return bad("only letters, digits, '-', '_' and '.' are allowed");
    }
    Ok(())
}

/// What is alive where the target lives, and what the region's scan held back.
#[derive(Clone, Copy, Debug)]
pub struct World<'a> {
    pub objects: &'a BTreeSet<String>,
    /// `None` before the region's EKS listing is read (the checks that need no AWS call first).
    pub eks: Option<&'a BTreeSet<String>>,
    pub not_ours: &'a BTreeSet<String>,
    pub held: &'a [HeldName],
    /// The session's (account, region), once it is built.
    pub session: Option<(&'a str, &'a str)>,
}

/// The first reason to refuse `t` in `w`, if any.
pub fn refusal(t: &OrphanTarget, w: &World<'_>) -> Option<TeardownRefusal> {
    for n in t.names() {
        if let Err(e) = check_name(n) {
            return Some(e);
        }
    }
    for n in t.names() {
        if w.objects.contains(n) {
            return Some(TeardownRefusal::LiveObject(n.into()));
        }
        if w.not_ours.contains(n) {
            return Some(TeardownRefusal::NotOurs(n.into()));
        }
        if w.eks.is_some_and(|e| e.contains(n)) {
            return Some(TeardownRefusal::LiveEks {
                name: n.into(),
                region: t.region.clone(),
            });
        }
        if let Some(h) = w.held.iter().find(|h| h.cluster == n)
            && let HeldBack::SharesWithLive(other) = &h.why
        {
            return Some(TeardownRefusal::SharesWithLive {
                name: n.into(),
                other: other.clone(),
            });
        }
    }
    if let Some((account, region)) = w.session {
        if let Some(want) = &t.account
            && want != account
        {
            return Some(TeardownRefusal::AccountMismatch {
                want: want.clone(),
                got: account.into(),
            });
        }
        if t.region != region {
            return Some(TeardownRefusal::RegionMismatch {
                want: t.region.clone(),
                got: region.into(),
            });
        }
    }
    None
}

/// The part of a `sweeper scan -o json` report a teardown reads.
#[derive(Debug, Deserialize)]
pub struct ScanFile {
    pub regions: Vec<FileRegion>,
}

#[derive(Debug, Deserialize)]
pub struct FileRegion {
    pub candidates: Vec<FileCandidate>,
}

#[derive(Debug, Deserialize)]
pub struct FileCandidate {
    pub cluster: String,
    pub account: String,
    pub region: String,
    #[serde(default)]
    pub also_named: BTreeSet<String>,
    #[serde(default)]
    pub resources: Vec<FileResource>,
}

#[derive(Debug, Deserialize)]
pub struct FileResource {
    #[serde(default)]
    pub proofs: Vec<FileProof>,
}

#[derive(Debug, Deserialize)]
pub struct FileProof {
    pub rule: ClaimRule,
}

impl FileCandidate {
    /// Whether CAPA's own tag claims any of its resources (CAPA's name, not the EKS one).
    fn capa_tagged(&self) -> bool {
        self.resources
            .iter()
            .any(|r| r.proofs.iter().any(|p| p.rule == ClaimRule::Capa))
    }
}

/// Why the command line names no target: nothing is deleted. Each says what to give instead.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(
        "--from-scan {path}: name the candidates with --cluster-name, or take every one with --all"
    )]
    NoSelection { path: String },
    #[error(
        "--from-scan takes each candidate's EKS name and account from the scan; --eks-name and --account are for one cluster by name"
    )]
    ScanGivesNames,
    #[error("cannot read {path}: {source}")]
    Unreadable {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a `sweeper scan -o json` report: {source}")]
    NotAScan {
        path: String,
        source: serde_json::Error,
    },
    #[error("give one --cluster-name (several only with --from-scan)")]
    OneName,
    #[error("give the cluster's --region")]
    NoRegion,
    #[error("{name:?} is not an orphan candidate of the scan{}", region.as_ref().map(|r| format!(" in {r}")).unwrap_or_default())]
    NotACandidate {
        name: String,
        region: Option<String>,
    },
    #[error(
        "{name:?} shares its resources with {other:?} and the scan does not tell which is CAPA's name: tear it down with --cluster-name <CAPA's name> --eks-name <the EKS name>"
    )]
    RolesUnclear { name: String, other: String },
    #[error(
        "{name:?} shares its resources with {others:?}: tear it down by name (--cluster-name, --eks-name)"
    )]
    SharedWithMany {
        name: String,
        others: BTreeSet<String>,
    },
    /// The parser names the annotation; here the value came from the flag.
    #[error("--gc-task: {0}")]
    GcTask(crate::external::core::annotations::AnnotationError),
}

/// The targets a scan's report names: its candidates called `names` (every one with `all`),
/// narrowed to `region`. An EKS cluster's two names (a candidate `also_named` the other) are one
/// target, CAPA's name being the one CAPA's tag claims. A name asked for that is no candidate,
/// or a pair whose roles cannot be told, is an error: nothing is guessed.
pub fn targets_from_scan(
    file: &ScanFile,
    names: &[String],
    all: bool,
    region: Option<&str>,
) -> Result<Vec<OrphanTarget>, TargetError> {
    let candidates: Vec<&FileCandidate> = file
        .regions
        .iter()
        .flat_map(|r| &r.candidates)
        .filter(|c| region.is_none_or(|r| c.region == r))
        .collect();
    let wanted: Vec<&FileCandidate> = if all {
        candidates.clone()
    } else {
        let mut w = Vec::new();
        for n in names {
            let found: Vec<_> = candidates.iter().filter(|c| &c.cluster == n).collect();
            if found.is_empty() {
                return Err(TargetError::NotACandidate {
                    name: n.clone(),
                    region: region.map(str::to_string),
                });
            }
            w.extend(found.into_iter().copied());
        }
        w
    };
    let mut out = BTreeSet::new();
    for c in wanted {
        let target = match c.also_named.len() {
            0 => OrphanTarget {
                capa: c.cluster.clone(),
                eks: None,
                region: c.region.clone(),
                account: Some(c.account.clone()),
            },
            1 => {
                let other_name = c.also_named.iter().next().cloned().unwrap_or_default();
                let other = candidates.iter().find(|o| {
                    o.cluster == other_name && o.account == c.account && o.region == c.region
                });
                let (capa, eks) = match (c.capa_tagged(), other.map(|o| o.capa_tagged())) {
                    (true, Some(false)) => (c.cluster.clone(), other_name),
                    (false, Some(true)) => (other_name, c.cluster.clone()),
                    _ => {
                        return Err(TargetError::RolesUnclear {
                            name: c.cluster.clone(),
                            other: other_name,
                        });
                    }
                };
                OrphanTarget {
                    capa,
                    eks: Some(eks),
                    region: c.region.clone(),
                    account: Some(c.account.clone()),
                }
            }
            _ => {
                return Err(TargetError::SharedWithMany {
                    name: c.cluster.clone(),
                    others: c.also_named.clone(),
                });
            }
        };
        out.insert(target);
    }
    Ok(out.into_iter().collect())
}

#[cfg(test)]
mod tests;
