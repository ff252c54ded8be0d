//! Scan and teardown agree (issue #76): for every kind the scan reports and every verdict the
//! teardown's rule for it can give (delete, keep, foreign, opt-in), the scan's `deleted_by`
//! says a teardown recovers the resource exactly when the policy function that kind's cleaner
//! calls, called here the way the cleaner calls it, says Delete (or Blocked: deleted later).
use super::*;
use crate::policy::Candidate;
use crate::scan::claims::claims;

const C: &str = "c1";
const REGION: &str = "us-east-1";
const A: &str = "arn:aws:ec2:us-east-1:111111111111";
const ELB: &str = "arn:aws:elasticloadbalancing:us-east-1:111111111111";
const CLOUD: (&str, &str) = ("kubernetes.io/cluster/c1", "owned");
const SHARED: (&str, &str) = ("kubernetes.io/cluster/c1", "shared");
const CAPA: (&str, &str) = ("sigs.k8s.io/cluster-api-provider-aws/cluster/c1", "owned");
const LBC: (&str, &str) = ("elbv2.k8s.aws/cluster", "c1");
const UUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

/// What the teardown's cleaner for the kind decides of the resource, calling its policy
/// function as the cleaner does (cleaners/<kind>.rs), with the same facts.
fn teardown_says(
    kind: &str,
    arn: &str,
    tags: &[(&str, &str)],
    state: Option<&str>,
    vpc: bool,
) -> Verdict {
    let capa = tags::capa_key(C);
    let own = Ownership::of(C).with_vpcs(vec!["vpc-1".into()]);
    let c = Candidate {
        tags,
        vpc: vpc.then_some("vpc-1"),
    };
    let capa_owned = tags::is_owned(tags.iter().copied(), &capa);
    match kind {
        // Phase 1 (cleaners/instances.rs, security_groups, load_balancers: CAPA's tag).
        "ec2:instance" if capa_owned => match policy::capa::decide(&Candidate::tagged(tags), &capa)
        {
            Verdict::Delete => policy::instances::by_state(state.unwrap_or("running")),
            v => v,
        },
        "ec2:security-group" if capa_owned => {
            policy::security_groups::decide_capa(&Candidate::tagged(tags), None, &capa)
        }
        k if capa_owned && k.starts_with("elasticloadbalancing:loadbalancer") => {
            policy::capa::decide(&Candidate::tagged(tags), &capa)
        }
        // Phase 3 (cleaners/vpc_owned.rs and the network cleaners: CAPA's tag as the filter).
        k if capa_owned && NETWORK.contains(&k) => {
            policy::capa::decide(&Candidate::tagged(tags), &capa)
        }
        // Phase 2: cleaners/volumes.rs filters on `available`, then policy::ebs::volume.
        "ec2:volume" if state != Some("available") => Verdict::foreign("not asked for"),
        "ec2:volume" => policy::ebs::volume(&Candidate::tagged(tags), C, &capa),
        "ec2:snapshot" => policy::ebs::snapshot(&Candidate::tagged(tags), C, &capa),
        "ec2:instance" => match policy::instances::decide(&own, &c) {
            Verdict::Delete => policy::instances::by_state(state.unwrap_or("running")),
            v => v,
        },
        "ec2:security-group" => policy::security_groups::decide(&own, &c),
        "iam:instance-profile" => {
            let (path, name) = profile_path_and_name(arn);
            policy::instance_profiles::decide(
                &policy::instance_profiles::ListedProfile {
                    name,
                    path: &path,
                    tags,
                },
                C,
                REGION,
            )
        }
        "secretsmanager:secret" | "ssm:parameter" => {
            let (store, name) = bootstrap_name(kind, arn).expect("a bootstrap name");
            policy::bootstrap_data::decide(store, &name, tags, C)
        }
        "ec2:launch-template" | "ec2:network-interface" | "elasticloadbalancing:targetgroup" => {
            own.decide(&c)
        }
        k if k.starts_with("elasticloadbalancing:loadbalancer") => own.decide(&c),
        // Kinds whose cleaner deletes nothing the scan can prove (see the module doc).
        _ => Verdict::keep("not deleted"),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    Delete,
    OptIn,
    Keep,
    Foreign,
    ReportOnly,
}

struct Row {
    kind: &'static str,
    arn: String,
    tags: Vec<(&'static str, &'static str)>,
    state: Option<&'static str>,
    /// placement confirmed it in the cluster's VPCs
    vpc: bool,
    want: Want,
    what: &'static str,
}

fn row(
    kind: &'static str,
    arn: String,
    tags: &[(&'static str, &'static str)],
    want: Want,
    what: &'static str,
) -> Row {
    Row {
        kind,
        arn,
        tags: tags.to_vec(),
        state: None,
        vpc: false,
        want,
        what,
    }
}

fn rows() -> Vec<Row> {
    let lb = format!("{ELB}:loadbalancer/app/k8s-a/1");
    let nlb = format!("{ELB}:loadbalancer/net/k8s-n/2");
    let clb = format!("{ELB}:loadbalancer/k8s-classic");
    let tg = format!("{ELB}:targetgroup/k8s-tg/3");
    let vol = format!("{A}:volume/vol-1");
    let csi = [CLOUD, ("CSIVolumeName", "pvc-1"), ("KubernetesCluster", C)];
    let profile = "arn:aws:iam::111111111111:instance-profile/c1_1234".to_string();
    let karpenter = [
        CLOUD,
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("topology.kubernetes.io/region", REGION),
    ];
    let secret = format!(
        "arn:aws:secretsmanager:us-east-1:111111111111:secret:aws.cluster.x-k8s.io/{UUID}-0-AbCdEf"
    );
    let param = format!("arn:aws:ssm:us-east-1:111111111111:parameter/cluster.x-k8s.io/{UUID}/0");
    let mut r = vec![
        row(
            "ec2:volume",
            vol.clone(),
            &csi,
            Want::OptIn,
            "the CSI driver's volume, available",
        ),
        row(
            "ec2:volume",
            vol.clone(),
            &[CLOUD],
            Want::Foreign,
            "owned but no CSIVolumeName: whose data is unknown",
        ),
        row(
            "ec2:volume",
            vol.clone(),
            &[CAPA, ("CSIVolumeName", "pvc-1"), ("KubernetesCluster", C)],
            Want::Keep,
            "CAPA's: not phase 2's",
        ),
        row(
            "ec2:volume",
            vol.clone(),
            &[SHARED, ("CSIVolumeName", "p"), ("KubernetesCluster", "c2")],
            Want::Foreign,
            "another cluster's",
        ),
        row(
            "ec2:snapshot",
            format!("{A}:snapshot/snap-1"),
            &[CLOUD, ("CSIVolumeSnapshotName", "s")],
            Want::OptIn,
            "the driver's snapshot",
        ),
        row(
            "ec2:snapshot",
            format!("{A}:snapshot/snap-1"),
            &[CLOUD],
            Want::Foreign,
            "someone else's snapshot",
        ),
        row(
            "ec2:instance",
            format!("{A}:instance/i-1"),
            &[CAPA],
            Want::Delete,
            "CAPA's machine: phase 1",
        ),
        row(
            "ec2:instance",
            format!("{A}:instance/i-1"),
            &[CLOUD],
            Want::Delete,
            "a free-standing node: phase 2",
        ),
        row(
            "ec2:instance",
            format!("{A}:instance/i-1"),
            &[CLOUD, ("aws:autoscaling:groupName", "g")],
            Want::Keep,
            "an Auto Scaling group's",
        ),
        row(
            "ec2:security-group",
            format!("{A}:security-group/sg-1"),
            &[CAPA],
            Want::Delete,
            "CAPA's group: phase 1",
        ),
        row(
            "ec2:security-group",
            format!("{A}:security-group/sg-1"),
            &[CLOUD],
            Want::Delete,
            "the cloud provider's",
        ),
        row(
            "ec2:security-group",
            format!("{A}:security-group/sg-1"),
            &[CLOUD, ("aws:eks:cluster-name", C)],
            Want::Keep,
            "EKS's cluster group",
        ),
        row(
            "ec2:security-group",
            format!("{A}:security-group/sg-1"),
            &[LBC],
            Want::Foreign,
            "the LB controller's, not in the cluster's VPCs",
        ),
        row(
            "ec2:network-interface",
            format!("{A}:network-interface/eni-1"),
            &[CLOUD],
            Want::Delete,
            "a detached interface",
        ),
        row(
            "ec2:launch-template",
            format!("{A}:launch-template/lt-1"),
            &[CLOUD],
            Want::Delete,
            "Karpenter's template",
        ),
        row(
            "ec2:launch-template",
            format!("{A}:launch-template/lt-1"),
            &[SHARED],
            Want::Foreign,
            "shared",
        ),
        row(
            "elasticloadbalancing:loadbalancer/app",
            lb.clone(),
            &[CLOUD],
            Want::Delete,
            "an ALB of the cluster",
        ),
        row(
            "elasticloadbalancing:loadbalancer/app",
            lb.clone(),
            &[CAPA],
            Want::Delete,
            "CAPA's API server LB: phase 1",
        ),
        row(
            "elasticloadbalancing:loadbalancer/net",
            nlb.clone(),
            &[LBC],
            Want::Foreign,
            "the LB controller's, VPC not confirmed",
        ),
        row(
            "elasticloadbalancing:loadbalancer",
            clb,
            &[CLOUD],
            Want::Delete,
            "a classic ELB",
        ),
        row(
            "elasticloadbalancing:targetgroup",
            tg.clone(),
            &[CLOUD],
            Want::Delete,
            "a target group",
        ),
        row(
            "elasticloadbalancing:targetgroup",
            tg,
            &[("kubernetes.io/cluster/c10", "owned")],
            Want::Foreign,
            "a cluster whose name extends ours",
        ),
        row(
            "ec2:vpc",
            format!("{A}:vpc/vpc-1"),
            &[CAPA],
            Want::Delete,
            "CAPA's VPC: phase 3",
        ),
        row(
            "ec2:vpc",
            format!("{A}:vpc/vpc-1"),
            &[CLOUD],
            Want::Keep,
            "a cloud-tagged VPC is no cleaner's",
        ),
        row(
            "ec2:subnet",
            format!("{A}:subnet/subnet-1"),
            &[CAPA],
            Want::Delete,
            "phase 3",
        ),
        row(
            "ec2:route-table",
            format!("{A}:route-table/rtb-1"),
            &[CAPA],
            Want::Delete,
            "phase 3",
        ),
        row(
            "ec2:internet-gateway",
            format!("{A}:internet-gateway/igw-1"),
            &[CAPA],
            Want::Delete,
            "phase 3",
        ),
        row(
            "ec2:natgateway",
            format!("{A}:natgateway/nat-1"),
            &[CAPA],
            Want::Delete,
            "phase 3",
        ),
        row(
            "ec2:elastic-ip",
            format!("{A}:elastic-ip/eipalloc-1"),
            &[CAPA],
            Want::Delete,
            "phase 3",
        ),
        row(
            "ec2:vpc-endpoint",
            format!("{A}:vpc-endpoint/vpce-1"),
            &[CAPA],
            Want::Delete,
            "phase 3",
        ),
        row(
            "iam:instance-profile",
            profile.clone(),
            &karpenter,
            Want::Delete,
            "Karpenter's profile",
        ),
        row(
            "iam:instance-profile",
            profile,
            &[CLOUD],
            Want::Foreign,
            "not Karpenter's",
        ),
        row(
            "iam:oidc-provider",
            "arn:aws:iam::111111111111:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/X".into(),
            &[CLOUD],
            Want::Keep,
            "no recorded issuer",
        ),
        row(
            "logs:log-group",
            "arn:aws:logs:us-east-1:111111111111:log-group:/aws/eks/c1/cluster".into(),
            &[CLOUD],
            Want::Keep,
            "retention unknown to the scan",
        ),
        row(
            "route53:hostedzone",
            "arn:aws:route53:::hostedzone/Z1".into(),
            &[CLOUD],
            Want::Keep,
            "a zone is never deleted",
        ),
        row(
            "secretsmanager:secret",
            secret.clone(),
            &[CAPA],
            Want::Delete,
            "CAPA's bootstrap secret",
        ),
        row(
            "secretsmanager:secret",
            secret,
            &[CLOUD],
            Want::Keep,
            "owned without CAPA's key",
        ),
        row(
            "ssm:parameter",
            param.clone(),
            &[CAPA],
            Want::Delete,
            "CAPA's bootstrap parameter",
        ),
        row(
            "ssm:parameter",
            param,
            &[("sigs.k8s.io/cluster-api-provider-aws/cluster/c1", "shared")],
            Want::Keep,
            "CAPA's key, not owned",
        ),
        row(
            "sqs:queue",
            "arn:aws:sqs:us-east-1:111111111111:c1-queue".into(),
            &[CLOUD],
            Want::Keep,
            "the queue's policy unknown to the scan",
        ),
        row(
            "s3:bucket",
            "arn:aws:s3:::c1-boot".into(),
            &[CAPA],
            Want::ReportOnly,
            "reported, never deleted",
        ),
        row(
            "ec2:dhcp-options",
            format!("{A}:dhcp-options/dopt-1"),
            &[CLOUD],
            Want::Keep,
            "no cleaner takes the kind",
        ),
    ];
    let mut placed = row(
        "elasticloadbalancing:loadbalancer/net",
        nlb,
        &[LBC],
        Want::Delete,
        "the LB controller's, confirmed in the cluster's VPC",
    );
    placed.vpc = true;
    r.push(placed);
    for (state, want, what) in [
        ("available", Want::OptIn, "available"),
        (
            "in-use",
            Want::Foreign,
            "attached: the task takes only available volumes",
        ),
    ] {
        let mut v = row("ec2:volume", vol.clone(), &csi, want, what);
        v.state = Some(state);
        r.push(v);
    }
    let mut dying = row(
        "ec2:instance",
        format!("{A}:instance/i-9"),
        &[CLOUD],
        Want::Delete,
        "shutting down: blocked, then gone",
    );
    dying.state = Some("shutting-down");
    r.push(dying);
    r
}

#[test]
fn scan_and_teardown_agree_on_every_kind_and_verdict() {
    let eks_live = BTreeSet::new();
    let target = Teardown {
        cluster: C,
        capa_name: C,
        region: REGION,
        eks_live: &eks_live,
    };
    let mut verdicts_seen = BTreeSet::new();
    for r in rows() {
        let claims = claims(r.tags.iter().copied());
        let state = match (r.kind, r.state) {
            // The volume describe always reads a state: `available` unless the row says.
            ("ec2:volume", None) => Some("available"),
            (_, s) => s,
        };
        let seen = Seen {
            kind: r.kind,
            arn: &r.arn,
            claims: &claims,
            tags: &r.tags,
            state,
            in_cluster_vpcs: r.vpc,
        };
        let scan = deleted_by(&target, &seen);
        let teardown = teardown_says(r.kind, &r.arn, &r.tags, state, r.vpc);
        let deletes = matches!(teardown, Verdict::Delete | Verdict::Blocked(_));
        let ctx = format!(
            "{} {} ({}): scan {scan:?}, teardown {teardown:?}",
            r.kind, r.arn, r.what
        );
        assert_eq!(
            scan.recovers(),
            deletes,
            "scan and teardown disagree: {ctx}"
        );
        let got = match (&scan.class, &teardown) {
            (TeardownClass::OptIn, _) => Want::OptIn,
            (TeardownClass::Default, _) => Want::Delete,
            (TeardownClass::ReportOnly, _) => Want::ReportOnly,
            (TeardownClass::NotDeleted, Verdict::Foreign(_)) => Want::Foreign,
            (TeardownClass::NotDeleted, _) => Want::Keep,
        };
        assert_eq!(got, r.want, "{ctx}");
        if !scan.recovers() {
            assert!(
                scan.why.as_deref().is_some_and(|w| !w.is_empty()),
                "a resource no teardown deletes says why: {ctx}"
            );
        }
        assert_eq!(scan.opt_in().is_some(), r.want == Want::OptIn, "{ctx}");
        verdicts_seen.insert(format!("{:?}", r.want));
    }
    assert_eq!(
        verdicts_seen.len(),
        5,
        "every verdict is in the table: {verdicts_seen:?}"
    );
}

#[test]
fn a_volume_without_the_csi_drivers_mark_is_promised_to_nobody_and_says_why() {
    let eks_live = BTreeSet::new();
    let target = Teardown {
        cluster: C,
        capa_name: C,
        region: REGION,
        eks_live: &eks_live,
    };
    let tags = [CLOUD];
    let claims = claims(tags.iter().copied());
    let by = deleted_by(
        &target,
        &Seen {
            kind: "ec2:volume",
            arn: "arn:aws:ec2:us-east-1:111111111111:volume/vol-1",
            claims: &claims,
            tags: &tags,
            state: Some("available"),
            in_cluster_vpcs: false,
        },
    );
    assert_eq!(by.class, TeardownClass::NotDeleted);
    assert_eq!(by.opt_in(), None, "no --gc-task recovers it");
    let why = by.why.unwrap_or_default();
    assert!(
        why.contains("no CSIVolumeName") && why.contains("by hand"),
        "{why}"
    );
}

#[test]
fn the_names_of_an_arn_are_read_as_the_cleaners_list_them() {
    assert_eq!(
        profile_path_and_name("arn:aws:iam::1:instance-profile/karpenter/us-east-1/c1/c1_9"),
        ("/karpenter/us-east-1/c1/".to_string(), "c1_9")
    );
    assert_eq!(
        profile_path_and_name("arn:aws:iam::1:instance-profile/c1_9"),
        ("/".to_string(), "c1_9")
    );
    let secret =
        format!("arn:aws:secretsmanager:us-east-1:1:secret:aws.cluster.x-k8s.io/{UUID}-0-AbCdEf");
    assert_eq!(
        bootstrap_name("secretsmanager:secret", &secret),
        Some((
            BootstrapStore::SecretsManager,
            format!("aws.cluster.x-k8s.io/{UUID}-0")
        ))
    );
    let param = format!("arn:aws:ssm:us-east-1:1:parameter/cluster.x-k8s.io/{UUID}/0");
    assert_eq!(
        bootstrap_name("ssm:parameter", &param),
        Some((BootstrapStore::Ssm, format!("/cluster.x-k8s.io/{UUID}/0")))
    );
    assert_eq!(bootstrap_name("secretsmanager:secret", "not an arn"), None);
}
