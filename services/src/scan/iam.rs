//! IAM in the scan. IAM is global and the tagging listing of a region does not return it, so
//! each account is listed once, whatever the regions scanned there ([`account_iam`]): the pages
//! of `iam:ListInstanceProfiles` and `iam:ListOpenIDConnectProviders`. Each region's scan then
//! takes from it what belongs to that region ([`claimed_in`], [`unproven_in`]).
//!
//! - Karpenter's instance profiles are claimed by the teardown's own rule
//!   (`policy::instance_profiles::decide`: name `<cluster>_<hash>`, Karpenter's tags, the region
//!   tag, the path). IAM lists no tags, so a profile is read (`iam:GetInstanceProfile`) only when
//!   its name or path names a cluster that is neither live nor not ours: the calls grow with the
//!   leaked profiles, never with the live clusters. A profile is claimed in the region its
//!   region tag names, so another region's twin is that region's business.
//! - An IRSA OIDC provider is proven a cluster's only by the issuer CAPA recorded on the
//!   cluster's object, which a deleted cluster no longer has: the scan never makes one a
//!   candidate, and lists those whose issuer names the region as unproven, saying so.

use super::claims::claims;
use super::join::ClaimedResource;
use crate::cleaners::oidc_providers::issuer_of_arn;
use crate::errors::{ApiFailure, ErrorClass, call};
use crate::locate::describe;
use crate::model::AwsClients;
use crate::policy::instance_profiles::{ListedProfile, REGION_TAG, decide};
use crate::policy::oidc_providers::issuer_region;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One Karpenter-looking profile of the account, read with its tags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadProfile {
    pub arn: String,
    pub name: String,
    pub path: String,
    pub tags: Vec<(String, String)>,
    /// The cluster its name or path names.
    pub cluster: String,
}

/// One account's IAM, listed once for all its regions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccountIam {
    pub profiles: Vec<ReadProfile>,
    /// Every OIDC provider's ARN.
    pub oidc_providers: Vec<String>,
    /// Calls by operation.
    pub calls: BTreeMap<&'static str, usize>,
}

/// A resource the scan found and cannot prove any cluster's: reported, never a candidate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unproven {
    pub arn: String,
    pub kind: String,
    pub why: String,
}

/// The cluster a Karpenter profile's path (`/karpenter/<region>/<cluster>/…`) or else its name
/// (`<cluster>_<hash>`: a cluster name has no `_`) names.
pub fn named_cluster(name: &str, path: &str) -> Option<String> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    if let ["karpenter", _region, cluster, ..] = parts.as_slice() {
        return Some(cluster.to_string());
    }
    let (cluster, hash) = name.rsplit_once('_')?;
    (!cluster.is_empty() && !hash.is_empty()).then(|| cluster.to_string())
}

/// The account's IAM listing; profiles named for `skip` (live, not ours) are not read.
#[tracing::instrument(skip_all)]
pub async fn account_iam(
    c: &AwsClients,
    skip: &BTreeSet<String>,
) -> Result<AccountIam, ApiFailure> {
    let mut out = AccountIam::default();
    let mut pages = 0;
    let listed = describe::all_pages(|marker| {
        pages += 1;
        async move {
            let page = call("iam.ListInstanceProfiles", || {
                // IAM's largest page is the account's quota of profiles: one page.
                c.iam
                    .list_instance_profiles()
                    .max_items(1000)
                    .set_marker(marker.clone())
                    .send()
            })
            .await?;
            let found: Vec<(String, String)> = page
                .instance_profiles()
                .iter()
                .map(|p| (p.instance_profile_name().to_string(), p.path().to_string()))
                .collect();
            let next = page
                .is_truncated()
                .then(|| page.marker().map(str::to_string));
            Ok::<_, ApiFailure>((found, next.flatten()))
        }
    })
    .await?;
    out.calls.insert("iam.ListInstanceProfiles", pages);
    for (name, path) in listed {
        let Some(cluster) = named_cluster(&name, &path) else {
            continue;
        };
        if skip.contains(&cluster) || !claims_usable(&cluster) {
            continue;
        }
        *out.calls.entry("iam.GetInstanceProfile").or_default() += 1;
        let got = call("iam.GetInstanceProfile", || {
            c.iam
                .get_instance_profile()
                .instance_profile_name(&name)
                .send()
        })
        .await;
        let p = match got {
            Ok(o) => o.instance_profile,
            // Gone since the listing.
            Err(f) if f.class == ErrorClass::NotFound => None,
            Err(f) => return Err(f),
        };
        let Some(p) = p else { continue };
        out.profiles.push(ReadProfile {
            arn: p.arn().to_string(),
            name,
            path: p.path().to_string(),
            tags: p
                .tags()
                .iter()
                .map(|t| (t.key().to_string(), t.value().to_string()))
                .collect(),
            cluster,
        });
    }
    let oidc = call("iam.ListOpenIDConnectProviders", || {
        c.iam.list_open_id_connect_providers().send()
    })
    .await?;
    out.calls.insert("iam.ListOpenIDConnectProviders", 1);
    out.oidc_providers = oidc
        .open_id_connect_provider_list()
        .iter()
        .filter_map(|p| p.arn().map(str::to_string))
        .collect();
    Ok(out)
}

