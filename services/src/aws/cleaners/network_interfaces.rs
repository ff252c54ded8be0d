//! Detached (`available`) network interfaces in the cluster's security groups: left behind by
//! deleted load balancers or CNI plugins, they keep the groups from being deleted.

use super::security_groups;
use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, settle};
use crate::aws::discovery::tags;
use crate::aws::errors::call;
use crate::aws::model::GcTask;
use async_trait::async_trait;

pub struct NetworkInterfaces;

const KIND: &str = "network-interface";

#[async_trait]
impl Cleaner for NetworkInterfaces {
    type Detail = ();

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        30
    }
    // They exist to be cleaned before the security groups; selecting those selects these.
    fn task(&self) -> Option<GcTask> {
        Some(security_groups::TASK)
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        let ids: Vec<String> = security_groups::external(ctx.inventory)
            .iter()
            .map(|(_, id)| id.clone())
            .collect();
        let mut out = Vec::new();
        for chunk in ids.chunks(200) {
            let mut token: Option<String> = None;
            loop {
                let page = call("ec2.DescribeNetworkInterfaces", || {
                    ctx.clients
                        .ec2
                        .describe_network_interfaces()
                        .filters(tags::ec2_filter("group-id", chunk))
                        .filters(tags::ec2_filter("status", &["available".to_string()]))
                        .max_results(1000)
                        .set_next_token(token.clone())
                        .send()
                })
                .await
                .map_err(CleanError::discover(KIND, "DescribeNetworkInterfaces"))?;
                out.extend(
                    page.network_interfaces()
                        .iter()
                        .filter_map(|n| n.network_interface_id())
                        .map(Target::plain),
                );
                token = page
                    .next_token()
                    .filter(|t| !t.is_empty())
                    .map(str::to_string);
                if token.is_none() {
                    break;
                }
            }
        }
        Ok(out)
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.DeleteNetworkInterface", || {
            ctx.clients
                .ec2
                .delete_network_interface()
                .network_interface_id(&t.id)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteNetworkInterface")
    }
}
