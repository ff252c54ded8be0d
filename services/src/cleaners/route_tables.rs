//! Phase 3: route tables of the CAPA-managed VPC carrying CAPA's ownership tag, except the main one
//! (it goes with the VPC: `policy::network::route_table`).
//! Non-main subnet associations are removed first, since an associated table cannot be deleted.

use super::vpc_owned::{InVpcs, before_delete};
use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::call;
use crate::locate::tags;
use crate::model::Phase;
use crate::policy::network as policy;
use async_trait::async_trait;

pub struct RouteTables;

/// A route table and its subnet associations, removed before the delete.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteTable {
    pub route_table_id: String,
    pub associations: Vec<String>,
}

const KIND: &str = "route-table";

pub const DESCRIPTOR: Descriptor = Descriptor {
    iam_actions: &[
        "ec2:DescribeRouteTables",
        "ec2:DisassociateRouteTable",
        "ec2:DeleteRouteTable",
    ],
    ..Descriptor::new("ec2", KIND, Phase::Network, 40)
};

#[async_trait]
impl Cleaner for RouteTables {
    type Detail = RouteTable;

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<RouteTable>>, CleanError> {
        let Some(at) = InVpcs::of(ctx) else {
            return Ok(Vec::new());
        };
        let out = call("ec2.DescribeRouteTables", || {
            at.ec2
                .describe_route_tables()
                .set_filters(Some(at.owned("vpc-id")))
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "DescribeRouteTables"))?;
        Ok(out
            .route_tables()
            .iter()
            .filter(|rt| {
                policy::route_table(rt.associations().iter().any(|a| a.main() == Some(true)))
                    .is_delete()
            })
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
        let ec2 = &ctx.clients.ec2;
        let RouteTable {
            route_table_id,
            associations,
        } = &t.detail;
        for assoc in associations {
            let res = call("ec2.DisassociateRouteTable", || {
                ec2.disassociate_route_table().association_id(assoc).send()
            })
            .await;
            if let Some(wait) = before_delete(res, KIND, &t.id, "DisassociateRouteTable")? {
                return Ok(wait);
            }
        }
        let res = call("ec2.DeleteRouteTable", || {
            ec2.delete_route_table()
                .route_table_id(route_table_id)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteRouteTable")
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::cleaners::{CleanCtx, Cleaner};
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, CAPA_KEY, assert_calls, code, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::delete_route_table::DeleteRouteTableOutput;
    use aws_sdk_ec2::operation::describe_route_tables::DescribeRouteTablesOutput;
    use aws_sdk_ec2::operation::disassociate_route_table::{
        DisassociateRouteTableError, DisassociateRouteTableOutput,
    };
    use aws_sdk_ec2::types::{RouteTable as Rt, RouteTableAssociation};

    fn table(id: &str, main: bool, assoc: &str) -> Rt {
        Rt::builder()
            .route_table_id(id)
            .vpc_id("vpc-1")
            .associations(
                RouteTableAssociation::builder()
                    .route_table_association_id(assoc)
                    .main(main)
                    .build(),
            )
            .tags(tag(CAPA_KEY, "owned"))
            .build()
    }

    #[tokio::test]
    async fn without_a_capa_managed_vpc_nothing_is_asked() {
        let c = mocked::no_calls();
        let inv = Inventory::default();
        assert!(
            RouteTables
                .discover(&ctx(&c, &inv))
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn the_main_table_is_left_to_the_vpc_and_the_others_disassociated_then_deleted() {
        let describe = mock!(Client::describe_route_tables)
            .match_requests(|r| {
                filter_is(r.filters(), "vpc-id", &["vpc-1"])
                    && filter_is(r.filters(), &format!("tag:{CAPA_KEY}"), &["owned"])
                    && r.filters().len() == 2
            })
            .then_output(|| {
                DescribeRouteTablesOutput::builder()
                    .route_tables(table("rtb-main", true, "rtbassoc-main"))
                    .route_tables(table("rtb-private", false, "rtbassoc-1"))
                    .build()
            });
        let disassociate = mock!(Client::disassociate_route_table)
            .match_requests(|r| r.association_id() == Some("rtbassoc-1"))
            .then_output(|| DisassociateRouteTableOutput::builder().build());
        let delete = mock!(Client::delete_route_table)
            .match_requests(|r| r.route_table_id() == Some("rtb-private"))
            .then_output(|| DeleteRouteTableOutput::builder().build());
        let c = mocked::in_order(&[&describe, &disassociate, &delete]);
        let inv = Inventory::default();
        let vpcs = ["vpc-1".to_string()];
        let cx = CleanCtx {
            vpc_ids: &vpcs,
            ..ctx(&c, &inv)
        };
        let found = RouteTables.discover(&cx).await.unwrap();
        assert_eq!(
            found.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["rtb-private"],
            "the main table goes with the VPC"
        );
        assert_eq!(
            RouteTables.delete(&cx, &found[0]).await.unwrap(),
            Outcome::Deleted
        );
        assert_calls(&disassociate, 1, "DisassociateRouteTable");
        assert_calls(&delete, 1, "DeleteRouteTable");
    }

    #[tokio::test]
    async fn an_association_refused_leaves_the_table_remaining_without_a_delete() {
        let disassociate = mock!(Client::disassociate_route_table)
            .sequence()
            .error(|| DisassociateRouteTableError::generic(code("RequestLimitExceeded")))
            .times(4)
            .build();
        let c = mocked::in_order(&[&disassociate]);
        let inv = Inventory::default();
        let t = Target::new(
            "rtb-1",
            RouteTable {
                route_table_id: "rtb-1".into(),
                associations: vec!["rtbassoc-1".into()],
            },
        );
        let out = RouteTables.delete(&ctx(&c, &inv), &t).await.unwrap();
        assert!(matches!(out, Outcome::Remaining(_)), "{out:?}");
        assert_calls(&disassociate, 4, "DisassociateRouteTable");
    }
}
