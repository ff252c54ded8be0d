//! Owner trees for the cascade collector: three roots (ConfigMaps), each with 9 ConfigMap children
//! and 10 Secret grandchildren per child, deleted with background, foreground and orphan
//! propagation. A `shared` ConfigMap has a second, live owner (`keeper`) and must survive.

use crate::kube_util::{self, DEMO_LABEL, Res, labels};
use crate::step::{Item, Observation, StepState};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, PartialObjectMeta};
use kube::{Api, Client, ResourceExt};
use std::collections::{BTreeMap, BTreeSet};

pub const NS: &str = "sweeper-demo-trees";
const CHILDREN: usize = 9;
const GRANDCHILDREN: usize = 10;
const CREATE_CONCURRENCY: usize = 16;
const TREE_LABEL: &str = "demo.sweeper.dev/tree";
/// The kind of the orphan tree's children in the report: released (owner reference removed), kept.
const RELEASED: &str = "ConfigMap released";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Background,
    Foreground,
    Orphan,
}

impl Policy {
    pub const ALL: [Policy; 3] = [Policy::Background, Policy::Foreground, Policy::Orphan];

    fn tag(self) -> &'static str {
        match self {
            Policy::Background => "bg",
            Policy::Foreground => "fg",
            Policy::Orphan => "orphan",
        }
    }

    pub fn root(self) -> String {
        format!("{}-root", self.tag())
    }

    fn delete_params(self) -> DeleteParams {
        match self {
            Policy::Background => DeleteParams::background(),
            Policy::Foreground => DeleteParams::foreground(),
            Policy::Orphan => DeleteParams::orphan(),
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Policy::Background => "cascade: background tree",
            Policy::Foreground => "cascade: foreground tree",
            Policy::Orphan => "cascade: orphan tree",
        }
    }
}

fn child(p: Policy, i: usize) -> String {
    format!("{}-c{i}", p.tag())
}

fn grandchild(p: Policy, i: usize, j: usize) -> String {
    format!("{}-c{i}-s{j}", p.tag())
}

fn owner_ref(cm: &ConfigMap) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: cm.name_any(),
        uid: cm.uid().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    }
}

fn config_map(name: &str, p: Option<Policy>, owners: Vec<OwnerReference>) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.labels = labels(&[
        (DEMO_LABEL, "trees"),
        (TREE_LABEL, p.map(Policy::tag).unwrap_or("shared")),
    ]);
    cm.metadata.owner_references = Some(owners);
    cm.data = Some(BTreeMap::from([("level".into(), name.into())]));
    cm
}

fn secret(name: &str, p: Policy, owner: OwnerReference) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.into());
    s.metadata.labels = labels(&[(DEMO_LABEL, "trees"), (TREE_LABEL, p.tag())]);
    s.metadata.owner_references = Some(vec![owner]);
    s
}

/// Creates the three trees and the doubly-owned ConfigMap; returns the objects created.
pub async fn create(c: &Client) -> Res<usize> {
    kube_util::create_namespace(c, NS, &[(DEMO_LABEL, "trees")]).await?;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(c.clone(), NS);
    let mut roots = Vec::new();
    for p in Policy::ALL {
        roots.push((
            p,
            kube_util::create(&cms, &config_map(&p.root(), Some(p), vec![])).await?,
        ));
    }
    let children: Vec<(Policy, usize, ConfigMap)> = futures::stream::iter(
        roots
            .iter()
            .flat_map(|(p, root)| (0..CHILDREN).map(move |i| (*p, i, root))),
    )
    .map(|(p, i, root)| {
        let cms = cms.clone();
        async move {
            let cm = config_map(&child(p, i), Some(p), vec![owner_ref(root)]);
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((
                p,
                i,
                kube_util::create(&cms, &cm).await?,
            ))
        }
    })
    .buffer_unordered(CREATE_CONCURRENCY)
    .try_collect()
    .await?;
    futures::stream::iter(
        children
            .iter()
            .flat_map(|(p, i, cm)| (0..GRANDCHILDREN).map(move |j| (*p, *i, j, cm))),
    )
    .map(|(p, i, j, parent)| {
        let secrets = secrets.clone();
        async move {
            let s = secret(&grandchild(p, i, j), p, owner_ref(parent));
            kube_util::create(&secrets, &s).await.map(|_| ())
        }
    })
    .buffer_unordered(CREATE_CONCURRENCY)
    .try_collect::<Vec<()>>()
    .await?;
    // Owned by the background root AND by a live ConfigMap: must survive the cascade.
    let keeper = kube_util::create(&cms, &config_map("keeper", None, vec![])).await?;
    let bg_root = &roots[0].1;
    let shared = config_map("shared", None, vec![owner_ref(bg_root), owner_ref(&keeper)]);
    kube_util::create(&cms, &shared).await?;
    Ok(Policy::ALL.len() * (1 + CHILDREN + CHILDREN * GRANDCHILDREN) + 2)
}

/// The rows: background and foreground must delete all 100 objects; orphan must delete the root
/// and release its 9 children.
pub fn steps() -> Vec<StepState> {
    Policy::ALL
        .iter()
        .map(|&p| {
            let mut items = vec![Item::new("ConfigMap", p.root())];
            for i in 0..CHILDREN {
                items.push(match p {
                    Policy::Orphan => Item::new(RELEASED, child(p, i)),
                    _ => Item::new("ConfigMap", child(p, i)),
                });
            }
            if p != Policy::Orphan {
                for i in 0..CHILDREN {
                    for j in 0..GRANDCHILDREN {
                        items.push(Item::new("Secret", grandchild(p, i, j)));
                    }
                }
            }
            StepState::new(p.title(), items, None)
        })
        .collect()
}

