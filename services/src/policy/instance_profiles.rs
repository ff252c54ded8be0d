//! IAM instance profiles Karpenter made for the cluster's EC2NodeClasses (phase 2,
//! `instance-profile`). IAM is global: a same-named cluster in another region of the account has
//! look-alike profiles. A profile is deleted only when every one of these holds:
//! - its name is Karpenter's for the cluster, `<cluster>_<hash>`;
//! - it carries `kubernetes.io/cluster/<cluster>=owned`, `karpenter.k8s.aws/ec2nodeclass` and
//!   `topology.kubernetes.io/region=<the session's region>` (the region tag is what keeps the
//!   other region's twin);
//! - its path, when it has one, is the cluster's: `/karpenter/<region>/<cluster>/…`
//!   (aws/karpenter-provider-aws#8249; older profiles have `/`);
//! - no live instance runs with it (deleting it would cut a node's credentials): until then it
//!   is blocked.
//!
//! The role in it is never deleted: it is the user's (Karpenter is given it, it does not make it).

use super::{Verdict, tags};

/// Karpenter's tag naming the EC2NodeClass a profile is for.
pub const NODECLASS_TAG: &str = "karpenter.k8s.aws/ec2nodeclass";
/// Karpenter's tag naming the region of the cluster a profile is for.
pub const REGION_TAG: &str = "topology.kubernetes.io/region";

/// One profile as IAM lists it.
#[derive(Clone, Copy, Debug)]
pub struct ListedProfile<'a> {
    pub name: &'a str,
    pub path: &'a str,
    pub tags: &'a [(&'a str, &'a str)],
}

/// Whether a profile is Karpenter's for `cluster` in `region` (see the module doc), from what
/// IAM lists; then [`by_user`] once the live instances are known.
pub fn decide(p: &ListedProfile<'_>, cluster: &str, region: &str) -> Verdict {
    let tagged = |k: &str, v: &str| p.tags.iter().any(|(tk, tv)| *tk == k && *tv == v);
    let named = p
        .name
        .strip_prefix(cluster)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|hash| !hash.is_empty());
    if !named {
        return Verdict::foreign("not named <cluster>_<hash>");
    }
    if !(tagged(&tags::cloud_key(cluster), tags::OWNED)
        && tags::has_key(p.tags.iter().copied(), NODECLASS_TAG))
    {
        return Verdict::foreign("not tagged as Karpenter's for the cluster");
    }
    if !tagged(REGION_TAG, region) {
        return Verdict::foreign("Karpenter's for a cluster of this name in another region");
    }
    if !(p.path == "/"
        || p.path
            .starts_with(&format!("/karpenter/{region}/{cluster}/")))
    {
        return Verdict::foreign("its path is not the cluster's");
    }
    Verdict::Delete
}

/// Karpenter's profile, once the live instances are known: `user`, one that runs with it.
pub fn by_user(user: Option<&str>) -> Verdict {
    match user {
        Some(i) => Verdict::blocked(format!("instance {i} still runs with it")),
        None => Verdict::Delete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    const OWNED: (&str, &str) = ("kubernetes.io/cluster/c1", "owned");
    const CLASS: (&str, &str) = (NODECLASS_TAG, "default");
    const REGION: (&str, &str) = (REGION_TAG, "us-east-1");

    fn d(name: &str, path: &str, tags: &[(&str, &str)]) -> Verdict {
        decide(&ListedProfile { name, path, tags }, "c1", "us-east-1")
    }

    #[test]
    fn karpenters_profile_of_the_cluster_in_its_region_is_deleted_and_look_alikes_are_not() {
        let all = [OWNED, CLASS, REGION];
        let shared = ("kubernetes.io/cluster/c1", "shared");
        table::check(&[
            (
                d("c1_123456", "/", &all),
                Delete,
                "an older profile, path /",
            ),
            (
                d("c1_123456", "/karpenter/us-east-1/c1/uid-1/", &all),
                Delete,
                "the cluster's path",
            ),
            (
                d("c1_123456", "/", &[OWNED, CLASS, (REGION_TAG, "eu-west-1")]),
                Foreign,
                "the same cluster name in another region",
            ),
            (
                d("c1_123456", "/", &[OWNED, CLASS]),
                Foreign,
                "no region tag",
            ),
            (
                d("c1_123456", "/", &[OWNED, REGION]),
                Foreign,
                "no EC2NodeClass tag",
            ),
            (
                d("c1_123456", "/", &[shared, CLASS, REGION]),
                Foreign,
                "shared is not owned",
            ),
            (
                d("c1-b_123456", "/", &all),
                Foreign,
                "another cluster's name",
            ),
            (d("c1", "/", &all), Foreign, "no hash"),
            (d("c1_", "/", &all), Foreign, "no hash, underscore"),
            (
                d("my-c1_123", "/", &all),
                Foreign,
                "the name must start with the cluster's",
            ),
            (
                d("c1_123456", "/karpenter/eu-west-1/c1/uid/", &all),
                Foreign,
                "the path names another region",
            ),
            (
                d("c1_123456", "/karpenter/us-east-1/c1-b/uid/", &all),
                Foreign,
                "the path names another cluster",
            ),
            (
                d("c1_123456", "/team/", &all),
                Foreign,
                "a path of someone else's",
            ),
        ]);
        assert_eq!(by_user(None), Verdict::Delete, "no node runs with it");
        assert_eq!(
            by_user(Some("i-1")),
            Verdict::blocked("instance i-1 still runs with it"),
            "a node still runs with it: blocked, as reported today"
        );
    }
}
