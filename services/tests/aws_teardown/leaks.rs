//! Issue #44's kinds: what a cluster leaves on resources it does not delete.

use crate::fixtures::*;
use std::collections::BTreeMap;
use sweeper_aws::model::AuditAction;
use sweeper_aws::phases::{PassRequest, teardown_pass};
use sweeper_aws::sdk::ec2::types::{IpPermission, IpRange, UserIdGroupPair};

/// The tags of one EC2 resource, on clients of their own (the recorder checks what the teardown
/// calls).
async fn tags_of(id: &str) -> BTreeMap<String, String> {
    sweeper_aws::testing::probe::tags_of(&retrying_clients().await, id).await
}

/// Kind 1: a bring-your-own VPC keeps everything, and loses exactly the cluster's `shared` key:
/// on the VPC, its subnets and its route table. Another cluster's `shared` key on the same
/// subnet, an `owned` value, and the cluster's `shared` key in a VPC the cluster does not name
/// all stay. A dry run plans the untags and changes nothing.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn phase3_untags_the_clusters_shared_key_in_its_byo_vpc_only() {
    let (c, rec) = env().await;
    let n = cluster("shared");
    let other = format!("{n}-b");
    let (key, _) = cloud(&n, "shared");
    let (other_key, _) = cloud(&other, "shared");
    let (byo, subnets) = byo_network(&c).await;
    tag(&c, &byo, &key, "shared").await;
    tag(&c, &subnets[0], &key, "shared").await;
    tag(&c, &subnets[0], &other_key, "shared").await;
    // Not `shared`: kept as it is.
    tag(&c, &subnets[1], &key, "owned").await;
    let rt = fallible::route_table(&c, &byo, &[], &[cloud(&n, "shared")])
        .await
        .unwrap();
    // The same key in a VPC the cluster does not name.
    let (elsewhere, elsewhere_subnets) = byo_network(&c).await;
    tag(&c, &elsewhere_subnets[0], &key, "shared").await;

    let req = PassRequest {
        vpc_ids: vec![byo.clone()],
        ..PassRequest::new(&n)
    };
    let plan = teardown_pass(
        &c,
        &PassRequest {
            dry_run: true,
            ..req.clone()
        },
    )
    .await;
    let p3 = plan.phases.last().unwrap();
    let mut planned: Vec<&str> = p3
        .planned_changes
        .iter()
        .map(|(r, _)| r.id.as_str())
        .collect();
    planned.sort();
    let mut want = vec![byo.as_str(), subnets[0].as_str(), rt.as_str()];
    want.sort();
    assert_eq!(planned, want, "{p3:#?}");
    assert!(
        p3.planned_changes
            .iter()
            .all(|(_, a)| *a == AuditAction::Untagged { key: key.clone() }),
        "{p3:#?}"
    );
    assert!(
        plan.phases.iter().all(|p| p.planned.is_empty()),
        "nothing is deleted: {plan:#?}"
    );
    assert_eq!(
        tags_of(&subnets[0]).await.get(&key).map(String::as_str),
        Some("shared")
    );

    let reports = until_done(&c, &req, 5).await;
    let untagged: Vec<_> = reports
        .iter()
        .flat_map(|r| r.phases.iter().flat_map(|p| p.untagged.iter()))
        .collect();
    assert_eq!(untagged.len(), 3, "{reports:#?}");
    let audited: Vec<_> = reports
        .iter()
        .flat_map(|r| r.phases.iter().flat_map(|p| p.audit.iter()))
        .collect();
    assert_eq!(audited.len(), 3, "{audited:#?}");
    assert!(
        audited
            .iter()
            .all(|a| a.action == AuditAction::Untagged { key: key.clone() }),
        "recorded as untags, not deletes: {audited:#?}"
    );
    assert!(
        reports
            .iter()
            .all(|r| r.phases.iter().all(|p| p.deleted.is_empty()))
    );

    assert!(vpc_exists(&c, &byo).await);
    for s in &subnets {
        assert!(subnet_exists(&c, s).await);
    }
    assert!(!tags_of(&byo).await.contains_key(&key));
    assert!(!tags_of(&rt).await.contains_key(&key));
    let first_subnet = tags_of(&subnets[0]).await;
    assert!(!first_subnet.contains_key(&key), "{first_subnet:?}");
    assert_eq!(
        first_subnet.get(&other_key).map(String::as_str),
        Some("shared"),
        "another cluster's key on the same subnet stays"
    );
    assert_eq!(
        tags_of(&subnets[1]).await.get(&key).map(String::as_str),
        Some("owned")
    );
    assert_eq!(
        tags_of(&elsewhere_subnets[0])
            .await
            .get(&key)
            .map(String::as_str),
        Some("shared"),
        "a VPC the cluster does not name: untouched"
    );
    assert!(vpc_exists(&c, &elsewhere).await);
    // Every untag named our key with the value `shared`, never an empty tag list.
    let calls = rec.calls();
    assert_eq!(
        calls.iter().filter(|c| *c == "EC2.DeleteTags").count(),
        3,
        "{calls:?}"
    );

    // Without the task selected, nothing is untagged.
    tag(&c, &subnets[0], &key, "shared").await;
    let narrowed = PassRequest {
        tasks: Some(vec!["load-balancer".parse().unwrap()]),
        ..req.clone()
    };
    let r = teardown_pass(&c, &narrowed).await;
    assert!(r.phases.iter().all(|p| p.untagged.is_empty()), "{r:#?}");
    assert_eq!(
        tags_of(&subnets[0]).await.get(&key).map(String::as_str),
        Some("shared")
    );
}

