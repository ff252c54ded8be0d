//! Issue #53: CAPA's own AWSCluster controller (CAPA v2.13.0, scripts/go/capa-manager) builds a
//! cluster's infrastructure in LocalStack, and sweeper alone tears it down. A Cluster and an
//! AWSCluster of CAPA's template, in a fresh account reached through a static identity: CAPA's
//! controller builds the network, the security groups and the API server's load balancer until
//! the AWSCluster is ready; the test adds what a workload leaves (the cloud provider's NLB and
//! its group, an AWS Load Balancer Controller group, an opt-in CSI volume). CAPA's controller
//! stops, the AWSCluster is deleted: once sweeper releases its finalizer, the account's
//! inventory (tagging API and the EC2/ELB describes) is what it was before the cluster existed,
//! but for the snapshot sweeper takes of the CSI volume before deleting it.

mod support;

use std::time::Duration;
use support::TestScope;
use support::capa::{annotate, audit_entries, has_finalizer, strip_finalizers};
use support::capa_cluster::{
    CAPA_FINALIZER, Running, TEARDOWN, Vpc, assert_no_loop, repeated_errors,
};
use support::sweeper::eventually;
use sweeper_aws::phases::AwsClients;

/// "Nothing changes for a while": several reconciles of CAPA's controller (it requeues a
/// paused cluster's event at once) and several passes and Cluster-watch events of sweeper's.
const A_WHILE: Duration = Duration::from_secs(20);
/// Between two steps of `clusterctl move`, as its retries and backoff allow.
const STEP: Duration = Duration::from_secs(3);
const MOVE: &str = "clusterctl.cluster.x-k8s.io/delete-for-move";

/// Part 2: CAPA's controller builds, then stops (uninstalled, or scaled to zero); the AWSCluster
/// is deleted with sweeper alone running. Once sweeper's finalizer is gone the inventory equals
/// the one before (but for sweeper's snapshot); CAPA's finalizer, which nobody runs, is then
/// removed by hand (what a user does after uninstalling CAPA).
async fn sweeper_alone_removes_what_capa_built(prefix: &str, vpc: Vpc) {
    let mut scope = TestScope::new(prefix).await;
    let mut r = Running::start(&mut scope, vpc, true).await;
    r.capa.stop();
    let b = &r.b;
    b.infra.delete(&b.name, &Default::default()).await.unwrap();
    assert!(
        eventually(TEARDOWN, || async {
            !has_finalizer(&b.infra, &b.name).await
        })
        .await,
        "sweeper released its finalizer: {:#?}",
        repeated_errors(&r.sweeper_log_text())
    );
    r.print_who_deleted().await;
    r.assert_left_only_the_snapshot().await;
    // Sweeper alone deleted all of it, so its audit trail lists every resource CAPA built that
    // has an id of its own in the inventory: here, each NAT gateway (an asynchronous delete,
    // recorded by the pass that requested it).
    let audited = audit_entries(&b.client, &b.ns, &b.name).await;
    for nat in r.mid.iter().filter_map(|l| l.strip_prefix("nat-gateway ")) {
        assert!(
            audited.iter().any(|e| e["id"] == nat),
            "{nat} is in the audit trail: {audited:#?}"
        );
    }
    if let Some(n) = &b.byo {
        assert_not_shared(&b.aws, &b.name, &[&n.vpc, &n.public, &n.private]).await;
    }
    assert!(
        r.finalizers().await.iter().any(|f| f == CAPA_FINALIZER),
        "CAPA's finalizer stays: its controller never ran the delete"
    );
    strip_finalizers(&b.infra, &b.name).await;
    assert_no_loop("sweeper", &r.sweeper_log_text());
}

