//! Whether a kind discovery no longer serves can still have objects.
//!
//! Upstream's garbage collector retries an owner whose kind it cannot map forever: it cannot tell
//! "not discovered yet" from "gone". So when a CRD is deleted before the collector saw one of its
//! custom resources' deletions (the watch ends with the CRD; a busy collector may never have
//! listed the kind at all), the dependents of those custom resources are kept forever, and the
//! stale owners in the graph keep them "solid".
//!
//! Here the API server itself answers. Objects of `group`/`kind` can only exist if something
//! serves the kind: a built-in API group, an aggregated API server, or a CRD. So a kind is
//! **gone** only when, read live (never from our discovery, which may lag):
//! - the group is not built in (core, or an APIService labelled `automanaged=onstart`),
//! - no APIService of the group points at an aggregated server (no `automanaged` label: it may be
//!   down, and its objects come back with it),
//! - and no CustomResourceDefinition, terminating or not, defines `group`/`kind` (a terminating
//!   CRD's custom resources are still being deleted: their deletions are watched as usual).
//!
//! A CRD is deleted only after all its custom resources are, so "no CRD defines it" means none of
//! them exists; one re-created later has new uids, which no old reference names. The question is
//! asked only about a kind sweeper saw served **by a CRD** since it started (discovery served it
//! while every APIService of its group was `automanaged=true`, the label the CRD registration
//! controller sets): an owner of a kind never seen served is "unknown" (a typo, a group not
//! installed yet) and kept, as upstream keeps it; so is one of an aggregated API whose APIService
//! was removed for a while (its server still holds the objects, and they come back with it).
//! Anything else (a read fails, an unknown label value) answers "may exist": the caller keeps
//! retrying, and nothing is deleted on doubt.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// The label kube-aggregator's autoregister controller puts on the APIServices it manages.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KindPresence {
    /// Nothing can serve the kind: no object of it exists.
    Gone,
    /// Something may still serve it (the reason, for the log and the retry error).
    MayExist(&'static str),
}

/// One APIService of the group, as far as the verdict needs it.
#[derive(Clone, Debug)]
pub struct ApiServiceFact {
    /// The `automanaged` label: `onstart` (built in), `true` (a CRD group), absent (aggregated).
    pub automanaged: Option<String>,
}

/// The decision, given what the API server said (pure, unit-tested).
pub fn verdict(
    group: &str,
    kind: &str,
    services: &[ApiServiceFact],
    crds: &[(String, String)],
) -> KindPresence {
    if group.is_empty() {
        return KindPresence::MayExist("the core group is built in");
    }
    for s in services {
        match s.automanaged.as_deref() {
            Some("true") => {}
            Some("onstart") => return KindPresence::MayExist("the group is built in"),
            _ => return KindPresence::MayExist("an aggregated API server serves the group"),
        }
    }
    if crds.iter().any(|(g, k)| g == group && k == kind) {
        return KindPresence::MayExist("a CustomResourceDefinition still defines the kind");
    }
    KindPresence::Gone
}

/// Every APIService's group and `automanaged` label (one metadata list).
async fn api_services(client: &Client) -> Result<Vec<(String, ApiServiceFact)>, kube::Error> {
    let ar = ApiResource {
        group: "apiregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiregistration.k8s.io/v1".into(),
        kind: "APIService".into(),
        plural: "apiservices".into(),
    };
    Ok(Api::<DynamicObject>::all_with(client.clone(), &ar)
        .list_metadata(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|s| {
            // APIService names are `<version>.<group>`; the core group's is just `v1`.
            let name = s.metadata.name?;
            let group = name.split_once('.').map(|(_, g)| g.to_string())?;
            let automanaged = s
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(AUTOMANAGED).cloned());
            Some((group, ApiServiceFact { automanaged }))
        })
        .collect())
}

/// The groups a CRD serves now: every APIService of the group is `automanaged=true`.
pub async fn crd_groups(client: &Client) -> Result<HashSet<String>, kube::Error> {
    let mut by_group: HashMap<String, bool> = HashMap::new();
    for (group, fact) in api_services(client).await? {
        let crd = fact.automanaged.as_deref() == Some("true");
        *by_group.entry(group).or_insert(true) &= crd;
    }
    Ok(by_group
        .into_iter()
        .filter_map(|(g, crd)| crd.then_some(g))
        .collect())
}

/// Asks the API server (see the module docs). Calls: one metadata list of APIServices, one of
/// CRDs, and one GET per CRD of the group.
pub async fn check(client: &Client, group: &str, kind: &str) -> Result<KindPresence, kube::Error> {
    if group.is_empty() {
        return Ok(verdict(group, kind, &[], &[]));
    }
    let services: Vec<ApiServiceFact> = api_services(client)
        .await?
        .into_iter()
        .filter(|(g, _)| g == group)
        .map(|(_, f)| f)
        .collect();
    if let KindPresence::MayExist(why) = verdict(group, kind, &services, &[]) {
        return Ok(KindPresence::MayExist(why));
    }
    let suffix = format!(".{group}");
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crds = Vec::new();
    // CRD names are `<plural>.<group>`: only the group's own CRDs are read in full.
    for m in crd_api.list_metadata(&ListParams::default()).await?.items {
        let Some(name) = m.metadata.name.filter(|n| n.ends_with(&suffix)) else {
            continue;
        };
        if let Some(crd) = crd_api.get_opt(&name).await? {
            crds.push((crd.spec.group.clone(), crd.spec.names.kind.clone()));
            if let Some(accepted) = crd.status.and_then(|s| s.accepted_names) {
                crds.push((crd.spec.group, accepted.kind));
            }
        }
    }
    Ok(verdict(group, kind, &services, &crds))
}

