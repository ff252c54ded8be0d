//! CAPA's bootstrap data in S3 (phase 2, task `bootstrap-data-s3`): **reported, never deleted**.
//! With `spec.s3Bucket` set (an AWSCluster only: AWSManagedControlPlane has no such field, and
//! CAPA's managed machine pools pass no object store), CAPA stores Ignition user data in the
//! bucket the object names. What CAPA does with it, quoting its code (at 2cf09d7,
//! `pkg/cloud/services/s3/s3.go` unless said otherwise):
//! - `Create`: a bare `PutObject` (no tags, no metadata) at `bootstrapDataKey`,
//!   `path.Join(m.Role(), m.Name())`: `control-plane/<AWSMachine name>` or
//!   `node/<AWSMachine name>` (`pkg/cloud/scope/machine.go`: `Role`, `Name`);
//! - `CreateForMachinePool`: `machine-pool/<AWSMachinePool name>/<sha256 of the data, hex>`
//!   (`bootstrapDataKeyForMachinePool`, `userdata.ComputeHash`, `LaunchTemplateName` =
//!   the AWSMachinePool's name);
//! - `ReconcileBucket`: `createBucketIfNotExist` treats `BucketAlreadyOwnedByYou` as success
//!   ("TODO: This will fail if bucket is shared with other cluster"), then `tagBucket`
//!   replaces the bucket's whole tag set (`PutBucketTagging`) with the reconciling cluster's
//!   `sigs.k8s.io/cluster-api-provider-aws/cluster/<N>=owned`; the bucket policy is rewritten on
//!   every reconcile too;
//! - `DeleteBucket` (the AWSCluster's own delete, `controllers/awscluster_controller.go`
//!   `reconcileDelete`): deletes every `machine-pool/` object (MachinePool gate), then the bucket,
//!   skipping it when `BucketNotEmpty`; `Delete` removes a machine's object with its AWSMachine.
//!
//! The key layout has been the same since the package's first commit, and no key names the
//! cluster. So:
//! - an **object** cannot be tied to this cluster: it carries no tag (the proof, CAPA's
//!   owned tag, is never on it), and two clusters naming the same bucket write the same layout,
//!   even the same key (AWSMachine names are unique per namespace only). An object in CAPA's
//!   layout is reported ([`decide_object`]: Keep, with why), any other key is not CAPA's and not
//!   reported (Foreign);
//! - the **bucket** cannot be proven created by CAPA for this cluster: CAPA adopts a bucket that
//!   already exists, records nothing of having created it, and re-tags it as the last reconciled
//!   cluster's (ListBuckets' `CreationDate` is no proof either: AWS documents it may change with
//!   the bucket's configuration, which CAPA rewrites). It is reported ([`decide_bucket`]: Keep),
//!   whatever its tags say, which the report quotes; CAPA's own delete removes it when empty.
//!
//! Only the bucket the object names is looked at (never found by tag: a bucket tagged for the
//! cluster but not named by it is not even read).

use super::Verdict;
use super::tags::{OWNED, capa_key};

/// The three prefixes CAPA writes under; also the listings' prefixes.
pub const PREFIXES: [&str; 3] = ["control-plane/", "node/", "machine-pool/"];

/// What an object key in CAPA's layout says: the role and the machine (or machine pool) named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapaObjectKey<'a> {
    /// `control-plane`, `node` or `machine-pool`.
    pub role: &'a str,
    /// The AWSMachine's (or AWSMachinePool's) name.
    pub machine: &'a str,
}

/// A Kubernetes object name (DNS-1123 subdomain): what `m.Name()` can be.
fn object_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 253
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'.')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// `key` parsed as CAPA lays out bootstrap data, or `None` for any other key.
pub fn capa_object_key(key: &str) -> Option<CapaObjectKey<'_>> {
    let (role, rest) = key.split_once('/')?;
    match role {
        "control-plane" | "node" if object_name(rest) => Some(CapaObjectKey {
            role,
            machine: rest,
        }),
        "machine-pool" => {
            let (pool, hash) = rest.split_once('/')?;
            let sha256 = hash.len() == 64
                && hash
                    .bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
            (object_name(pool) && sha256).then_some(CapaObjectKey {
                role,
                machine: pool,
            })
        }
        _ => None,
    }
}

/// An object `key` in `bucket`, the bucket the cluster's object names: reported when in CAPA's
/// layout, never deleted (see the module doc).
pub fn decide_object(bucket: &str, key: &str) -> Verdict {
    match capa_object_key(key) {
        Some(k) => Verdict::keep(format!(
            "s3://{bucket}/{key}: CAPA's {} bootstrap data for {} in the bucket spec.s3Bucket \
             names, but CAPA writes it untagged and keyed by machine name only, so another \
             cluster's in the same bucket looks the same: reported, never deleted",
            k.role, k.machine
        )),
        None => Verdict::foreign("not in CAPA's bootstrap-data key layout"),
    }
}

