use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

#[test]
fn label_wins_then_owner_reference() {
    let mut c = AWSCluster::new("infra", Default::default());
    c.metadata.namespace = Some("ns".into());
    assert!(matches!(
        for_aws_cluster(&c),
        Err(ClusterNameError::NoOwner { .. })
    ));
    c.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "cluster.x-k8s.io/v1beta1".into(),
        kind: "Cluster".into(),
        name: "c1".into(),
        uid: "u".into(),
        ..Default::default()
    }]);
    let names = for_aws_cluster(&c).unwrap();
    assert_eq!((names.capi.as_str(), names.tag.as_str()), ("c1", "c1"));
    c.metadata.labels = Some([(CLUSTER_NAME_LABEL.to_string(), "c2".to_string())].into());
    assert_eq!(for_aws_cluster(&c).unwrap().tag, "c2");
}

#[test]
fn eks_name_comes_from_the_spec_and_is_validated() {
    let mut cp = AWSManagedControlPlane::new("cp", Default::default());
    cp.metadata.labels = Some([(CLUSTER_NAME_LABEL.to_string(), "ek1".to_string())].into());
    assert!(matches!(
        for_control_plane(&cp),
        Err(ClusterNameError::NoEksName { .. })
    ));
    cp.spec.eks_cluster_name = Some("eks-1".into());
    assert_eq!(for_control_plane(&cp).unwrap().tag, "eks-1");
    cp.spec.eks_cluster_name = Some("a/b".into());
    assert!(matches!(
        for_control_plane(&cp),
        Err(ClusterNameError::Invalid(_))
    ));
    cp.spec.eks_cluster_name = Some(String::new());
    assert!(matches!(
        for_control_plane(&cp),
        Err(ClusterNameError::Invalid(_))
    ));
}

/// CAPA's default EKS name is `<namespace>_<name>`: the cloud provider tags with it, while
/// CAPA tags its own network with the Cluster API name.
#[test]
fn eks_control_plane_has_two_names_and_needs_its_cluster() {
    let mut cp = AWSManagedControlPlane::new("ek1-control-plane", Default::default());
    cp.metadata.namespace = Some("eksns".into());
    cp.spec.eks_cluster_name = Some("eksns_ek1-control-plane".into());
    assert!(
        matches!(
            for_control_plane(&cp),
            Err(ClusterNameError::NoOwner {
                kind: "AWSManagedControlPlane",
                ..
            })
        ),
        "no guess at CAPA's name without the owning Cluster"
    );
    cp.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "cluster.x-k8s.io/v1beta2".into(),
        kind: "Cluster".into(),
        name: "ek1".into(),
        uid: "u".into(),
        ..Default::default()
    }]);
    let names = for_control_plane(&cp).unwrap();
    assert_eq!(names.capi, "ek1");
    assert_eq!(names.tag, "eksns_ek1-control-plane");
    assert_eq!(names.describe(), "ek1 (EKS name eksns_ek1-control-plane)");
}
