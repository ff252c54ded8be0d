//! Each cluster is torn down where it lives, as CAPA reconciles it: its own region, AWS account
//! and CAPA identity (issue 23), and, on EKS, CAPA's own resources by the Cluster API name while
//! the cloud provider's carry the EKS name (issue 22). Against CAPA's and Cluster API's own CRDs
//! (identities included) from `scripts/fixtures.sh`, objects shaped from CAPA's templates, and
//! LocalStack, which keeps one world per account and region (a 12-digit access key id is the
//! account; AssumeRole into another account's role acts in that account).
//!
//! Beside every cluster, a cluster of the same name lives in sweeper's own region and account
//! (another management cluster's): it must be kept, whatever happens to the first.

mod support;

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use std::time::Duration;
use support::aws::{
    Net, clients, clients_as, gc_plan, network, network_in, nlb, sg, sg_exists, tag, tagged,
};
use support::capa::{
    api, capa_conditions, create, eks_cluster, from_template, gone, has_finalizer, identity,
    identity_crds, owned_by_cluster, set_status, static_secret, upstream_crds, vars,
};
use support::sweeper::{Sweeper, eventually};
use support::{EnvFacts, TestScope, unique_name};
use sweeper_aws::phases::AwsClients;
use sweeper_aws::testing::probe::{v2_exists as lb_exists, vpc_exists};

const T: Duration = Duration::from_secs(120);
const OTHER_ACCOUNT: &str = "222222222222";
const STATIC_ACCOUNT: &str = "333333333333";

/// What CAPA and the cloud provider made for a cluster in one account and region: a network
/// tagged as CAPA's (phase 3) and a security group tagged `owned` by the cloud provider
/// (phase 2).
struct World {
    net: Net,
    owned_sg: String,
}

async fn world(aws: &AwsClients, region: &str, capi_name: &str, tag_name: &str) -> World {
    let net = network_in(aws, &format!("{region}a")).await;
    let capa_key = format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{capi_name}");
    for id in [&net.vpc, &net.subnet] {
        tag(aws, id, &capa_key, "owned").await;
    }
    let key = format!("kubernetes.io/cluster/{tag_name}");
    let owned_sg = sg(
        aws,
        &net.vpc,
        &format!("{tag_name}-svc"),
        &tagged(&key, "owned"),
    )
    .await;
    World { net, owned_sg }
}

impl World {
    async fn intact(&self, aws: &AwsClients) -> bool {
        vpc_exists(aws, &self.net.vpc).await && sg_exists(aws, &self.owned_sg).await
    }

    async fn gone(&self, aws: &AwsClients) -> bool {
        !vpc_exists(aws, &self.net.vpc).await && !sg_exists(aws, &self.owned_sg).await
    }
}

/// An AWSCluster from CAPA's template, owned by its Cluster, with `spec` merged in.
async fn aws_cluster(c: &Client, ns: &str, name: &str, region: &str, spec: Value) {
    let tpl = "capa/templates/cluster-template.yaml";
    let vars = vars(name, region);
    let clusters = api(c, ns, "cluster.x-k8s.io/v1beta1", "Cluster");
    let cluster = create(&clusters, from_template(tpl, "Cluster", &vars)).await;
    let mut ac = from_template(tpl, "AWSCluster", &vars);
    owned_by_cluster(&mut ac, &cluster);
    if let (Some(target), Some(extra)) = (ac["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            target.insert(k.clone(), v.clone());
        }
    }
    let infra = api(
        c,
        ns,
        "infrastructure.cluster.x-k8s.io/v1beta2",
        "AWSCluster",
    );
    create(&infra, ac).await;
    set_status(
        &infra,
        name,
        json!({"ready": true, "conditions": capa_conditions()}),
    )
    .await;
}

fn infra(c: &Client, ns: &str) -> Api<DynamicObject> {
    api(
        c,
        ns,
        "infrastructure.cluster.x-k8s.io/v1beta2",
        "AWSCluster",
    )
}

