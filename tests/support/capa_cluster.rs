//! One cluster built by CAPA's own AWSCluster controller (CAPA v2.13.0, scripts/go/capa-manager)
//! in a fresh LocalStack account, with what a workload leaves in it, for the tests of issue #53
//! (tests/capa_controller.rs) and its benchmark (`make bench-capa`): the account's inventory
//! before and after, both controllers' logs, and what each deleted.

use super::aws::{Net, clients_as, nlb, sg, tagged};
use super::capa::{
    api, audit_entries, fresh_static_identity, has_finalizer, merge, template_cluster,
    upstream_crds,
};
use super::capa_manager::CapaManager;
use super::inventory::{diff, inventory, snapshot_lines, sweepers_snapshot};
use super::sweeper::{Sweeper, eventually};
use super::{EnvFacts, TestScope, unique_name};
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;
use sweeper_aws::phases::AwsClients;
use sweeper_aws::phases::registry::default_tasks;
use sweeper_aws::testing::leaks::csi_volume;

/// CAPA's finalizer on an AWSCluster (infrav1.ClusterFinalizer).
pub const CAPA_FINALIZER: &str = "awscluster.infrastructure.cluster.x-k8s.io";
pub const GATES: [&str; 2] = ["--feature-gates", "CascadeGC=false,ExternalResourceGC=true"];
/// How long CAPA's controller may take to build a cluster in LocalStack (measured: see docs/capa.md).
pub const BUILD: Duration = Duration::from_secs(300);
pub const TEARDOWN: Duration = Duration::from_secs(180);

/// What a test's cluster is: the AWSCluster API, its name, the account's clients.
pub struct Built {
    pub client: kube::Client,
    pub ns: String,
    pub infra: Api<DynamicObject>,
    pub name: String,
    pub aws: AwsClients,
    pub before: BTreeSet<String>,
    pub byo: Option<ByoNetwork>,
}

/// Where CAPA builds: a VPC of its own, or the user's (bring-your-own).
#[derive(Clone, Copy, PartialEq)]
pub enum Vpc {
    Managed,
    BringYourOwn,
}

/// A user's own network, made before the cluster (so in the inventory before it): a VPC with an
/// internet gateway, a public subnet (its route table sends 0.0.0.0/0 there, which is how CAPA
/// tells public from private) and a private one, each tagged with the role the AWS cloud
/// provider's documentation asks of a bring-your-own subnet (`kubernetes.io/role/elb`,
/// `.../internal-elb`). CAPA adds this cluster's `shared` key to both; nobody removes the role
/// tags, which were the user's before the cluster.
pub struct ByoNetwork {
    pub vpc: String,
    pub public: String,
    pub private: String,
}

pub async fn byo_network(c: &AwsClients) -> ByoNetwork {
    use sweeper_aws::testing::build::{AZ, fallible, subnet, tag, vpc};
    let vpc = vpc(c, &[]).await;
    let public = subnet(c, &vpc, "10.0.1.0/24", AZ).await;
    let private = subnet(c, &vpc, "10.0.2.0/24", AZ).await;
    let igw = fallible::internet_gateway(c, &vpc, &[]).await.unwrap();
    let rt = fallible::route_table(c, &vpc, &[&public], &[])
        .await
        .unwrap();
    c.ec2
        .create_route()
        .route_table_id(&rt)
        .destination_cidr_block("0.0.0.0/0")
        .gateway_id(&igw)
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateRoute to {igw}: {e:?}"));
    tag(c, &public, "kubernetes.io/role/elb", "1").await;
    tag(c, &private, "kubernetes.io/role/internal-elb", "1").await;
    ByoNetwork {
        vpc,
        public,
        private,
    }
}

/// The fresh account behind a static identity allowed in `ns`, its inventory before anything
/// of the cluster is built, and CAPA's template cluster in it, in a VPC as `vpc` says.
pub async fn capa_cluster(scope: &mut TestScope, vpc: Vpc) -> Built {
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let region = EnvFacts::load().get("AWS_REGION");
    let (account, stat) = fresh_static_identity(&c, &ns, "capa").await;
    let aws = clients_as(&region, &account).await;
    let byo = match vpc {
        Vpc::BringYourOwn => Some(byo_network(&aws).await),
        Vpc::Managed => None,
    };
    let before = inventory(&aws).await;
    let name = unique_name("capa");
    let infra = template_cluster(&c, &ns, &name, |ac| {
        ac["spec"]["identityRef"] = json!({"kind": "AWSClusterStaticIdentity", "name": stat});
        // The load balancer's DNS name LocalStack returns resolves nowhere: CAPA's check off.
        ac["spec"]["controlPlaneLoadBalancer"]["dnsResolutionCheck"] = json!("None");
        ac["metadata"]["annotations"] = json!({ "sweeper.dev/gc-tasks": tasks_with_volumes() });
        if let Some(n) = &byo {
            ac["spec"]["network"]["vpc"] = json!({"id": n.vpc});
            ac["spec"]["network"]["subnets"] = json!([{"id": n.public}, {"id": n.private}]);
        }
    })
    .await;
    Built {
        client: c,
        ns,
        infra,
        name,
        aws,
        before,
        byo,
    }
}

