//! From a scan to nothing left (issue #54): an orphan with CAPA's network and NAT gateway, a
//! classic load balancer the cloud provider made with its own security group, and an EBS volume
//! the CSI driver made, beside a live cluster whose name extends the orphan's and has the same
//! kinds. The scan marks each resource with the step that deletes it and prices the volume
//! apart, as the opt-in `ebs-volume`'s; `teardown --from-scan NAME --gc-task ebs-volume` plans
//! what the task adds, then leaves nothing of the orphan, and every look-alike of the live
//! cluster stays.

mod support;

use serde_json::{Value, json};
use support::aws::{clients_as, network_in, sg, sg_exists, sweeper_cli, sweeper_output, tag};
use support::capa::{fresh_static_identity, template_cluster, upstream_crds};
use support::{TestScope, unique_name};
use sweeper_aws::phases::AwsClients;
use sweeper_aws::testing::build::fallible;
use sweeper_aws::testing::leaks::csi_volume_tags;
use sweeper_aws::testing::probe::{classic_exists, volume_exists, vpc_exists};

const REGION: &str = "us-west-2";

fn pair(k: &str, v: &str) -> Vec<(String, String)> {
    vec![(k.to_string(), v.to_string())]
}

/// A classic load balancer of the cloud provider's for `cluster`, with its own group; (name,
/// group id).
async fn service_lb(aws: &AwsClients, vpc: &str, subnet: &str, cluster: &str) -> (String, String) {
    let owned = pair(&format!("kubernetes.io/cluster/{cluster}"), "owned");
    let group = sg(aws, vpc, &format!("k8s-elb-{cluster}"), &owned).await;
    let name = format!("{cluster}-elb");
    fallible::classic_lb(aws, &name, &[subnet], &[&group], 80, &owned)
        .await
        .expect("classic load balancer");
    (name, group)
}

async fn nat_alive(aws: &AwsClients, id: &str) -> bool {
    let out = aws
        .ec2
        .describe_nat_gateways()
        .nat_gateway_ids(id)
        .send()
        .await;
    out.map(|o| {
        o.nat_gateways()
            .iter()
            .any(|n| n.state().is_some_and(|s| s.as_str() != "deleted"))
    })
    .unwrap_or(false)
}

async fn eip_alive(aws: &AwsClients, allocation: &str) -> bool {
    let out = aws
        .ec2
        .describe_addresses()
        .allocation_ids(allocation)
        .send()
        .await;
    out.is_ok_and(|o| !o.addresses().is_empty())
}

