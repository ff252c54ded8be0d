//! sweeper's identity may make every call it needs: one SelfSubjectAccessReview per permission.
//!
//! The list below is what the shipped roles grant (deploy/manifests/*/rbac.yaml and the chart),
//! which tests/rbac.rs proves against the audit log of the whole suite: every call allowed, and
//! every verb needed. Run by the chart's `helm test` as sweeper's own service account, a denied
//! permission here is a call the service would have refused.

use super::{Config, Line, kube_message};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

const CATEGORY: &str = "rbac";

/// One permission: a verb on a resource, in a namespace (empty: every namespace) and on a name
/// (empty: any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permission {
    pub group: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
    pub verb: &'static str,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)?;
        if !self.subresource.is_empty() {
            write!(f, "/{}", self.subresource)?;
        }
        if !self.name.is_empty() {
            write!(f, " {:?}", self.name)?;
        }
        if self.namespace.is_empty() {
            f.write_str(" (all namespaces)")
        } else {
            write!(f, " in {}", self.namespace)
        }
    }
}

fn p(
    group: &'static str,
    resource: &'static str,
    verbs: &[&'static str],
    namespace: &str,
) -> Vec<Permission> {
    verbs
        .iter()
        .map(|verb| Permission {
            group,
            resource,
            subresource: "",
            verb,
            namespace: namespace.to_string(),
            name: String::new(),
        })
        .collect()
}

/// What each enabled collector needs, by collector (`sweeper` for what every collector shares).
pub fn needed(cfg: &Config) -> Vec<(&'static str, Vec<Permission>)> {
    let mut out = Vec::new();
    let mut shared = Vec::new();
    shared.extend(p("events.k8s.io", "events", &["create"], ""));
    // The pause switch: a field-selected watch of one ConfigMap in sweeper's namespace.
    shared.extend(p("", "configmaps", &["list", "watch"], &cfg.namespace));
    if cfg.archive {
        // Records, and the deletecollection of expired ones.
        shared.extend(p(
            "",
            "configmaps",
            &["create", "delete", "deletecollection"],
            &cfg.namespace,
        ));
    }
    if let Some((ns, name, _)) = &cfg.lease {
        shared.extend(p("coordination.k8s.io", "leases", &["create"], ns));
        for verb in ["get", "update"] {
            shared.push(Permission {
                group: "coordination.k8s.io",
                resource: "leases",
                subresource: "",
                verb,
                namespace: ns.clone(),
                name: name.clone(),
            });
        }
    }
    if !cfg.collectors().is_empty() {
        out.push(("sweeper", shared));
    }
    for collector in ["cascade", "tenant"] {
        if !cfg.enabled(collector) {
            continue;
        }
        // Like kube-controller-manager's garbage collector: every kind it discovers.
        let mut own = p("*", "*", &["get", "list", "watch", "patch", "delete"], "");
        if cfg.archive {
            // A Secret's record is a Secret, in the deleted object's namespace.
            own.extend(p("", "secrets", &["create", "deletecollection"], ""));
            own.extend(p("", "configmaps", &["create", "deletecollection"], ""));
        }
        out.push((collector, own));
    }
    if cfg.enabled("external") {
        let mut own = Vec::new();
        for (group, resource) in [
            ("infrastructure.cluster.x-k8s.io", "awsclusters"),
            ("controlplane.cluster.x-k8s.io", "awsmanagedcontrolplanes"),
        ] {
            own.extend(p(group, resource, &["get", "list", "watch", "patch"], ""));
            own.push(Permission {
                subresource: "status",
                ..p(group, resource, &["patch"], "").remove(0)
            });
        }
        own.extend(p(
            "cluster.x-k8s.io",
            "clusters",
            &["get", "list", "watch"],
            "",
        ));
        for resource in [
            "awsmanagedclusters",
            "awsclustercontrolleridentities",
            "awsclusterroleidentities",
            "awsclusterstaticidentities",
        ] {
            own.extend(p("infrastructure.cluster.x-k8s.io", resource, &["get"], ""));
        }
        own.extend(p("", "namespaces", &["get"], ""));
        own.extend(p("", "secrets", &["get"], &cfg.capa_namespace));
        own.extend(p("events.k8s.io", "events", &["patch"], ""));
        out.push(("external", own));
    }
    out
}

/// The line for one collector, from its permissions and the review's answer for each (`Err`: the
/// review itself failed).
pub fn judge(collector: &str, answers: &[(Permission, Result<bool, String>)]) -> Line {
    let denied: Vec<String> = answers
        .iter()
        .filter(|(_, a)| matches!(a, Ok(false)))
        .map(|(p, _)| p.to_string())
        .collect();
    let failed: Vec<String> = answers
        .iter()
        .filter_map(|(p, a)| a.as_ref().err().map(|e| format!("{p}: {e}")))
        .collect();
    if !denied.is_empty() {
        return Line::fail(
            CATEGORY,
            format!(
                "{collector}: {} of {} permissions denied: {}",
                denied.len(),
                answers.len(),
                denied.join("; ")
            ),
            "apply the chart's RBAC for these gates (or deploy/manifests/<overlay>/rbac.yaml); \
             from a workstation, check as the service account with \
             --as=system:serviceaccount:<namespace>:sweeper",
        );
    }
    if !failed.is_empty() {
        return Line::warn(
            CATEGORY,
            format!(
                "{collector}: {} of {} permissions could not be reviewed: {}",
                failed.len(),
                answers.len(),
                failed.join("; ")
            ),
            "SelfSubjectAccessReview is allowed to every authenticated user; is an admission \
             webhook refusing it?",
        );
    }
    Line::pass(
        CATEGORY,
        format!(
            "{collector}: all {} permissions it needs are granted",
            answers.len()
        ),
    )
}

async fn review(client: &kube::Client, p: &Permission) -> Result<bool, String> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let ssar = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(p.group.to_string()),
                resource: Some(p.resource.to_string()),
                subresource: (!p.subresource.is_empty()).then(|| p.subresource.to_string()),
                verb: Some(p.verb.to_string()),
                namespace: (!p.namespace.is_empty()).then(|| p.namespace.clone()),
                name: (!p.name.is_empty()).then(|| p.name.clone()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &ssar).await {
        Ok(r) => Ok(r.status.is_some_and(|s| s.allowed)),
        Err(e) => Err(kube_message(&e)),
    }
}

pub async fn check(client: &kube::Client, cfg: &Config) -> Vec<Line> {
    let mut lines = Vec::new();
    for (collector, perms) in needed(cfg) {
        let answers = futures::future::join_all(perms.into_iter().map(|p| async move {
            let a = review(client, &p).await;
            (p, a)
        }))
        .await;
        lines.push(judge(collector, &answers));
    }
    lines
}
