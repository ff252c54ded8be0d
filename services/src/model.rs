//! The vocabulary every layer shares: the clients, the phase-2 task names, how a resource and a
//! phase's outcome are reported. Depends on nothing above it, so locating, the cleaners and the
//! phase runner can all use it without importing each other.

use crate::errors::CleanError;
pub use crate::errors::FailureKind;
use crate::fence::AwsFence;
use aws_config::SdkConfig;
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use aws_smithy_runtime_api::client::interceptors::SharedInterceptor;
use std::fmt;

/// One client per AWS service the teardown talks to.
#[derive(Clone, Debug)]
pub struct AwsClients {
    pub ec2: aws_sdk_ec2::Client,
    pub elb: aws_sdk_elasticloadbalancing::Client,
    pub elbv2: aws_sdk_elasticloadbalancingv2::Client,
    pub tagging: aws_sdk_resourcegroupstagging::Client,
    /// IAM is global, but a session's client acts in its account (Karpenter's instance profiles).
    pub iam: aws_sdk_iam::Client,
    /// EKS is asked, never changed: whether a cluster is gone and which OIDC issuer a live one
    /// reports (the EKS-made kinds are deleted only once EKS says so).
    pub eks: aws_sdk_eks::Client,
    /// The EKS control-plane log group (opt-in task `eks-log-group`).
    pub logs: aws_sdk_cloudwatchlogs::Client,
    /// external-dns records pointing at the cluster's load balancers (reported).
    pub route53: aws_sdk_route53::Client,
    /// CAPA's EventBridgeInstanceState queue (task `instance-state-queue`).
    pub sqs: aws_sdk_sqs::Client,
    /// CAPA's EventBridgeInstanceState rule (task `instance-state-queue`).
    pub events: aws_sdk_eventbridge::Client,
    /// CAPA's bootstrap data in Secrets Manager (task `bootstrap-data`).
    pub secrets: aws_sdk_secretsmanager::Client,
    /// CAPA's bootstrap data in SSM Parameter Store (task `bootstrap-data`).
    pub ssm: aws_sdk_ssm::Client,
    /// The bucket of CAPA's bootstrap data the cluster names (task `bootstrap-data-s3`: read,
    /// never changed).
    pub s3: aws_sdk_s3::Client,
    /// Where a cluster's session acts: phase 2 ignores (and reports) anything discovered whose
    /// ARN names another partition, region or account. `None` for clients not built for a
    /// cluster (tests' fixtures).
    pub scope: Option<crate::scope::Scope>,
    /// The session's account and region throttle (see `throttle`).
    pub throttle: Option<std::sync::Arc<crate::throttle::Throttle>>,
    /// The account's shared IAM listings (see `listings`); `None`: every pass lists.
    pub listings: Option<std::sync::Arc<crate::listings::Listings>>,
}

impl AwsClients {
    /// Clients with the SDK's own retries turned off: every call already goes through
    /// `errors::call` (short backoff, then "remaining" and the next pass), and stacking the SDK's
    /// standard retry (up to 20 s backoff) under it would hold a pass for minutes when throttled.
    pub fn new(sdk: &SdkConfig) -> Self {
        Self::build(sdk, None)
    }

    /// Like [`AwsClients::new`], with every operation refused while `fence` is closed (leader
    /// election: a replica that lost its lease makes no AWS call).
    pub fn fenced(sdk: &SdkConfig, fence: AwsFence) -> Self {
        Self::build(sdk, Some(fence))
    }

    /// A cluster session's clients: fenced by `fence`, backing off with its account and region.
    pub fn for_session(
        sdk: &SdkConfig,
        fence: Option<AwsFence>,
        throttle: std::sync::Arc<crate::throttle::Throttle>,
    ) -> Self {
        AwsClients {
            throttle: Some(throttle),
            ..Self::build(sdk, fence)
        }
    }

    /// The same clients, sharing the account's IAM listings with its other sessions.
    pub fn with_listings(mut self, listings: std::sync::Arc<crate::listings::Listings>) -> Self {
        self.listings = Some(listings);
        self
    }

