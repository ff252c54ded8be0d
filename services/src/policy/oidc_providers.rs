//! The IAM OIDC provider CAPA made for an EKS cluster's IRSA (phase 2, `oidc-provider`, EKS
//! only). IAM is global and the provider carries only the tags CAPA copied from the cluster, so
//! the rule is strict. A provider is deleted only when every one of these holds:
//! - the cluster is an EKS cluster and CAPA recorded its issuer (`status.oidcProvider`, read by
//!   the controller before the teardown starts, `PassRequest::eks`); no recorded issuer, no
//!   candidate at all: sweeper never guesses which provider was the cluster's (the cleaner does
//!   not list providers then);
//! - the provider's URL is that issuer ([`decide`]);
//! - it carries `kubernetes.io/cluster/<eksName>=owned` ([`decide`]);
//! - no live EKS cluster in the account reports that issuer ([`by_use`]). An issuer names its
//!   region, so that region's clusters are asked; an issuer of another region than the
//!   session's cannot be checked and is kept. While a live cluster reports it, or while EKS
//!   cannot be asked (a transient failure), it is blocked, with the reason; any other failure
//!   to ask fails the locate step, so nothing is deleted either (fail closed).

use super::{Verdict, tags};

/// An issuer URL as IAM and CAPA write it and as EKS does, made comparable: no scheme, no
/// trailing slash (`https://oidc.eks.r.amazonaws.com/id/X/` and `oidc.eks.r.amazonaws.com/id/X`
/// are one issuer). The host is case-insensitive, the path (the id) is kept as it is.
pub fn issuer_key(url: &str) -> String {
    let url = url.trim();
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or(url)
        .trim_end_matches('/');
    match rest.split_once('/') {
        Some((host, path)) => format!("{}/{path}", host.to_ascii_lowercase()),
        None => rest.to_ascii_lowercase(),
    }
}

/// The region in an EKS issuer (`oidc.eks.<region>.amazonaws.com[.cn]/id/<ID>`), if it is one.
pub fn issuer_region(issuer: &str) -> Option<&str> {
    let host = issuer.split('/').next()?;
    let rest = host.strip_prefix("oidc.eks.")?;
    let (region, tail) = rest.split_once('.')?;
    tail.starts_with("amazonaws.com")
        .then_some(region)
        .filter(|r| !r.is_empty())
}

/// One provider as IAM describes it.
#[derive(Clone, Copy, Debug)]
pub struct Provider<'a> {
    pub url: &'a str,
    pub tags: &'a [(&'a str, &'a str)],
}

/// Whether a provider is the cluster's (`cluster`: its EKS name; `recorded_issuer`: the issuer
/// CAPA recorded), from what IAM says of it; then [`by_use`] once EKS has been asked.
pub fn decide(p: &Provider<'_>, cluster: &str, recorded_issuer: &str) -> Verdict {
    if issuer_key(p.url) != issuer_key(recorded_issuer) {
        return Verdict::foreign("another issuer's provider");
    }
    if !tags::is_owned(p.tags.iter().copied(), &tags::cloud_key(cluster)) {
        return Verdict::foreign(
            "the recorded issuer's provider lacks the cluster's owned tag: someone else's",
        );
    }
    Verdict::Delete
}