/// The scan's JSON for `account` in REGION.
fn scan_here(account: &str) -> (String, Value) {
    let scan = sweeper_output(&["scan", "-o", "json", "--region", REGION]);
    let report = String::from_utf8_lossy(&scan.stdout).to_string();
    assert!(
        scan.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&scan.stderr)
    );
    let v: Value = serde_json::from_str(&report).expect("the scan's JSON");
    let here = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["account"] == account && r["region"] == REGION)
        .unwrap_or_else(|| panic!("the scan reached {account} {REGION}: {report}"))
        .clone();
    (report, here)
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_scanned_orphan_torn_down_with_its_opt_in_leaves_nothing_and_the_look_alikes_stay() {
    let mut scope = TestScope::new("tdoptin").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let (account, stat) = fresh_static_identity(&c, &ns, "to").await;
    let p = unique_name("to");
    let (orphan, live) = (format!("{p}-o"), format!("{p}-o-live"));
    let aws = clients_as(REGION, &account).await;
    let az = format!("{REGION}a");

    // The orphan: CAPA's network with its NAT gateway and address, the cloud provider's load
    // balancer and group, the CSI driver's volume.
    let net = network_in(&aws, &az).await;
    let capa = pair(
        &format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{orphan}"),
        "owned",
    );
    for r in [&net.vpc, &net.subnet] {
        tag(&aws, r, &capa[0].0, "owned").await;
    }
    let eip = fallible::elastic_ip(&aws, &capa).await.expect("address");
    let nat = fallible::nat_gateway(&aws, &net.subnet, &eip, &capa)
        .await
        .expect("NAT gateway");
    let (lb, lb_sg) = service_lb(&aws, &net.vpc, &net.subnet, &orphan).await;
    let vol = fallible::volume(&aws, &az, &csi_volume_tags(&orphan, "pv-1"))
        .await
        .expect("volume");
    // The live cluster's look-alikes, on another network of the same account and region.
    let other = network_in(&aws, &format!("{REGION}b")).await;
    let (live_lb, live_sg) = service_lb(&aws, &other.vpc, &other.subnet, &live).await;
    let live_vol = fallible::volume(&aws, &az, &csi_volume_tags(&live, "pv-1"))
        .await
        .expect("volume");
    let static_ref = json!({"kind": "AWSClusterStaticIdentity", "name": stat});
    template_cluster(&c, &ns, &live, |ac| {
        ac["spec"]["region"] = json!(REGION);
        ac["spec"]["identityRef"] = static_ref.clone();
    })
    .await;

    // The scan: the orphan alone is a candidate; each resource says what deletes it, and the
    // volume's cost is left for the opt-in.
    let (report, here) = scan_here(&account);
    let candidates = here["candidates"].as_array().unwrap();
    let names: Vec<&str> = candidates
        .iter()
        .filter_map(|c| c["cluster"].as_str())
        .collect();
    assert_eq!(names, [orphan.as_str()], "{report}");
    let cand = &candidates[0];
    let step_of = |id: &str| {
        cand["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["arn"].as_str().is_some_and(|a| a.contains(id)))
            .map(|r| r["deleted_by"].clone())
            .unwrap_or_else(|| panic!("{id} among the candidate's resources: {report}"))
    };
    assert_eq!(
        step_of(&vol),
        json!({"step": "ebs-volume", "class": "opt-in"})
    );
    assert_eq!(
        step_of(&nat),
        json!({"step": "phase 3", "class": "default"})
    );
    assert_eq!(
        step_of(&lb_sg),
        json!({"step": "security-group", "class": "default"})
    );
    assert_eq!(
        step_of(&lb),
        json!({"step": "load-balancer", "class": "default"})
    );
    let recovery = &cand["recovery"];
    assert!(
        recovery["default_teardown"]["dollars_per_month"].as_f64() > Some(0.0),
        "the NAT gateway and the load balancer: {recovery}"
    );
    assert!(recovery["opt_in"]["ebs-volume"].is_object(), "{recovery}");
    let table = sweeper_cli(&["scan", "--region", REGION]).1;
    assert!(
        table.contains("left for opt-in ebs-volume (--gc-task ebs-volume)"),
        "{table}"
    );

    let file = std::env::temp_dir().join(format!("{p}-scan.json"));
    std::fs::write(&file, &report).unwrap();
    let path = file.to_string_lossy().to_string();
    let teardown = |extra: &[&str]| {
        let mut args = vec![
            "teardown",
            "--from-scan",
            &path,
            "--cluster-name",
            &orphan,
            "--cluster-namespace",
            &ns,
            "--gc-task",
            "ebs-volume",
        ];
        args.extend_from_slice(extra);
        sweeper_cli(&args)
    };
    let (ok, out) = teardown(&[]);
    assert!(ok && out.contains("dry run: nothing is deleted"), "{out}");
    assert!(
        out.contains("--gc-task ebs-volume adds:") && out.contains(&vol),
        "{out}"
    );
    assert!(volume_exists(&aws, &vol).await, "a dry run deletes nothing");
    let (ok, out) = teardown(&["--yes"]);
    assert!(ok && out.contains("done:"), "{out}");

    // Nothing of the orphan is left; every look-alike stays.
    assert!(!volume_exists(&aws, &vol).await, "the opt-in's volume");
    assert!(!classic_exists(&aws, &lb).await, "the load balancer");
    assert!(!sg_exists(&aws, &lb_sg).await, "its group");
    assert!(!nat_alive(&aws, &nat).await, "the NAT gateway");
    assert!(!eip_alive(&aws, &eip).await, "its address");
    assert!(!vpc_exists(&aws, &net.vpc).await, "CAPA's network");
    assert!(
        volume_exists(&aws, &live_vol).await,
        "the live cluster's volume"
    );
    assert!(
        classic_exists(&aws, &live_lb).await,
        "the live cluster's load balancer"
    );
    assert!(sg_exists(&aws, &live_sg).await, "the live cluster's group");
    assert!(vpc_exists(&aws, &other.vpc).await, "a network nobody owns");
    let (report, here) = scan_here(&account);
    assert!(
        !here["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["cluster"] == orphan.as_str()),
        "the orphan is no candidate any more: {report}"
    );
    let _ = std::fs::remove_file(&file);
}

/// One scanned resource of a candidate: its ARN and what the scan said a teardown does with it.
struct Promised {
    arn: String,
    deleted_by: Value,
}

impl Promised {
    fn recovers(&self) -> bool {
        matches!(
            self.deleted_by["class"].as_str(),
            Some("default" | "opt-in")
        )
    }
}

/// The candidate `name`'s resources in a scan (none when it is no candidate).
fn promised(here: &Value, name: &str) -> Vec<Promised> {
    here["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["cluster"] == name)
        .flat_map(|c| c["resources"].as_array().cloned().unwrap_or_default())
        .map(|r| Promised {
            arn: r["arn"].as_str().unwrap_or_default().to_string(),
            deleted_by: r["deleted_by"].clone(),
        })
        .collect()
}

/// Issue #76: what `sweeper scan` promises is what `sweeper teardown` does. An orphan whose
/// resources get every kind of answer (deleted by default, by an opt-in, kept by the rule:
/// a volume the CSI driver did not make, an Auto Scaling group's instance), scanned, torn down
/// `--from-scan` with every task the scan named, scanned again: every resource the first scan
/// said a teardown deletes is gone, every other one is still there, and said why.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn what_the_scan_says_teardown_deletes_is_exactly_what_it_deletes() {
    let mut scope = TestScope::new("agree").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let (account, stat) = fresh_static_identity(&c, &ns, "ag").await;
    let orphan = unique_name("ag");
    let aws = clients_as(REGION, &account).await;
    let az = format!("{REGION}a");
    let cloud = pair(&format!("kubernetes.io/cluster/{orphan}"), "owned");

    // CAPA's network, the cloud provider's load balancer and group in it (default teardown).
    let net = network_in(&aws, &az).await;
    let capa_key = format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{orphan}");
    for r in [&net.vpc, &net.subnet] {
        tag(&aws, r, &capa_key, "owned").await;
    }
    let (lb, lb_sg) = service_lb(&aws, &net.vpc, &net.subnet, &orphan).await;
    // The CSI driver's volume (the opt-in ebs-volume), and one that only carries the cluster
    // tag: whose data it holds is unknown, so no teardown deletes it.
    let csi_vol = fallible::volume(&aws, &az, &csi_volume_tags(&orphan, "pv-1"))
        .await
        .expect("volume");
    let bare_vol = fallible::volume(&aws, &az, &cloud).await.expect("volume");
    // An Auto Scaling group's node, outside CAPA's network: left to its group.
    let elsewhere = network_in(&aws, &format!("{REGION}b")).await;
    let mut asg = cloud.clone();
    asg.push((
        "aws:autoscaling:groupName".into(),
        format!("{orphan}-nodes"),
    ));
    let node = fallible::instance(&aws, &elsewhere.subnet, &[], None, &asg)
        .await
        .expect("instance");

    // A live cluster in the same account and region: the scan reaches an account through the
    // identities of the live objects.
    let static_ref = json!({"kind": "AWSClusterStaticIdentity", "name": stat});
    template_cluster(&c, &ns, &format!("{orphan}-live"), |ac| {
        ac["spec"]["region"] = json!(REGION);
        ac["spec"]["identityRef"] = static_ref.clone();
    })
    .await;

    let (report, here) = scan_here(&account);
    let first = promised(&here, &orphan);
    let by = |id: &str| {
        first
            .iter()
            .find(|p| p.arn.contains(id))
            .unwrap_or_else(|| panic!("{id} among the candidate's resources: {report}"))
    };
    assert_eq!(by(&lb).deleted_by["class"], "default", "{report}");
    assert_eq!(by(&lb_sg).deleted_by["class"], "default", "{report}");
    assert_eq!(by(&net.vpc).deleted_by["step"], "phase 3", "{report}");
    assert_eq!(
        by(&csi_vol).deleted_by,
        json!({"step": "ebs-volume", "class": "opt-in"})
    );
    for kept in [&bare_vol, &node] {
        let d = &by(kept).deleted_by;
        assert_eq!(d["class"], "not-deleted", "{kept}: {report}");
        assert!(
            d["why"].as_str().is_some_and(|w| w.contains("by hand")),
            "{kept} says why: {report}"
        );
    }
    assert!(
        by(&bare_vol).deleted_by["why"]
            .as_str()
            .is_some_and(|w| w.contains("CSIVolumeName")),
        "{report}"
    );
    let cand = here["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cluster"] == orphan.as_str())
        .unwrap();
    assert!(
        cand["recovery"]["needs_person"]["dollars_per_month"].as_f64() > Some(0.0),
        "the bare volume's cost needs a person: {}",
        cand["recovery"]
    );
    let table = sweeper_cli(&["scan", "--region", REGION]).1;
    assert!(
        table.contains("needs a person") && table.contains("NOT deleted by a teardown"),
        "{table}"
    );

    // Teardown from the scan, with every task the scan named.
    let tasks: std::collections::BTreeSet<String> = first
        .iter()
        .filter(|p| p.deleted_by["class"] == "opt-in")
        .filter_map(|p| p.deleted_by["step"].as_str().map(str::to_string))
        .collect();
    assert_eq!(tasks.iter().collect::<Vec<_>>(), ["ebs-volume"], "{report}");
    let file = std::env::temp_dir().join(format!("{orphan}-scan.json"));
    std::fs::write(&file, &report).unwrap();
    let path = file.to_string_lossy().to_string();
    let mut args = vec![
        "teardown",
        "--from-scan",
        &path,
        "--cluster-name",
        &orphan,
        "--cluster-namespace",
        &ns,
        "--yes",
    ];
    for t in &tasks {
        args.extend(["--gc-task", t.as_str()]);
    }
    let (ok, out) = sweeper_cli(&args);
    assert!(ok && out.contains("done:"), "{out}");

    // The second scan: every promise kept, nothing else touched.
    let (report2, here2) = scan_here(&account);
    let second: Vec<String> = promised(&here2, &orphan)
        .into_iter()
        .map(|p| p.arn)
        .collect();
    for p in &first {
        let still = second.contains(&p.arn);
        if p.recovers() {
            assert!(
                !still,
                "the scan said a teardown deletes {}: {report2}",
                p.arn
            );
        } else {
            assert!(
                still,
                "the scan said no teardown deletes {}: {report2}",
                p.arn
            );
        }
    }
    assert!(!volume_exists(&aws, &csi_vol).await, "the opt-in's volume");
    assert!(
        volume_exists(&aws, &bare_vol).await,
        "the volume no rule proves"
    );
    assert!(!classic_exists(&aws, &lb).await, "the load balancer");
    assert!(!vpc_exists(&aws, &net.vpc).await, "CAPA's network");
    assert!(
        vpc_exists(&aws, &elsewhere.vpc).await,
        "a network nobody owns"
    );
    let _ = std::fs::remove_file(&file);
}
