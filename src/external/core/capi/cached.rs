//! Cluster API lookups with API discovery kept per collector: the Cluster resources the server
//! serves and what each ref's kind resolves to are discovered once, not on every reconcile (a
//! group's discovery is two to three calls, and an EKS reconcile resolves two groups).
//!
//! What is kept is refreshed where it could mislead: a NotFound read through a kept resource
//! discovers again and, when the resource changed (a CRD's versions changed), reads once more,
//! so a stale version never passes for a gone Cluster or AWSManagedCluster; a kind discovery does
//! not serve (or a group not installed yet) is never kept, so it is looked up again next time.

use crate::api::capa::ObjectRef;
use crate::external::core::capi::{CapiError, ClusterRefs};
use kube::Client;
use kube::api::ApiResource;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// What discovery said, shared by every clone.
#[derive(Default)]
struct Known {
    /// The Cluster resources, most preferred first; `None` until discovered (never kept empty).
    clusters: Option<Vec<ApiResource>>,
    /// Each ref's (group, kind, version asked) resolved.
    refs: HashMap<(String, String, Option<String>), ApiResource>,
}

/// A client for Cluster API lookups with discovery kept across calls. Clones share what was
/// discovered: the external collector holds one for both kinds' controllers.
#[derive(Clone)]
pub struct Capi {
    client: Client,
    known: Arc<Mutex<Known>>,
}

impl Capi {
    /// Nothing discovered yet: a one-shot command's lookups discover as they go.
    pub fn new(client: Client) -> Self {
        Capi {
            client,
            known: Arc::default(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    fn known(&self) -> MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The Cluster resources served (see [`crate::external::core::capi::cluster_resources`]), and whether they were
    /// kept from an earlier discovery.
    async fn clusters(&self) -> Result<(Vec<ApiResource>, bool), CapiError> {
        if let Some(kept) = self.known().clusters.clone() {
            return Ok((kept, true));
        }
        let found = crate::external::core::capi::cluster_resources(&self.client).await?;
        if !found.is_empty() {
            self.known().clusters = Some(found.clone());
        }
        Ok((found, false))
    }

    /// The Cluster resources the server serves, most preferred first; empty when Cluster API is
    /// not installed.
    pub async fn cluster_resources(&self) -> Result<Vec<ApiResource>, CapiError> {
        Ok(self.clusters().await?.0)
    }

    /// Reads the Cluster `namespace/name` (see [`crate::external::core::capi::read_cluster`]). A NotFound at a kept
    /// version is checked against fresh discovery before it counts.
    #[tracing::instrument(skip(self))]
    pub async fn read_cluster(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ClusterRefs>, CapiError> {
        let (resources, kept) = self.clusters().await?;
        let found =
            crate::external::core::capi::read_over(&self.client, &resources, namespace, name)
                .await?;
        if found.is_some() || !kept {
            return Ok(found);
        }
        self.known().clusters = None;
        let (fresh, _) = self.clusters().await?;
        if fresh == resources {
            return Ok(None);
        }
        tracing::info!("Cluster API's served versions changed: reading the Cluster again");
        crate::external::core::capi::read_over(&self.client, &fresh, namespace, name).await
    }

    /// The resource a ref points at (see [`crate::external::core::capi::resolve_ref`]), and whether it was kept from
    /// an earlier discovery.
    pub async fn resolve_ref(&self, r: &ObjectRef) -> Result<(ApiResource, bool), CapiError> {
        let key = crate::external::core::capi::ref_key(r)?;
        if let Some(ar) = self.known().refs.get(&key).cloned() {
            return Ok((ar, true));
        }
        let ar = crate::external::core::capi::discover_ref(&self.client, &key).await?;
        self.known().refs.insert(key, ar.clone());
        Ok((ar, false))
    }

    /// A read through what `r` resolved to found nothing: forget it and resolve again. `Some`
    /// only when discovery now says something else (then read again there).
    pub async fn re_resolve(
        &self,
        r: &ObjectRef,
        was: &ApiResource,
    ) -> Result<Option<ApiResource>, CapiError> {
        self.known()
            .refs
            .remove(&crate::external::core::capi::ref_key(r)?);
        let (ar, _) = self.resolve_ref(r).await?;
        Ok((ar != *was).then_some(ar))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MockApi;
    use http::Method;
    use serde_json::{Value, json};

    const AT_V2: &str = "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters/c1";
    const AT_V1: &str = "/apis/cluster.x-k8s.io/v1beta1/namespaces/ns/clusters/c1";

    /// One discovery of Cluster API serving `versions` (each call answered once).
    fn discovery(server: &MockApi, versions: &[&str]) {
        crate::external::core::capi::mocked::discovery(server, versions, false);
    }

    fn cluster(paused: bool) -> Value {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
               "metadata": {"name": "c1", "namespace": "ns"}, "spec": {"paused": paused}})
    }

    /// Discovery is kept between reads; a NotFound at the kept version is not taken for a gone
    /// Cluster until fresh discovery agrees: here the CRD stopped serving v1beta2, and the
    /// Cluster (paused) is found at v1beta1.
    #[tokio::test]
    async fn discovery_is_kept_and_refreshed_on_a_not_found() {
        let (client, server) = MockApi::new();
        discovery(&server, &["v1beta2"]);
        server
            .expect(Method::GET, AT_V2)
            .respond(200, cluster(false));
        server
            .expect(Method::GET, AT_V2)
            .respond(200, cluster(false));
        server
            .expect(Method::GET, AT_V2)
            .respond_status(404, "NotFound");
        discovery(&server, &["v1beta1"]);
        server
            .expect(Method::GET, AT_V1)
            .respond(200, cluster(true));
        let capi = Capi::new(client);

        assert!(!capi.read_cluster("ns", "c1").await.unwrap().unwrap().paused);
        assert!(!capi.read_cluster("ns", "c1").await.unwrap().unwrap().paused);
        let refs = capi.read_cluster("ns", "c1").await.unwrap().unwrap();
        assert!(refs.paused, "read again where it is served now");
        assert_eq!(refs.version, "v1beta1");

        let lines: Vec<String> = server.finish().iter().map(|c| c.line()).collect();
        assert_eq!(
            lines,
            [
                "GET /apis",
                "GET /apis/cluster.x-k8s.io/v1beta2",
                &format!("GET {AT_V2}"),
                &format!("GET {AT_V2}"),
                &format!("GET {AT_V2}"),
                "GET /apis",
                "GET /apis/cluster.x-k8s.io/v1beta1",
                &format!("GET {AT_V1}"),
            ]
        );
    }

    /// A NotFound that fresh discovery confirms (the versions served are the same) is a gone
    /// Cluster, read once.
    #[tokio::test]
    async fn a_confirmed_not_found_is_gone() {
        let (client, server) = MockApi::new();
        discovery(&server, &["v1beta2"]);
        server
            .expect(Method::GET, AT_V2)
            .respond(200, cluster(false));
        server
            .expect(Method::GET, AT_V2)
            .respond_status(404, "NotFound");
        discovery(&server, &["v1beta2"]);
        let capi = Capi::new(client);

        assert!(capi.read_cluster("ns", "c1").await.unwrap().is_some());
        assert!(capi.read_cluster("ns", "c1").await.unwrap().is_none());
        assert_eq!(server.finish().len(), 6, "discovery twice, two reads");
    }
}