    /// The account-wide listing `what`: the account's shared one when the session has them,
    /// else made by `fetch` now.
    pub async fn listed<F, Fut>(
        &self,
        what: &'static str,
        fetch: F,
    ) -> Result<std::sync::Arc<Vec<String>>, crate::errors::CleanError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Vec<String>, crate::errors::CleanError>>,
    {
        match &self.listings {
            Some(l) => l.get(what, fetch).await,
            None => fetch().await.map(std::sync::Arc::new),
        }
    }

    /// `entry` of the account-wide listing `what` was deleted (`listings::Listings::gone`).
    pub async fn unlisted(&self, what: &'static str, entry: &str) {
        if let Some(l) = &self.listings {
            l.gone(what, entry).await;
        }
    }

    /// The same clients, checking discovered ARNs against `scope`.
    pub fn with_scope(mut self, scope: crate::scope::Scope) -> Self {
        self.scope = Some(scope);
        self
    }

    fn build(sdk: &SdkConfig, fence: Option<AwsFence>) -> Self {
        let interceptors: Vec<SharedInterceptor> =
            fence.into_iter().map(SharedInterceptor::new).collect();
        Self::assemble(sdk, &interceptors, None)
    }

    /// One client per service from `sdk`, with the SDK's retries off (see [`AwsClients::new`]),
    /// `interceptors` on every one of them, and `http` instead of `sdk`'s HTTP client when given.
    /// The one place the clients are put together: production (the fence), the unit tests'
    /// mocks and the test recorder all come through here, so a new service is one line.
    pub fn assemble(
        sdk: &SdkConfig,
        interceptors: &[SharedInterceptor],
        http: Option<SharedHttpClient>,
    ) -> Self {
        let retry = aws_config::retry::RetryConfig::disabled();
        // Each service has its own config builder type, hence the macro rather than a function.
        // After the crate, a service's own settings on top of the shared ones (`.setting(x)`).
        macro_rules! client {
            ($sdk_crate:ident $($own:tt)*) => {{
                let mut b = $sdk_crate::config::Builder::from(sdk)
                    .retry_config(retry.clone())
                    $($own)*;
                for i in interceptors {
                    b.push_interceptor(i.clone());
                }
                if let Some(h) = &http {
                    b.set_http_client(Some(h.clone()));
                }
                $sdk_crate::Client::from_conf(b.build())
            }};
        }
        // S3 addresses a bucket as a host name (`<bucket>.s3.<region>.amazonaws.com`); behind an
        // endpoint of the user's own (LocalStack, an S3-compatible store) no such name resolves,
        // so there the bucket goes in the path.
        let path_style = sdk.endpoint_url().is_some();
        AwsClients {
            ec2: client!(aws_sdk_ec2),
            elb: client!(aws_sdk_elasticloadbalancing),
            elbv2: client!(aws_sdk_elasticloadbalancingv2),
            tagging: client!(aws_sdk_resourcegroupstagging),
            iam: client!(aws_sdk_iam),
            eks: client!(aws_sdk_eks),
            logs: client!(aws_sdk_cloudwatchlogs),
            route53: client!(aws_sdk_route53),
            sqs: client!(aws_sdk_sqs),
            events: client!(aws_sdk_eventbridge),
            secrets: client!(aws_sdk_secretsmanager),
            ssm: client!(aws_sdk_ssm),
            s3: client!(aws_sdk_s3.force_path_style(path_style)),
            scope: None,
            throttle: None,
            listings: None,
        }
    }
}

/// What the controller read from an AWSManagedControlPlane before the teardown started, for
/// the EKS-made kinds (the EKS cluster's name is `cluster_name`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EksFacts {
    /// The IRSA OIDC issuer CAPA recorded for the cluster (from `status.oidcProvider`), without
    /// its scheme: `oidc.eks.<region>.amazonaws.com/id/<ID>`. `None`: CAPA recorded none
    /// (`associateOIDCProvider` off, or the status was lost), and no provider is deleted.
    pub oidc_issuer: Option<String>,
}