/// Whether a live EKS cluster may still use the issuer, as far as the session can tell.
#[derive(Clone, Copy, Debug)]
pub enum Use<'a> {
    /// The issuer names `region`, the session acts in `session`: EKS there is not asked.
    OtherRegion {
        region: &'a str,
        session: Option<&'a str>,
    },
    /// No live EKS cluster reports it.
    Unused,
    /// Live EKS cluster `name` reports it (its name was reused, or a restore shares the issuer).
    UsedBy(&'a str),
    /// EKS could not be asked now (a transient failure, as it reads).
    Unknown(&'a str),
}

/// The region check made before EKS is asked: `Some` when the issuer names another region than
/// the session's, so EKS must not be asked and [`by_use`] keeps the provider.
pub fn other_region<'a>(issuer: &'a str, session: Option<&'a str>) -> Option<Use<'a>> {
    issuer_region(issuer)
        .filter(|r| session != Some(*r))
        .map(|region| Use::OtherRegion { region, session })
}

/// The cluster's provider of `issuer`, once its use is known: deleted only when unused.
pub fn by_use(issuer: &str, u: Use<'_>) -> Verdict {
    match u {
        Use::Unused => Verdict::Delete,
        Use::OtherRegion { region, session } => Verdict::blocked(format!(
            "kept: the issuer is in region {region}, this session acts in {}; EKS there is not asked",
            session.unwrap_or("no region")
        )),
        Use::UsedBy(name) => {
            Verdict::blocked(format!("EKS cluster {name} still reports issuer {issuer}"))
        }
        Use::Unknown(failure) => Verdict::blocked(format!(
            "kept: EKS cannot be asked whether a live cluster reports issuer {issuer}: {failure}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    const ISSUER: &str = "https://oidc.eks.us-east-1.amazonaws.com/id/AAAA1111";
    const OWNED: (&str, &str) = ("kubernetes.io/cluster/ns_ek1", "owned");

    fn d(url: &str, tags: &[(&str, &str)], cluster: &str) -> Verdict {
        decide(&Provider { url, tags }, cluster, ISSUER)
    }

    #[test]
    fn the_recorded_issuers_provider_with_the_owned_tag_is_deleted_and_look_alikes_are_not() {
        let url = "oidc.eks.us-east-1.amazonaws.com/id/AAAA1111";
        let other = "oidc.eks.us-east-1.amazonaws.com/id/BBBB2222";
        table::check(&[
            (d(url, &[OWNED], "ns_ek1"), Delete, "IAM's URL, no scheme"),
            (d(ISSUER, &[OWNED], "ns_ek1"), Delete, "the URL as recorded"),
            (
                d(&format!("{ISSUER}/"), &[OWNED], "ns_ek1"),
                Delete,
                "a trailing slash is the same issuer",
            ),
            (
                d(other, &[OWNED], "ns_ek1"),
                Foreign,
                "a provider of another issuer, even with the cluster's tag",
            ),
            (
                d(ISSUER, &[], "ns_ek1"),
                Foreign,
                "the recorded issuer but not tagged: someone else's (eksctl, terraform)",
            ),
            (
                d(
                    ISSUER,
                    &[("kubernetes.io/cluster/ns_ek1", "shared")],
                    "ns_ek1",
                ),
                Foreign,
                "shared is not owned",
            ),
            (
                d(ISSUER, &[OWNED], "ns_ek2"),
                Foreign,
                "another cluster's tag",
            ),
            (
                d(
                    ISSUER,
                    &[("kubernetes.io/cluster/ns_ek1-b", "owned")],
                    "ns_ek1",
                ),
                Foreign,
                "a cluster whose name starts with the cluster's",
            ),
        ]);
    }

    #[test]
    fn the_clusters_provider_waits_while_a_live_cluster_may_use_it() {
        let issuer = "oidc.eks.us-east-1.amazonaws.com/id/AAAA1111";
        let east = Some("us-east-1");
        table::check(&[
            (
                by_use(issuer, Use::Unused),
                Delete,
                "no live cluster reports it",
            ),
            (
                by_use(issuer, Use::UsedBy("restored")),
                Blocked,
                "a live cluster reports it",
            ),
            (
                by_use(issuer, Use::Unknown("ThrottlingException")),
                Blocked,
                "EKS cannot be asked now",
            ),
            (
                by_use(issuer, other_region(issuer, Some("eu-west-1")).unwrap()),
                Blocked,
                "the issuer is another region's",
            ),
            (
                by_use(issuer, other_region(issuer, None).unwrap()),
                Blocked,
                "the session has no region",
            ),
        ]);
        assert!(other_region(issuer, east).is_none(), "the session's region");
        assert!(
            other_region("https://issuer.example.com/x", east).is_none(),
            "an issuer that names no region is asked in the session's"
        );
        assert_eq!(
            by_use(issuer, Use::UsedBy("restored")),
            Verdict::blocked(format!(
                "EKS cluster restored still reports issuer {issuer}"
            )),
            "as reported today"
        );
        assert_eq!(
            by_use(issuer, other_region(issuer, None).unwrap()),
            Verdict::blocked(
                "kept: the issuer is in region us-east-1, this session acts in no region; EKS there is not asked"
            ),
        );
        assert_eq!(
            by_use(issuer, Use::Unknown("throttled")),
            Verdict::blocked(format!(
                "kept: EKS cannot be asked whether a live cluster reports issuer {issuer}: throttled"
            )),
        );
    }
}
