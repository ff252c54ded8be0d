//! The cleaners: every resource kind is one module implementing [`Cleaner`], owning everything
//! about its kind. What a kind is, where it runs and what it may call is its `const`
//! [`Descriptor`] (service, kind, phase, order, task, IAM actions); the trait's methods are the
//! executor: find (`claim`, `describe_owned`, `discover`) and delete. `phases::registry` lists
//! the cleaners once; the phases, the task names and the IAM policy's test derive from their
//! descriptors.

pub mod addresses;
pub mod bootstrap_data;
pub mod dns_records;
pub mod guardduty;
pub mod instance_profiles;
pub mod instance_state;
pub mod instances;
pub mod internet_gateways;
pub mod launch_templates;
pub mod load_balancers;
pub mod log_groups;
pub mod nat_gateways;
pub mod network_interfaces;
pub mod oidc_providers;
pub mod route_tables;
pub mod security_groups;
pub mod shared_tags;
pub mod snapshots;
pub mod subnets;
pub mod target_groups;
pub mod volumes;
pub mod vpc_blockers;
pub mod vpc_endpoints;
pub mod vpc_owned;
pub mod vpcs;

pub use crate::errors::CleanError;

use crate::errors::{ApiFailure, ErrorClass};
use crate::locate::inventory::Inventory;
use crate::locate::tagging::TaggedResource;
use crate::locate::view::PassView;
use crate::model::{AwsClients, Failure, GcTask, Phase};
use crate::policy::{Ownership, Verdict};
use async_trait::async_trait;
use std::fmt;

/// How many per-candidate reads (a Get per IAM profile, ...) a cleaner's locate step keeps in
/// flight: the reads of one pass are few and cheap, the round trips are what cost.
pub(crate) const READ_CONCURRENCY: usize = 8;

/// What every cleaner may look at during a pass.
pub struct CleanCtx<'a> {
    pub clients: &'a AwsClients,
    /// The name the cloud provider and the cluster's controllers tag with
    /// (`kubernetes.io/cluster/<name>`, the LB controller's, the VPC CNI's, the EBS CSI driver's):
    /// the EKS cluster name on EKS, the Cluster API Cluster's name otherwise.
    pub cluster: &'a str,
    /// The Cluster API Cluster's name: CAPA tags everything it creates for the cluster
    /// `sigs.k8s.io/cluster-api-provider-aws/cluster/<name>` with it, on EKS too.
    pub capa_cluster: &'a str,
    /// Phase 2's one locate step (tagging API or describe calls); empty in phases 1 and 3.
    pub inventory: &'a Inventory,
    /// Phase 3: the CAPA-managed VPCs of the cluster. Empty means nothing of the network is ours.
    pub vpc_ids: &'a [String],
    /// Phase 3: the cluster's bring-your-own VPCs (its object's `spec.network.vpc.id`, not
    /// CAPA-tagged). Nothing in them is ever deleted; only the `shared-tag` task looks at them.
    pub byo_vpcs: &'a [String],
    /// Phase 2: the VPCs the cluster lives in (its object's, the CAPA-tagged ones), where its
    /// resources are looked for first. Nothing is deleted for being in one of them.
    pub cluster_vpcs: &'a [String],
    /// Snapshot EBS volumes before deleting them (`--external-ebs-snapshot`).
    pub snapshot_volumes: bool,
    /// EKS clusters only: what the control plane recorded (see `PassRequest::eks`).
    pub eks: Option<&'a crate::model::EksFacts>,
    /// Phase 2: the tasks this pass runs, the selection resolved (opt-ins only when named), so
    /// a cleaner can tell what another deletes in the same pass. Empty in phases 1 and 3.
    pub tasks: &'a [GcTask],
    /// Phase 2: the external-dns owner id the cluster names (see `PassRequest`); `None`
    /// means external-dns records are only reported.
    pub external_dns_owner: Option<&'a str>,
    /// Phase 2: the bucket of CAPA's bootstrap data the cluster's object names
    /// (`spec.s3Bucket.name`, see `PassRequest`); the only bucket ever read. `None`: none named.
    pub s3_bucket: Option<&'a str>,
    /// The pass's shared listings (one per pass, across its phases): a list several steps ask
    /// alike is described once, until a delete of its kind (see `locate::view`).
    pub view: &'a PassView,
    /// `--alternative-discovery`: the tagging API is not trusted, so every locate step uses
    /// Describe calls (phase 1's load balancers and target groups, phase 2's inventory).
    pub alternative_discovery: bool,
}

