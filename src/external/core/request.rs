//! The one request builder: what a teardown pass of one cluster is asked
//! ([`PassRequest`], services/src/phases/request.rs), from the cluster's names, what its object
//! states, its GC settings and how sweeper runs the pass. The controller's passes
//! (controller/mod.rs), `sweeper gc plan` (commands/plan.rs) and a one-shot teardown build it here and nowhere
//! else, so the same cluster is asked the same thing whoever asks. Pure: the reads that resolve
//! its inputs (the object, the linked switches, the identity) stay with the callers.

use crate::external::core::annotations::GcSettings;
use crate::external::core::cluster::ClusterNames;
use crate::external::core::kind::GcKind;
use sweeper_aws::phases::{EksFacts, PassRequest};

/// What the request takes from the cluster's object (AWSCluster or AWSManagedControlPlane),
/// besides its names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectFacts {
    /// `spec.network.vpc.id`: confirms what the LB controller and the VPC CNI tagged.
    pub vpc_ids: Vec<String>,
    /// An EKS control plane's recorded facts; `None` for a kind that is not EKS.
    pub eks: Option<EksFacts>,
    /// `spec.s3Bucket.name`: CAPA's bootstrap-data bucket (AWSCluster only), reported on.
    pub s3_bucket: Option<String>,
}

impl ObjectFacts {
    /// Read through the accessors both kinds implement.
    pub fn of<K: GcKind>(o: &K) -> Self {
        ObjectFacts {
            vpc_ids: o.vpc_ids(),
            eks: o.eks_facts(),
            s3_bucket: o.s3_bucket(),
        }
    }
}

/// How the pass runs: the collector's flags, or `gc plan`'s fixed choices ([`Mode::plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    /// Discover everything, delete nothing (`--external-dry-run`; always for a plan).
    pub dry_run: bool,
    /// AlternativeGCStrategy: describe calls instead of the tagging API.
    pub alternative_discovery: bool,
    /// `--external-ebs-snapshot`: snapshot volumes before the opt-in `ebs-volume` task deletes
    /// them.
    pub ebs_snapshot: bool,
}

impl Mode {
    /// `sweeper gc plan`: the real teardown's discovery, deleting nothing.
    pub fn plan(alternative_discovery: bool) -> Self {
        Mode {
            dry_run: true,
            alternative_discovery,
            ebs_snapshot: true,
        }
    }
}