/// Sweeper's default phase-2 tasks plus the opt-in `ebs-volume` (a workload's CSI volume).
pub fn tasks_with_volumes() -> String {
    let mut tasks: Vec<String> = default_tasks().iter().map(|t| t.to_string()).collect();
    tasks.push("ebs-volume".into());
    tasks.join(",")
}

pub async fn ready(infra: &Api<DynamicObject>, name: &str) -> bool {
    infra.get(name).await.unwrap().data["status"]["ready"] == json!(true)
}

/// Waits for CAPA's controller to make the AWSCluster ready; fails with its conditions and log.
pub async fn wait_built(b: &Built, capa: &CapaManager) -> Value {
    if !eventually(BUILD, || ready(&b.infra, &b.name)).await {
        let ac = b.infra.get(&b.name).await.unwrap();
        let log = capa.log_text();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        panic!(
            "CAPA's controller did not make {} ready: conditions {:#}\nlog (last lines, newest first):\n{}",
            b.name,
            ac.data["status"]["conditions"],
            tail.join("\n")
        );
    }
    b.infra.get(&b.name).await.unwrap().data
}

/// A public subnet CAPA made (where the cloud provider puts an internet-facing load balancer).
pub fn public_subnet(ac: &Value) -> String {
    let subnets = ac["spec"]["network"]["subnets"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    subnets
        .iter()
        .find(|s| s["isPublic"] == json!(true))
        .and_then(|s| s["resourceID"].as_str().or(s["id"].as_str()))
        .unwrap_or_else(|| panic!("a public subnet among {subnets:#?}"))
        .to_string()
}

/// What a workload left in CAPA's network: the ids the inventory must list, and the CSI volume.
pub struct Leaks {
    pub ids: Vec<String>,
    pub volume: String,
}

/// The workload's leaks in CAPA's network: the cloud provider's NLB and its security group
/// (`kubernetes.io/cluster/<name>=owned`) in a public subnet CAPA made, an AWS Load Balancer
/// Controller group (`elbv2.k8s.aws/cluster=<name>`), and a CSI volume (opt-in task `ebs-volume`).
pub async fn workload_leaks(b: &Built, ac: &Value) -> Leaks {
    let vpc = ac["spec"]["network"]["vpc"]["id"]
        .as_str()
        .expect("CAPA's VPC")
        .to_string();
    let owned = tagged(&format!("kubernetes.io/cluster/{}", b.name), "owned");
    let net = Net {
        vpc: vpc.clone(),
        subnet: public_subnet(ac),
    };
    let short = &b.name[b.name.len() - 6..];
    let lb = nlb(&b.aws, &net, &format!("svc-{short}"), &owned).await;
    let svc_sg = sg(&b.aws, &vpc, &format!("k8s-elb-{short}"), &owned).await;
    let lbc = tagged("elbv2.k8s.aws/cluster", &b.name);
    let lbc_sg = sg(&b.aws, &vpc, &format!("k8s-traffic-{short}"), &lbc).await;
    let volume = csi_volume(&b.aws, &b.name, &format!("pvc-{short}")).await;
    Leaks {
        ids: vec![lb, svc_sg, lbc_sg, volume.clone()],
        volume,
    }
}

/// One cluster CAPA's controller built, with its workload's leaks, sweeper's finalizer on, and
/// both controllers running (each with its log in the env's logs/).
pub struct Running {
    pub b: Built,
    pub capa: CapaManager,
    /// Sweeper, unless CAPA's controller runs alone (the benchmark's baseline).
    pub sweeper: Option<Sweeper>,
    pub sweeper_log: PathBuf,
    pub leaks: Leaks,
    /// The account's inventory once everything was built.
    pub mid: BTreeSet<String>,
}

impl Running {
    /// CAPA's controller (its `ExternalResourceGC` gate as `gc_gate` says) and sweeper.
    pub async fn start(scope: &mut TestScope, vpc: Vpc, gc_gate: bool) -> Running {
        Running::start_with(scope, vpc, gc_gate, true).await
    }

    /// CAPA's controller alone, as before sweeper was installed.
    pub async fn start_capa_alone(scope: &mut TestScope, gc_gate: bool) -> Running {
        Running::start_with(scope, Vpc::Managed, gc_gate, false).await
    }

    async fn start_with(scope: &mut TestScope, vpc: Vpc, gc_gate: bool, with: bool) -> Running {
        let b = capa_cluster(scope, vpc).await;
        let ns = scope.namespace().await;
        let capa = CapaManager::start(&ns, gc_gate);
        let sweeper_log = capa.log.with_file_name(format!("sweeper-{ns}.log"));
        let sweeper = if with {
            Some(Sweeper::start_scoped_logged(scope, &GATES, &sweeper_log).await)
        } else {
            None
        };
        let ac = wait_built(&b, &capa).await;
        let leaks = workload_leaks(&b, &ac).await;
        if sweeper.is_some() {
            assert!(
                eventually(Duration::from_secs(60), || has_finalizer(&b.infra, &b.name)).await,
                "sweeper's finalizer is on"
            );
        }
        capa.wait_idle(Duration::from_secs(3), Duration::from_secs(90))
            .await;
        let mid = inventory(&b.aws).await;
        for l in &leaks.ids {
            assert!(
                mid.iter().any(|i| i.contains(l.as_str())),
                "{l} is listed: {mid:#?}"
            );
        }
        Running {
            b,
            capa,
            sweeper,
            sweeper_log,
            leaks,
            mid,
        }
    }

    pub fn sweeper_log_text(&self) -> String {
        std::fs::read_to_string(&self.sweeper_log).unwrap_or_default()
    }

    pub async fn finalizers(&self) -> Vec<String> {
        let ac = self.b.infra.get(&self.b.name).await.unwrap();
        ac.metadata.finalizers.unwrap_or_default()
    }

    /// The account's inventory is what it was before the cluster was built, plus the one
    /// snapshot sweeper takes of the workload's CSI volume before deleting it (its default: a
    /// volume's data is not undoable; the snapshot is the team's to delete).
    pub async fn assert_left_only_the_snapshot(&self) {
        let b = &self.b;
        let after = inventory(&b.aws).await;
        let snapshot = sweepers_snapshot(&b.aws, &b.name, &self.leaks.volume).await;
        let mut expected = b.before.clone();
        expected.extend(snapshot_lines(&after, &snapshot));
        let (left, lost) = diff(&expected, &after);
        assert!(
            left.is_empty() && lost.is_empty(),
            "left behind: {left:#?}\nlost (there before, or sweeper's snapshot): {lost:#?}"
        );
    }

    /// Nothing in the account changed since everything was built.
    pub async fn assert_untouched(&self, why: &str) {
        let (added, lost) = diff(&self.mid, &inventory(&self.b.aws).await);
        assert!(
            added.is_empty() && lost.is_empty(),
            "{why}: added {added:#?}\ndeleted {lost:#?}"
        );
    }

    /// Deletes the AWSCluster and waits until it is gone; fails with the finalizers left and
    /// both controllers' most repeated errors.
    pub async fn delete_until_gone(&self) {
        let b = &self.b;
        b.infra.delete(&b.name, &Default::default()).await.unwrap();
        self.wait_gone().await;
    }

    /// Waits until the AWSCluster is gone, noting each distinct condition (type, status, reason)
    /// it shows on the way: what a user sees in CAPA's conditions while both work.
    pub async fn wait_gone(&self) {
        let b = &self.b;
        let gone = self.gone_within(TEARDOWN).await.is_some();
        assert!(
            gone,
            "both finalizers released: {:?}\nCAPA's errors: {:#?}\nsweeper's errors: {:#?}",
            b.infra
                .get_opt(&b.name)
                .await
                .unwrap()
                .map(|o| o.metadata.finalizers),
            repeated_errors(&self.capa.log_text()),
            repeated_errors(&self.sweeper_log_text())
        );
    }

    /// How long the AWSCluster took to go, from now, if it went within `bound`; prints each
    /// distinct condition (type, status, reason) it showed on the way.
    pub async fn gone_within(&self, bound: Duration) -> Option<Duration> {
        let b = &self.b;
        let start = std::time::Instant::now();
        let seen = std::sync::Mutex::new(Vec::<String>::new());
        let gone = eventually(bound, || async {
            let Some(o) = b.infra.get_opt(&b.name).await.unwrap() else {
                return true;
            };
            let conditions = o.data["status"]["conditions"].as_array().cloned();
            let mut seen = seen.lock().unwrap();
            for c in conditions.unwrap_or_default() {
                let line = format!("{} {} {}", c["type"], c["status"], c["reason"]);
                if !seen.contains(&line) {
                    seen.push(line);
                }
            }
            false
        })
        .await;
        eprintln!(
            "conditions seen while deleting: {:#?}",
            seen.lock().unwrap()
        );
        gone.then(|| start.elapsed())
    }

    /// Who deleted what, for the record (docs/capa.md's observations come from these lines):
    /// sweeper's audit entries (every delete and untag it made) and CAPA's log of its deletes.
    pub async fn print_who_deleted(&self) {
        let b = &self.b;
        let audited = audit_entries(&b.client, &b.ns, &b.name).await;
        let by_sweeper: Vec<String> = audited
            .iter()
            .map(|e| {
                let what = ["untagged", "revoked"]
                    .into_iter()
                    .find(|w| e[format!("{w}At")].is_string())
                    .unwrap_or("deleted");
                format!("phase {} {what} {} {}", e["phase"], e["kind"], e["id"])
            })
            .collect();
        let log = self.capa.log_text();
        let by_capa: Vec<String> = log
            .lines()
            .filter_map(|l| {
                let msg = l.split_once("] \"")?.1.split_once('"')?.0;
                let deleted = msg.starts_with("Deleted") || msg.starts_with("released");
                // The AWS id the line names (its last quoted value that looks like one).
                const IDS: [&str; 8] = [
                    "sg-",
                    "rtb-",
                    "nat-",
                    "eipalloc-",
                    "igw-",
                    "subnet-",
                    "vpc-",
                    "arn:",
                ];
                let id = l
                    .split('"')
                    .rfind(|v| IDS.iter().any(|p| v.starts_with(p)))
                    .unwrap_or("");
                deleted.then(|| format!("{msg} {id}"))
            })
            .collect();
        eprintln!("sweeper: {by_sweeper:#?}\nCAPA's controller: {by_capa:#?}");
    }

    /// Neither controller repeated an error past [`REPEATS`]; both logs were read (each has its
    /// controller's ordinary lines, so an empty or unreadable log cannot pass for a quiet one).
    pub fn assert_no_loops(&self) {
        let (capa, sweeper) = (self.capa.log_text(), self.sweeper_log_text());
        assert!(
            capa.contains("Reconciling AWSCluster"),
            "CAPA's log: {capa}"
        );
        assert!(
            sweeper.contains(" INFO "),
            "sweeper's log, plain text: {sweeper}"
        );
        assert_no_loop("CAPA's controller", &capa);
        assert_no_loop("sweeper", &sweeper);
    }

    /// Sets the owner Cluster's `spec.paused` (written at v1beta1 by CAPA's template).
    pub async fn pause(&self, paused: bool) {
        let clusters = api(
            &self.b.client,
            &self.b.ns,
            "cluster.x-k8s.io/v1beta1",
            "Cluster",
        );
        merge(&clusters, &self.b.name, json!({"spec": {"paused": paused}})).await;
    }
}

/// How often one error may repeat in either controller's log while both delete one cluster.
/// Each retries on its own schedule (CAPA: its workqueue's backoff; sweeper: its pass interval),
/// so an error that meets a resource the other has just deleted shows once or twice; past this
/// bound it is a loop.
pub const REPEATS: usize = 5;

/// The error lines of a log, each reduced to its text without timestamps, digits and ids, with
/// how often each occurs; the most frequent first. For sweeper, a warning counts: a reconcile
/// that failed and is retried is logged at WARN.
pub fn repeated_errors(log: &str) -> Vec<(usize, String)> {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for line in log.lines() {
        // klog: `E1127 19:40:01.123456 ...`; sweeper (tracing, text): `<time>  WARN ...`.
        let klog_error =
            line.starts_with('E') && line.as_bytes().get(1).is_some_and(u8::is_ascii_digit);
        if !(klog_error || line.contains(" ERROR ") || line.contains(" WARN ")) {
            continue;
        }
        let text: String = line
            .split_whitespace()
            .skip(if klog_error { 3 } else { 1 })
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .collect();
        *counts.entry(text).or_default() += 1;
    }
    let mut v: Vec<(usize, String)> = counts.into_iter().map(|(k, n)| (n, k)).collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.0));
    v
}

pub fn assert_no_loop(who: &str, log: &str) {
    let errors = repeated_errors(log);
    if let Some((n, text)) = errors.first() {
        assert!(
            *n <= REPEATS,
            "{who} repeated an error {n} times (bound {REPEATS}): {text}"
        );
    }
}