impl CleanCtx<'_> {
    /// The tag key CAPA marks the cluster's own resources with.
    pub fn capa_key(&self) -> String {
        crate::locate::tags::capa_key(self.capa_cluster)
    }
}

/// One resource a cleaner found, with `detail`: the facts locating gathered so `delete` needs
/// no extra Describe call. Each cleaner chooses its own detail type (`()` when the id is all the
/// delete call needs).
#[derive(Clone, Debug, PartialEq)]
pub struct Target<D = ()> {
    /// What the report shows: the ARN when there is one, else the AWS id.
    pub id: String,
    /// Set when locating already knows it cannot be deleted yet (e.g. a target group still
    /// attached to a load balancer): reported as remaining without calling AWS.
    pub blocked: Option<String>,
    pub detail: D,
    /// The tags the cleaner's own Describe call read, for the audit trail (phase 2's come from
    /// the inventory instead).
    pub tags: Option<std::collections::BTreeMap<String, String>>,
    /// Report only: found, never deleted, and never holding the phase (the reason is reported
    /// in the phase's `kept`). For kinds sweeper reports before it may delete them.
    pub kept: Option<String>,
}

impl<D> Target<D> {
    pub fn new(id: impl Into<String>, detail: D) -> Self {
        Target {
            id: id.into(),
            blocked: None,
            detail,
            tags: None,
            kept: None,
        }
    }

    /// Marks the target report-only (see [`Target::kept`]).
    pub fn kept(mut self, why: impl Into<String>) -> Self {
        self.kept = Some(why.into());
        self
    }

    /// The tags a Describe call returned with the resource.
    pub fn with_tags<'a>(mut self, tags: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        self.tags = Some(
            tags.into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        self
    }
}

impl<D> Target<D> {
    /// The target as a rule's verdict leaves it: deleted as found, blocked (remaining without a
    /// call), or not a target at all. Here, not on `Verdict`: the rules know nothing of targets.
    pub fn judged(mut self, verdict: Verdict) -> Option<Self> {
        match verdict {
            Verdict::Delete => Some(self),
            Verdict::Blocked(why) => {
                self.blocked = Some(why.into_owned());
                Some(self)
            }
            Verdict::Untag | Verdict::Keep(_) | Verdict::Foreign(_) => None,
        }
    }
}

impl Target {
    /// A target whose id is all its delete needs.
    pub fn plain(id: impl Into<String>) -> Self {
        Target::new(id, ())
    }
}

/// What happened to one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Deleted,
    /// Deleted, with something the user must be told (e.g. the snapshot taken first): reported in
    /// the phase's `notes` and as an Event.
    DeletedWith(String),
    /// Not deleted: the cluster's tag of this key was removed (see [`Descriptor::untags`]).
    Untagged(String),
    /// The inner outcome, after changes to other resources that stay (a rule revoked in another
    /// security group): each is audited whatever became of the target.
    Also(Vec<crate::model::Audited>, Box<Outcome>),
    /// Already gone (NotFound): as good as deleted.
    Gone,
    /// Deletion started or still blocked; the reason says what we wait for (its kind: a failed
    /// call's, or `Dependency` for a wait). Keeps the phase open.
    Remaining(Failure),
    /// An asynchronous delete AWS accepted (a NAT gateway, a VPC endpoint): audited now, as it is
    /// this pass that deleted it (the pass that later finds it gone records nothing); keeps the
    /// phase open, as [`Outcome::Remaining`] with the reason, until it is gone.
    Requested(Failure),
    /// Not deleted, and an error of the pass that no call returned: calls AWS answered without
    /// doing what they asked (a revoke that revoked nothing). Reported in the phase's `errors`.
    Failed(Failure),
}

/// Maps the result of a delete call: NotFound is done, transient errors that outlived the retries
/// leave the resource remaining with the reason, anything else is an error naming the resource.
pub fn settle<T>(
    res: Result<T, ApiFailure>,
    kind: &'static str,
    id: &str,
    op: &'static str,
) -> Result<Outcome, CleanError> {
    match res {
        Ok(_) => Ok(Outcome::Deleted),
        Err(f) => match f.class {
            ErrorClass::NotFound => Ok(Outcome::Gone),
            ErrorClass::Transient => Ok(Outcome::Remaining(Failure {
                op: Some(op),
                ..Failure::new(f.kind, format!("{op}: {f}"))
            })),
            ErrorClass::Fatal => Err(CleanError::Api {
                kind,
                id: id.to_string(),
                op,
                source: f,
            }),
        },
    }
}

