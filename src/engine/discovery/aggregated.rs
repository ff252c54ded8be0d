//! Aggregated discovery (apidiscovery.k8s.io/v2, GA in Kubernetes 1.30): every group's resources
//! in two calls (`/api` and `/apis`), where the classic way takes one call per group version.
//!
//! Why it matters: discovery shares the process's client rate limit with the collectors, and it
//! is refreshed every `--discovery-interval`. With about 30 group versions served, each refresh
//! cost about 30 calls, 1.5 s of a 20 qps budget: at the tests' 2 s interval it took about 60 % of
//! the rate (issue #52: a restarted tenant collector's 285 deletes took 40 s instead of 15), and at
//! start-up each collector waited for those calls before its first pass.
//!
//! A server without it (before 1.26) answers the same request with the classic `APIGroupList`,
//! which is then used as the first call of the classic way.

use super::{DeletableResource, DiscoveryReport, FailedGroup, is_deletable};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList;
use kube::Client;
use kube::core::discovery::v2::{
    ACCEPT_AGGREGATED_DISCOVERY_V2, APIGroupDiscovery, APIGroupDiscoveryList,
};
use kube::discovery::{ApiCapabilities, ApiResource, Scope};

/// What the server answered to the aggregated request on `/apis`.
pub enum Answer {
    /// Aggregated discovery: the whole report.
    Aggregated(DiscoveryReport),
    /// A server without it: the classic group list, to be followed group by group.
    Classic(APIGroupList),
}

async fn get(client: &Client, path: &str) -> Result<serde_json::Value, kube::Error> {
    let req = http::Request::get(path)
        .header(http::header::ACCEPT, ACCEPT_AGGREGATED_DISCOVERY_V2)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    let text = client.request_text(req).await?;
    serde_json::from_str(&text).map_err(kube::Error::SerdeError)
}

fn is_aggregated(v: &serde_json::Value) -> bool {
    v["kind"] == "APIGroupDiscoveryList"
}

/// Asks `/apis` (and, when aggregated, `/api`) for aggregated discovery.
pub async fn discover(client: &Client) -> Result<Answer, kube::Error> {
    let apis = get(client, "/apis").await?;
    if !is_aggregated(&apis) {
        // The list would deserialize as an empty aggregated list (its items default): the kind
        // tells them apart, and an old server's answer is the classic group list.
        return serde_json::from_value(apis)
            .map(Answer::Classic)
            .map_err(kube::Error::SerdeError);
    }
    let core = get(client, "/api").await?;
    let mut groups: Vec<APIGroupDiscovery> = Vec::new();
    for list in [core, apis] {
        if !is_aggregated(&list) {
            // A server that aggregates /apis aggregates /api: not one we know how to read.
            return Err(kube::Error::Discovery(
                kube::error::DiscoveryError::MissingResource(
                    "aggregated discovery of the core group".into(),
                ),
            ));
        }
        let list: APIGroupDiscoveryList =
            serde_json::from_value(list).map_err(kube::Error::SerdeError)?;
        groups.extend(list.items);
    }
    Ok(Answer::Aggregated(report(groups)))
}

