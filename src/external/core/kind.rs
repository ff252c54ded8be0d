//! The two kinds the external collector tears down, behind one trait: what each states about
//! its cluster (names, VPCs, region and identity, EKS facts) and where its GC switches are.

use crate::api::capa::IdentityRef;
use crate::api::capa::{AWSCluster, AWSManagedControlPlane};
use crate::external::core::capi::Capi;
use crate::external::core::cluster::{
    self, ClusterNameError, ClusterNames, LinkedAnnotations, Owning, ResolveError,
};
use k8s_openapi::NamespaceResourceScope;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use sweeper_aws::phases::EksFacts;

/// Where sweeper keeps, on a live AWSManagedControlPlane, the IRSA issuer CAPA recorded in its
/// status. `clusterctl move` moves annotations but not the status (CAPA#3972: the provider's ARN
/// was lost and CAPA never deleted it), so the teardown reads the status first, this second.
pub const OIDC_ISSUER_ANNOTATION: &str = "sweeper.dev/oidc-issuer";

/// The kinds the external collector handles.
pub trait GcKind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + serde::Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
    /// This kind's readiness component (not ready while its watch keeps failing).
    const COMPONENT: &'static str;

    /// The names in the cluster's AWS tags: CAPA's own and the cloud provider's.
    fn names(&self) -> Result<ClusterNames, ClusterNameError>;

    /// The cluster's VPC as the object states it (`spec.network.vpc.id`): it confirms what the
    /// LB controller and the VPC CNI tagged for a cluster of this name.
    fn vpc_ids(&self) -> Vec<String>;

    /// The bucket CAPA keeps the machines' bootstrap data in (`spec.s3Bucket.name`): the only
    /// bucket the `bootstrap-data-s3` task reads. `None` for a kind without the field
    /// (AWSManagedControlPlane: CAPA stores no EKS bootstrap data in S3).
    fn s3_bucket(&self) -> Option<String> {
        None
    }

    /// Where the cluster lives: `spec.region` and `spec.identityRef`.
    fn placement(&self) -> (Option<&str>, Option<&IdentityRef>);

    /// What the EKS-made kinds need, read from the object before the teardown starts; `None`
    /// for a kind that is not EKS.
    fn eks_facts(&self) -> Option<EksFacts> {
        None
    }

    /// The issuer to keep in [`OIDC_ISSUER_ANNOTATION`] while the object lives, when the
    /// annotation does not say it yet; `None` for a kind that is not EKS.
    fn issuer_to_keep(&self) -> Option<String> {
        None
    }

    /// Another object whose GC annotations also govern this one (its label and annotations),
    /// read fresh; `Ok(None)` when there is none. `owning`: the owning Cluster if this reconcile
    /// already read it (`None`: read it when needed).
    fn linked_switches(
        &self,
        capi: &Capi,
        owning: Option<Owning>,
    ) -> impl Future<Output = Result<Option<LinkedAnnotations>, ResolveError>> + Send;
}

impl GcKind for AWSCluster {
    const COMPONENT: &'static str = "external-awscluster";

    fn names(&self) -> Result<ClusterNames, ClusterNameError> {
        cluster::for_aws_cluster(self)
    }

    fn vpc_ids(&self) -> Vec<String> {
        crate::api::capa::vpc_ids(self.spec.network.as_ref())
    }

    fn s3_bucket(&self) -> Option<String> {
        crate::api::capa::s3_bucket_name(self.spec.s3_bucket.as_ref())
    }

    fn placement(&self) -> (Option<&str>, Option<&IdentityRef>) {
        (self.spec.region.as_deref(), self.spec.identity_ref.as_ref())
    }

    /// CAPA and clusterawsadm agree on the AWSCluster: nothing else to read.
    async fn linked_switches(
        &self,
        _capi: &Capi,
        _owning: Option<Owning>,
    ) -> Result<Option<LinkedAnnotations>, ResolveError> {
        Ok(None)
    }
}

impl GcKind for AWSManagedControlPlane {
    const COMPONENT: &'static str = "external-awsmanagedcontrolplane";

    fn names(&self) -> Result<ClusterNames, ClusterNameError> {
        cluster::for_control_plane(self)
    }

    fn vpc_ids(&self) -> Vec<String> {
        crate::api::capa::vpc_ids(self.spec.network.as_ref())
    }

    fn placement(&self) -> (Option<&str>, Option<&IdentityRef>) {
        (self.spec.region.as_deref(), self.spec.identity_ref.as_ref())
    }

    /// The IRSA issuer CAPA recorded in `status.oidcProvider`, else the one sweeper kept from
    /// it while the object lived (none when neither says one).
    fn eks_facts(&self) -> Option<EksFacts> {
        Some(EksFacts {
            oidc_issuer: recorded_issuer(self).or_else(|| {
                self.annotations()
                    .get(OIDC_ISSUER_ANNOTATION)
                    .map(|i| i.trim().to_string())
                    .filter(|i| !i.is_empty())
            }),
        })
    }

    fn issuer_to_keep(&self) -> Option<String> {
        recorded_issuer(self).filter(|i| self.annotations().get(OIDC_ISSUER_ANNOTATION) != Some(i))
    }

    /// On EKS `clusterawsadm gc disable` annotates Cluster.spec.infrastructureRef, the
    /// AWSManagedCluster, while CAPA reads this control plane: users who opted out with CAPA's
    /// own tool have the annotation there.
    async fn linked_switches(
        &self,
        capi: &Capi,
        owning: Option<Owning>,
    ) -> Result<Option<LinkedAnnotations>, ResolveError> {
        cluster::managed_cluster_annotations(capi, self, owning).await
    }
}

/// The issuer in CAPA's `status.oidcProvider` of a control plane.
fn recorded_issuer(cp: &AWSManagedControlPlane) -> Option<String> {
    cp.status
        .as_ref()
        .and_then(|s| s.oidc_provider.as_ref())
        .and_then(|p| p.issuer())
}