/// The ingress and egress rules of `group`: (direction, the group a pair names or the CIDR).
async fn rules_of(group: &str) -> Vec<(&'static str, String)> {
    let out = retrying_clients()
        .await
        .ec2
        .describe_security_groups()
        .group_ids(group)
        .send()
        .await
        .unwrap_or_else(|e| panic!("DescribeSecurityGroups {group}: {e}"));
    let mut rules = Vec::new();
    for g in out.security_groups() {
        for (way, perms) in [
            ("ingress", g.ip_permissions()),
            ("egress", g.ip_permissions_egress()),
        ] {
            for p in perms {
                for u in p.user_id_group_pairs() {
                    rules.push((way, u.group_id().unwrap_or_default().to_string()));
                }
                for r in p.ip_ranges() {
                    rules.push((way, r.cidr_ip().unwrap_or_default().to_string()));
                }
            }
        }
    }
    rules.sort();
    rules
}

fn pair(group: &str) -> IpPermission {
    IpPermission::builder()
        .ip_protocol("tcp")
        .from_port(443)
        .to_port(443)
        .user_id_group_pairs(UserIdGroupPair::builder().group_id(group).build())
        .build()
}

/// Kind 3: the rules of groups sweeper keeps that name a group it deletes are revoked (each
/// audited as revoked, not deleted), in the group's VPC and in another VPC of the account; every
/// other rule of those groups stays, and a rule naming a group that is not deleted is untouched.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn rules_naming_a_deleted_group_are_revoked_alone_and_audited() {
    let (c, _rec) = env().await;
    let n = cluster("refs");
    let a = vpc(&c, &[]).await;
    let b = vpc(&c, &[]).await;
    let ours = sg(&c, &a, &format!("{n}-lb"), &[cloud(&n, "owned")]).await;
    let kept = sg(&c, &a, &format!("{n}-kept"), &[]).await;
    let bastion = sg(&c, &a, &format!("{n}-bastion"), &[]).await;
    let peer = sg(&c, &b, &format!("{n}-peer"), &[]).await;
    let bystander = sg(&c, &a, &format!("{n}-bystander"), &[]).await;
    let ingress = |g: &str, p: IpPermission| {
        c.ec2
            .authorize_security_group_ingress()
            .group_id(g)
            .ip_permissions(p)
            .send()
    };
    ingress(&bastion, pair(&ours)).await.unwrap();
    ingress(&bastion, pair(&kept)).await.unwrap();
    ingress(
        &bastion,
        IpPermission::builder()
            .ip_protocol("tcp")
            .from_port(22)
            .to_port(22)
            .ip_ranges(IpRange::builder().cidr_ip("10.9.0.0/16").build())
            .build(),
    )
    .await
    .unwrap();
    ingress(&bystander, pair(&kept)).await.unwrap();
    c.ec2
        .authorize_security_group_egress()
        .group_id(&peer)
        .ip_permissions(pair(&ours))
        .send()
        .await
        .unwrap();
    let bastion_before = rules_of(&bastion).await;
    let peer_before = rules_of(&peer).await;
    let bystander_before = rules_of(&bystander).await;

    let req = PassRequest::new(&n);
    let plan = teardown_pass(
        &c,
        &PassRequest {
            dry_run: true,
            ..req.clone()
        },
    )
    .await;
    let mut planned: Vec<String> = plan
        .phases
        .iter()
        .flat_map(|p| p.planned_changes.iter())
        .filter(|(_, a)| matches!(a, AuditAction::Revoked { .. }))
        .map(|(r, _)| r.id.clone())
        .collect();
    planned.sort();
    let mut holders = vec![bastion.clone(), peer.clone()];
    holders.sort();
    assert_eq!(planned, holders, "{plan:#?}");
    assert_eq!(
        rules_of(&bastion).await,
        bastion_before,
        "a dry run revokes nothing"
    );

    let reports = until_done(&c, &req, 10).await;
    assert!(!sg_exists(&c, &ours).await);
    for g in [&kept, &bastion, &peer, &bystander] {
        assert!(sg_exists(&c, g).await, "{g} is kept");
    }
    let without = |before: Vec<(&'static str, String)>| -> Vec<(&'static str, String)> {
        before.into_iter().filter(|(_, g)| *g != ours).collect()
    };
    assert_eq!(
        rules_of(&bastion).await,
        without(bastion_before),
        "only the rule naming ours went"
    );
    assert_eq!(
        rules_of(&peer).await,
        without(peer_before),
        "another VPC's rule naming ours went"
    );
    assert_eq!(rules_of(&bystander).await, bystander_before, "untouched");
    let mut revoked: Vec<(String, String)> = reports
        .iter()
        .flat_map(|r| r.phases.iter().flat_map(|p| p.audit.iter()))
        .filter_map(|a| match &a.action {
            AuditAction::Revoked { rule } => Some((a.resource.id.clone(), rule.clone())),
            _ => None,
        })
        .collect();
    revoked.sort();
    let mut want = vec![
        (bastion.clone(), format!("ingress tcp port 443 from {ours}")),
        (peer.clone(), format!("egress tcp port 443 to {ours}")),
    ];
    want.sort();
    // AWS fills in the pair's account: `… (account 000000000000)` after the rule.
    assert_eq!(revoked.len(), want.len(), "{revoked:?}");
    for ((holder, rule), (h, r)) in revoked.iter().zip(&want) {
        assert!(
            holder == h && rule.starts_with(r.as_str()),
            "each revoked rule is audited as revoked: {revoked:?}"
        );
    }
}

