//! One name, one owner: AWS tags carry only a cluster's name, so two objects that resolve to one
//! name in one account and region own the same tagged resources, and tearing down either would
//! delete the other's. A teardown is refused while another AWSCluster or AWSManagedControlPlane,
//! in any namespace, live or being deleted, claims one of its names there.
//!
//! What an object claims is the names it would be torn down as ([`GcKind::names`]), or, for an
//! object that does not resolve (no owner yet, undecodable), every Cluster its owner references
//! name and its EKS name: a name that might be live counts. The decision is pure
//! ([`rivals`], table-tested); the accounts of the rivals that share a region are then read
//! through their own identities (the caller), since only AWS knows which account a session is.

use crate::api::capa::{AWSCluster, AWSManagedControlPlane, IdentityRef};
use crate::external::core::identity::{self, Placement};
use crate::external::core::kind::GcKind;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client, ResourceExt};
use sweeper_aws::scope::Scope;
use sweeper_aws::session::SessionCache;

/// What one object claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameClaim {
    /// `Kind ns/name`, for messages.
    pub label: String,
    pub uid: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The names its AWS resources are (or would be) tagged with.
    pub names: Vec<String>,
    /// `spec.region`; `None`: not set (the controller's default region).
    pub region: Option<String>,
    pub identity_ref: Option<IdentityRef>,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "cannot list {kind} in every namespace to check that no other object claims the cluster's name: {source}"
)]
pub struct ClaimsListError {
    kind: String,
    #[source]
    source: kube::Error,
}

impl NameClaim {
    /// The parts every claim has, from the object's metadata.
    fn new(
        kind: String,
        o: &impl ResourceExt,
        names: Vec<String>,
        region: Option<&str>,
        identity_ref: Option<IdentityRef>,
    ) -> NameClaim {
        let namespace = o.namespace().unwrap_or_default();
        NameClaim {
            label: crate::engine::meta::object_label(&kind, Some(&namespace), &o.name_any()),
            uid: o.uid().unwrap_or_default(),
            kind,
            namespace,
            name: o.name_any(),
            names,
            region: region.filter(|r| !r.is_empty()).map(str::to_string),
            identity_ref,
        }
    }

    /// What a decoded object claims.
    pub fn of<K: GcKind>(o: &K) -> NameClaim {
        let names = match o.names() {
            Ok(n) if n.capi == n.tag => vec![n.capi],
            Ok(n) => vec![n.capi, n.tag],
            Err(_) => Vec::new(),
        };
        let (region, identity_ref) = o.placement();
        NameClaim::new(
            K::kind(&()).into_owned(),
            o,
            names,
            region,
            identity_ref.cloned(),
        )
    }

    /// What a listed object claims: its typed names when it decodes and resolves, else every
    /// Cluster its owner references name and its EKS name (conservative).
    fn listed<K: GcKind>(o: &DynamicObject) -> NameClaim {
        let value = serde_json::to_value(o).unwrap_or_default();
        if let Ok(typed) = serde_json::from_value::<K>(value.clone()) {
            let mut claim = NameClaim::of(&typed);
            if claim.names.is_empty() {
                claim.names = loose_names::<K>(o, &value);
            }
            return claim;
        }
        NameClaim::new(
            K::kind(&()).into_owned(),
            o,
            loose_names::<K>(o, &value),
            value.pointer("/spec/region").and_then(|r| r.as_str()),
            value
                .pointer("/spec/identityRef")
                .and_then(|r| serde_json::from_value(r.clone()).ok()),
        )
    }
}

/// The EKS name a listed object (`value`, its JSON) may be tagged with, whether or not it
/// decodes: `spec.eksClusterName` where it is a non-empty string; for a control plane without
/// one (empty or not a string), the name CAPA's defaulter derives. The claims and the scan's
/// live names both read it here.
pub fn listed_eks_name<K: GcKind>(o: &DynamicObject, value: &serde_json::Value) -> Option<String> {
    let stated = value
        .pointer("/spec/eksClusterName")
        .and_then(|v| v.as_str())
        .filter(|n| !n.is_empty());
    match stated {
        Some(n) => Some(n.to_string()),
        None if K::kind(&()) == "AWSManagedControlPlane" => Some(
            crate::api::capa::default_eks_name(&o.namespace().unwrap_or_default(), &o.name_any()),
        ),
        None => None,
    }
}