/// The bucket the cluster's object names, tagged `tags` (`None`: it has no tag set). Always
/// kept: no tag proves CAPA created it for this cluster (see the module doc); the reason says
/// what its tags claim.
pub fn decide_bucket(bucket: &str, tags: Option<&[(&str, &str)]>, capa_cluster: &str) -> Verdict {
    let ours = capa_key(capa_cluster);
    let prefix = capa_key("");
    let tags = tags.unwrap_or_default();
    let claimed_by: Vec<&str> = tags
        .iter()
        .filter(|(_, v)| *v == OWNED)
        .filter_map(|(k, _)| k.strip_prefix(prefix.as_str()))
        .collect();
    let what = match claimed_by.as_slice() {
        [c] if *c == capa_cluster => format!(
            "tagged {ours}=owned, which CAPA writes on any bucket spec.s3Bucket names, one it \
             created or one that existed (it replaces the bucket's tags)"
        ),
        [] => "not tagged owned by CAPA for any cluster".to_string(),
        others => format!(
            "tagged owned by CAPA for {}: named by another cluster too",
            others.join(", ")
        ),
    };
    Verdict::keep(format!(
        "bucket {bucket} (spec.s3Bucket): {what}; nothing proves CAPA created it for this \
         cluster, so it is reported, never deleted (CAPA's own AWSCluster delete removes it when \
         it is empty)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn keys_are_capas_layout_and_nothing_else() {
        fn k(key: &str) -> Option<(&str, &str)> {
            capa_object_key(key).map(|k| (k.role, k.machine))
        }
        assert_eq!(
            k("control-plane/c1-control-plane-x7k2p"),
            Some(("control-plane", "c1-control-plane-x7k2p"))
        );
        assert_eq!(k("node/c1-md-0-abc.12"), Some(("node", "c1-md-0-abc.12")));
        assert_eq!(
            k(&format!("machine-pool/c1-mp-0/{HASH}")),
            Some(("machine-pool", "c1-mp-0"))
        );
        for other in [
            "node/",
            "node/a/b",
            "node/Upper",
            "node/-lead",
            "node/trail-",
            "workers/c1-md-0",
            "control-plane",
            "machine-pool/c1-mp-0",
            "machine-pool/c1-mp-0/not-a-hash",
            &format!("machine-pool/c1-mp-0/{}", HASH.to_uppercase()),
            &format!("machine-pool/c1-mp-0/{HASH}/x"),
            "c1/node/c1-md-0",
            &format!("node/{}", "a".repeat(254)),
        ] {
            assert_eq!(k(other), None, "{other}");
        }
    }

    #[test]
    fn no_object_and_no_bucket_is_ever_deleted() {
        let capa = "sigs.k8s.io/cluster-api-provider-aws/cluster/c1";
        let c10 = "sigs.k8s.io/cluster-api-provider-aws/cluster/c10";
        let b = |tags: Option<&[(&str, &str)]>| decide_bucket("capa-boot", tags, "c1");
        table::check(&[
            (
                decide_object("capa-boot", "node/c1-md-0-x"),
                Keep,
                "CAPA's layout: reported",
            ),
            (
                decide_object("capa-boot", "control-plane/c2-cp-y"),
                Keep,
                "another cluster's machine looks the same: reported",
            ),
            (
                decide_object("capa-boot", &format!("machine-pool/mp/{HASH}")),
                Keep,
                "a machine pool's",
            ),
            (
                decide_object("capa-boot", "backups/etcd.db"),
                Foreign,
                "another layout",
            ),
            (b(Some(&[(capa, "owned")])), Keep, "tagged for this cluster"),
            (b(Some(&[(c10, "owned")])), Keep, "tagged for another"),
            (b(Some(&[(capa, "shared")])), Keep, "not owned"),
            (b(None), Keep, "no tag set"),
        ]);
    }

    #[test]
    fn the_buckets_report_says_what_its_tags_claim() {
        fn why(tags: &[(&str, &str)]) -> String {
            match decide_bucket("b", Some(tags), "c1") {
                Verdict::Keep(w) => w.into_owned(),
                v => panic!("{v:?}"),
            }
        }
        let capa = |n: &str| format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{n}");
        let ours = why(&[(&capa("c1"), "owned")]);
        assert!(ours.contains("replaces the bucket's tags"), "{ours}");
        let other = why(&[(&capa("c10"), "owned")]);
        assert!(other.contains("for c10"), "{other}");
        assert!(why(&[]).contains("not tagged owned"));
    }
}
