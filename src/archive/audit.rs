//! The external collector's audit trail: after each teardown pass, one record of every AWS
//! resource it deleted (ARN or id, service, kind, phase, and what discovery knew of it: its
//! describe facts and its tags; `tags: null` where the discovery that found it read none). AWS resources cannot be re-created from a description, so this is an audit
//! trail, not something `sweeper restore` reads.
//!
//! A record is a ConfigMap in the cluster object's namespace (who may read the AWSCluster's
//! namespace's ConfigMaps may read it), labelled like archive records with collector `external`
//! so the archive's expiry removes it after `--archive-ttl`.

use super::{ANNOTATION_EXPIRES, COMPLETE, LABEL_ARCHIVE, LABEL_COLLECTOR, LABEL_STATE};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use std::collections::BTreeMap;
use std::time::Duration;
use sweeper_services::aws::model::Audited;

/// The label naming the workload cluster of an audit record.
pub const LABEL_CLUSTER: &str = "sweeper.dev/audit-cluster";

/// Writes one audit record for `deleted` (phase, resource, detail).
pub async fn write(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    object: &ObjectReference,
    deleted: &[(u8, &Audited)],
    ttl: Duration,
) -> Result<String, kube::Error> {
    let now = Timestamp::now();
    let data: BTreeMap<String, String> = deleted
        .iter()
        .enumerate()
        .map(|(i, (phase, a))| {
            let r = &a.resource;
            let v = serde_json::json!({
                "service": r.service, "kind": r.kind, "id": r.id, "phase": phase,
                "detail": a.detail, "tags": a.tags, "deletedAt": now.to_string(),
                "cluster": cluster,
                "object": format!("{}/{}", object.kind.as_deref().unwrap_or(""), object.name.as_deref().unwrap_or("")),
            });
            (format!("{i:05}.json"), v.to_string())
        })
        .collect();
    let expires = super::expires_after(now, ttl);
    // Label values are at most 63 characters; the cluster name is in every entry in full.
    let cluster_label: String = cluster.chars().take(63).collect();
    let name = format!(
        "sweeper-audit-{}-{}",
        cluster.chars().take(30).collect::<String>(),
        now.as_millisecond()
    );
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([
                (LABEL_ARCHIVE.to_string(), "true".to_string()),
                (LABEL_STATE.to_string(), COMPLETE.to_string()),
                (LABEL_COLLECTOR.to_string(), "external".to_string()),
                (LABEL_CLUSTER.to_string(), cluster_label),
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
