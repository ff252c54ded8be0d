//! The tag keys and values that decide ownership, and the exact-match predicates over them. The
//! cluster name is the whole last path segment of the key, so cluster `c1` never matches `c1-b`
//! (exact key comparison, never a prefix match). Locating builds its filters from the same keys
//! (`locate::tags` re-exports them), so the server's filter and the policy's check agree.

/// CAPA marks what it created for cluster `N` with `sigs.k8s.io/cluster-api-provider-aws/cluster/N=owned`.
pub fn capa_key(cluster: &str) -> String {
    format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{cluster}")
}

/// The cloud provider / load balancer controller marks what it created with `kubernetes.io/cluster/N=owned`.
pub fn cloud_key(cluster: &str) -> String {
    format!("kubernetes.io/cluster/{cluster}")
}

/// The only value that means "ours to delete"; `shared` never does.
pub const OWNED: &str = "owned";

/// The value of a resource the cluster uses but does not own (a bring-your-own subnet): never
/// deleted; issue #44 will untag it.
pub const SHARED: &str = "shared";

/// The AWS Load Balancer Controller tags its load balancers, target groups and security groups
/// `elbv2.k8s.aws/cluster=<name>`, never with the cluster tag: a search by that tag misses them.
pub const LBC_CLUSTER_TAG: &str = "elbv2.k8s.aws/cluster";

/// The resource types phase 2 takes from a controller tag's finds (see locate::placement, which
/// drops every other kind): the controller-tag queries ask the tagging API for these only. Classic
/// load balancers are `elasticloadbalancing:loadbalancer` too in AWS; neither controller creates
/// them.
pub const CONTROLLER_TAGGED_TYPES: &[&str] = &[
    "elasticloadbalancing:loadbalancer",
    "elasticloadbalancing:targetgroup",
    "ec2:security-group",
    "ec2:network-interface",
];

/// The Amazon VPC CNI tags the network interfaces it creates `cluster.k8s.amazonaws.com/name=<name>`
/// (when CLUSTER_NAME is set), never with the cluster tag.
pub const CNI_CLUSTER_TAG: &str = "cluster.k8s.amazonaws.com/name";

/// True when `tags` carry `key=value` exactly.
pub fn has<'a>(tags: impl IntoIterator<Item = (&'a str, &'a str)>, key: &str, value: &str) -> bool {
    tags.into_iter().any(|(k, v)| k == key && v == value)
}

/// EKS tags the cluster security group it creates; EKS deletes it, not us.
pub const EKS_CLUSTER_TAG: &str = "aws:eks:cluster-name";

/// True when `tags` (key, value pairs) carry `key=owned`.
pub fn is_owned<'a>(tags: impl IntoIterator<Item = (&'a str, &'a str)>, key: &str) -> bool {
    tags.into_iter().any(|(k, v)| k == key && v == OWNED)
}

/// True when `tags` carry `key` with any value.
pub fn has_key<'a>(tags: impl IntoIterator<Item = (&'a str, &'a str)>, key: &str) -> bool {
    tags.into_iter().any(|(k, _)| k == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_name_prefix_is_not_the_same_cluster() {
        let tags = [(cloud_key("c1-b"), OWNED.to_string())];
        let pairs = || tags.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        assert!(!is_owned(pairs(), &cloud_key("c1")));
        assert!(is_owned(pairs(), &cloud_key("c1-b")));
    }

    #[test]
    fn shared_is_not_owned() {
        let key = cloud_key("c1");
        assert!(!is_owned([(key.as_str(), "shared")], &key));
    }
}