/// `(group, kind)`.
pub type GroupKind = (String, String);

/// What the cascade collector remembers about kinds that may be gone: which were served by a CRD
/// (only those can be found gone), and recent answers, so the many owners of one vanished kind,
/// each retried by its own dependents, cost one check every few seconds, not one each.
#[derive(Default)]
pub struct KindHistory {
    crd_served: HashSet<GroupKind>,
    answers: HashMap<GroupKind, (Instant, KindPresence)>,
}

/// How long an answer is reused. Short: a CRD being deleted is gone within seconds.
const ANSWER_TTL: Duration = Duration::from_secs(5);
/// Answers kept at most (they are short-lived; past this the oldest are simply dropped).
const ANSWERS_CAP: usize = 1024;

impl KindHistory {
    /// Discovery served these kinds while `crd_groups` were served by CRDs.
    pub fn record_crd_served<'a>(
        &mut self,
        served: impl IntoIterator<Item = &'a GroupKind>,
        crd_groups: &HashSet<String>,
    ) {
        self.crd_served.extend(
            served
                .into_iter()
                .filter(|(g, _)| crd_groups.contains(g))
                .cloned(),
        );
    }

    pub fn was_crd_served(&self, gk: &GroupKind) -> bool {
        self.crd_served.contains(gk)
    }

    pub fn answer(&self, gk: &GroupKind, now: Instant) -> Option<KindPresence> {
        self.answers
            .get(gk)
            .filter(|(at, _)| now.duration_since(*at) < ANSWER_TTL)
            .map(|(_, v)| v.clone())
    }

    pub fn remember(&mut self, gk: GroupKind, verdict: KindPresence, now: Instant) {
        if self.answers.len() >= ANSWERS_CAP {
            self.answers
                .retain(|_, (at, _)| now.duration_since(*at) < ANSWER_TTL);
        }
        if self.answers.len() < ANSWERS_CAP {
            self.answers.insert(gk, (now, verdict));
        }
    }
}

/// The API group of an `apiVersion` (`""` for the core group's `v1`).
pub fn group_of(api_version: &str) -> &str {
    api_version
        .rsplit_once('/')
        .map(|(g, _)| g)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(label: Option<&str>) -> ApiServiceFact {
        ApiServiceFact {
            automanaged: label.map(str::to_string),
        }
    }

    #[test]
    fn a_kind_no_crd_defines_in_a_crd_group_is_gone() {
        assert_eq!(
            verdict("w.example.com", "Widget", &[svc(Some("true"))], &[]),
            KindPresence::Gone
        );
        // The group's last CRD went, and its APIService with it.
        assert_eq!(
            verdict("w.example.com", "Widget", &[], &[]),
            KindPresence::Gone
        );
        // Another kind of the group is still defined.
        let other = [("w.example.com".to_string(), "Gadget".to_string())];
        assert_eq!(
            verdict("w.example.com", "Widget", &[svc(Some("true"))], &other),
            KindPresence::Gone
        );
    }

    #[test]
    fn a_defined_built_in_or_aggregated_kind_may_exist() {
        let defined = [("w.example.com".to_string(), "Widget".to_string())];
        assert!(matches!(
            verdict("w.example.com", "Widget", &[svc(Some("true"))], &defined),
            KindPresence::MayExist(_)
        ));
        assert!(matches!(
            verdict("apps", "Deplyoment", &[svc(Some("onstart"))], &[]),
            KindPresence::MayExist(_)
        ));
        assert!(matches!(
            verdict("metrics.k8s.io", "PodMetrics", &[svc(None)], &[]),
            KindPresence::MayExist(_)
        ));
        assert!(matches!(
            verdict("w.example.com", "Widget", &[svc(Some("other"))], &[]),
            KindPresence::MayExist(_)
        ));
        assert!(matches!(
            verdict("", "Pod", &[], &[]),
            KindPresence::MayExist(_)
        ));
    }

    fn gk(g: &str, k: &str) -> GroupKind {
        (g.to_string(), k.to_string())
    }

    #[test]
    fn only_kinds_served_by_a_crd_can_be_found_gone() {
        let mut h = KindHistory::default();
        let crd_groups: HashSet<String> = ["w.example.com".to_string()].into();
        let served = [
            gk("w.example.com", "Widget"),
            gk("metrics.k8s.io", "PodMetrics"),
        ];
        h.record_crd_served(&served, &crd_groups);
        assert!(h.was_crd_served(&gk("w.example.com", "Widget")));
        assert!(
            !h.was_crd_served(&gk("metrics.k8s.io", "PodMetrics")),
            "an aggregated API's kind: its APIService may come back with its objects"
        );
        assert!(
            !h.was_crd_served(&gk("w.example.com", "Gadget")),
            "never served"
        );
    }

    #[test]
    fn answers_are_reused_for_a_few_seconds() {
        let mut h = KindHistory::default();
        let t = Instant::now();
        h.remember(gk("w", "Widget"), KindPresence::Gone, t);
        assert_eq!(
            h.answer(&gk("w", "Widget"), t + Duration::from_secs(1)),
            Some(KindPresence::Gone)
        );
        assert_eq!(h.answer(&gk("w", "Widget"), t + ANSWER_TTL), None);
        for i in 0..2 * ANSWERS_CAP {
            h.remember(
                gk("w", &format!("K{i}")),
                KindPresence::Gone,
                t + ANSWER_TTL * 2,
            );
        }
        assert!(h.answers.len() <= ANSWERS_CAP);
    }

    #[test]
    fn group_of_api_versions() {
        assert_eq!(group_of("v1"), "");
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("cluster.x-k8s.io/v1beta1"), "cluster.x-k8s.io");
    }
}
