//! Phase 3: route tables of the CAPA-managed VPC carrying CAPA's ownership tag, except the main one
//! (it goes with the VPC).
//! Non-main subnet associations are removed first, since an associated table cannot be deleted.

use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, settle};
use crate::aws::discovery::tags;
use crate::aws::errors::call;
use async_trait::async_trait;

pub struct RouteTables;

/// A route table and its subnet associations, removed before the delete.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteTable {
    pub route_table_id: String,
    pub associations: Vec<String>,
}

const KIND: &str = "route-table";

#[async_trait]
impl Cleaner for RouteTables {
    type Detail = RouteTable;

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        40
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        if ctx.vpc_ids.is_empty() {
            return Ok(Vec::new());
        }
        let out = call("ec2.DescribeRouteTables", || {
            ctx.clients
                .ec2
                .describe_route_tables()
                .filters(tags::ec2_filter("vpc-id", ctx.vpc_ids))
                .filters(tags::ec2_tag_filter(&ctx.capa_key(), tags::OWNED))
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "DescribeRouteTables"))?;
        Ok(out
            .route_tables()
            .iter()
            .filter(|rt| !rt.associations().iter().any(|a| a.main() == Some(true)))
            .filter_map(|rt| {
                let id = rt.route_table_id()?;
                let associations = rt
                    .associations()
                    .iter()
                    .filter_map(|a| a.route_table_association_id())
                    .map(str::to_string)
                    .collect();
                Some(
                    Target::new(
                        id,
                        RouteTable {
                            route_table_id: id.to_string(),
                            associations,
                        },
                    )
                    .with_tags(tags::ec2_pairs(rt.tags())),
                )
            })
            .collect())
    }

    async fn delete(
        &self,
        ctx: &CleanCtx<'_>,
        t: &Target<RouteTable>,
    ) -> Result<Outcome, CleanError> {
        let RouteTable {
            route_table_id,
            associations,
        } = &t.detail;
        for assoc in associations {
            let res = call("ec2.DisassociateRouteTable", || {
                ctx.clients
                    .ec2
                    .disassociate_route_table()
                    .association_id(assoc)
                    .send()
            })
            .await;
            if let Outcome::Remaining(r) = settle(res, KIND, &t.id, "DisassociateRouteTable")? {
                return Ok(Outcome::Remaining(r));
            }
        }
        let res = call("ec2.DeleteRouteTable", || {
            ctx.clients
                .ec2
                .delete_route_table()
                .route_table_id(route_table_id)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteRouteTable")
    }
}
