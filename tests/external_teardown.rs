//! `sweeper teardown` (issue #45), the command as users run it, against the real apiserver with
//! CAPA's own CRDs, identities and webhooks, and LocalStack (EKS served from moto, as the
//! command asks `eks:ListClusters`). In a fresh account reached through a static identity: an
//! orphan (CAPA's network and a group the cloud provider tagged), a second orphan, a live
//! cluster whose name extends the orphan's, and another cluster's `shared` tag. The command
//! refuses the live name, a name marked not ours and another account; without `--yes` it
//! prints the plan with proofs and deletes nothing; with it, it deletes exactly the orphan's
//! resources and writes the audit record; fed by `sweeper scan -o json`, it tears down the
//! candidate named, in the account and region the scan found it in.

mod support;

use serde_json::json;
use support::aws::{
    clients_as, network_in, sg, sg_exists, sweeper_cli, sweeper_output, tag, tagged, vpc_exists,
};
use support::capa::{audit_entries, fresh_static_identity, template_cluster, upstream_crds};
use support::{TestScope, unique_name};

const REGION: &str = "us-west-2";

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_teardown_refuses_live_names_plans_with_proofs_and_deletes_exactly_the_orphan() {
    let mut scope = TestScope::new("tdown").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let (account, stat) = fresh_static_identity(&c, &ns, "td").await;
    let id = format!("AWSClusterStaticIdentity/{stat}");

    let p = unique_name("td");
    let (orphan, live, o2) = (format!("{p}-o"), format!("{p}-o-live"), format!("{p}-o2"));
    let aws = clients_as(REGION, &account).await;
    // The orphan: CAPA's network, a group the cloud provider made.
    let net = network_in(&aws, &format!("{REGION}a")).await;
    let capa_key = format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{orphan}");
    for r in [&net.vpc, &net.subnet] {
        tag(&aws, r, &capa_key, "owned").await;
    }
    let cloud = |n: &str| format!("kubernetes.io/cluster/{n}");
    let orphan_sg = sg(
        &aws,
        &net.vpc,
        &format!("{orphan}-svc"),
        &tagged(&cloud(&orphan), "owned"),
    )
    .await;
    // Look-alikes: the live cluster (its name extends the orphan's) and the orphan's name
    // `shared` on another network, both in the same account and region.
    let other = network_in(&aws, &format!("{REGION}b")).await;
    let live_sg = sg(
        &aws,
        &other.vpc,
        &format!("{live}-svc"),
        &tagged(&cloud(&live), "owned"),
    )
    .await;
    let shared_sg = sg(
        &aws,
        &other.vpc,
        &format!("{orphan}-shared"),
        &tagged(&cloud(&orphan), "shared"),
    )
    .await;
    let o2_sg = sg(
        &aws,
        &other.vpc,
        &format!("{o2}-svc"),
        &tagged(&cloud(&o2), "owned"),
    )
    .await;
    // The live cluster: CAPA's template, in the fresh account through the static identity.
    let static_ref = json!({"kind": "AWSClusterStaticIdentity", "name": stat});
    template_cluster(&c, &ns, &live, |ac| {
        ac["spec"]["region"] = json!(REGION);
        ac["spec"]["identityRef"] = static_ref.clone();
    })
    .await;

    let teardown = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "teardown",
            "--cluster-name",
            name,
            "--region",
            REGION,
            "--identity",
            &id,
            "--cluster-namespace",
            &ns,
        ];
        args.extend_from_slice(extra);
        sweeper_cli(&args)
    };
    let intact = || async {
        sg_exists(&aws, &orphan_sg).await
            && vpc_exists(&aws, &net.vpc).await
            && sg_exists(&aws, &live_sg).await
            && sg_exists(&aws, &shared_sg).await
    };

    // Refused, whatever --yes says: the live name, a name marked not ours, another account.
    let (ok, out) = teardown(&live, &["--yes"]);
    assert!(
        !ok && out.contains("refused: a live AWSCluster/AWSManagedControlPlane"),
        "{out}"
    );
    let (ok, out) = teardown(&orphan, &["--yes", "--not-ours", &orphan]);
    assert!(!ok && out.contains("marked not ours"), "{out}");
    let (ok, out) = teardown(&orphan, &["--yes", "--account", "999999999999"]);
    assert!(
        !ok && out.contains(&format!("account {account}, not 999999999999")),
        "{out}"
    );
    let (ok, out) = teardown("bad*name", &["--yes"]);
    assert!(!ok && out.contains("is not a cluster name"), "{out}");
    assert!(intact().await, "a refusal deletes nothing");

    // The plan: every resource with its proof; nothing deleted.
    let (ok, out) = teardown(&orphan, &["--account", &account]);
    assert!(ok, "{out}");
    assert!(out.contains("dry run: nothing is deleted"), "{out}");
    assert!(
        out.contains(&format!("ec2 security-group {orphan_sg}"))
            || out.contains(&format!("security-group/{orphan_sg}")),
        "{out}"
    );
    assert!(
        out.contains(&format!("proof: {}=owned", cloud(&orphan))),
        "{out}"
    );
    assert!(out.contains(&net.vpc), "CAPA's VPC is in phase 3: {out}");
    for kept in [&live_sg, &shared_sg, &o2_sg, &other.vpc] {
        assert!(!out.contains(kept.as_str()), "{kept} is not planned: {out}");
    }
    assert!(intact().await, "a dry run deletes nothing");

    // With --yes: exactly the orphan's, and the audit record.
    let (ok, out) = teardown(&orphan, &["--yes"]);
    assert!(ok && out.contains("done:"), "{out}");
    assert!(!sg_exists(&aws, &orphan_sg).await, "the orphan's group");
    assert!(
        !vpc_exists(&aws, &net.vpc).await,
        "the orphan's CAPA network"
    );
    for kept in [&live_sg, &shared_sg, &o2_sg] {
        assert!(sg_exists(&aws, kept).await, "{kept} is kept");
    }
    let entries = audit_entries(&c, &ns, &orphan).await;
    assert!(
        entries
            .iter()
            .any(|e| e["id"].as_str().is_some_and(|i| i.contains(&orphan_sg))
                && e["object"] == format!("SweeperTeardown/{orphan}")
                && e["account"] == account.as_str()),
        "{entries:#?}"
    );

    // From a scan: the scan reaches the fresh account through the live cluster's identity;
    // the teardown of the candidate named needs no --identity.
    let scan = sweeper_output(&["scan", "-o", "json", "--region", REGION]);
    let report = String::from_utf8_lossy(&scan.stdout).to_string();
    assert!(
        scan.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&scan.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&report).expect("the scan's JSON");
    let here = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["account"] == account.as_str() && r["region"] == REGION)
        .unwrap_or_else(|| panic!("the scan reached {account} {REGION}: {report}"));
    let names: Vec<&str> = here["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["cluster"].as_str())
        .collect();
    assert_eq!(names, [o2.as_str()], "{report}");
    let file = std::env::temp_dir().join(format!("{p}-scan.json"));
    std::fs::write(&file, &report).unwrap();
    let path = file.to_string_lossy().to_string();
    let (ok, out) = sweeper_cli(&["teardown", "--from-scan", &path]);
    assert!(!ok && out.contains("--cluster-name"), "{out}");
    let (ok, out) = sweeper_cli(&[
        "teardown",
        "--from-scan",
        &path,
        "--cluster-name",
        &o2,
        "--cluster-namespace",
        &ns,
        "--yes",
    ]);
    assert!(ok && out.contains("done:"), "{out}");
    assert!(!sg_exists(&aws, &o2_sg).await, "o2's group");
    assert!(sg_exists(&aws, &live_sg).await, "the live cluster's group");
    assert!(sg_exists(&aws, &shared_sg).await, "the shared tag's group");
    assert!(vpc_exists(&aws, &other.vpc).await, "a network nobody owns");
    let _ = std::fs::remove_file(&file);
}
