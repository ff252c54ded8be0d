//! What EKS says about clusters, for the kinds EKS made (the IRSA OIDC provider, the cluster
//! security group, the control-plane log group). EKS is only asked, never changed: sweeper does
//! not delete EKS clusters (CAPA does), it deletes their leftovers once EKS reports them gone.
//!
//! Every answer that is not a clear "does not exist" counts as "still there": a failed call
//! keeps the resource (fail closed) and says why.

use crate::errors::{ApiFailure, ErrorClass, call};
use crate::model::AwsClients;

/// One EKS cluster as DescribeCluster reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveCluster {
    pub name: String,
    /// `ACTIVE`, `CREATING`, `DELETING`, ... (a deleting cluster still exists).
    pub status: String,
    /// Its OIDC issuer, as [`issuer_key`] writes it.
    pub issuer: Option<String>,
    pub vpc: Option<String>,
    /// The security group EKS made for the cluster.
    pub security_group: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EksCluster {
    /// DescribeCluster says ResourceNotFound.
    Gone,
    Live(LiveCluster),
}

// How an issuer is compared and which region it names is the OIDC provider rule's
// (`policy::oidc_providers`); EKS's answers are read with the same functions.
pub use crate::policy::oidc_providers::{issuer_key, issuer_region};

/// DescribeCluster `name` in the session's region.
pub async fn describe(c: &AwsClients, name: &str) -> Result<EksCluster, ApiFailure> {
    let res = call("eks.DescribeCluster", || {
        c.eks.describe_cluster().name(name).send()
    })
    .await;
    let out = match res {
        Ok(out) => out,
        Err(f) if f.class == ErrorClass::NotFound => return Ok(EksCluster::Gone),
        Err(f) => return Err(f),
    };
    // An answer without a cluster is not "gone": only ResourceNotFound is.
    let Some(cl) = out.cluster() else {
        return Ok(EksCluster::Live(LiveCluster {
            name: name.to_string(),
            status: "unknown".into(),
            ..Default::default()
        }));
    };
    let vpc = cl.resources_vpc_config();
    Ok(EksCluster::Live(LiveCluster {
        name: cl.name().unwrap_or(name).to_string(),
        status: cl
            .status()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        issuer: cl
            .identity()
            .and_then(|i| i.oidc())
            .and_then(|o| o.issuer())
            .map(issuer_key),
        vpc: vpc.and_then(|v| v.vpc_id()).map(str::to_string),
        security_group: vpc
            .and_then(|v| v.cluster_security_group_id())
            .map(str::to_string),
    }))
}

/// The live EKS cluster in the session's region that reports `issuer` (an [`issuer_key`]), if
/// any. `first` is asked first (the cluster the issuer was made for: the usual answer while it
/// lives), then every cluster ListClusters names. A cluster gone between the listing and its
/// describe reports nothing.
pub async fn cluster_reporting(
    c: &AwsClients,
    issuer: &str,
    first: &str,
) -> Result<Option<String>, ApiFailure> {
    if let EksCluster::Live(l) = describe(c, first).await?
        && l.issuer.as_deref() == Some(issuer)
    {
        return Ok(Some(l.name));
    }
    let mut token: Option<String> = None;
    loop {
        let page = call("eks.ListClusters", || {
            c.eks.list_clusters().set_next_token(token.clone()).send()
        })
        .await?;
        for name in page.clusters().iter().filter(|n| n.as_str() != first) {
            if let EksCluster::Live(l) = describe(c, name).await?
                && l.issuer.as_deref() == Some(issuer)
            {
                return Ok(Some(l.name));
            }
        }
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return Ok(None),
        }
    }
}

/// Every EKS cluster ListClusters names in the session's region (all pages), with the pages
/// read: the leak scan's one EKS listing per region. A failed page fails the listing: a scan
/// that cannot tell which EKS clusters live names no candidate there.
pub async fn cluster_names(
    c: &AwsClients,
) -> Result<(std::collections::BTreeSet<String>, usize), ApiFailure> {
    let mut names = std::collections::BTreeSet::new();
    let mut pages = 0;
    let mut token: Option<String> = None;
    loop {
        let page = call("eks.ListClusters", || {
            c.eks.list_clusters().set_next_token(token.clone()).send()
        })
        .await?;
        pages += 1;
        names.extend(page.clusters().iter().cloned());
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return Ok((names, pages)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuers_compare_without_scheme_or_trailing_slash() {
        let k = "oidc.eks.us-west-2.amazonaws.com/id/ABCDEF0123";
        assert_eq!(
            issuer_key("https://oidc.eks.us-west-2.amazonaws.com/id/ABCDEF0123"),
            k
        );
        assert_eq!(
            issuer_key("OIDC.eks.us-west-2.amazonaws.com/id/ABCDEF0123/"),
            k
        );
        assert_ne!(
            issuer_key("oidc.eks.us-west-2.amazonaws.com/id/abcdef0123"),
            k,
            "the id is case-sensitive"
        );
    }

    #[test]
    fn an_issuers_region_is_in_its_host() {
        assert_eq!(
            issuer_region("oidc.eks.eu-west-1.amazonaws.com/id/X"),
            Some("eu-west-1")
        );
        assert_eq!(
            issuer_region("oidc.eks.cn-north-1.amazonaws.com.cn/id/X"),
            Some("cn-north-1")
        );
        assert_eq!(issuer_region("token.actions.githubusercontent.com"), None);
        assert_eq!(issuer_region("oidc.eks..amazonaws.com/id/X"), None);
    }
}