/// A phase-2 cleaner family a cluster may select, by the name its annotation uses. Not a closed
/// enum: each phase-2 cleaner declares its own (`GcTask::new`), and parsing accepts exactly the
/// names the registered cleaners declare (see `phases::registry`), so a new kind brings its task
/// with it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct GcTask(&'static str);

impl GcTask {
    /// Only cleaners name tasks; everyone else parses one, so an unknown name is always an error.
    pub(crate) const fn new(name: &'static str) -> Self {
        GcTask(name)
    }

    pub fn name(&self) -> &'static str {
        self.0
    }
}

impl fmt::Display for GcTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("unknown GC task {given:?}: expected one of {expected}")]
pub struct UnknownGcTask {
    pub given: String,
    /// The known task names, comma-separated.
    pub expected: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceRef {
    pub service: String,
    pub kind: String,
    /// ARN, or the AWS id where the resource has no ARN at hand.
    pub id: String,
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} {}", self.service, self.kind, self.id)
    }
}

/// Why a call failed, or why a resource remains, as a pass reports it: the [`FailureKind`] every
/// decision reads, and the text users read (conditions, Events, `sweeper status`, `gc plan`),
/// which is exactly its `Display` and is never matched on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    /// The resource it is about, when it is about one (not a failed locating).
    pub resource: Option<ResourceRef>,
    /// The AWS operation that failed (`DeleteVpc`), when one did.
    pub op: Option<&'static str>,
    /// What users read.
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            resource: None,
            op: None,
            message: message.into(),
        }
    }

    /// A resource that waits on something (an attachment, a deletion under way), not on a
    /// failed call.
    pub fn waiting(message: impl Into<String>) -> Self {
        Failure::new(FailureKind::Dependency, message)
    }

    /// A cleaner's or a locate step's error, with its kind and operation.
    pub fn of(e: &CleanError) -> Self {
        Failure {
            op: Some(e.op()),
            ..Failure::new(e.kind(), e.to_string())
        }
    }

    /// About `resource`.
    pub fn on(mut self, resource: ResourceRef) -> Self {
        self.resource = Some(resource);
        self
    }
}

/// Text of no known cause: [`FailureKind::Other`].
impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::new(FailureKind::Other, message)
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Failure::new(FailureKind::Other, message)
    }
}

/// Exactly the message: what users saw when reports carried strings.
impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The three phases of an external teardown, in the order they run (DESIGN.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// 1: what CAPA owns that is not network: instances, the API-server load balancer, CAPA's
    /// security groups. (The default only so a `PhaseReport` has one.)
    #[default]
    CapaOwned,
    /// 2, the tagged phase: what the cloud provider, the controllers and node provisioners
    /// created, found by the cluster's owned tag.
    Tagged,
    /// 3: the CAPA-managed network, only when the VPC is CAPA's.
    Network,
}

impl Phase {
    /// Its number, 1 to 3, as reports, logs and audit records show it.
    pub fn number(self) -> u8 {
        match self {
            Phase::CapaOwned => 1,
            Phase::Tagged => 2,
            Phase::Network => 3,
        }
    }

    /// What it deletes, in a few words (`sweeper status`).
    pub fn name(self) -> &'static str {
        match self {
            Phase::CapaOwned => "CAPA-owned non-network",
            // The words users have read since phase 2 was named "external" (status, tests).
            Phase::Tagged => "external resources",
            Phase::Network => "CAPA-owned network",
        }
    }
}

