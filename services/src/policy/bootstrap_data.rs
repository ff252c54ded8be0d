//! CAPA's bootstrap data (phase 2, task `bootstrap-data`): the machines' user data CAPA stores in
//! Secrets Manager or SSM Parameter Store (`spec.cloudInit.secureSecretsBackend`) and deletes with
//! each AWSMachine; a machine whose delete never got that far (a force-removed finalizer, a
//! deleted namespace) leaves them, holding a bootstrap token. What CAPA writes (at 2cf09d7):
//! - Secrets Manager (`pkg/cloud/services/secretsmanager/secret.go`, `Create`): secrets named
//!   `aws.cluster.x-k8s.io/<uuid>-<n>` (`entryPrefix` joined with a new UUID, one per 7000-byte
//!   chunk, `n` from 0);
//! - SSM (`pkg/cloud/services/ssm/secret.go`, `Create`): the same prefix with its leading `aws.`
//!   removed (SSM refuses names starting with `aws`/`ssm`: `prefixRe`) and a `/` in front, chunks
//!   as path elements: parameters `/cluster.x-k8s.io/<uuid>/<n>`, SecureString;
//! - both tagged with `infrav1.Build` for the Cluster API Cluster `N` (`scope.Name()`), owned:
//!   `sigs.k8s.io/cluster-api-provider-aws/cluster/N=owned` and the role and name, **and**
//!   `kubernetes.io/cluster/N=owned` (`ClusterAWSCloudProviderTagKey`, added to the same tags).
//!
//! A secret or parameter is deleted ([`decide`]: Delete) only when its name has exactly CAPA's
//! shape for its store ([`capa_name`]) and it carries `sigs.k8s.io/cluster-api-provider-aws/
//! cluster/N=owned`. Kept: CAPA's tag with another value, or on a name of another shape (reported:
//! not what CAPA writes); only `kubernetes.io/cluster/N=owned` without CAPA's key (CAPA always
//! writes both, so this is not CAPA's bootstrap data: someone else tagged it for the cluster; never
//! deleted, and not even found: the listings ask for CAPA's key); another cluster's (a prefix of
//! its name included: `c1` is not `c10`) or untagged: foreign.
//!
//! A Secrets Manager secret is deleted with the minimum recovery window (7 days): it can be
//! restored (`aws secretsmanager restore-secret`) until then, and is no longer listed. CAPA
//! itself force-deletes; sweeper deletes what CAPA left, so it leaves the way back.

use super::Verdict;
use super::tags::{OWNED, capa_key, cloud_key};

/// Where CAPA stores a machine's bootstrap data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootstrapStore {
    SecretsManager,
    Ssm,
}

impl BootstrapStore {
    /// The prefix of every name CAPA gives in this store (the listing's name filter).
    pub fn prefix(self) -> &'static str {
        match self {
            BootstrapStore::SecretsManager => "aws.cluster.x-k8s.io/",
            BootstrapStore::Ssm => "/cluster.x-k8s.io/",
        }
    }

    /// Between the UUID and the chunk number.
    fn separator(self) -> char {
        match self {
            BootstrapStore::SecretsManager => '-',
            BootstrapStore::Ssm => '/',
        }
    }
}

/// Whether `name` has exactly the shape CAPA gives bootstrap data in `store`:
/// prefix, a UUID (8-4-4-4-12 hex digits), the separator, a chunk number.
pub fn capa_name(store: BootstrapStore, name: &str) -> bool {
    let Some(rest) = name.strip_prefix(store.prefix()) else {
        return false;
    };
    if rest.len() < 38 || !rest.is_char_boundary(36) {
        return false;
    }
    let (uuid, tail) = rest.split_at(36);
    let uuid_ok = uuid.char_indices().all(|(i, c)| match i {
        8 | 13 | 18 | 23 => c == '-',
        _ => c.is_ascii_hexdigit(),
    });
    let mut tail = tail.chars();
    let sep_ok = tail.next() == Some(store.separator());
    let n: String = tail.collect();
    uuid_ok && sep_ok && !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())
}

