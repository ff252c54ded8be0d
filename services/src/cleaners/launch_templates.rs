//! Phase 2 (task `launch-template`): launch templates the cluster owns
//! (`kubernetes.io/cluster/<name>=owned`, not CAPA's), which Karpenter creates per node class and
//! leaves behind. A template blocks nothing, but it is the cluster's and it leaks.
//!
//! Found by one filtered DescribeLaunchTemplates per pass, whichever phase-2 locate step runs: not
//! every tagging API returns launch templates (LocalStack's does not), and the describe answers
//! for both modes at once.

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::call;
use crate::locate::describe;
use crate::locate::inventory::Inventory;
use crate::locate::tagging::TaggedResource;
use crate::locate::tags;
use crate::model::{AwsClients, GcTask, Phase};
use crate::policy::{Candidate, Ownership};
use async_trait::async_trait;

/// Selects phase 2's launch templates.
pub const TASK: GcTask = GcTask::new("launch-template");

pub struct LaunchTemplates;

const KIND: &str = "launch-template";

/// Launch templates tagged `kubernetes.io/cluster/<name>=owned` and not CAPA's, all pages.
type Tags = Vec<(String, String)>;

fn owned_pairs(tags: &[aws_sdk_ec2::types::Tag]) -> Tags {
    tags::ec2_pairs(tags)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn borrowed(tags: &Tags) -> impl Iterator<Item = (&str, &str)> {
    tags.iter().map(|(k, v)| (k.as_str(), v.as_str()))
}

/// The cluster's launch templates: (id, tags).
async fn owned_templates(
    c: &AwsClients,
    own: &Ownership,
) -> Result<Vec<(String, Tags)>, CleanError> {
    describe::all_pages(|token| async move {
        let page = call("ec2.DescribeLaunchTemplates", || {
            c.ec2
                .describe_launch_templates()
                .filters(tags::ec2_tag_filter(own.cloud_key(), tags::OWNED))
                .set_next_token(token.clone())
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "DescribeLaunchTemplates"))?;
        let ids = page
            .launch_templates()
            .iter()
            .filter(|t| {
                let tags: Vec<_> = tags::ec2_pairs(t.tags()).collect();
                own.decide(&Candidate::tagged(&tags)).is_delete()
            })
            .filter_map(|t| Some((t.launch_template_id()?.to_string(), owned_pairs(t.tags()))))
            .collect();
        Ok((ids, page.next_token().map(str::to_string)))
    })
    .await
}

pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &["ec2:DescribeLaunchTemplates", "ec2:DeleteLaunchTemplate"],
    ..Descriptor::new("ec2", KIND, Phase::Tagged, 25)
};

#[async_trait]
impl Cleaner for LaunchTemplates {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    /// Taken, so the tagging scan does not log it as a kind nobody cleans; `discover` finds it.
    fn claim(&self, r: &TaggedResource, _inv: &mut Inventory) -> bool {
        (r.arn.service.as_str(), r.arn.resource_type()) == ("ec2", "launch-template")
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        let own = Ownership::of(ctx.cluster).with_capa_name(ctx.capa_cluster);
        Ok(owned_templates(ctx.clients, &own)
            .await?
            .into_iter()
            .map(|(id, tags)| Target::plain(id).with_tags(borrowed(&tags)))
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.DeleteLaunchTemplate", || {
            ctx.clients
                .ec2
                .delete_launch_template()
                .launch_template_id(&t.id)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteLaunchTemplate")
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::mocked::{self, CAPA_KEY, CLOUD_KEY, assert_calls, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::delete_launch_template::DeleteLaunchTemplateOutput;
    use aws_sdk_ec2::operation::describe_launch_templates::DescribeLaunchTemplatesOutput;
    use aws_sdk_ec2::types::LaunchTemplate;

    fn template(id: &str, tags: &[(&str, &str)]) -> LaunchTemplate {
        let mut b = LaunchTemplate::builder().launch_template_id(id);
        for (k, v) in tags {
            b = b.tags(tag(k, v));
        }
        b.build()
    }

    #[tokio::test]
    async fn the_clusters_templates_not_capas_are_found_on_every_page_and_deleted() {
        let page1 = mock!(Client::describe_launch_templates)
            .match_requests(|r| {
                filter_is(r.filters(), &format!("tag:{CLOUD_KEY}"), &["owned"])
                    && r.next_token().is_none()
            })
            .then_output(|| {
                DescribeLaunchTemplatesOutput::builder()
                    .launch_templates(template("lt-karpenter", &[(CLOUD_KEY, "owned")]))
                    // CAPA's machine pool template: phase 1 and CAPA's, not ours here.
                    .launch_templates(template(
                        "lt-capa",
                        &[(CLOUD_KEY, "owned"), (CAPA_KEY, "owned")],
                    ))
                    .next_token("p2")
                    .build()
            });
        let page2 = mock!(Client::describe_launch_templates)
            .match_requests(|r| r.next_token() == Some("p2"))
            .then_output(|| {
                DescribeLaunchTemplatesOutput::builder()
                    .launch_templates(template("lt-shared", &[(CLOUD_KEY, "shared")]))
                    .launch_templates(template("lt-2", &[(CLOUD_KEY, "owned")]))
                    .build()
            });
        let delete = mock!(Client::delete_launch_template)
            .match_requests(|r| r.launch_template_id() == Some("lt-karpenter"))
            .then_output(|| DeleteLaunchTemplateOutput::builder().build());
        let c = mocked::in_order(&[&page1, &page2, &delete]);
        let inv = Inventory::default();
        let cx = ctx(&c, &inv);
        let found = LaunchTemplates.discover(&cx).await.unwrap();
        assert_eq!(
            found.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["lt-karpenter", "lt-2"]
        );
        assert_eq!(
            LaunchTemplates.delete(&cx, &found[0]).await.unwrap(),
            Outcome::Deleted
        );
        assert_calls(&delete, 1, "DeleteLaunchTemplate");
    }
}