/// Deletes the three roots, each with its propagation policy.
pub async fn delete_roots(c: &Client) -> Res<()> {
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), NS);
    for p in Policy::ALL {
        cms.delete(&p.root(), &p.delete_params())
            .await
            .map_err(|e| format!("delete {} ({p:?}): {e}", p.root()))?;
    }
    Ok(())
}

/// The demo's objects in the namespace, by name.
struct Seen {
    cms: BTreeMap<String, PartialObjectMeta<ConfigMap>>,
    secrets: BTreeSet<String>,
}

async fn look(c: &Client) -> Res<Seen> {
    let lp = ListParams::default().labels(DEMO_LABEL);
    let cms = Api::<ConfigMap>::namespaced(c.clone(), NS)
        .list_metadata(&lp)
        .await?
        .items
        .into_iter()
        .map(|o| (o.name_any(), o))
        .collect();
    let secrets = Api::<Secret>::namespaced(c.clone(), NS)
        .list_metadata(&lp)
        .await?
        .items
        .into_iter()
        .map(|o| o.name_any())
        .collect();
    Ok(Seen { cms, secrets })
}

/// One look for the three rows (in `Policy::ALL` order).
pub async fn observe(c: &Client, steps: &[Vec<String>]) -> Res<Vec<Observation>> {
    let seen = look(c).await?;
    Ok(Policy::ALL
        .iter()
        .zip(steps)
        .map(|(&p, keys)| observe_tree(p, keys, &seen))
        .collect())
}

fn observe_tree(p: Policy, keys: &[String], seen: &Seen) -> Observation {
    let root = seen.cms.get(&p.root());
    let root_uid = root.and_then(|r| r.uid());
    let done: BTreeSet<String> = keys
        .iter()
        .filter(|key| {
            let (kind, name) = key.split_once('/').unwrap_or_default();
            match kind {
                "Secret" => !seen.secrets.contains(name),
                RELEASED => seen.cms.get(name).is_some_and(|o| {
                    !o.owner_references()
                        .iter()
                        .any(|r| Some(&r.uid) == root_uid.as_ref() || r.name == p.root())
                }),
                _ => !seen.cms.contains_key(name),
            }
        })
        .cloned()
        .collect();
    let left = keys.len() - done.len();
    let unreleased = keys
        .iter()
        .filter(|k| k.starts_with(RELEASED) && !done.contains(*k))
        .count();
    let hint = match (p, root) {
        (_, None) if left == 0 => "done".to_string(),
        (Policy::Orphan, None) => {
            format!("root deleted; {} still reference it", children(unreleased))
        }
        (Policy::Orphan, Some(_)) => {
            format!(
                "root waits (orphan finalizer): {} to release",
                children(unreleased)
            )
        }
        (_, None) => format!("root deleted; {left} dependents left"),
        (Policy::Foreground, Some(r)) if r.metadata.deletion_timestamp.is_some() => {
            format!("root waits (foregroundDeletion): {left} left")
        }
        (_, Some(_)) => format!("{left} left"),
    };
    Observation { done, hint }
}

fn children(n: usize) -> String {
    format!("{n} {}", if n == 1 { "child" } else { "children" })
}

/// Survivors: the doubly-owned ConfigMap, its live owner, and the orphan tree's 99 dependents.
pub async fn survivors(c: &Client) -> Res<Vec<(String, bool)>> {
    let seen = look(c).await?;
    let orphans_cm = (0..CHILDREN)
        .filter(|&i| seen.cms.contains_key(&child(Policy::Orphan, i)))
        .count();
    let orphans_s = (0..CHILDREN)
        .flat_map(|i| (0..GRANDCHILDREN).map(move |j| grandchild(Policy::Orphan, i, j)))
        .filter(|n| seen.secrets.contains(n))
        .count();
    let shared_ok = seen.cms.get("shared").is_some_and(|o| {
        o.metadata.deletion_timestamp.is_none()
            && o.owner_references().iter().any(|r| r.name == "keeper")
    });
    Ok(vec![
        (
            format!("ConfigMap {NS}/shared (owners: bg-root, deleted, and keeper, live)"),
            shared_ok,
        ),
        (
            format!("ConfigMap {NS}/keeper (the live owner)"),
            seen.cms.contains_key("keeper"),
        ),
        (
            format!(
                "orphan tree: {orphans_cm}/{CHILDREN} ConfigMaps and {orphans_s}/{} Secrets kept",
                CHILDREN * GRANDCHILDREN
            ),
            orphans_cm == CHILDREN && orphans_s == CHILDREN * GRANDCHILDREN,
        ),
    ])
}

/// Removes the trees of an earlier run: the namespace goes, and any finalizer a half-done
/// foreground deletion left is released so it cannot hold the namespace.
pub async fn clean(c: &Client) -> Res<()> {
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), NS);
    kube_util::delete(
        &Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone()),
        NS,
    )
    .await?;
    let held = match cms.list_metadata(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) if kube_util::is_not_found(&e) => vec![],
        Err(e) => return Err(e.into()),
    };
    for o in held.iter().filter(|o| !o.finalizers().is_empty()) {
        kube_util::delete_and_release(&cms, &o.name_any()).await?;
    }
    Ok(())
}
