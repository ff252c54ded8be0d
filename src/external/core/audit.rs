//! The external collector's audit trail: after each teardown pass, one record of every AWS
//! resource it deleted (ARN or id, service, kind, phase, and what discovery knew of it: its
//! describe facts and its tags; `tags: null` where the discovery that found it read none), and
//! of every resource it changed and kept: `untagged` (the tag key removed, `untaggedAt`) or
//! `revoked` (a rule revoked in a security group, `revokedAt`, with what putting it back needs). AWS resources cannot be re-created from a description, so this is an audit
//! trail, not something `sweeper restore` reads.
//!
//! A record is a ConfigMap in sweeper's own namespace (so the external collector's role needs
//! ConfigMap access there only: a Role, never a cluster-wide grant), labelled with the cluster it
//! belongs to ([`LABEL_CLUSTER`], [`LABEL_NAMESPACE`]), and like archive records with collector
//! `external` so the archive's expiry removes it after `--archive-ttl`.

use crate::archive::{ANNOTATION_EXPIRES, COMPLETE, LABEL_ARCHIVE, LABEL_COLLECTOR, LABEL_STATE};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use std::collections::BTreeMap;
use std::time::Duration;
use sweeper_aws::model::{AuditAction, Audited, ResourceRef};

/// The label naming the workload cluster of an audit record.
pub const LABEL_CLUSTER: &str = "sweeper.dev/audit-cluster";

/// The label naming the namespace of the cluster object (AWSCluster or AWSManagedControlPlane)
/// of an audit record: Cluster API names are unique per namespace only.
pub const LABEL_NAMESPACE: &str = "sweeper.dev/audit-namespace";

/// The label selector of the audit records of one cluster (`kubectl get configmaps -l`).
pub fn selector(cluster_namespace: &str, capi_name: &str) -> String {
    format!(
        "{LABEL_COLLECTOR}=external,{LABEL_NAMESPACE}={},{LABEL_CLUSTER}={}",
        crate::engine::meta::label_value(cluster_namespace),
        cluster_label(capi_name)
    )
}

/// The value of [`LABEL_CLUSTER`] for a Cluster API cluster name: the name itself when it is a
/// valid label value, else a cleaned form with a fingerprint (the full names are in every entry).
pub fn cluster_label(capi_name: &str) -> String {
    crate::engine::meta::label_value(capi_name)
}

/// The record's object name: a DNS-1123 name for any cluster name (an EKS name such as
/// `eksns_ek1-control-plane`, or 253 characters), unique per cluster and millisecond.
fn record_name(cluster: &str, millis: i64) -> String {
    format!(
        "sweeper-audit-{}-{millis}",
        crate::engine::meta::dns_name_part(cluster, 40)
    )
}

/// What one teardown pass has for the record: (phase, entry).
pub struct AuditedPass<'a> {
    pub deleted: &'a [(u8, &'a Audited)],
    pub kept: &'a [(u8, &'a (ResourceRef, String))],
}

/// Writes one audit record for `deleted` (phase, resource, detail) into `namespace` (sweeper's),
/// labelled with the cluster object's namespace and the Cluster API cluster's name (the name
/// `sweeper gc` takes). `kept` (phase, resource, why) are what the
/// pass found and reported without deleting (external-dns records of the load balancers it
/// deleted): entries with `reported` and `reportedAt` instead of `deletedAt`, after the deleted.
// Long: the record's labels, data and annotations are built where they are written, so the
// archive's expiry labels cannot drift from what is stored.
pub async fn write(
    client: &kube::Client,
    namespace: &str,
    names: &crate::external::core::cluster::ClusterNames,
    session: &sweeper_aws::session::Session,
    object: &ObjectReference,
    pass: AuditedPass<'_>,
    ttl: Duration,
) -> Result<String, kube::Error> {
    let AuditedPass { deleted, kept } = pass;
    let now = Timestamp::now();
    let object_name = format!(
        "{}/{}",
        object.kind.as_deref().unwrap_or(""),
        object.name.as_deref().unwrap_or("")
    );
    let object_namespace = object.namespace.as_deref().unwrap_or("");
    let reported = kept.iter().map(|(phase, (r, why))| {
        serde_json::json!({
            "service": r.service, "kind": r.kind, "id": r.id, "phase": phase,
            "reported": why, "reportedAt": now.to_string(),
            "cluster": names.capi, "tagName": names.tag,
            "region": session.scope.region, "account": session.scope.account,
            "partition": session.scope.partition, "identity": session.chain,
            "object": object_name, "namespace": object_namespace,
        })
    });
    let data: BTreeMap<String, String> = deleted
        .iter()
        .map(|(phase, a)| {
            let r = &a.resource;
            let mut v = serde_json::json!({
                "service": r.service, "kind": r.kind, "id": r.id, "phase": phase,
                "detail": a.detail, "tags": a.tags,
                "cluster": names.capi, "tagName": names.tag,
                "region": session.scope.region, "account": session.scope.account,
                "partition": session.scope.partition, "identity": session.chain,
                "object": object_name, "namespace": object_namespace,
            });
            // What was done, and when: a resource kept with a tag removed or a rule revoked is
            // never recorded as deleted.
            let (when, what) = match &a.action {
                AuditAction::Deleted => ("deletedAt", None),
                AuditAction::Untagged { key } => ("untaggedAt", Some(("untagged", key))),
                AuditAction::Revoked { rule } => ("revokedAt", Some(("revoked", rule))),
            };
            v[when] = now.to_string().into();
            if let Some((field, value)) = what {
                v[field] = value.clone().into();
            }
            v
        })
        .chain(reported)
        .enumerate()
        .map(|(i, v)| (format!("{i:05}.json"), v.to_string()))
        .collect();
    let expires = crate::archive::expires_after(now, ttl);
    let cluster_label = cluster_label(&names.capi);
    let name = record_name(&names.capi, now.as_millisecond());
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([
                (LABEL_ARCHIVE.to_string(), "true".to_string()),
                (LABEL_STATE.to_string(), COMPLETE.to_string()),
                (LABEL_COLLECTOR.to_string(), "external".to_string()),
                (LABEL_CLUSTER.to_string(), cluster_label),
                (
                    LABEL_NAMESPACE.to_string(),
                    crate::engine::meta::label_value(object_namespace),
                ),
                (
                    crate::archive::LABEL_EXPIRY_BUCKET.to_string(),
                    crate::archive::expiry_bucket(expires, ttl),
                ),
            ])),
            annotations: Some(BTreeMap::from([(
                ANNOTATION_EXPIRES.to_string(),
                expires.to_string(),
            )])),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &cm)
        .await?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_names_are_valid_object_names_for_any_cluster_name() {
        let long = "e_".repeat(126) + "k";
        for cluster in ["c1", "eksns_ek1-control-plane", long.as_str()] {
            let name = record_name(cluster, 1_764_000_000_000);
            assert!(name.len() <= 253, "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
            let label = cluster_label(cluster);
            assert!(label.len() <= 63, "{label}");
        }
        assert_eq!(record_name("c1", 5), "sweeper-audit-c1-5");
        assert_eq!(
            selector("team-a", "c1"),
            "sweeper.dev/archive-collector=external,sweeper.dev/audit-namespace=team-a,sweeper.dev/audit-cluster=c1"
        );
    }
}
