//! Every cluster identity in use can build its AWS session.
//!
//! For each distinct (namespace, region, identityRef) of the AWSClusters and
//! AWSManagedControlPlanes the external collector takes, the identity chain is resolved exactly as
//! a teardown resolves it (`external::core::identity::resolve`: the identity objects, their
//! `allowedNamespaces`, a static identity's Secret) and the session is built and proven with one
//! `sts:GetCallerIdentity` through the chain. Nothing else is called: no cluster's resources are
//! looked up or touched. Clusters that share an identity share one line.

use super::{CheckError, Config, Line, kube_message};
use crate::api::capa::{AWSCluster, AWSManagedControlPlane, IdentityRef};
use crate::external::core::identity::{self, Placement};
use crate::external::core::kind::GcKind;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use std::collections::BTreeMap;
use sweeper_aws::session::SessionCache;

const CATEGORY: &str = "aws";

/// A distinct place clusters live: what a session is resolved from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Place {
    pub namespace: String,
    pub region: Option<String>,
    /// `Kind/name`, or None for the controller's own credentials.
    pub identity: Option<(String, String)>,
}

impl Place {
    pub fn label(&self) -> String {
        let who = match &self.identity {
            Some((kind, name)) => format!("{kind} {name}"),
            None => "sweeper's own credentials".to_string(),
        };
        let region = self.region.as_deref().unwrap_or("the default region");
        format!("{who} in {region} (namespace {})", self.namespace)
    }

    fn identity_ref(&self) -> Option<IdentityRef> {
        self.identity.as_ref().map(|(kind, name)| IdentityRef {
            kind: Some(kind.clone()),
            name: Some(name.clone()),
        })
    }
}

/// The line for one place: the clusters there and what building the session gave (the caller's
/// ARN, or why not).
pub fn judge(place: &Place, clusters: &[String], built: &Result<String, CheckError>) -> Line {
    let shown: Vec<&str> = clusters.iter().take(3).map(String::as_str).collect();
    let more = clusters.len().saturating_sub(shown.len());
    let who = if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    };
    match built {
        Ok(caller) => Line::pass(
            CATEGORY,
            format!("{}: session built as {caller} (for {who})", place.label()),
        ),
        Err(e) => Line::fail(
            CATEGORY,
            format!("{}: no session (for {who}): {e}", place.label()),
            "fix the identity (its object, allowedNamespaces, Secret, role trust policy) or \
             sweeper's own credentials; until then these clusters' teardowns fail",
        ),
    }
}

async fn places<K: GcKind>(
    client: &Client,
    cfg: &Config,
    out: &mut BTreeMap<Place, Vec<String>>,
) -> Result<(), CheckError> {
    let api: Api<K> = if cfg.cluster_namespace.is_empty() {
        Api::all(client.clone())
    } else {
        Api::namespaced(client.clone(), &cfg.cluster_namespace)
    };
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| CheckError::List {
            plural: K::plural(&()).to_string(),
            message: kube_message(&e),
        })?;
    for o in list.items {
        if !cfg.external_selector.matches(o.labels()) {
            continue;
        }
        let (region, identity_ref) = o.placement();
        let place = Place {
            namespace: o.namespace().unwrap_or_default(),
            region: region.filter(|r| !r.is_empty()).map(str::to_string),
            identity: identity_ref.map(|r| {
                (
                    r.kind.clone().unwrap_or_default(),
                    r.name.clone().unwrap_or_default(),
                )
            }),
        };
        out.entry(place).or_default().push(format!(
            "{} {}/{}",
            K::kind(&()),
            o.namespace().unwrap_or_default(),
            o.name_any()
        ));
    }
    Ok(())
}

pub async fn check(client: &Client, cfg: &Config, sessions: Option<&SessionCache>) -> Vec<Line> {
    let mut found = BTreeMap::new();
    let mut lines = Vec::new();
    for r in [
        places::<AWSCluster>(client, cfg, &mut found).await,
        places::<AWSManagedControlPlane>(client, cfg, &mut found).await,
    ] {
        if let Err(e) = r {
            lines.push(Line::warn(
                CATEGORY,
                e.to_string(),
                "the identities of these clusters were not checked; see the rbac section",
            ));
        }
    }
    if found.is_empty() {
        lines.push(Line::pass(
            CATEGORY,
            "no cluster object to build a session for (none exists, or none is selected)",
        ));
        return lines;
    }
    let Some(sessions) = sessions else {
        lines.push(Line::warn(
            CATEGORY,
            "AWS sessions were not checked (--skip-aws)",
            "run without --skip-aws to prove every identity in use",
        ));
        return lines;
    };
    for (place, clusters) in &found {
        let identity_ref = place.identity_ref();
        let at = Placement {
            namespace: &place.namespace,
            region: place.region.as_deref(),
            identity_ref: identity_ref.as_ref(),
        };
        let built = match identity::resolve(client, &cfg.capa_namespace, &at).await {
            Ok(spec) => sessions
                .session(&spec)
                .await
                .map(|s| s.caller.clone())
                .map_err(|e| CheckError::Session {
                    place: place.label(),
                    message: e.to_string(),
                }),
            Err(e) => Err(CheckError::Identity {
                place: place.label(),
                message: e.to_string(),
            }),
        };
        lines.push(judge(place, clusters, &built));
    }
    lines
}