async fn instance_state_pair(
    n: &str,
    policy: Option<&str>,
    target_arn: Option<&str>,
) -> (String, String, String) {
    let c = retrying_clients().await;
    sweeper_aws::testing::leaks::instance_state_pair(&c, n, policy, target_arn).await
}

async fn queue_exists(n: &str) -> bool {
    let q = sweeper_aws::policy::instance_state::queue_name(n);
    retrying_clients()
        .await
        .sqs
        .get_queue_url()
        .queue_name(q)
        .send()
        .await
        .is_ok()
}

async fn rule_exists(n: &str) -> bool {
    let r = sweeper_aws::policy::instance_state::rule_name(n);
    retrying_clients()
        .await
        .events
        .describe_rule()
        .name(r)
        .send()
        .await
        .is_ok()
}

/// Kind 4: CAPA's EventBridgeInstanceState queue and rule go, rule first, when the rule targets
/// only the queue and the queue's policy is only CAPA's statement naming the rule; otherwise both
/// are reported and kept: a queue whose policy lacks CAPA's Sid, a rule targeting another queue.
/// Another cluster's pair is never looked at. A dry run plans both; without the task nothing is
/// asked.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn capas_instance_state_queue_and_rule_go_only_as_capas_pair() {
    let (c, rec) = env().await;
    let n = cluster("isq");
    let (_, queue_arn, rule_arn) = instance_state_pair(&n, None, None).await;
    let other = format!("{n}-b");
    instance_state_pair(&other, None, None).await;
    // Look-alikes, each its own cluster name: a queue without CAPA's statement, a rule
    // targeting another queue.
    let no_sid = format!("{n}-nosid");
    let foreign_policy = r#"{"Version":"2012-10-17","Statement":[{"Sid":"Mine","Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"*"}]}"#;
    instance_state_pair(&no_sid, Some(foreign_policy), None).await;
    let elsewhere = format!("{n}-elsewhere");
    let (_, other_queue_arn, _) = instance_state_pair(&format!("{n}-target"), None, None).await;
    instance_state_pair(&elsewhere, None, Some(&other_queue_arn)).await;

    let req = PassRequest::new(&n);
    let plan = teardown_pass(
        &c,
        &PassRequest {
            dry_run: true,
            ..req.clone()
        },
    )
    .await;
    let mut planned: Vec<&str> = plan
        .phases
        .iter()
        .flat_map(|p| p.planned.iter().map(|r| r.id.as_str()))
        .collect();
    planned.sort();
    let mut want = vec![queue_arn.as_str(), rule_arn.as_str()];
    want.sort();
    assert_eq!(planned, want, "{plan:#?}");
    assert!(queue_exists(&n).await && rule_exists(&n).await);

    // Without the task, nothing of it is asked.
    rec.clear();
    let narrowed = PassRequest {
        tasks: Some(vec!["load-balancer".parse().unwrap()]),
        ..req.clone()
    };
    teardown_pass(&c, &narrowed).await;
    assert!(
        !rec.calls()
            .iter()
            .any(|op| op.starts_with("SQS.") || op.starts_with("EventBridge.")),
        "{:?}",
        rec.calls()
    );

    let reports = until_done(&c, &req, 4).await;
    let deleted: Vec<String> = reports
        .iter()
        .flat_map(|r| {
            r.phases
                .iter()
                .flat_map(|p| p.deleted.iter().map(|r| r.id.clone()))
        })
        .collect();
    assert_eq!(
        deleted,
        [rule_arn.clone(), queue_arn.clone()],
        "{reports:#?}"
    );
    let audited: Vec<_> = reports
        .iter()
        .flat_map(|r| r.phases.iter().flat_map(|p| p.audit.iter()))
        .map(|a| (a.resource.id.clone(), a.action.clone()))
        .collect();
    assert_eq!(
        audited,
        [
            (rule_arn.clone(), AuditAction::Deleted),
            (queue_arn.clone(), AuditAction::Deleted)
        ]
    );
    let calls = rec.calls();
    assert!(
        first(&calls, "EventBridge.DeleteRule") < first(&calls, "SQS.DeleteQueue"),
        "the rule goes first: {calls:?}"
    );
    assert!(!queue_exists(&n).await && !rule_exists(&n).await);
    assert!(
        queue_exists(&other).await && rule_exists(&other).await,
        "another cluster's pair stays"
    );

    // The look-alikes: reported, never deleted.
    for lookalike in [&no_sid, &elsewhere] {
        let r = teardown_pass(&c, &PassRequest::new(lookalike)).await;
        let kept: Vec<_> = r.phases.iter().flat_map(|p| p.kept.iter()).collect();
        assert_eq!(kept.len(), 2, "{lookalike}: {r:#?}");
        assert!(
            r.phases.iter().all(|p| p.deleted.is_empty()),
            "{lookalike}: {r:#?}"
        );
        assert!(
            r.done,
            "reported look-alikes do not hold the teardown: {r:#?}"
        );
        assert!(queue_exists(lookalike).await && rule_exists(lookalike).await);
    }
}