async fn condition_message(api: &Api<DynamicObject>, name: &str) -> String {
    let o = api.get(name).await.unwrap();
    o.data["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "ExternalResourcesDeleted"))
        .map(|c| c["message"].to_string())
        .unwrap_or_default()
}

/// CAPA's own namespace (`--capa-namespace`'s default), where static identities' Secrets live:
/// the external-only role may read Secrets there and nowhere else. env-up creates it.
const CAPA_NS: &str = "capa-system";

async fn drop_secrets(c: &Client, names: &[&str]) {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(c.clone(), CAPA_NS);
    for n in names {
        let _ = secrets.delete(n, &Default::default()).await;
    }
}

/// Every entry of the audit records of the clusters in `ns`. The external-only sweeper writes
/// them in its own namespace, sweeper-system, and only there.
async fn audit(c: &Client, ns: &str) -> Vec<Value> {
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::all(c.clone());
    let records = cms
        .list(&kube::api::ListParams::default().labels(&format!(
            "sweeper.dev/archive-collector=external,{}={ns}",
            sweeper::external::core::audit::LABEL_NAMESPACE
        )))
        .await
        .unwrap()
        .items;
    for r in &records {
        assert_eq!(
            r.metadata.namespace.as_deref(),
            Some("sweeper-system"),
            "audit records are in sweeper's namespace"
        );
    }
    records
        .into_iter()
        .flat_map(|r| r.data.unwrap_or_default().into_values())
        .map(|e| serde_json::from_str(&e).unwrap())
        .collect()
}

/// Issue 23: a cluster in another region (no identity), one in another account through a role
/// identity chained from the controller identity, one through a static identity, and an EKS
/// control plane with both a region and a role identity. Each is torn down in its own session;
/// the same-named clusters in sweeper's own region and account are all kept.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn each_cluster_is_torn_down_in_its_own_region_account_and_identity() {
    let mut scope = TestScope::new("sess").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    identity_crds(&c).await;
    let home_region = EnvFacts::load().get("AWS_REGION");
    let home = clients().await;
    let capa_ns = CAPA_NS;

    let role = unique_name("role");
    let stat = unique_name("static");
    identity(
        &c,
        "AWSClusterControllerIdentity",
        "default",
        json!({"allowedNamespaces": {}}),
    )
    .await;
    identity(
        &c,
        "AWSClusterRoleIdentity",
        &role,
        json!({
            "roleARN": format!("arn:aws:iam::{OTHER_ACCOUNT}:role/capa-manager"),
            "sessionName": "sweeper-test", "externalID": "ext-1", "durationSeconds": 900,
            "allowedNamespaces": {"list": [ns]},
            "sourceIdentityRef": {"kind": "AWSClusterControllerIdentity", "name": "default"},
        }),
    )
    .await;
    let secret = unique_name("creds");
    static_secret(&c, capa_ns, &secret, STATIC_ACCOUNT).await;
    identity(
        &c,
        "AWSClusterStaticIdentity",
        &stat,
        json!({"secretRef": secret, "allowedNamespaces": {"selector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}}),
    )
    .await;
    // kube-apiserver 1.20 does not set kubernetes.io/metadata.name: label the namespace as 1.21+ does.
    Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone())
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"kubernetes.io/metadata.name": ns}}})),
        )
        .await
        .unwrap();

    // (name, region, account, identityRef)
    let regional = unique_name("rgn");
    let by_role = unique_name("role");
    let by_static = unique_name("stat");
    let cases = [
        (regional.clone(), "eu-west-1", "000000000000", Value::Null),
        (
            by_role.clone(),
            home_region.as_str(),
            OTHER_ACCOUNT,
            json!({"kind": "AWSClusterRoleIdentity", "name": role}),
        ),
        (
            by_static.clone(),
            home_region.as_str(),
            STATIC_ACCOUNT,
            json!({"kind": "AWSClusterStaticIdentity", "name": stat}),
        ),
    ];
    let mut worlds = Vec::new();
    for (name, region, account, id) in &cases {
        let there = clients_as(region, account).await;
        let own = world(&there, region, name, name).await;
        let twin = world(&home, &home_region, name, name).await;
        let mut spec = json!({"region": region});
        if !id.is_null() {
            spec["identityRef"] = id.clone();
        }
        aws_cluster(&c, &ns, name, region, spec).await;
        worlds.push((name.clone(), there, own, twin));
    }
    // EKS in another region and account: CAPA's network by the Cluster API name, the cloud
    // provider's resources by the EKS name.
    let eks = unique_name("eks");
    let eks_region = "eu-central-1";
    let eks_name = format!("{ns}_{eks}-control-plane");
    let eks_there = clients_as(eks_region, OTHER_ACCOUNT).await;
    let eks_world = world(&eks_there, eks_region, &eks, &eks_name).await;
    let eks_twin = world(&home, &home_region, &eks, &eks_name).await;
    let (cps, _managed, cp) = eks_cluster(&c, &ns, &eks, eks_region, &eks_name).await;
    cps.patch(
        &cp,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"spec": {"identityRef": {"kind": "AWSClusterRoleIdentity", "name": role}}}),
        ),
    )
    .await
    .unwrap();

    // The plan runs in the cluster's session and says so.
    let text = gc_plan(&by_role, &ns);
    assert!(
        text.contains(&format!("account {OTHER_ACCOUNT}"))
            && text.contains(&format!("AWSClusterRoleIdentity {role}"))
            && text.contains("AWSClusterControllerIdentity default")
            && text.contains(&worlds[1].2.owned_sg),
        "{text}"
    );
    assert!(
        !text.contains(&worlds[1].3.owned_sg),
        "the same-named cluster at home is not in the plan: {text}"
    );

    let _gc = Sweeper::start_external_only_scoped(&scope, &[]).await;
    let infra = infra(&c, &ns);
    for (name, ..) in &worlds {
        assert!(
            eventually(T, || has_finalizer(&infra, name)).await,
            "{name}"
        );
        infra.delete(name, &Default::default()).await.unwrap();
    }
    assert!(eventually(T, || has_finalizer(&cps, &cp)).await);
    cps.delete(&cp, &Default::default()).await.unwrap();

    for (name, there, own, twin) in &worlds {
        assert!(
            eventually(T, || gone(&infra, name)).await,
            "{name} finished: {}",
            condition_message(&infra, name).await
        );
        assert!(
            own.gone(there).await,
            "{name}: its own resources are deleted"
        );
        assert!(
            twin.intact(&home).await,
            "{name}: the same-named cluster in sweeper's own region and account is kept"
        );
    }
    assert!(eventually(T, || gone(&cps, &cp)).await);
    assert!(
        eks_world.gone(&eks_there).await,
        "EKS: its own network and groups are deleted"
    );
    assert!(
        eks_twin.intact(&home).await,
        "EKS: the same-named twin is kept"
    );

    // The audit trail names where each cluster was torn down, and as whom.
    let entries = audit(&c, &ns).await;
    let of = |cluster: &str| -> Vec<&Value> {
        entries.iter().filter(|e| e["cluster"] == cluster).collect()
    };
    for e in of(&by_role) {
        assert_eq!(e["account"], OTHER_ACCOUNT, "{e}");
        assert!(e["identity"].as_str().unwrap().contains(&role), "{e}");
    }
    for e in of(&regional) {
        assert_eq!(e["region"], "eu-west-1", "{e}");
    }
    for e in of(&by_static) {
        assert_eq!(e["account"], STATIC_ACCOUNT, "{e}");
    }
    let eks_entries = of(&eks);
    assert!(!eks_entries.is_empty(), "the EKS audit record is written");
    for e in eks_entries {
        assert_eq!(e["tagName"], eks_name.as_str(), "{e}");
        assert_eq!(e["region"], eks_region, "{e}");
    }
    assert!(!of(&by_role).is_empty() && !of(&regional).is_empty() && !of(&by_static).is_empty());
    drop_secrets(&c, &[&secret]).await;
}