/// The deletable resources of each group's preferred (first) version; a version the API server
/// marks `Stale` (an aggregated API whose backend is down) is a failed group, as a failing
/// group-version call is the classic way.
pub fn report(groups: Vec<APIGroupDiscovery>) -> DiscoveryReport {
    let mut report = DiscoveryReport::default();
    for g in groups {
        let group = g.metadata.and_then(|m| m.name).unwrap_or_default();
        let Some(v) = g.versions.into_iter().next() else {
            continue;
        };
        let version = v.version.unwrap_or_default();
        let api_version = if group.is_empty() {
            version.clone()
        } else {
            format!("{group}/{version}")
        };
        if v.freshness.as_deref() == Some("Stale") {
            tracing::warn!(group_version = %api_version, "API group marked stale by aggregated discovery; skipped until the next refresh");
            report.failed.push(FailedGroup {
                group_version: api_version.clone(),
                error: "the API server's aggregated discovery marks it stale".into(),
            });
            continue;
        }
        for r in v.resources {
            let (Some(plural), Some(kind)) = (r.resource, r.response_kind.and_then(|k| k.kind))
            else {
                continue;
            };
            let resource = ApiResource {
                group: group.clone(),
                version: version.clone(),
                api_version: api_version.clone(),
                kind,
                plural,
            };
            let caps = ApiCapabilities {
                scope: if r.scope.as_deref() == Some("Namespaced") {
                    Scope::Namespaced
                } else {
                    Scope::Cluster
                },
                subresources: Vec::new(),
                operations: r.verbs,
            };
            if is_deletable(&resource, &caps) {
                report.resources.push(DeletableResource {
                    namespaced: caps.scope == Scope::Namespaced,
                    resource,
                });
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_preferred_version_of_each_group_and_stale_groups_reported() {
        let groups: Vec<APIGroupDiscovery> = serde_json::from_value(json!([
            {"metadata": {"name": ""}, "versions": [{"version": "v1", "freshness": "Current", "resources": [
                {"resource": "configmaps", "responseKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                 "scope": "Namespaced", "verbs": ["get", "list", "watch", "delete"]},
                {"resource": "events", "responseKind": {"group": "", "version": "v1", "kind": "Event"},
                 "scope": "Namespaced", "verbs": ["get", "list", "watch", "delete"]},
                {"resource": "bindings", "responseKind": {"group": "", "version": "v1", "kind": "Binding"},
                 "scope": "Namespaced", "verbs": ["create"]}]}]},
            {"metadata": {"name": "rbac.authorization.k8s.io"}, "versions": [
                {"version": "v1", "resources": [
                    {"resource": "clusterroles", "responseKind": {"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "ClusterRole"},
                     "scope": "Cluster", "verbs": ["list", "watch", "delete"]}]},
                {"version": "v1beta1", "resources": [
                    {"resource": "oldroles", "responseKind": {"group": "rbac.authorization.k8s.io", "version": "v1beta1", "kind": "Old"},
                     "scope": "Cluster", "verbs": ["list", "watch", "delete"]}]}]},
            {"metadata": {"name": "metrics.k8s.io"}, "versions": [{"version": "v1beta1", "freshness": "Stale", "resources": []}]}
        ]))
        .unwrap();
        let r = report(groups);
        let found: Vec<(String, String, bool)> = r
            .resources
            .iter()
            .map(|d| {
                (
                    d.resource.api_version.clone(),
                    d.resource.plural.clone(),
                    d.namespaced,
                )
            })
            .collect();
        assert_eq!(
            found,
            vec![
                ("v1".into(), "configmaps".into(), true),
                (
                    "rbac.authorization.k8s.io/v1".into(),
                    "clusterroles".into(),
                    false
                ),
            ],
            "events are ignored, bindings not deletable, only the preferred version"
        );
        assert_eq!(r.failed.len(), 1);
        assert_eq!(r.failed[0].group_version, "metrics.k8s.io/v1beta1");
    }

    /// One resource of the preferred version, as the server describes it, and what the report
    /// makes of it: (scope, verbs, freshness) -> Some(namespaced) when deletable, None when not.
    #[test]
    fn which_resources_are_deletable_table() {
        // (scope, verbs, freshness, deletable and namespaced?)
        type Row<'a> = (&'a str, &'a [&'a str], Option<&'a str>, Option<bool>);
        let rows: [Row; 7] = [
            (
                "Namespaced",
                &["list", "watch", "delete"],
                Some("Current"),
                Some(true),
            ),
            ("Cluster", &["list", "watch", "delete"], None, Some(false)),
            // Without a scope the API server means cluster-scoped (its default).
            (
                "",
                &["list", "watch", "delete"],
                Some("Current"),
                Some(false),
            ),
            ("Namespaced", &["list", "delete"], Some("Current"), None),
            ("Namespaced", &["list", "watch"], Some("Current"), None),
            ("Namespaced", &["get", "create"], None, None),
            // A stale group: its resources are not trusted, the group is a failed one.
            (
                "Namespaced",
                &["list", "watch", "delete"],
                Some("Stale"),
                None,
            ),
        ];
        for (scope, verbs, freshness, want) in rows {
            let mut version = json!({"version": "v1", "resources": [
                {"resource": "widgets", "responseKind": {"group": "example.com", "version": "v1", "kind": "Widget"},
                 "scope": scope, "verbs": verbs}]});
            if let Some(f) = freshness {
                version["freshness"] = json!(f);
            }
            let groups: Vec<APIGroupDiscovery> = serde_json::from_value(
                json!([{"metadata": {"name": "example.com"}, "versions": [version]}]),
            )
            .unwrap();
            let r = report(groups);
            let got = r.resources.first().map(|d| d.namespaced);
            assert_eq!(
                got, want,
                "scope {scope:?}, verbs {verbs:?}, freshness {freshness:?}"
            );
            assert_eq!(
                r.failed.len(),
                usize::from(freshness == Some("Stale")),
                "only a stale group fails: {freshness:?}"
            );
            if let Some(d) = r.resources.first() {
                assert_eq!(d.resource.api_version, "example.com/v1");
                assert_eq!(
                    (d.resource.kind.as_str(), d.resource.plural.as_str()),
                    ("Widget", "widgets")
                );
            }
        }
    }

    #[test]
    fn an_old_servers_group_list_is_not_taken_for_an_empty_aggregated_one() {
        let classic = json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []});
        assert!(!is_aggregated(&classic));
        assert!(is_aggregated(
            &json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": []})
        ));
    }
}