fn claims_usable(cluster: &str) -> bool {
    super::claims::usable(cluster)
}

/// The account's Karpenter profiles the teardown's rule gives to a cluster in `region`, as the
/// scan's claimed resources.
pub fn claimed_in(iam: &AccountIam, region: &str) -> Vec<ClaimedResource> {
    iam.profiles
        .iter()
        .filter(|p| p.tags.iter().any(|(k, v)| k == REGION_TAG && v == region))
        .filter_map(|p| {
            let pairs: Vec<(&str, &str)> = p
                .tags
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let listed = ListedProfile {
                name: &p.name,
                path: &p.path,
                tags: &pairs,
            };
            if !decide(&listed, &p.cluster, region).is_delete() {
                return None;
            }
            let found: Vec<_> = claims(pairs.iter().copied())
                .into_iter()
                .filter(|c| c.cluster == p.cluster)
                .collect();
            (!found.is_empty()).then(|| ClaimedResource {
                arn: p.arn.clone(),
                kind: "iam:instance-profile".into(),
                claims: found,
                tags: p.tags.clone(),
            })
        })
        .collect()
}

/// The account's OIDC providers whose issuer names `region`: never candidates (see the module
/// doc), reported as unproven.
pub fn unproven_in(iam: &AccountIam, region: &str) -> Vec<Unproven> {
    iam.oidc_providers
        .iter()
        .filter(|arn| issuer_of_arn(arn).and_then(issuer_region) == Some(region))
        .map(|arn| Unproven {
            arn: arn.clone(),
            kind: "iam:oidc-provider".into(),
            why: "an IRSA OIDC provider is proven a cluster's only by the issuer CAPA recorded on \
                  its object, which a deleted cluster no longer has: never a candidate (check it \
                  by hand)"
                .into(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(name: &str, path: &str, region: &str, cluster: &str) -> ReadProfile {
        ReadProfile {
            arn: format!("arn:aws:iam::111:instance-profile{path}{name}"),
            name: name.into(),
            path: path.into(),
            tags: vec![
                (format!("kubernetes.io/cluster/{cluster}"), "owned".into()),
                ("karpenter.k8s.aws/ec2nodeclass".into(), "default".into()),
                (REGION_TAG.into(), region.into()),
            ],
            cluster: named_cluster(name, path).unwrap_or_default(),
        }
    }

    #[test]
    fn a_profile_names_its_cluster_by_path_or_name() {
        assert_eq!(named_cluster("c1_123", "/").as_deref(), Some("c1"));
        assert_eq!(
            named_cluster("x_1", "/karpenter/us-east-1/c-2/uid/").as_deref(),
            Some("c-2")
        );
        assert_eq!(named_cluster("no-hash", "/"), None);
        assert_eq!(named_cluster("c1_", "/"), None);
    }

    #[test]
    fn karpenters_profiles_are_claimed_in_their_tagged_region_only_and_oidc_never() {
        let iam = AccountIam {
            profiles: vec![
                profile("dead_1", "/", "us-east-1", "dead"),
                profile(
                    "dead_2",
                    "/karpenter/eu-west-1/dead/u/",
                    "eu-west-1",
                    "dead",
                ),
                // Tagged for another cluster than its name: not Karpenter's for it.
                profile("dead_3", "/", "us-east-1", "other"),
            ],
            oidc_providers: vec![
                "arn:aws:iam::111:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/A".into(),
                "arn:aws:iam::111:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/B".into(),
            ],
            calls: BTreeMap::new(),
        };
        let here = claimed_in(&iam, "us-east-1");
        assert_eq!(here.len(), 1, "{here:?}");
        assert!(here[0].arn.ends_with("/dead_1"));
        assert_eq!(here[0].claims[0].cluster, "dead");
        let there = claimed_in(&iam, "eu-west-1");
        assert!(
            there.len() == 1 && there[0].arn.ends_with("/dead_2"),
            "{there:?}"
        );
        let unproven = unproven_in(&iam, "us-east-1");
        assert_eq!(unproven.len(), 1);
        assert!(unproven[0].arn.ends_with("/id/A"));
    }
}