/// A refused identity never falls back: a role identity that does not allow the cluster's
/// namespace, a role chain whose second hop does not (its `allowedNamespaces` a list, then a
/// selector; the first hop allows every namespace), as CAPA refuses a chain link by link
/// (pkg/cloud/scope/session.go, buildProvidersForRef), a static identity whose Secret is missing,
/// and a role chain with a cycle. Nothing
/// is deleted anywhere, the finalizers hold, the condition and a Warning Event say why; once each
/// identity is fixed, the teardown proceeds.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_refused_identity_deletes_nothing_and_proceeds_once_fixed() {
    let mut scope = TestScope::new("refuse").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    identity_crds(&c).await;
    let home_region = EnvFacts::load().get("AWS_REGION");
    let home = clients().await;
    let capa_ns = CAPA_NS;

    let role = unique_name("role");
    let cyc_a = unique_name("cyc-a");
    let cyc_b = unique_name("cyc-b");
    let stat = unique_name("static");
    let secret = unique_name("creds");
    // CAPA's webhook requires a role identity's sourceIdentityRef ("field cannot be set to nil").
    let role_spec = |allowed: Value| {
        json!({"roleARN": format!("arn:aws:iam::{OTHER_ACCOUNT}:role/capa"), "allowedNamespaces": allowed,
               "sourceIdentityRef": {"kind": "AWSClusterControllerIdentity", "name": "default"}})
    };
    identity(
        &c,
        "AWSClusterRoleIdentity",
        &role,
        role_spec(json!({"list": ["somewhere-else"]})),
    )
    .await;
    let cyclic = |source: &str| {
        json!({"roleARN": format!("arn:aws:iam::{OTHER_ACCOUNT}:role/capa"), "allowedNamespaces": {},
               "sourceIdentityRef": {"kind": "AWSClusterRoleIdentity", "name": source}})
    };
    // Chains: outer (every namespace) -> inner (not this one) -> the controller identity.
    let (outer_l, inner_l) = (unique_name("hop-l"), unique_name("inner-l"));
    let (outer_s, inner_s) = (unique_name("hop-s"), unique_name("inner-s"));
    let sourced = |allowed: Value, source: &str| {
        json!({"roleARN": format!("arn:aws:iam::{OTHER_ACCOUNT}:role/capa"), "allowedNamespaces": allowed,
               "sourceIdentityRef": {"kind": "AWSClusterRoleIdentity", "name": source}})
    };
    let inner_sel =
        json!({"selector": {"matchLabels": {"kubernetes.io/metadata.name": "somewhere-else"}}});
    identity(
        &c,
        "AWSClusterRoleIdentity",
        &inner_l,
        role_spec(json!({"list": ["somewhere-else"]})),
    )
    .await;
    identity(
        &c,
        "AWSClusterRoleIdentity",
        &outer_l,
        sourced(json!({}), &inner_l),
    )
    .await;
    identity(&c, "AWSClusterRoleIdentity", &inner_s, role_spec(inner_sel)).await;
    identity(
        &c,
        "AWSClusterRoleIdentity",
        &outer_s,
        sourced(json!({}), &inner_s),
    )
    .await;
    identity(&c, "AWSClusterRoleIdentity", &cyc_a, cyclic(&cyc_b)).await;
    identity(&c, "AWSClusterRoleIdentity", &cyc_b, cyclic(&cyc_a)).await;
    identity(
        &c,
        "AWSClusterStaticIdentity",
        &stat,
        json!({"secretRef": secret, "allowedNamespaces": {}}),
    )
    .await;

    let not_allowed = unique_name("na");
    let hop_list = unique_name("hl");
    let hop_selector = unique_name("hs");
    let no_secret = unique_name("nosec");
    let cycle = unique_name("cyc");
    // (cluster, identity, account, expected reason)
    let cases = [
        (
            not_allowed.clone(),
            json!({"kind": "AWSClusterRoleIdentity", "name": role}),
            OTHER_ACCOUNT,
            "IdentityNotAllowed",
        ),
        (
            hop_list.clone(),
            json!({"kind": "AWSClusterRoleIdentity", "name": outer_l}),
            OTHER_ACCOUNT,
            "IdentityNotAllowed",
        ),
        (
            hop_selector.clone(),
            json!({"kind": "AWSClusterRoleIdentity", "name": outer_s}),
            OTHER_ACCOUNT,
            "IdentityNotAllowed",
        ),
        (
            no_secret.clone(),
            json!({"kind": "AWSClusterStaticIdentity", "name": stat}),
            STATIC_ACCOUNT,
            "IdentityNotFound",
        ),
        (
            cycle.clone(),
            json!({"kind": "AWSClusterRoleIdentity", "name": cyc_a}),
            OTHER_ACCOUNT,
            "IdentityInvalid",
        ),
    ];
    let mut worlds = Vec::new();
    for (name, id, account, _) in &cases {
        let there = clients_as(&home_region, account).await;
        let own = world(&there, &home_region, name, name).await;
        let twin = world(&home, &home_region, name, name).await;
        aws_cluster(&c, &ns, name, &home_region, json!({"identityRef": id})).await;
        worlds.push((there, own, twin));
    }

    let _gc = Sweeper::start_external_only_scoped(&scope, &[]).await;
    let infra = infra(&c, &ns);
    for (name, ..) in &cases {
        assert!(
            eventually(T, || has_finalizer(&infra, name)).await,
            "{name}"
        );
        infra.delete(name, &Default::default()).await.unwrap();
    }
    for (name, _, _, reason) in &cases {
        assert!(
            eventually(T, || async {
                support::capa::our_reason(&infra, name).await.as_deref() == Some(*reason)
            })
            .await,
            "{name}: condition {reason}; got {:?}",
            support::capa::our_reason(&infra, name).await
        );
        let warned = || async {
            support::objects::warnings_about(&c, name)
                .await
                .iter()
                .any(|w| w.starts_with(reason))
        };
        assert!(
            eventually(T, warned).await,
            "{name}: a Warning Event names the identity problem: {:?}",
            support::objects::warnings_about(&c, name).await
        );
    }
    let msg = condition_message(&infra, &not_allowed).await;
    assert!(msg.contains(&role) && msg.contains(&ns), "{msg}");
    // The refusal names the hop that refused, not the first one.
    for (cluster, inner) in [(&hop_list, &inner_l), (&hop_selector, &inner_s)] {
        let msg = condition_message(&infra, cluster).await;
        assert!(
            msg.contains(inner.as_str()) && msg.contains(&ns),
            "{cluster}: {msg}"
        );
    }
    for ((name, ..), (there, own, twin)) in cases.iter().zip(&worlds) {
        assert!(
            has_finalizer(&infra, name).await,
            "{name}: the finalizer holds"
        );
        assert!(
            own.intact(there).await,
            "{name}: nothing of its own is deleted"
        );
        assert!(
            twin.intact(&home).await,
            "{name}: nothing of the same-named cluster is deleted"
        );
    }

    // Fixed: the namespace allowed, the Secret created, the cycle broken.
    identity(
        &c,
        "AWSClusterRoleIdentity",
        &role,
        role_spec(json!({"list": [ns]})),
    )
    .await;
    static_secret(&c, capa_ns, &secret, STATIC_ACCOUNT).await;
    identity(
        &c,
        "AWSClusterRoleIdentity",
        &inner_l,
        role_spec(json!({"list": [ns]})),
    )
    .await;
    let inner_sel = json!({"selector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}});
    identity(&c, "AWSClusterRoleIdentity", &inner_s, role_spec(inner_sel)).await;
    identity(&c, "AWSClusterRoleIdentity", &cyc_b, role_spec(json!({}))).await;
    for ((name, ..), (there, own, twin)) in cases.iter().zip(&worlds) {
        assert!(
            eventually(Duration::from_secs(240), || gone(&infra, name)).await,
            "{name} proceeds once fixed: {}",
            condition_message(&infra, name).await
        );
        assert!(
            own.gone(there).await,
            "{name}: its own resources are deleted"
        );
        assert!(
            twin.intact(&home).await,
            "{name}: the same-named cluster is kept"
        );
    }
    drop_secrets(&c, &[&secret]).await;
}

/// Issue 22: an EKS cluster as CAPA's EKS template makes it, with CAPA's default EKS name
/// `<namespace>_<control plane>`. CAPA's network carries the Cluster API name, the cloud
/// provider's resources the EKS name; the EKS-managed security group in the VPC holds the
/// network until EKS deletes it (sweeper never does); a self-managed cluster in another VPC
/// whose resources carry the Cluster API name under `kubernetes.io/cluster/` is kept; the audit
/// record is written.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn eks_network_goes_by_the_cluster_api_name_after_the_eks_security_group() {
    let mut scope = TestScope::new("eksnames").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let region = EnvFacts::load().get("AWS_REGION");
    let aws = clients().await;
    let name = unique_name("ek");
    let eks_name = format!("{ns}_{name}-control-plane");
    let own = world(&aws, &region, &name, &eks_name).await;
    let eks_key = format!("kubernetes.io/cluster/{eks_name}");
    let short = &name[name.len() - 6..];
    let service_lb = nlb(
        &aws,
        &own.net,
        &format!("{short}-svc"),
        &tagged(&eks_key, "owned"),
    )
    .await;
    // EKS's own cluster security group: tagged for the EKS cluster, deleted by EKS.
    let eks_sg = sg(
        &aws,
        &own.net.vpc,
        &format!("eks-cluster-sg-{short}"),
        &[
            ("aws:eks:cluster-name".to_string(), eks_name.clone()),
            (eks_key.clone(), "owned".to_string()),
        ],
    )
    .await;
    // A self-managed cluster named like the Cluster API Cluster, in its own VPC.
    let self_managed = network(&aws).await;
    let self_managed_sg = sg(
        &aws,
        &self_managed.vpc,
        &format!("{name}-self"),
        &tagged(&format!("kubernetes.io/cluster/{name}"), "owned"),
    )
    .await;

    let (cps, _managed, cp) = eks_cluster(&c, &ns, &name, &region, &eks_name).await;
    let text = gc_plan(&name, &ns);
    assert!(
        text.contains(&format!(
            "sigs.k8s.io/cluster-api-provider-aws/cluster/{name}=owned"
        )) && text.contains(&format!("{eks_key}=owned"))
            && text.contains(&own.net.vpc),
        "the plan shows both names and finds CAPA's network: {text}"
    );
    let _gc = Sweeper::start_external_only_scoped(&scope, &[]).await;
    assert!(eventually(T, || has_finalizer(&cps, &cp)).await);
    cps.delete(&cp, &Default::default()).await.unwrap();

    assert!(
        eventually(T, || async {
            !lb_exists(&aws, &service_lb).await && !sg_exists(&aws, &own.owned_sg).await
        })
        .await,
        "phase 2 by the EKS name"
    );
    assert!(
        eventually(T, || async {
            condition_message(&cps, &cp).await.contains(&eks_sg)
        })
        .await,
        "the EKS security group is named as what holds the network: {}",
        condition_message(&cps, &cp).await
    );
    assert!(
        vpc_exists(&aws, &own.net.vpc).await,
        "the network waits for EKS's group"
    );
    assert!(
        sg_exists(&aws, &eks_sg).await,
        "sweeper never deletes EKS's group"
    );
    assert!(has_finalizer(&cps, &cp).await);

    // EKS deletes its group with the cluster.
    aws.ec2
        .delete_security_group()
        .group_id(&eks_sg)
        .send()
        .await
        .unwrap();
    assert!(
        eventually(T, || gone(&cps, &cp)).await,
        "released once the network is gone"
    );
    assert!(
        !vpc_exists(&aws, &own.net.vpc).await,
        "phase 3 by the Cluster API name"
    );
    assert!(
        sg_exists(&aws, &self_managed_sg).await,
        "the self-managed namesake is kept"
    );
    assert!(vpc_exists(&aws, &self_managed.vpc).await);

    let records: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::all(c.clone());
    let found = records
        .list(
            &kube::api::ListParams::default()
                .labels(&sweeper::external::core::audit::selector(&ns, &name)),
        )
        .await
        .unwrap()
        .items;
    assert!(!found.is_empty(), "the audit record is written");
    let all = audit(&c, &ns).await;
    assert!(
        all.iter().any(
            |e| e["id"].as_str().is_some_and(|id| id.contains(&own.net.vpc))
                && e["tagName"] == eks_name.as_str()
        ),
        "{all:?}"
    );
}