async fn secret_listed(arn: &str) -> bool {
    let d = retrying_clients()
        .await
        .secrets
        .describe_secret()
        .secret_id(arn)
        .send()
        .await;
    matches!(d, Ok(d) if d.deleted_date().is_none())
}

async fn parameter_exists(name: &str) -> bool {
    retrying_clients()
        .await
        .ssm
        .get_parameter()
        .name(name)
        .send()
        .await
        .is_ok()
}

/// Kind 5: CAPA's bootstrap data, named as CAPA names it and tagged CAPA-owned for the cluster,
/// goes (secrets with a recovery window, parameters); every look-alike stays: a secret with the
/// cloud provider's owned tag but not CAPA's, a hand-named one with CAPA's tag (reported),
/// another cluster's, a cluster whose name starts with this one's, an untagged one.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn capas_bootstrap_data_goes_only_with_capas_name_and_owned_tag() {
    use sweeper_aws::testing::leaks::{bootstrap_parameter, bootstrap_secret, uuid_like};
    let (c, rec) = env().await;
    let f = retrying_clients().await;
    let n = cluster("boot");
    let capa = |n: &str| format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{n}");
    let cloud_key = |n: &str| format!("kubernetes.io/cluster/{n}");
    let (ours_capa, ours_cloud) = (capa(&n), cloud_key(&n));
    let both = [
        (ours_capa.as_str(), "owned"),
        (ours_cloud.as_str(), "owned"),
    ];
    let uuid = uuid_like();
    let s0 = bootstrap_secret(&f, &format!("aws.cluster.x-k8s.io/{uuid}-0"), &both).await;
    let s1 = bootstrap_secret(&f, &format!("aws.cluster.x-k8s.io/{uuid}-1"), &both).await;
    let p0 = format!("/cluster.x-k8s.io/{uuid}/0");
    bootstrap_parameter(&f, &p0, &both).await;
    // Look-alikes.
    let cloud_only = bootstrap_secret(
        &f,
        &format!("aws.cluster.x-k8s.io/{}-0", uuid_like()),
        &[(ours_cloud.as_str(), "owned")],
    )
    .await;
    let hand_named = bootstrap_secret(&f, &format!("aws.cluster.x-k8s.io/{n}-mine"), &both).await;
    let longer = format!("{n}0");
    let (longer_capa, other_capa) = (capa(&longer), capa(&format!("{n}-b")));
    let prefix_cluster = bootstrap_secret(
        &f,
        &format!("aws.cluster.x-k8s.io/{}-0", uuid_like()),
        &[(longer_capa.as_str(), "owned")],
    )
    .await;
    let other = bootstrap_secret(
        &f,
        &format!("aws.cluster.x-k8s.io/{}-0", uuid_like()),
        &[(other_capa.as_str(), "owned")],
    )
    .await;
    let untagged =
        bootstrap_secret(&f, &format!("aws.cluster.x-k8s.io/{}-0", uuid_like()), &[]).await;
    let other_param = format!("/cluster.x-k8s.io/{}/0", uuid_like());
    bootstrap_parameter(&f, &other_param, &[(other_capa.as_str(), "owned")]).await;
    let cloud_param = format!("/cluster.x-k8s.io/{}/0", uuid_like());
    bootstrap_parameter(&f, &cloud_param, &[(ours_cloud.as_str(), "owned")]).await;

    let req = PassRequest::new(&n);
    let plan = teardown_pass(
        &c,
        &PassRequest {
            dry_run: true,
            ..req.clone()
        },
    )
    .await;
    let mut planned: Vec<String> = plan
        .phases
        .iter()
        .flat_map(|p| p.planned.iter().map(|r| r.id.clone()))
        .collect();
    planned.sort();
    assert_eq!(planned.len(), 3, "{plan:#?}");
    assert!(
        planned.contains(&s0) && planned.contains(&s1),
        "{planned:?}"
    );
    assert!(planned.iter().any(|id| id.ends_with(&p0)), "{planned:?}");
    let kept: Vec<&str> = plan
        .phases
        .iter()
        .flat_map(|p| p.kept.iter().map(|(r, _)| r.id.as_str()))
        .collect();
    assert_eq!(kept, [hand_named.as_str()], "{plan:#?}");
    assert!(secret_listed(&s0).await && parameter_exists(&p0).await);

    let reports = until_done(&c, &req, 4).await;
    let deleted: Vec<String> = reports
        .iter()
        .flat_map(|r| {
            r.phases
                .iter()
                .flat_map(|p| p.deleted.iter().map(|r| r.id.clone()))
        })
        .collect();
    assert_eq!(deleted.len(), 3, "{reports:#?}");
    let audited: Vec<_> = reports
        .iter()
        .flat_map(|r| r.phases.iter().flat_map(|p| p.audit.iter()))
        .collect();
    assert!(
        audited.iter().all(|a| a.action == AuditAction::Deleted
            && a.tags
                .as_ref()
                .is_some_and(|t| t.get(&ours_capa).map(String::as_str) == Some("owned"))),
        "{audited:#?}"
    );
    assert!(!secret_listed(&s0).await && !secret_listed(&s1).await);
    assert!(!parameter_exists(&p0).await);
    for (what, arn) in [
        ("the cloud provider's key only", &cloud_only),
        ("a hand-made name", &hand_named),
        ("a cluster whose name starts with ours", &prefix_cluster),
        ("another cluster's", &other),
        ("untagged", &untagged),
    ] {
        assert!(secret_listed(arn).await, "{what} stays");
    }
    assert!(parameter_exists(&other_param).await && parameter_exists(&cloud_param).await);
    let calls = rec.calls();
    assert_eq!(
        calls
            .iter()
            .filter(|op| *op == "SecretsManager.DeleteSecret")
            .count(),
        2,
        "{calls:?}"
    );
}
