//! sweeper's identity may make every call it needs: one SelfSubjectAccessReview per permission.
//!
//! What every collector shares is listed here; what each collector needs beyond it is its
//! `CollectorDescriptor`'s (`CollectorDescriptor::permissions`). Together they are what the shipped roles grant
//! (deploy/manifests/*/rbac.yaml and the chart), which tests/rbac.rs proves against the audit log
//! of the whole suite: every call allowed, and every verb needed. Run by the chart's `helm test` as sweeper's own service account, a denied
//! permission here is a call the service would have refused.

use super::{CheckError, Config, Line, kube_message};
use crate::collector::check::Access;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

const CATEGORY: &str = "rbac";

pub use crate::collector::check::Permission;

/// What each enabled collector needs, by collector (`sweeper` for what every collector shares),
/// in the list's order: each collector's own as its `CollectorDescriptor::permissions` says.
pub fn needed(cfg: &Config) -> Vec<(&'static str, Vec<Permission>)> {
    let p = Permission::verbs;
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
    let access = Access {
        archive: cfg.archive,
        capa_namespace: &cfg.capa_namespace,
    };
    for spec in crate::catalog::ALL {
        if cfg.enabled(spec.name()) {
            out.push((spec.name(), spec.permissions(access)));
        }
    }
    out
}

/// The line for one collector, from its permissions and the review's answer for each (`Err`: the
/// review itself failed).
pub fn judge(collector: &str, answers: &[(Permission, Result<bool, CheckError>)]) -> Line {
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

async fn review(client: &kube::Client, p: &Permission) -> Result<bool, CheckError> {
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
        Err(e) => Err(CheckError::Review {
            permission: p.to_string(),
            message: kube_message(&e),
        }),
    }
}

pub async fn check(client: &kube::Client, cfg: &Config) -> Vec<Line> {
    let needed = needed(cfg);
    // Collectors ask for some of the same permissions (cascade and tenant both list and delete
    // namespaces): each distinct one is reviewed once, and every collector that needs it is
    // judged on that one answer.
    let mut distinct: Vec<&Permission> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for p in needed.iter().flat_map(|(_, perms)| perms) {
        if seen.insert(p) {
            distinct.push(p);
        }
    }
    let answers: std::collections::HashMap<&Permission, Result<bool, CheckError>> =
        futures::future::join_all(
            distinct
                .into_iter()
                .map(|p| async move { (p, review(client, p).await) }),
        )
        .await
        .into_iter()
        .collect();
    needed
        .iter()
        .map(|(collector, perms)| {
            let mine: Vec<_> = perms
                .iter()
                .map(|p| {
                    let a = answers.get(p).cloned();
                    let not_reviewed = || {
                        Err(CheckError::NotReviewed {
                            permission: p.to_string(),
                        })
                    };
                    (p.clone(), a.unwrap_or_else(not_reviewed))
                })
                .collect();
            judge(collector, &mine)
        })
        .collect()
}