/// The number: "phase 2".
impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number())
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PhaseReport {
    pub phase: Phase,
    /// False when an earlier phase still had work, so this one was not run.
    pub started: bool,
    pub deleted: Vec<ResourceRef>,
    /// Resources not deleted yet, with why (the kind says whether a call failed or it waits).
    pub remaining: Vec<(ResourceRef, Failure)>,
    pub errors: Vec<Failure>,
    /// Dry run: what would be deleted.
    pub planned: Vec<ResourceRef>,
    /// Phase 3: resources the cluster does not own that keep its VPC from being deleted, with
    /// the VPC each one blocks. Never deleted; the phase waits until they are gone.
    pub blockers: Vec<(ResourceRef, String)>,
    /// What deletes left the user to know about (e.g. the snapshot a volume was kept in).
    pub notes: Vec<String>,
    /// Every resource deleted, with what locating knew of it: the audit trail the service writes.
    pub audit: Vec<Audited>,
    /// Resources locating returned whose ARN names another partition, region or account than
    /// the session's, with why: never the cluster's, so ignored (never deleted) and counted.
    pub foreign: Vec<String>,
    /// Found and left alone, with why: what the user must know of but sweeper does not delete
    /// (external-dns records of the cluster's load balancers). Never holds the phase.
    pub kept: Vec<(ResourceRef, String)>,
    /// Resources that stay but lost the cluster's tag (a bring-your-own network's `shared`
    /// tag), with the tag key removed. Never deleted.
    pub untagged: Vec<(ResourceRef, String)>,
    /// Dry run: resources that would be changed and kept (a tag removed, a rule revoked), with
    /// what would be done; apart from `planned` (deletes).
    pub planned_changes: Vec<(ResourceRef, AuditAction)>,
}

/// What sweeper did to an audited resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AuditAction {
    /// Deleted.
    #[default]
    Deleted,
    /// Kept, with the tag of this key removed (a bring-your-own network's `shared` tag).
    Untagged { key: String },
    /// Kept, with one rule revoked because it named a security group sweeper deletes: the
    /// resource is the group that held the rule; `rule` says what `AuthorizeSecurityGroupIngress`
    /// / `Egress` needs to put it back.
    Revoked { rule: String },
}

/// One resource sweeper changed (deleted, untagged, a rule revoked in it) as the audit trail
/// records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audited {
    pub resource: ResourceRef,
    pub action: AuditAction,
    /// The cleaner's describe facts (`Debug` of its target detail), and any note of the delete.
    pub detail: String,
    /// Its tags, as locating read them (the tagging API's, or the Describe call's). `None`: the
    /// locating that found it did not read tags (e.g. a VPC id taken from the cluster object).
    pub tags: Option<std::collections::BTreeMap<String, String>>,
}

impl PhaseReport {
    pub fn started(phase: Phase) -> Self {
        PhaseReport {
            phase,
            started: true,
            ..Default::default()
        }
    }

    pub fn not_started(phase: Phase) -> Self {
        PhaseReport {
            phase,
            ..Default::default()
        }
    }

    /// Nothing left and nothing failed: the next phase may start.
    pub fn is_clear(&self) -> bool {
        self.started
            && self.remaining.is_empty()
            && self.errors.is_empty()
            && self.blockers.is_empty()
    }

    /// Every failure the phase reports: its errors, then why each remaining resource remains.
    pub fn failures(&self) -> impl Iterator<Item = &Failure> {
        self.errors
            .iter()
            .chain(self.remaining.iter().map(|(_, why)| why))
    }

    pub fn merge(&mut self, other: PhaseReport) {
        self.deleted.extend(other.deleted);
        self.remaining.extend(other.remaining);
        self.errors.extend(other.errors);
        self.planned.extend(other.planned);
        self.blockers.extend(other.blockers);
        self.notes.extend(other.notes);
        self.audit.extend(other.audit);
        self.foreign.extend(other.foreign);
        self.kept.extend(other.kept);
        self.untagged.extend(other.untagged);
        self.planned_changes.extend(other.planned_changes);
    }
}

#[cfg(test)]
impl AwsClients {
    /// Clients for unit tests: IAM and EKS as given (aws-smithy-mocks clients); every other
    /// client points at a closed port and must not be called.
    pub(crate) fn mocked(iam: aws_sdk_iam::Client, eks: aws_sdk_eks::Client) -> Self {
        let sdk = SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .build();
        AwsClients {
            iam,
            eks,
            ..AwsClients::new(&sdk)
        }
    }
}