/// Every Cluster an object's owner references name, and its EKS name ([`listed_eks_name`]).
fn loose_names<K: GcKind>(o: &DynamicObject, value: &serde_json::Value) -> Vec<String> {
    let mut names = crate::external::core::cluster::owner_clusters(o);
    names.extend(listed_eks_name::<K>(o, value));
    names.sort();
    names.dedup();
    names
}

/// Lists both kinds in every namespace (one list each) as claims. A kind the server does not
/// serve has no objects.
pub async fn list(client: &Client) -> Result<Vec<NameClaim>, ClaimsListError> {
    let mut claims = Vec::new();
    for (ar, claim) in [
        (
            ApiResource::erase::<AWSCluster>(&()),
            NameClaim::listed::<AWSCluster> as fn(&DynamicObject) -> NameClaim,
        ),
        (
            ApiResource::erase::<AWSManagedControlPlane>(&()),
            NameClaim::listed::<AWSManagedControlPlane>,
        ),
    ] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        match api.list(&ListParams::default()).await {
            Ok(list) => claims.extend(list.items.iter().map(claim)),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                return Err(ClaimsListError {
                    kind: ar.kind.clone(),
                    source,
                });
            }
        }
    }
    Ok(claims)
}

/// The other objects that claim one of `me`'s names in a region that may be `me`'s (the same, or
/// either unset). Whether they are in `me`'s account is the caller's question. Pure.
pub fn rivals<'a>(me: &NameClaim, all: &'a [NameClaim]) -> Vec<&'a NameClaim> {
    all.iter()
        .filter(|o| !(o.uid == me.uid && o.kind == me.kind))
        .filter(|o| !(o.kind == me.kind && o.namespace == me.namespace && o.name == me.name))
        .filter(|o| o.names.iter().any(|n| me.names.contains(n)))
        .filter(|o| match (&o.region, &me.region) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        })
        .collect()
}

/// The other objects that claim one of `me`'s names in the account and region `here` (each
/// rival's place read through its own identity, the session cache keeping it), each with how it
/// reads in a message. A rival whose account cannot be told counts: it may be this one.
pub async fn clashing(
    client: &Client,
    capa_namespace: &str,
    sessions: &SessionCache,
    me: &NameClaim,
    here: &Scope,
) -> Result<Vec<(NameClaim, String)>, ClaimsListError> {
    let all = list(client).await?;
    let mut out = Vec::new();
    for rival in rivals(me, &all) {
        match place_of(client, capa_namespace, sessions, rival).await {
            Ok(there) if there.account == here.account && there.region == here.region => {
                out.push((
                    rival.clone(),
                    format!("{} in the same account and region", rival.label),
                ));
            }
            Ok(_) => {}
            Err(why) => out.push((
                rival.clone(),
                format!("{} (its account cannot be told: {why})", rival.label),
            )),
        }
    }
    Ok(out)
}

/// The account and region a claim's own identity reaches.
async fn place_of(
    client: &Client,
    capa_namespace: &str,
    sessions: &SessionCache,
    c: &NameClaim,
) -> Result<Scope, identity::SessionRefused> {
    let at = Placement {
        namespace: &c.namespace,
        region: c.region.as_deref(),
        identity_ref: c.identity_ref.as_ref(),
    };
    Ok(identity::session(client, capa_namespace, sessions, &at)
        .await?
        .scope
        .clone())
}

