//! The public types of a teardown pass: what the controller asks for and what it gets back.

use crate::aws::gate::Gate;
use aws_config::SdkConfig;
use std::fmt;
use std::str::FromStr;

/// One client per AWS service the teardown talks to.
#[derive(Clone, Debug)]
pub struct AwsClients {
    pub ec2: aws_sdk_ec2::Client,
    pub elb: aws_sdk_elasticloadbalancing::Client,
    pub elbv2: aws_sdk_elasticloadbalancingv2::Client,
    pub tagging: aws_sdk_resourcegroupstagging::Client,
}

impl AwsClients {
    /// Clients with the SDK's own retries turned off: every call already goes through
    /// `errors::call` (short backoff, then "remaining" and the next pass), and stacking the SDK's
    /// standard retry (up to 20 s backoff) under it would hold a pass for minutes when throttled.
    pub fn new(sdk: &SdkConfig) -> Self {
        Self::build(sdk, None)
    }

    /// Like [`AwsClients::new`], with every operation refused while `gate` is closed (leader
    /// election: a replica that lost its lease makes no AWS call).
    pub fn gated(sdk: &SdkConfig, gate: Gate) -> Self {
        Self::build(sdk, Some(gate))
    }

    fn build(sdk: &SdkConfig, gate: Option<Gate>) -> Self {
        let retry = aws_config::retry::RetryConfig::disabled();
        // Each service has its own config builder type, hence the macro rather than a function.
        macro_rules! client {
            ($sdk_crate:ident) => {{
                let mut b = $sdk_crate::config::Builder::from(sdk).retry_config(retry.clone());
                if let Some(g) = &gate {
                    b = b.interceptor(g.clone());
                }
                $sdk_crate::Client::from_conf(b.build())
            }};
        }
        AwsClients {
            ec2: client!(aws_sdk_ec2),
            elb: client!(aws_sdk_elasticloadbalancing),
            elbv2: client!(aws_sdk_elasticloadbalancingv2),
            tagging: client!(aws_sdk_resourcegroupstagging),
        }
    }
}

/// A phase-2 cleaner family a cluster may select.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum GcTask {
    LoadBalancer,
    TargetGroup,
    SecurityGroup,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown GC task {0:?}: expected one of load-balancer, target-group, security-group")]
pub struct UnknownGcTask(pub String);

impl FromStr for GcTask {
    type Err = UnknownGcTask;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "load-balancer" => Ok(GcTask::LoadBalancer),
            "target-group" => Ok(GcTask::TargetGroup),
            "security-group" => Ok(GcTask::SecurityGroup),
            other => Err(UnknownGcTask(other.to_string())),
        }
    }
}

impl fmt::Display for GcTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GcTask::LoadBalancer => "load-balancer",
            GcTask::TargetGroup => "target-group",
            GcTask::SecurityGroup => "security-group",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TeardownRequest {
    pub cluster_name: String,
    /// Phase 2 (resources the cloud provider created for the cluster). `false` opts out; phases
    /// 1 and 3 still run.
    pub external_gc: bool,
    /// Phase-2 cleaner selection; `None` means all.
    pub tasks: Option<Vec<GcTask>>,
    /// Discover everything, delete nothing; the report's `planned` lists what would go.
    pub dry_run: bool,
    /// Phase-2 discovery through tag-filtered Describe calls instead of the tagging API.
    pub alternative_discovery: bool,
}

impl TeardownRequest {
    /// All phases, all tasks, tagging-API discovery, for real.
    pub fn new(cluster_name: impl Into<String>) -> Self {
        TeardownRequest {
            cluster_name: cluster_name.into(),
            external_gc: true,
            tasks: None,
            dry_run: false,
            alternative_discovery: false,
        }
    }
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

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PhaseReport {
    pub phase: u8,
    /// False when an earlier phase still had work, so this one was not run.
    pub started: bool,
    pub deleted: Vec<ResourceRef>,
    pub remaining: Vec<(ResourceRef, String)>,
    pub errors: Vec<String>,
    /// Dry run: what would be deleted.
    pub planned: Vec<ResourceRef>,
}

impl PhaseReport {
    pub fn started(phase: u8) -> Self {
        PhaseReport {
            phase,
            started: true,
            ..Default::default()
        }
    }

    pub fn not_started(phase: u8) -> Self {
        PhaseReport {
            phase,
            ..Default::default()
        }
    }

    /// Nothing left and nothing failed: the next phase may start.
    pub fn is_clear(&self) -> bool {
        self.started && self.remaining.is_empty() && self.errors.is_empty()
    }

    pub fn merge(&mut self, other: PhaseReport) {
        self.deleted.extend(other.deleted);
        self.remaining.extend(other.remaining);
        self.errors.extend(other.errors);
        self.planned.extend(other.planned);
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TeardownReport {
    /// All three phases ran, left nothing and reported no error.
    pub done: bool,
    pub phases: Vec<PhaseReport>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_tasks_round_trip() {
        for t in [
            GcTask::LoadBalancer,
            GcTask::TargetGroup,
            GcTask::SecurityGroup,
        ] {
            assert_eq!(t.to_string().parse::<GcTask>(), Ok(t));
        }
    }

    #[test]
    fn unknown_or_empty_gc_task_names_the_value() {
        let e = "load-balancers".parse::<GcTask>().unwrap_err();
        assert!(e.to_string().contains("\"load-balancers\""), "{e}");
        let e = "".parse::<GcTask>().unwrap_err();
        assert!(e.to_string().contains("\"\""), "{e}");
    }
}