/// For kinds whose delete is only accepted, not finished (NAT gateways, VPC endpoints): a request
/// that went through leaves the resource remaining, so what depends on it waits for a later pass
/// to see it gone.
pub(crate) fn requested(o: Outcome) -> Outcome {
    match o {
        Outcome::Deleted => Outcome::Requested(Failure::waiting(
            "deletion requested; waiting until deleted",
        )),
        o => o,
    }
}

/// For [`Cleaner::claim`]: whether `r` is a `service`/`resource type` ARN; if so, `keep` records
/// it in the kind's own share `S` of the inventory.
pub(crate) fn claim_into<S: std::any::Any + Send + Sync + Default>(
    r: &TaggedResource,
    inv: &mut Inventory,
    (service, ty): (&str, &str),
    keep: impl FnOnce(&mut S, &TaggedResource),
) -> bool {
    if (r.arn.service.as_str(), r.arn.resource_type()) != (service, ty) {
        return false;
    }
    keep(inv.share_mut::<S>(), r);
    true
}

/// What a cleaner is, written once as a `const` in its module: everything about a kind that is
/// not a call. The phase runner orders by it, the registry selects by it, the report names by it,
/// and the IAM policy's test reads what each kind may call from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// The AWS service in ARNs: `elasticloadbalancing`, `ec2`.
    pub service: &'static str,
    /// The resource kind: `load-balancer`, `target-group`, `security-group`, ...
    pub kind: &'static str,
    /// The phase the cleaner runs in.
    pub phase: Phase,
    /// Cleaners of a phase run in ascending order; equal orders run concurrently.
    pub order: u32,
    /// The phase-2 task selection entry that enables this cleaner (`None`: always runs).
    pub task: Option<GcTask>,
    /// True for "delete, then wait until deleted" kinds: while such a cleaner leaves anything
    /// remaining, the later cleaners of its phase wait for the next pass (AWS would refuse them
    /// anyway, and an emulator that doesn't could orphan what depends on this kind).
    pub gates_later: bool,
    /// False for a kind whose leftovers must not hold up the next phase, because what keeps
    /// them alive may be the next phase's to delete (CAPA's security groups, held by the
    /// cloud provider's network interfaces). They still hold the phase after it, and `done`.
    pub holds_next_phase: bool,
    /// The IAM actions the cleaner's calls need, its locate step's included (`ec2:DescribeVpcs`):
    /// `deploy/iam/sweeper-policy.json` grants exactly these and the pass's own
    /// (`phases::PASS_IAM_ACTIONS`), which a test checks.
    pub iam_actions: &'static [&'static str],
    /// True for a kind that never deletes: its "delete" removes the cluster's tag and the
    /// resource stays (`shared-tag`). A dry run plans it as an untag, not a delete.
    pub untags: bool,
}

impl Descriptor {
    /// A kind with no task, not gating, holding the next phase, calling nothing: the usual
    /// case, completed with `Descriptor { task: .., iam_actions: .., ..Descriptor::new(..) }`.
    pub const fn new(service: &'static str, kind: &'static str, phase: Phase, order: u32) -> Self {
        Descriptor {
            service,
            kind,
            phase,
            order,
            task: None,
            gates_later: false,
            holds_next_phase: true,
            iam_actions: &[],
            untags: false,
        }
    }
}

/// One resource kind's executor: how it finds its resources and deletes one. Everything else
/// about it is its [`Descriptor`].
#[async_trait]
pub trait Cleaner: Send + Sync {
    /// What locating records per target for `delete` (see [`Target`]).
    type Detail: Clone + fmt::Debug + Send + Sync;

    /// The kind's `const` descriptor. A method rather than an associated const because three
    /// kinds (instances, load balancers, security groups) run in two phases with one executor:
    /// the value picks its phase's descriptor.
    fn descriptor(&self) -> &'static Descriptor;