/// The user's network stays, with no key of this cluster left on it (CAPA tagged the subnets
/// `kubernetes.io/cluster/<name>=shared`; the inventory shows they exist, this that they are
/// untagged of it).
async fn assert_not_shared(c: &AwsClients, cluster: &str, ids: &[&str]) {
    for id in ids {
        let tags = sweeper_aws::testing::probe::tags_of(c, id).await;
        let left: Vec<&String> = tags.keys().filter(|k| k.contains(cluster)).collect();
        assert!(
            left.is_empty(),
            "the user's {id} keeps {cluster}'s tags: {left:?}"
        );
    }
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn what_capa_builds_in_a_managed_vpc_sweeper_alone_removes() {
    sweeper_alone_removes_what_capa_built("capa-own", Vpc::Managed).await;
}

/// The bring-your-own VPC: CAPA builds its security groups and load balancer in the user's
/// network and tags the user's subnets `shared`; sweeper removes what CAPA and the workload made
/// and the tags, and the VPC, its subnets, gateway and routes stay.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn what_capa_builds_in_a_byo_vpc_sweeper_alone_removes_and_the_vpc_stays() {
    sweeper_alone_removes_what_capa_built("capa-byo", Vpc::BringYourOwn).await;
}

/// Part 3: CAPA's controller, its `ExternalResourceGC` gate as `gc_gate` says, and sweeper live
/// delete one cluster together: every resource goes (but sweeper's snapshot), both finalizers
/// go, the AWSCluster is gone, and neither controller repeats an error past [`REPEATS`].
async fn both_delete_a_cluster(prefix: &str, gc_gate: bool) {
    let mut scope = TestScope::new(prefix).await;
    let r = Running::start(&mut scope, Vpc::Managed, gc_gate).await;
    r.delete_until_gone().await;
    r.print_who_deleted().await;
    r.assert_left_only_the_snapshot().await;
    r.assert_no_loops();
}

/// The hand-over's end state: CAPA's gate off, sweeper does the external part.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn capa_with_its_gate_off_and_sweeper_delete_a_cluster_together() {
    both_delete_a_cluster("capa-off", false).await;
}

/// What a user has before the hand-over: CAPA's gate on as well; neither is blocked by what the
/// other deleted first.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn capa_with_its_gate_on_and_sweeper_delete_a_cluster_together() {
    both_delete_a_cluster("capa-on", true).await;
}

/// Part 3: a paused Cluster's AWSCluster is deleted with both controllers running: neither
/// deletes anything (Cluster API's contract), both finalizers hold; unpaused, both finish.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_paused_clusters_deletion_waits_for_both_controllers_until_unpaused() {
    let mut scope = TestScope::new("capa-pause").await;
    let r = Running::start(&mut scope, Vpc::Managed, false).await;
    r.pause(true).await;
    tokio::time::sleep(STEP).await;
    r.b.infra
        .delete(&r.b.name, &Default::default())
        .await
        .unwrap();
    tokio::time::sleep(A_WHILE).await;
    r.assert_untouched("a paused cluster's deletion").await;
    let held = r.finalizers().await;
    assert!(
        held.iter().any(|f| f == CAPA_FINALIZER) && held.len() == 2,
        "both finalizers hold: {held:?}"
    );
    r.pause(false).await;
    r.wait_gone().await;
    r.print_who_deleted().await;
    r.assert_left_only_the_snapshot().await;
    r.assert_no_loops();
}

/// Part 3: `clusterctl move`'s source side with both controllers running (pause, mark, strip the
/// finalizers, delete; a pause between steps as clusterctl's retries allow): the AWSCluster goes
/// and nothing in AWS is deleted by either: the cluster lives on in the target.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn clusterctl_move_with_capa_running_deletes_nothing() {
    let mut scope = TestScope::new("capa-move").await;
    let r = Running::start(&mut scope, Vpc::Managed, true).await;
    let b = &r.b;
    r.pause(true).await;
    tokio::time::sleep(STEP).await;
    annotate(&b.infra, &b.name, MOVE, Some("")).await;
    tokio::time::sleep(STEP).await;
    strip_finalizers(&b.infra, &b.name).await;
    tokio::time::sleep(STEP).await;
    assert!(
        r.finalizers().await.is_empty(),
        "neither controller put its finalizer back in the gap before the delete"
    );
    r.delete_until_gone().await;
    tokio::time::sleep(A_WHILE).await;
    r.assert_untouched("the moved cluster lives on").await;
    r.assert_no_loops();
}
