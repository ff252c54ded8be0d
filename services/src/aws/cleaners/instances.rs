//! Phase 1: EC2 instances carrying the CAPA-owned tag. Termination is asynchronous, so a pass
//! terminates and reports "waiting" until a later pass no longer finds them (terminated instances
//! are not discovered), instead of blocking the pass.

use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, settle};
use crate::aws::discovery::tags;
use crate::aws::errors::call;
use async_trait::async_trait;

pub struct Instances;

const KIND: &str = "instance";
const LIVE_STATES: [&str; 5] = ["pending", "running", "stopping", "stopped", "shutting-down"];

#[async_trait]
impl Cleaner for Instances {
    type Detail = ();

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        10
    }
    /// CAPA's security groups (next in phase 1) cannot go while its instances use them.
    fn gates_later(&self) -> bool {
        true
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        let states: Vec<String> = LIVE_STATES.iter().map(|s| s.to_string()).collect();
        let filters = vec![
            tags::ec2_tag_filter(&tags::capa_key(ctx.cluster), tags::OWNED),
            tags::ec2_filter("instance-state-name", &states),
        ];
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = call("ec2.DescribeInstances", || {
                ctx.clients
                    .ec2
                    .describe_instances()
                    .set_filters(Some(filters.clone()))
                    .max_results(1000)
                    .set_next_token(token.clone())
                    .send()
            })
            .await
            .map_err(CleanError::discover(KIND, "DescribeInstances"))?;
            for i in page.reservations().iter().flat_map(|r| r.instances()) {
                let Some(id) = i.instance_id() else { continue };
                let state = i
                    .state()
                    .and_then(|s| s.name())
                    .map(|n| n.as_str().to_string());
                let mut t = Target::plain(id);
                if state.as_deref() == Some("shutting-down") {
                    t.blocked = Some("waiting for termination (shutting-down)".into());
                }
                out.push(t);
            }
            token = page
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.TerminateInstances", || {
            ctx.clients
                .ec2
                .terminate_instances()
                .instance_ids(&t.id)
                .send()
        })
        .await;
        let terminated = res.as_ref().ok().map(|o| {
            o.terminating_instances().iter().all(|i| {
                i.current_state().and_then(|s| s.name()).map(|n| n.as_str()) == Some("terminated")
            })
        });
        match (settle(res, KIND, &t.id, "TerminateInstances")?, terminated) {
            (Outcome::Deleted, Some(false)) => Ok(Outcome::Remaining(
                "terminating; waiting until terminated".into(),
            )),
            (o, _) => Ok(o),
        }
    }
}