/// Every group of objects that claim one name in one region (as [`rivals`] reads it), for
/// `sweeper check`: each name with the objects that claim it. Accounts are not compared here.
pub fn collisions(all: &[NameClaim]) -> Vec<(String, Vec<String>)> {
    let mut by_name: std::collections::BTreeMap<String, Vec<&NameClaim>> = Default::default();
    for c in all {
        for n in &c.names {
            by_name.entry(n.clone()).or_default().push(c);
        }
    }
    by_name
        .into_iter()
        .filter_map(|(name, claims)| {
            let clashing: Vec<String> = claims
                .iter()
                .filter(|c| rivals(c, all).iter().any(|r| r.names.contains(&name)))
                .map(|c| match &c.region {
                    Some(r) => format!("{} ({r})", c.label),
                    None => format!("{} (default region)", c.label),
                })
                .collect();
            (clashing.len() > 1).then_some((name, clashing))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(kind: &str, ns: &str, name: &str, names: &[&str], region: Option<&str>) -> NameClaim {
        NameClaim {
            label: format!("{kind} {ns}/{name}"),
            uid: format!("{kind}/{ns}/{name}"),
            kind: kind.into(),
            namespace: ns.into(),
            name: name.into(),
            names: names.iter().map(|n| n.to_string()).collect(),
            region: region.map(Into::into),
            identity_ref: None,
        }
    }

    #[test]
    fn rivals_share_a_name_in_a_region_that_may_be_the_same() {
        let me = claim("AWSCluster", "a", "dev", &["dev"], Some("eu-west-1"));
        let table = [
            (
                "itself",
                claim("AWSCluster", "a", "dev", &["dev"], Some("eu-west-1")),
                false,
            ),
            (
                "same name, other namespace",
                claim("AWSCluster", "m", "x", &["dev"], Some("eu-west-1")),
                true,
            ),
            (
                "same name, other region",
                claim("AWSCluster", "m", "x", &["dev"], Some("us-east-1")),
                false,
            ),
            (
                "same name, region unset",
                claim("AWSCluster", "m", "x", &["dev"], None),
                true,
            ),
            (
                "prefix-sharing name",
                claim("AWSCluster", "m", "x", &["dev2"], Some("eu-west-1")),
                false,
            ),
            (
                "an EKS name equal to it",
                claim(
                    "AWSManagedControlPlane",
                    "e",
                    "cp",
                    &["other", "dev"],
                    Some("eu-west-1"),
                ),
                true,
            ),
            (
                "no names (unresolved)",
                claim("AWSCluster", "m", "x", &[], Some("eu-west-1")),
                false,
            ),
        ];
        for (case, other, want) in table {
            let all = vec![me.clone(), other];
            assert_eq!(rivals(&me, &all).len() == 1, want, "{case}");
        }
    }

    fn listed_control_plane(spec: serde_json::Value) -> NameClaim {
        let o: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
            "kind": "AWSManagedControlPlane",
            "metadata": {"name": "cp", "namespace": "team-a", "uid": "u1", "ownerReferences": [
                {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c1", "uid": "u0"}
            ]},
            "spec": spec,
        }))
        .unwrap();
        NameClaim::listed::<AWSManagedControlPlane>(&o)
    }

    /// A control plane without `spec.eksClusterName` (created past CAPA's defaulting webhook)
    /// claims the name CAPA would give it, whether it decodes or not, so that a control plane
    /// stating that name is held with it.
    #[test]
    fn a_control_plane_without_an_eks_name_claims_capas_default() {
        for (case, spec, want) in [
            ("decodes", serde_json::json!({}), vec!["c1", "team-a_cp"]),
            (
                "empty",
                serde_json::json!({"eksClusterName": ""}),
                vec!["c1", "team-a_cp"],
            ),
            (
                "undecodable",
                serde_json::json!({"eksClusterName": 7, "region": "eu-west-1"}),
                vec!["c1", "team-a_cp"],
            ),
            (
                "stated",
                serde_json::json!({"eksClusterName": "prod"}),
                vec!["c1", "prod"],
            ),
        ] {
            assert_eq!(listed_control_plane(spec).names, want, "{case}");
        }
    }

    #[test]
    fn collisions_list_each_shared_name_with_its_claimants() {
        let all = vec![
            claim("AWSCluster", "a", "dev", &["dev"], Some("eu-west-1")),
            claim("AWSCluster", "b", "dev", &["dev"], Some("eu-west-1")),
            claim("AWSCluster", "c", "dev", &["dev"], Some("us-east-1")),
            claim("AWSCluster", "d", "prod", &["prod"], Some("eu-west-1")),
        ];
        let found = collisions(&all);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "dev");
        assert_eq!(
            found[0].1,
            vec![
                "AWSCluster a/dev (eu-west-1)".to_string(),
                "AWSCluster b/dev (eu-west-1)".to_string()
            ]
        );
    }
}