/// Whether `name` in `store`, tagged `tags`, is CAPA's bootstrap data of Cluster API Cluster
/// `capa_cluster` (see the module doc).
pub fn decide(
    store: BootstrapStore,
    name: &str,
    tags: &[(&str, &str)],
    capa_cluster: &str,
) -> Verdict {
    let capa = capa_key(capa_cluster);
    let cloud = cloud_key(capa_cluster);
    let value = |key: &str| tags.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    match value(&capa) {
        Some(OWNED) if capa_name(store, name) => Verdict::Delete,
        Some(OWNED) => Verdict::keep(format!(
            "{name} carries {capa}=owned but is not named as CAPA names bootstrap data \
             ({}<uuid>{}<n>): not CAPA's",
            store.prefix(),
            store.separator()
        )),
        Some(other) => Verdict::keep(format!(
            "{name} carries {capa}={other}, not owned: not CAPA's own"
        )),
        None if value(&cloud) == Some(OWNED) => Verdict::keep(format!(
            "{name} carries {cloud}=owned without CAPA's {capa}: CAPA tags its bootstrap data \
             with both, so this is someone else's"
        )),
        None => Verdict::foreign("not tagged for the cluster by CAPA"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    const UUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

    #[test]
    fn names_are_capas_per_store() {
        let s = |n: &str| capa_name(BootstrapStore::SecretsManager, n);
        let p = |n: &str| capa_name(BootstrapStore::Ssm, n);
        assert!(s(&format!("aws.cluster.x-k8s.io/{UUID}-0")));
        assert!(s(&format!("aws.cluster.x-k8s.io/{UUID}-12")));
        assert!(p(&format!("/cluster.x-k8s.io/{UUID}/0")));
        assert!(
            !p(&format!("aws.cluster.x-k8s.io/{UUID}-0")),
            "SSM's has no aws."
        );
        assert!(!s(&format!("/cluster.x-k8s.io/{UUID}/0")));
        assert!(!s(&format!("aws.cluster.x-k8s.io/{UUID}-")));
        assert!(!s(&format!("aws.cluster.x-k8s.io/{UUID}-0x")));
        assert!(!s(&format!("aws.cluster.x-k8s.io/{UUID}/0")));
        assert!(!s("aws.cluster.x-k8s.io/my-own-secret-0"));
        assert!(!s(&format!(
            "aws.cluster.x-k8s.io/{}-0",
            UUID.replace('-', "x")
        )));
        assert!(!s(&format!("other/aws.cluster.x-k8s.io/{UUID}-0")));
    }

    #[test]
    fn only_capas_owned_and_named_data_is_deleted() {
        let capa = "sigs.k8s.io/cluster-api-provider-aws/cluster/c1";
        let cloud = "kubernetes.io/cluster/c1";
        let secret = format!("aws.cluster.x-k8s.io/{UUID}-0");
        let param = format!("/cluster.x-k8s.io/{UUID}/1");
        let both = [(capa, "owned"), (cloud, "owned")];
        let d = |store, name: &str, tags: &[(&str, &str)]| decide(store, name, tags, "c1");
        use BootstrapStore::*;
        table::check(&[
            (d(SecretsManager, &secret, &both), Delete, "CAPA's secret"),
            (d(Ssm, &param, &both), Delete, "CAPA's parameter"),
            (
                d(SecretsManager, &secret, &[(capa, "owned")]),
                Delete,
                "CAPA's key alone",
            ),
            (
                d(SecretsManager, &secret, &[(cloud, "owned")]),
                Keep,
                "the cloud provider's key without CAPA's",
            ),
            (
                d(SecretsManager, &secret, &[(capa, "shared")]),
                Keep,
                "CAPA's key, not owned",
            ),
            (
                d(SecretsManager, "aws.cluster.x-k8s.io/mine-0", &both),
                Keep,
                "another name shape",
            ),
            (
                d(Ssm, &secret, &both),
                Keep,
                "Secrets Manager's shape in SSM",
            ),
            (
                d(
                    SecretsManager,
                    &secret,
                    &[("sigs.k8s.io/cluster-api-provider-aws/cluster/c10", "owned")],
                ),
                Foreign,
                "a cluster whose name starts with ours",
            ),
            (d(SecretsManager, &secret, &[]), Foreign, "untagged"),
        ]);
    }
}