/// The request for one pass of the cluster `names` names. Phase 2 and its tasks follow the
/// cluster's settings; the external-dns records go with their load balancers only under a valid
/// owner id (an invalid one is reported by the caller, and deletes nothing).
pub fn pass_request(
    names: &ClusterNames,
    object: ObjectFacts,
    settings: &GcSettings,
    mode: Mode,
) -> PassRequest {
    PassRequest {
        cluster_name: names.tag.clone(),
        capa_name: names.capi.clone(),
        external_gc: settings.external_gc,
        tasks: settings.tasks.clone(),
        dry_run: mode.dry_run,
        alternative_discovery: mode.alternative_discovery,
        vpc_ids: object.vpc_ids,
        ebs_snapshot: mode.ebs_snapshot,
        eks: object.eks,
        external_dns_owner: settings.dns_owner.id().map(str::to_string),
        s3_bucket: object.s3_bucket,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::external::core::annotations::{self, DnsOwner};
    use std::collections::BTreeMap;

    fn names(capi: &str, tag: &str) -> ClusterNames {
        ClusterNames {
            capi: capi.into(),
            tag: tag.into(),
        }
    }

    fn settings(pairs: &[(&str, &str)]) -> GcSettings {
        let a: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        annotations::parse(&a).unwrap()
    }

    /// (what, names, object, annotations, mode, the request wanted)
    type Case = (
        &'static str,
        ClusterNames,
        ObjectFacts,
        Vec<(&'static str, &'static str)>,
        Mode,
        PassRequest,
    );

    const LIVE: Mode = Mode {
        dry_run: false,
        alternative_discovery: false,
        ebs_snapshot: true,
    };

    #[test]
    fn the_request_follows_the_names_the_settings_and_the_mode() {
        let default = PassRequest::new("c1");
        let eks = EksFacts {
            oidc_issuer: Some("oidc.eks.eu-west-1.amazonaws.com/id/ABC".into()),
        };
        let vpc = ObjectFacts {
            vpc_ids: vec!["vpc-1".into()],
            ..ObjectFacts::default()
        };
        let cases: Vec<Case> = vec![
            (
                "an AWSCluster with no annotation: everything, for real",
                names("c1", "c1"),
                ObjectFacts::default(),
                vec![],
                LIVE,
                default.clone(),
            ),
            (
                "its VPC as the object states it",
                names("c1", "c1"),
                vpc.clone(),
                vec![],
                LIVE,
                PassRequest {
                    vpc_ids: vec!["vpc-1".into()],
                    ..default.clone()
                },
            ),
            (
                "EKS: CAPA's name for phases 1 and 3, the EKS name for phase 2, its facts",
                names("c1", "eks-c1"),
                ObjectFacts {
                    eks: Some(eks.clone()),
                    ..ObjectFacts::default()
                },
                vec![],
                LIVE,
                PassRequest::new("eks-c1")
                    .with_capa_name("c1")
                    .with_eks(eks.clone()),
            ),
            (
                "the bucket CAPA keeps bootstrap data in, as the object names it",
                names("c1", "c1"),
                ObjectFacts {
                    s3_bucket: Some("capa-boot".into()),
                    ..ObjectFacts::default()
                },
                vec![],
                LIVE,
                PassRequest {
                    s3_bucket: Some("capa-boot".into()),
                    ..default.clone()
                },
            ),
            (
                "opted out of phase 2",
                names("c1", "c1"),
                ObjectFacts::default(),
                vec![(annotations::GC_ANNOTATION, "false")],
                LIVE,
                PassRequest {
                    external_gc: false,
                    ..default.clone()
                },
            ),
            (
                "CAPA's task selection",
                names("c1", "c1"),
                ObjectFacts::default(),
                vec![(annotations::CAPA_TASKS_ANNOTATION, "load-balancer")],
                LIVE,
                PassRequest {
                    tasks: Some(vec!["load-balancer".parse().unwrap()]),
                    ..default.clone()
                },
            ),
            (
                "a valid external-dns owner id",
                names("c1", "c1"),
                ObjectFacts::default(),
                vec![(annotations::DNS_OWNER_ANNOTATION, "team-a")],
                LIVE,
                PassRequest {
                    external_dns_owner: Some("team-a".into()),
                    ..default.clone()
                },
            ),
            (
                "the collector's flags: dry run, describe calls, no snapshots",
                names("c1", "c1"),
                ObjectFacts::default(),
                vec![],
                Mode {
                    dry_run: true,
                    alternative_discovery: true,
                    ebs_snapshot: false,
                },
                PassRequest {
                    dry_run: true,
                    alternative_discovery: true,
                    ebs_snapshot: false,
                    ..default.clone()
                },
            ),
            (
                "gc plan: a dry run that would snapshot, with the strategy it was given",
                names("c1", "c1"),
                vpc,
                vec![],
                Mode::plan(true),
                PassRequest {
                    dry_run: true,
                    alternative_discovery: true,
                    vpc_ids: vec!["vpc-1".into()],
                    ..default
                },
            ),
        ];
        for (what, names, object, ann, mode, want) in cases {
            let got = pass_request(&names, object, &settings(&ann), mode);
            assert_eq!(got, want, "{what}");
        }
    }

    /// The bucket comes from an AWSCluster's `spec.s3Bucket.name` as CAPA's CRD shapes it (its
    /// other fields ignored); an AWSManagedControlPlane has no such field.
    #[test]
    fn the_facts_name_the_bucket_an_awscluster_states() {
        use crate::api::capa::{AWSCluster, AWSManagedControlPlane};
        let cluster = |spec: serde_json::Value| -> AWSCluster {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": "AWSCluster",
                "metadata": {"name": "c1", "namespace": "ns"},
                "spec": spec,
            }))
            .unwrap()
        };
        let with = cluster(serde_json::json!({"s3Bucket": {
            "name": "capa-boot",
            "controlPlaneIAMInstanceProfile": "control-plane.cluster-api-provider-aws.sigs.k8s.io",
            "nodesIAMInstanceProfiles": ["nodes.cluster-api-provider-aws.sigs.k8s.io"],
            "bestEffortDeleteObjects": true,
        }}));
        assert_eq!(
            ObjectFacts::of(&with).s3_bucket.as_deref(),
            Some("capa-boot")
        );
        assert_eq!(
            ObjectFacts::of(&cluster(serde_json::json!({}))).s3_bucket,
            None
        );
        let empty = cluster(serde_json::json!({"s3Bucket": {"name": " "}}));
        assert_eq!(
            ObjectFacts::of(&empty).s3_bucket,
            None,
            "no name, no bucket"
        );
        let cp: AWSManagedControlPlane = serde_json::from_value(serde_json::json!({
            "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
            "kind": "AWSManagedControlPlane",
            "metadata": {"name": "c1", "namespace": "ns"},
            // Not a field of this kind: ignored, whatever it says.
            "spec": {"s3Bucket": {"name": "capa-boot"}},
        }))
        .unwrap();
        assert_eq!(ObjectFacts::of(&cp).s3_bucket, None);
    }

    #[test]
    fn an_invalid_owner_id_deletes_no_record() {
        let s = settings(&[(annotations::DNS_OWNER_ANNOTATION, "default")]);
        assert!(
            matches!(s.dns_owner, DnsOwner::Invalid(_)),
            "`default` is refused"
        );
        let got = pass_request(&names("c1", "c1"), ObjectFacts::default(), &s, LIVE);
        assert_eq!(got.external_dns_owner, None);
    }
}