    /// Phase 2, tagging-API locating: if `r` (owned by the cluster, not by CAPA) is of this
    /// kind, record it in the inventory (or an error there for one this kind cannot handle) and
    /// return true. Phases 1 and 3 never call it.
    fn claim(&self, _r: &TaggedResource, _inv: &mut Inventory) -> bool {
        false
    }
    /// Phase 2, alternative discovery: record this kind's resources that `own` accepts, found
    /// through Describe calls instead of the tagging API. A failure fails the whole locate step.
    async fn describe_owned(
        &self,
        _c: &AwsClients,
        _own: &Ownership,
        _inv: &mut Inventory,
    ) -> Result<(), CleanError> {
        Ok(())
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError>;
    /// For a kind whose targets must go together in one request (Route53's change batch: a
    /// record and the TXT record that owns it): deletes every one of `targets` (none blocked)
    /// and returns one outcome per target, in their order. `None`, the default: each target is
    /// deleted on its own by [`Cleaner::delete`], concurrently.
    async fn delete_together(
        &self,
        _ctx: &CleanCtx<'_>,
        _targets: &[Target<Self::Detail>],
    ) -> Option<Vec<Result<Outcome, CleanError>>> {
        None
    }
    async fn delete(
        &self,
        ctx: &CleanCtx<'_>,
        t: &Target<Self::Detail>,
    ) -> Result<Outcome, CleanError>;
    /// What deleting a target with this detail changes besides it, kept (the rules of other
    /// security groups naming it, revoked first): a dry run's plan lists them. None by default.
    fn also_changes(&self, _detail: &Self::Detail) -> Vec<crate::model::Audited> {
        Vec::new()
    }
}

/// Phase 1's gate for an EC2 `kind` CAPA tags (`instance`, `security-group`): whether its
/// cleaner must describe, as the pass's one tagging query says (`locate::capa_tagged::holds`).
/// Always with `--alternative-discovery`, which does not trust the tagging API.
pub(crate) async fn capa_may_hold(
    ctx: &CleanCtx<'_>,
    kind: &'static str,
) -> Result<bool, CleanError> {
    if ctx.alternative_discovery {
        return Ok(true);
    }
    let found = ctx
        .view
        .capa_tagged(ctx.clients, &ctx.capa_key(), kind)
        .await?;
    Ok(crate::locate::capa_tagged::holds(&found, "ec2", kind))
}

#[cfg(test)]
/// Unit tests' pass context for `mocked::CLUSTER` (here, not in `mocked`, which stays below the
/// cleaners and locating it serves), nothing else set: tests override fields with
/// `CleanCtx { vpc_ids: &vpcs, ..test_ctx(&c, &inv) }`.
pub(crate) fn test_ctx<'a>(clients: &'a AwsClients, inventory: &'a Inventory) -> CleanCtx<'a> {
    CleanCtx {
        clients,
        cluster: crate::mocked::CLUSTER,
        capa_cluster: crate::mocked::CLUSTER,
        inventory,
        vpc_ids: &[],
        byo_vpcs: &[],
        cluster_vpcs: &[],
        snapshot_volumes: false,
        eks: None,
        tasks: &[],
        external_dns_owner: None,
        s3_bucket: None,
        // Leaked: a test's context outlives nothing but the test.
        view: Box::leak(Box::default()),
        alternative_discovery: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(class: ErrorClass) -> Result<(), ApiFailure> {
        Err(ApiFailure {
            class,
            code: Some("X".into()),
            message: "mocked".into(),
            kind: crate::errors::FailureKind::Other,
        })
    }

    #[test]
    fn settle_maps_not_found_to_gone_transient_to_remaining_and_fatal_to_a_named_error() {
        let s = |r| settle(r, "vpc", "vpc-1", "DeleteVpc");
        assert_eq!(s(Ok(())).unwrap(), Outcome::Deleted);
        assert_eq!(s(failed(ErrorClass::NotFound)).unwrap(), Outcome::Gone);
        assert!(matches!(
            s(failed(ErrorClass::Transient)).unwrap(),
            Outcome::Remaining(_)
        ));
        let err = s(failed(ErrorClass::Fatal)).unwrap_err();
        assert!(err.to_string().contains("vpc vpc-1: DeleteVpc"), "{err}");
    }

    #[test]
    fn a_resource_left_remaining_carries_its_calls_kind_and_the_same_words() {
        use crate::errors::FailureKind;
        let throttled = Err::<(), _>(ApiFailure {
            class: ErrorClass::Transient,
            code: Some("RequestLimitExceeded".into()),
            message: "mocked".into(),
            kind: FailureKind::Throttled,
        });
        match settle(throttled, "vpc", "vpc-1", "DeleteVpc").unwrap() {
            Outcome::Remaining(why) => {
                assert_eq!(
                    (why.kind, why.op),
                    (FailureKind::Throttled, Some("DeleteVpc"))
                );
                assert_eq!(why.to_string(), "DeleteVpc: RequestLimitExceeded: mocked");
            }
            o => panic!("{o:?}"),
        }
        match requested(Outcome::Deleted) {
            Outcome::Requested(why) => assert_eq!(why.kind, FailureKind::Dependency),
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn an_accepted_asynchronous_delete_is_requested_and_stays_open() {
        assert!(matches!(requested(Outcome::Deleted), Outcome::Requested(_)));
        assert_eq!(requested(Outcome::Gone), Outcome::Gone);
    }
}
