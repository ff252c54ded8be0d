use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use std::collections::BTreeMap;

fn owner(api_version: &str, kind: &str, name: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        ..Default::default()
    }
}

/// The name comes from the owner reference only; a label is never the source, and must agree.
#[test]
fn the_owner_reference_names_the_cluster_and_a_label_must_agree() {
    let capi = "cluster.x-k8s.io/v1beta2";
    let label = |v: &str| Some([(CLUSTER_NAME_LABEL.to_string(), v.to_string())].into());
    type Case = (
        &'static str,
        Vec<OwnerReference>,
        Option<BTreeMap<String, String>>,
        Result<&'static str, &'static str>,
    );
    let table: Vec<Case> = vec![
        ("nothing", vec![], None, Err("NoOwner")),
        (
            "a label alone proves nothing",
            vec![],
            label("victim"),
            Err("NoOwner"),
        ),
        (
            "owner reference",
            vec![owner(capi, "Cluster", "c1")],
            None,
            Ok("c1"),
        ),
        (
            "agreeing label",
            vec![owner(capi, "Cluster", "c1")],
            label("c1"),
            Ok("c1"),
        ),
        (
            "disagreeing label",
            vec![owner(capi, "Cluster", "c1")],
            label("victim"),
            Err("LabelDisagrees"),
        ),
        (
            "another group's Cluster is no owner",
            vec![owner("example.com/v1", "Cluster", "c1")],
            None,
            Err("NoOwner"),
        ),
        (
            "another kind is no owner",
            vec![owner(capi, "MachineDeployment", "c1")],
            None,
            Err("NoOwner"),
        ),
        (
            "two Clusters",
            vec![owner(capi, "Cluster", "c1"), owner(capi, "Cluster", "c2")],
            None,
            Err("SeveralOwners"),
        ),
        (
            "the same Cluster at two versions",
            vec![
                owner(capi, "Cluster", "c1"),
                owner("cluster.x-k8s.io/v1beta1", "Cluster", "c1"),
            ],
            None,
            Ok("c1"),
        ),
    ];
    for (case, owners, labels, want) in table {
        let mut c = AWSCluster::new("infra", Default::default());
        c.metadata.namespace = Some("ns".into());
        c.metadata.owner_references = Some(owners);
        c.metadata.labels = labels;
        let got = for_aws_cluster(&c);
        match (want, &got) {
            (Ok(n), Ok(names)) => {
                assert_eq!((names.capi.as_str(), names.tag.as_str()), (n, n), "{case}")
            }
            (Err("NoOwner"), Err(ClusterNameError::NoOwner { .. }))
            | (Err("LabelDisagrees"), Err(ClusterNameError::LabelDisagrees { .. }))
            | (Err("SeveralOwners"), Err(ClusterNameError::SeveralOwners { .. })) => {}
            _ => panic!("{case}: want {want:?}, got {got:?}"),
        }
    }
}

fn obj_ref(api_group: Option<&str>, kind: &str, name: &str) -> Option<ObjectRef> {
    Some(ObjectRef {
        api_group: api_group.map(Into::into),
        kind: Some(kind.into()),
        name: Some(name.into()),
        ..Default::default()
    })
}

/// The owner is proven only by a Cluster whose own ref names the object, as its kind.
#[test]
fn the_owner_cluster_must_reference_the_object() {
    let infra = Some("infrastructure.cluster.x-k8s.io");
    let cp = Some("controlplane.cluster.x-k8s.io");
    let refs = |i: Option<ObjectRef>, c: Option<ObjectRef>| capi::ClusterRefs {
        version: "v1beta2".into(),
        infrastructure_ref: i,
        control_plane_ref: c,
        paused: false,
    };
    let table = [
        (
            "infrastructure ref names it",
            refs(obj_ref(infra, "AWSCluster", "a"), None),
            "AWSCluster",
            "a",
            true,
        ),
        (
            "a ref without a group (v1beta1 stored)",
            refs(obj_ref(None, "AWSCluster", "a"), None),
            "AWSCluster",
            "a",
            true,
        ),
        (
            "another AWSCluster",
            refs(obj_ref(infra, "AWSCluster", "b"), None),
            "AWSCluster",
            "a",
            false,
        ),
        ("no ref", refs(None, None), "AWSCluster", "a", false),
        (
            "another group",
            refs(obj_ref(Some("example.com"), "AWSCluster", "a"), None),
            "AWSCluster",
            "a",
            false,
        ),
        (
            "named as the control plane only",
            refs(None, obj_ref(cp, "AWSCluster", "a")),
            "AWSCluster",
            "a",
            false,
        ),
        (
            "control plane ref names it",
            refs(
                obj_ref(infra, "AWSManagedCluster", "x"),
                obj_ref(cp, "AWSManagedControlPlane", "x-cp"),
            ),
            "AWSManagedControlPlane",
            "x-cp",
            true,
        ),
        (
            "control plane named as infrastructure only",
            refs(obj_ref(cp, "AWSManagedControlPlane", "x-cp"), None),
            "AWSManagedControlPlane",
            "x-cp",
            false,
        ),
    ];
    for (case, r, kind, name, want) in table {
        assert_eq!(references(&r, kind, name), want, "{case}");
        let owning = Owning::Read {
            namespace: "ns".into(),
            name: "c".into(),
            read: Box::new(Ok(Some(r))),
        };
        assert_eq!(owning.proof(kind, name).is_ok(), want, "{case}");
    }
    let gone = Owning::Read {
        namespace: "ns".into(),
        name: "c".into(),
        read: Box::new(Ok(None)),
    };
    assert!(
        gone.proof("AWSCluster", "a")
            .unwrap_err()
            .to_string()
            .contains("does not exist")
    );
    assert!(
        Owning::NoOwner
            .proof("AWSCluster", "a")
            .unwrap_err()
            .to_string()
            .contains("proves nothing")
    );
}

#[test]
fn eks_name_comes_from_the_spec_or_capas_default_and_is_validated() {
    let mut cp = AWSManagedControlPlane::new("cp", Default::default());
    cp.metadata.namespace = Some("team-a".into());
    cp.metadata.labels = Some([(CLUSTER_NAME_LABEL.to_string(), "ek1".to_string())].into());
    cp.metadata.owner_references = Some(vec![owner("cluster.x-k8s.io/v1beta2", "Cluster", "ek1")]);
    // No spec.eksClusterName: the name CAPA's defaulting webhook derives.
    assert_eq!(
        for_control_plane(&cp).unwrap(),
        ClusterNames {
            capi: "ek1".into(),
            tag: "team-a_cp".into()
        }
    );
    cp.spec.eks_cluster_name = Some("eks-1".into());
    assert_eq!(for_control_plane(&cp).unwrap().tag, "eks-1");
    cp.spec.eks_cluster_name = Some("a/b".into());
    assert!(matches!(
        for_control_plane(&cp),
        Err(ClusterNameError::Invalid(_))
    ));
    cp.spec.eks_cluster_name = Some(" ".into());
    assert!(matches!(
        for_control_plane(&cp),
        Err(ClusterNameError::Invalid(_))
    ));
    // Empty is missing, to CAPA's Go as here.
    cp.spec.eks_cluster_name = Some(String::new());
    assert_eq!(for_control_plane(&cp).unwrap().tag, "team-a_cp");
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
