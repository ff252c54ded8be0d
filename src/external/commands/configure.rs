//! `sweeper gc configure`: which annotations it writes, on the object [`cluster::annotate`] picks
//! (the AWSManagedControlPlane on EKS, else the AWSCluster).
//!
//! `--gc-task X` writes only what each annotation's reader accepts (issue #41): sweeper's
//! `sweeper.dev/gc-tasks` gets all of X; CAPA's `aws.cluster.x-k8s.io/external-resource-tasks-gc`
//! gets the part of X in CAPA's vocabulary (`load-balancer`, `target-group`, `security-group`),
//! joined with "," and no spaces, or is removed when X names none of them: CAPA's webhook refuses
//! any other name there, and CAPA's gc panics on an empty value. By the rule of
//! [`tasks`], the object's tasks are then exactly X. No `--gc-task` removes both
//! (the default set).

use crate::external::core::annotations::{DNS_OWNER_ANNOTATION, tasks};
use crate::external::core::cluster;
use kube::Client;
use sweeper_aws::phases::GcTask;
use sweeper_aws::phases::registry::OPT_IN;

/// The annotations `gc configure` writes (`Some`) or removes (`None`), and what it says it did.
/// `external_dns_owner_id`: not given = left as it is, "" = removed.
pub fn writes(
    gc_tasks: &[GcTask],
    external_dns_owner_id: Option<&str>,
) -> (Vec<(&'static str, Option<String>)>, String) {
    let values = tasks::configured(gc_tasks);
    let [(sweeper_key, sweeper_value), (capa_key, capa_value)] = &values;
    let mut what = match (sweeper_value, capa_value) {
        (None, _) => format!(
            "default GC tasks (all but the opt-ins {}): {sweeper_key} and {capa_key} removed",
            OPT_IN.map(|t| t.name()).join(", ")
        ),
        (Some(own), Some(capa)) => format!(
            "GC tasks {own}: {sweeper_key}={own}, {capa_key}={capa} (CAPA's tasks only: CAPA \
             refuses sweeper's there)"
        ),
        (Some(own), None) => format!(
            "GC tasks {own}: {sweeper_key}={own}, {capa_key} removed (none of CAPA's tasks {}; an \
             empty value would make CAPA's gc panic). CAPA's own gc, where its ExternalResourceGC \
             gate is on, then runs all its tasks",
            tasks::capa_names()
        ),
    };
    let mut values = values.to_vec();
    // Only when given: the owner id is what lets records be deleted.
    if let Some(id) = external_dns_owner_id {
        what.push_str(&if id.is_empty() {
            "; external-dns records only reported".to_string()
        } else {
            format!("; external-dns records of owner {id} deleted with their load balancers")
        });
        values.push((
            DNS_OWNER_ANNOTATION,
            (!id.is_empty()).then(|| id.to_string()),
        ));
    }
    (values, what)
}

/// `sweeper gc configure` on the CAPI Cluster `namespace/name`: one merge patch of its GC target;
/// the message names the target, what was written, and on EKS what the AWSManagedCluster says.
pub async fn configure(
    client: &Client,
    namespace: &str,
    name: &str,
    gc_tasks: &[GcTask],
    external_dns_owner_id: Option<&str>,
) -> Result<String, cluster::ResolveError> {
    let (values, what) = writes(gc_tasks, external_dns_owner_id);
    let (target, note) = cluster::annotate(client, namespace, name, &values).await?;
    Ok(match note {
        None => format!("{target}: {what}"),
        Some(note) => format!("{target}: {what}\n{note}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::external::core::annotations;
    use crate::testing::MockApi;
    use http::Method;
    use serde_json::{Value, json};

    const TARGET: &str =
        "/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/ns/awsclusters/c1-infra";

    /// Cluster API and CAPA's AWSCluster served (discovery answers any number of times), the
    /// Cluster ns/c1 referencing AWSCluster c1-infra, and one patch of it.
    fn an_aws_cluster(server: &MockApi) {
        let gv = |g: &str, v: &str| json!({"groupVersion": format!("{g}/{v}"), "version": v});
        let group = |g: &str, vs: &[&str]| {
            json!({"name": g, "versions": vs.iter().map(|v| gv(g, v)).collect::<Vec<_>>(),
                   "preferredVersion": gv(g, vs[0])})
        };
        server.expect(Method::GET, "/apis").repeatedly().respond(
            200,
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                group("cluster.x-k8s.io", &["v1beta2", "v1beta1"]),
                group("infrastructure.cluster.x-k8s.io", &["v1beta2"])]}),
        );
        let resources = |g: &str, v: &str, plural: &str, kind: &str| {
            json!({"kind": "APIResourceList", "apiVersion": "v1",
                   "groupVersion": format!("{g}/{v}"),
                   "resources": [{"name": plural, "singularName": kind.to_lowercase(),
                                  "namespaced": true, "kind": kind,
                                  "verbs": ["get", "list", "watch", "patch"]}]})
        };
        for v in ["v1beta2", "v1beta1"] {
            server
                .expect(Method::GET, &format!("/apis/cluster.x-k8s.io/{v}"))
                .repeatedly()
                .respond(200, resources("cluster.x-k8s.io", v, "clusters", "Cluster"));
        }
        server
            .expect(Method::GET, "/apis/infrastructure.cluster.x-k8s.io/v1beta2")
            .repeatedly()
            .respond(
                200,
                resources(
                    "infrastructure.cluster.x-k8s.io",
                    "v1beta2",
                    "awsclusters",
                    "AWSCluster",
                ),
            );
        server
            .expect(
                Method::GET,
                "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters/c1",
            )
            .respond(
                200,
                json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                       "metadata": {"name": "c1", "namespace": "ns", "uid": "u-cluster"},
                       "spec": {"infrastructureRef": {
                           "apiGroup": "infrastructure.cluster.x-k8s.io",
                           "kind": "AWSCluster", "name": "c1-infra"}}}),
            );
        server.expect(Method::PATCH, TARGET).respond(
            200,
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSCluster",
                   "metadata": {"name": "c1-infra", "namespace": "ns"}}),
        );
    }

    fn gc_tasks(names: &str) -> Vec<GcTask> {
        names.split(',').map(|n| n.parse().unwrap()).collect()
    }

    /// Runs `gc configure --gc-task <names>` against the scripted server: the one patch's
    /// annotations, and the message.
    async fn configure_tasks(names: Option<&str>) -> (Value, String) {
        let (client, server) = MockApi::new();
        an_aws_cluster(&server);
        let ts = names.map(gc_tasks).unwrap_or_default();
        let out = configure(&client, "ns", "c1", &ts, None).await.unwrap();
        let calls = server.finish();
        let patches: Vec<_> = calls.iter().filter(|c| c.method == Method::PATCH).collect();
        assert_eq!(patches.len(), 1, "one write: {calls:?}");
        assert_eq!(patches[0].path, TARGET);
        assert_eq!(patches[0].content_type, "application/merge-patch+json");
        (patches[0].body["metadata"]["annotations"].clone(), out)
    }

    #[tokio::test]
    async fn configure_writes_capas_part_to_capas_annotation_and_all_to_sweepers() {
        let (ann, out) = configure_tasks(Some("ebs-volume,load-balancer")).await;
        assert_eq!(
            ann,
            json!({
                "sweeper.dev/gc-tasks": "ebs-volume,load-balancer",
                "aws.cluster.x-k8s.io/external-resource-tasks-gc": "load-balancer",
            }),
            "nothing else is written, the owner id is left as it is"
        );
        assert!(
            out.starts_with("AWSCluster ns/c1-infra: ")
                && out.contains("sweeper.dev/gc-tasks=ebs-volume,load-balancer")
                && out.contains("aws.cluster.x-k8s.io/external-resource-tasks-gc=load-balancer"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn configure_without_a_capa_task_removes_capas_annotation() {
        let (ann, out) = configure_tasks(Some("ebs-volume")).await;
        assert_eq!(
            ann,
            json!({
                "sweeper.dev/gc-tasks": "ebs-volume",
                "aws.cluster.x-k8s.io/external-resource-tasks-gc": null,
            }),
            "null removes it in a merge patch: never an empty value"
        );
        assert!(
            out.contains("aws.cluster.x-k8s.io/external-resource-tasks-gc removed"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn configure_without_tasks_removes_both() {
        let (ann, out) = configure_tasks(None).await;
        assert_eq!(
            ann,
            json!({
                "sweeper.dev/gc-tasks": null,
                "aws.cluster.x-k8s.io/external-resource-tasks-gc": null,
            })
        );
        assert!(out.contains("default GC tasks"), "{out}");
    }

    #[test]
    fn the_owner_id_is_written_only_when_given() {
        let (values, _) = writes(&gc_tasks("load-balancer"), None);
        assert!(values.iter().all(|(k, _)| *k != DNS_OWNER_ANNOTATION));
        let (values, what) = writes(&[], Some("prod-eu-1"));
        assert!(values.contains(&(DNS_OWNER_ANNOTATION, Some("prod-eu-1".into()))));
        assert!(what.contains("prod-eu-1"), "{what}");
        let (values, _) = writes(&[], Some(""));
        assert!(values.contains(&(DNS_OWNER_ANNOTATION, None)));
        assert_eq!(
            values.iter().map(|(k, _)| *k).take(2).collect::<Vec<_>>(),
            [
                annotations::SWEEPER_TASKS_ANNOTATION,
                annotations::CAPA_TASKS_ANNOTATION
            ]
        );
    }
}
