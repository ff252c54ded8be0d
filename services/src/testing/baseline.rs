//! The baseline the benchmark compares against: what CAPA's gc service does for phase 2. One flat
//! list from the tagging API, then one resource at a time in order (load balancers, target groups,
//! security groups), describing each security group before deleting it.

use crate::cleaners::load_balancers::{self, Api};
use crate::cleaners::{CleanError, Outcome, security_groups, settle, target_groups};
use crate::errors::call;
use crate::model::{AwsClients, Failure, PhaseReport, ResourceRef};
use crate::phases::tagged;

/// Phase 2, sequentially. Same retry policy and reporting as sweeper's mode, so only the
/// scheduling differs. Kept as one straight function on purpose (it is over the ~80-line
/// guideline): it is the benchmark's yardstick, and reading CAPA's loop top to bottom in one place
/// is what makes the comparison checkable.
pub async fn baseline_phase2(clients: &AwsClients, cluster_name: &str) -> PhaseReport {
    let own = crate::policy::Ownership::of(cluster_name);
    let inv = tagged::discover(clients, &own, false).await;
    let mut report = PhaseReport::started(crate::model::Phase::Tagged);
    report.errors.extend(inv.failures());
    let rref = |kind: &str, id: &str| ResourceRef {
        service: if kind == "security-group" {
            "ec2"
        } else {
            "elasticloadbalancing"
        }
        .to_string(),
        kind: kind.to_string(),
        id: id.to_string(),
    };
    let mut record = |kind: &str, id: &str, res: Result<Outcome, CleanError>| match res {
        Ok(Outcome::Deleted | Outcome::DeletedWith(_)) => report.deleted.push(rref(kind, id)),
        Ok(Outcome::Gone | Outcome::Untagged(_) | Outcome::Also(..)) => {}
        Ok(Outcome::Remaining(r) | Outcome::Requested(r)) => {
            report.remaining.push((rref(kind, id), r))
        }
        Ok(Outcome::Failed(f)) => report.errors.push(f),
        Err(e) => report.errors.push(Failure::of(&e)),
    };
    for lb in load_balancers::tagged(&inv) {
        let res = match &lb.detail {
            Api::Classic { name } => settle(
                call("elb.DeleteLoadBalancer", || {
                    clients
                        .elb
                        .delete_load_balancer()
                        .load_balancer_name(name)
                        .send()
                })
                .await,
                "load-balancer",
                &lb.id,
                "DeleteLoadBalancer",
            ),
            _ => settle(
                call("elbv2.DeleteLoadBalancer", || {
                    clients
                        .elbv2
                        .delete_load_balancer()
                        .load_balancer_arn(&lb.id)
                        .send()
                })
                .await,
                "load-balancer",
                &lb.id,
                "DeleteLoadBalancer",
            ),
        };
        record("load-balancer", &lb.id, res);
    }
    for tg in target_groups::tagged(&inv) {
        let res = call("elbv2.DeleteTargetGroup", || {
            clients
                .elbv2
                .delete_target_group()
                .target_group_arn(tg)
                .send()
        })
        .await;
        record(
            "target-group",
            tg,
            settle(res, "target-group", tg, "DeleteTargetGroup"),
        );
    }
    for (arn, id) in security_groups::tagged(&inv) {
        let described = call("ec2.DescribeSecurityGroups", || {
            clients.ec2.describe_security_groups().group_ids(id).send()
        })
        .await;
        if let Err(f) = described {
            record(
                "security-group",
                arn,
                settle::<()>(Err(f), "security-group", arn, "DescribeSecurityGroups"),
            );
            continue;
        }
        let res = call("ec2.DeleteSecurityGroup", || {
            clients.ec2.delete_security_group().group_id(id).send()
        })
        .await;
        record(
            "security-group",
            arn,
            settle(res, "security-group", arn, "DeleteSecurityGroup"),
        );
    }
    report
}
