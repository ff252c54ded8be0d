//! Phase 2 (task `instance-profile`): the IAM instance profiles Karpenter made for the cluster's
//! EC2NodeClasses. Karpenter deletes them only while it runs, so a deleted cluster leaves them,
//! and they count against the account's quota of 1,000 (karpenter-provider-aws#8838).
//!
//! Which profiles are Karpenter's for the cluster, and which wait for a node still running with
//! one, is `policy::instance_profiles`'s.
//!
//! The delete removes the profile's roles from it, then the profile. The role is never deleted:
//! it is the user's (Karpenter is given it, it does not make it).

use super::instances;
use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::call;
use crate::locate::describe;
use crate::model::{GcTask, Phase};
use crate::policy::instance_profiles as policy;
use async_trait::async_trait;
use aws_sdk_iam::types::InstanceProfile;
use futures::StreamExt;

/// Selects Karpenter's instance profiles (on by default, like its launch templates).
pub const TASK: GcTask = GcTask::new("instance-profile");

pub use crate::policy::instance_profiles::{NODECLASS_TAG, REGION_TAG};

pub struct InstanceProfiles;

const KIND: &str = "instance-profile";
/// The account-wide listing of profile names (`session::listings`).
const LISTING: &str = "iam.ListInstanceProfiles";

/// What the delete needs: the profile's name (the target's id is its ARN) and its roles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    pub name: String,
    pub roles: Vec<String>,
}

/// After the nodes (order 30): a profile is free once the instances that ran with it are
/// terminated.
pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &[
        "iam:ListInstanceProfiles",
        "iam:GetInstanceProfile",
        // Which live instances still run with a profile.
        "ec2:DescribeInstances",
        "iam:RemoveRoleFromInstanceProfile",
        "iam:DeleteInstanceProfile",
    ],
    ..Descriptor::new("iam", KIND, Phase::Tagged, 30)
};

#[async_trait]
impl Cleaner for InstanceProfiles {
    type Detail = Profile;

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Profile>>, CleanError> {
        let Some(region) = ctx.clients.ec2.config().region().map(|r| r.to_string()) else {
            // Without the session's region the region tag cannot be checked: nothing is ours.
            return Ok(Vec::new());
        };
        let prefix = format!("{}_", ctx.cluster);
        // IAM lists no tags: the listing narrows by name, a Get per candidate reads its tags.
        let names: Vec<String> = account_profile_names(ctx)
            .await?
            .iter()
            .filter(|n| n.starts_with(prefix.as_str()))
            .cloned()
            .collect();
        let found: Vec<Target<Profile>> = read_profiles(ctx, names)
            .await?
            .iter()
            .filter_map(|p| clusters_profile(p, ctx.cluster, &region))
            .collect();
        if found.is_empty() {
            return Ok(found);
        }
        // One region-wide look at the live instances, only when there is a candidate: a profile
        // a node still runs with stays until the node is gone.
        let live = instances::live_instances(ctx.clients, Vec::new()).await?;
        Ok(found
            .into_iter()
            .filter_map(|t| {
                let user = live
                    .iter()
                    .find(|i| i.profile.as_deref() == Some(t.id.as_str()));
                t.judged(policy::by_user(user.map(|i| i.id.as_str())))
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<Profile>) -> Result<Outcome, CleanError> {
        for role in &t.detail.roles {
            let res = call("iam.RemoveRoleFromInstanceProfile", || {
                ctx.clients
                    .iam
                    .remove_role_from_instance_profile()
                    .instance_profile_name(&t.detail.name)
                    .role_name(role)
                    .send()
            })
            .await;
            match settle(res, KIND, &t.id, "RemoveRoleFromInstanceProfile")? {
                // The role already left the profile (or the profile is gone): go on.
                Outcome::Deleted
                | Outcome::Gone
                | Outcome::DeletedWith(_)
                | Outcome::Untagged(_)
                | Outcome::Also(..) => {}
                left @ (Outcome::Remaining(_) | Outcome::Requested(_) | Outcome::Failed(_)) => {
                    return Ok(left);
                }
            }
        }
        let res = call("iam.DeleteInstanceProfile", || {
            ctx.clients
                .iam
                .delete_instance_profile()
                .instance_profile_name(&t.detail.name)
                .send()
        })
        .await;
        let outcome = settle(res, KIND, &t.id, "DeleteInstanceProfile")?;
        if matches!(outcome, Outcome::Deleted | Outcome::Gone) {
            ctx.clients.unlisted(LISTING, &t.detail.name).await;
        }
        Ok(outcome)
    }
}

/// The names of the account's instance profiles, all pages. The listing is the account's,
/// shared by its clusters' passes (`session::listings`).
async fn account_profile_names(
    ctx: &CleanCtx<'_>,
) -> Result<std::sync::Arc<Vec<String>>, CleanError> {
    ctx.clients
        .listed(LISTING, || {
            describe::all_pages(|marker| async move {
                let page = call("iam.ListInstanceProfiles", || {
                    ctx.clients
                        .iam
                        .list_instance_profiles()
                        .set_marker(marker.clone())
                        .send()
                })
                .await
                .map_err(CleanError::discover(KIND, "ListInstanceProfiles"))?;
                let names: Vec<String> = page
                    .instance_profiles()
                    .iter()
                    .map(|p| p.instance_profile_name().to_string())
                    .collect();
                let next = page
                    .is_truncated()
                    .then(|| page.marker().map(str::to_string));
                Ok((names, next.flatten()))
            })
        })
        .await
}

/// One Get per name (its tags, path and roles), a few at once, in the listing's order; a
/// profile gone since the listing is left out. At 80 ms a call, ten profiles read one after
/// another held the pass 0.8 s (bench-external).
async fn read_profiles(
    ctx: &CleanCtx<'_>,
    names: Vec<String>,
) -> Result<Vec<InstanceProfile>, CleanError> {
    let read = |name: String| async move {
        let got = call("iam.GetInstanceProfile", || {
            ctx.clients
                .iam
                .get_instance_profile()
                .instance_profile_name(&name)
                .send()
        })
        .await;
        match got {
            Ok(out) => Ok(out.instance_profile),
            // Gone since the listing.
            Err(f) if f.class == crate::errors::ErrorClass::NotFound => Ok(None),
            Err(f) => Err(CleanError::discover(KIND, "GetInstanceProfile")(f)),
        }
    };
    // Collected, not a lazy filter: a closure over a borrow inside the stream would not be
    // `Send` for every lifetime, as `async_trait` needs.
    let read: Vec<Result<Option<InstanceProfile>, CleanError>> =
        futures::stream::iter(names.into_iter().map(read))
            .buffered(super::READ_CONCURRENCY)
            .collect()
            .await;
    let mut found = Vec::new();
    for p in read {
        found.extend(p?);
    }
    Ok(found)
}

/// The profile as a target when the policy says it is Karpenter's for `cluster` in `region`.
fn clusters_profile(p: &InstanceProfile, cluster: &str, region: &str) -> Option<Target<Profile>> {
    let name = p.instance_profile_name().to_string();
    let pairs: Vec<(&str, &str)> = p.tags().iter().map(|t| (t.key(), t.value())).collect();
    let listed = policy::ListedProfile {
        name: &name,
        path: p.path(),
        tags: &pairs,
    };
    if !policy::decide(&listed, cluster, region).is_delete() {
        return None;
    }
    let detail = Profile {
        name,
        roles: p
            .roles()
            .iter()
            .map(|r| r.role_name().to_string())
            .collect(),
    };
    Some(Target::new(p.arn(), detail).with_tags(pairs.iter().copied()))
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, CLOUD_KEY, assert_calls, code, mock};
    use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
    use aws_sdk_ec2::types::{
        IamInstanceProfile, Instance, InstanceState, InstanceStateName, Reservation,
    };
    use aws_sdk_iam::Client;
    use aws_sdk_iam::operation::delete_instance_profile::DeleteInstanceProfileOutput;
    use aws_sdk_iam::operation::get_instance_profile::{
        GetInstanceProfileError, GetInstanceProfileOutput,
    };
    use aws_sdk_iam::operation::list_instance_profiles::ListInstanceProfilesOutput;
    use aws_sdk_iam::operation::remove_role_from_instance_profile::RemoveRoleFromInstanceProfileOutput;
    use aws_sdk_iam::primitives::DateTime;
    use aws_sdk_iam::types::{InstanceProfile, Role, Tag};

    fn arn(name: &str) -> String {
        format!("arn:aws:iam::000000000000:instance-profile/{name}")
    }

    fn profile(name: &str, region: &str) -> InstanceProfile {
        let tag = |k: &str, v: &str| Tag::builder().key(k).value(v).build().unwrap();
        InstanceProfile::builder()
            .path("/")
            .instance_profile_name(name)
            .instance_profile_id("AIPA")
            .arn(arn(name))
            .create_date(DateTime::from_secs(0))
            .roles(
                Role::builder()
                    .path("/")
                    .role_name("KarpenterNodeRole")
                    .role_id("AROA")
                    .arn("arn:aws:iam::000000000000:role/KarpenterNodeRole")
                    .create_date(DateTime::from_secs(0))
                    .build()
                    .unwrap(),
            )
            .tags(tag(CLOUD_KEY, "owned"))
            .tags(tag(NODECLASS_TAG, "default"))
            .tags(tag(REGION_TAG, region))
            .build()
            .unwrap()
    }

    fn listed(names: &[&str]) -> ListInstanceProfilesOutput {
        let mut b = ListInstanceProfilesOutput::builder();
        for n in names {
            b = b.instance_profiles(profile(n, "us-east-1"));
        }
        b.build().unwrap()
    }

    #[tokio::test]
    async fn only_the_clusters_profiles_in_its_region_are_read_and_one_in_use_waits() {
        let list = mock!(Client::list_instance_profiles)
            .then_output(|| listed(&["c1_inuse", "c1_twin", "c1-b_other", "unrelated", "c1_gone"]));
        // Only names with the cluster's prefix are read; `c1-b_…` is another cluster's.
        let get_inuse = mock!(Client::get_instance_profile)
            .match_requests(|r| r.instance_profile_name() == Some("c1_inuse"))
            .then_output(|| {
                GetInstanceProfileOutput::builder()
                    .instance_profile(profile("c1_inuse", "us-east-1"))
                    .build()
            });
        let get_twin = mock!(Client::get_instance_profile)
            .match_requests(|r| r.instance_profile_name() == Some("c1_twin"))
            .then_output(|| {
                GetInstanceProfileOutput::builder()
                    .instance_profile(profile("c1_twin", "eu-west-1"))
                    .build()
            });
        let get_gone = mock!(Client::get_instance_profile)
            .match_requests(|r| r.instance_profile_name() == Some("c1_gone"))
            .then_error(|| GetInstanceProfileError::generic(code("NoSuchEntity.NotFound")));
        let instances = mock!(aws_sdk_ec2::Client::describe_instances).then_output(|| {
            DescribeInstancesOutput::builder()
                .reservations(
                    Reservation::builder()
                        .instances(
                            Instance::builder()
                                .instance_id("i-node")
                                .state(
                                    InstanceState::builder()
                                        .name(InstanceStateName::Running)
                                        .build(),
                                )
                                .iam_instance_profile(
                                    IamInstanceProfile::builder().arn(arn("c1_inuse")).build(),
                                )
                                .build(),
                        )
                        .build(),
                )
                .build()
        });
        let c = mocked::in_order(&[&list, &get_inuse, &get_twin, &get_gone, &instances]);
        let inv = Inventory::default();
        let found = InstanceProfiles.discover(&ctx(&c, &inv)).await.unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].id, arn("c1_inuse"));
        assert_eq!(found[0].detail.roles, ["KarpenterNodeRole"]);
        assert_eq!(
            found[0].blocked.as_deref(),
            Some("instance i-node still runs with it")
        );
        assert_calls(&instances, 1, "DescribeInstances");
    }

    #[tokio::test]
    async fn no_candidate_means_no_look_at_the_instances() {
        let list = mock!(Client::list_instance_profiles).then_output(|| listed(&["c1-b_other"]));
        let c = mocked::in_order(&[&list]);
        let inv = Inventory::default();
        assert!(
            InstanceProfiles
                .discover(&ctx(&c, &inv))
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn the_role_leaves_the_profile_then_the_profile_is_deleted_never_the_role() {
        let remove = mock!(Client::remove_role_from_instance_profile)
            .match_requests(|r| {
                r.instance_profile_name() == Some("c1_x") && r.role_name() == Some("R")
            })
            .then_output(|| RemoveRoleFromInstanceProfileOutput::builder().build());
        let delete = mock!(Client::delete_instance_profile)
            .match_requests(|r| r.instance_profile_name() == Some("c1_x"))
            .then_output(|| DeleteInstanceProfileOutput::builder().build());
        let c = mocked::in_order(&[&remove, &delete]);
        let inv = Inventory::default();
        let t = Target::new(
            arn("c1_x"),
            Profile {
                name: "c1_x".into(),
                roles: vec!["R".into()],
            },
        );
        let out = InstanceProfiles.delete(&ctx(&c, &inv), &t).await.unwrap();
        assert_eq!(out, Outcome::Deleted);
        assert_calls(&delete, 1, "DeleteInstanceProfile");
    }
    /// The account's listing is shared (`session::listings`): a profile this pass deleted leaves
    /// it, so the verifying pass served from it reads nothing it knows is gone. Sequential rules:
    /// a second Get of `c1_x` would have no rule and fail the second discover.
    #[tokio::test]
    async fn a_deleted_profile_leaves_the_shared_listing_so_the_next_pass_does_not_read_it() {
        let list = mock!(Client::list_instance_profiles).then_output(|| listed(&["c1_x"]));
        let get = mock!(Client::get_instance_profile)
            .match_requests(|r| r.instance_profile_name() == Some("c1_x"))
            .then_output(|| {
                GetInstanceProfileOutput::builder()
                    .instance_profile(profile("c1_x", "us-east-1"))
                    .build()
            });
        let instances = mock!(aws_sdk_ec2::Client::describe_instances)
            .then_output(|| DescribeInstancesOutput::builder().build());
        let remove = mock!(Client::remove_role_from_instance_profile)
            .then_output(|| RemoveRoleFromInstanceProfileOutput::builder().build());
        let delete = mock!(Client::delete_instance_profile)
            .then_output(|| DeleteInstanceProfileOutput::builder().build());
        let c = mocked::in_order(&[&list, &get, &instances, &remove, &delete])
            .with_listings(std::sync::Arc::default());
        let inv = Inventory::default();
        let found = InstanceProfiles.discover(&ctx(&c, &inv)).await.unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        let out = InstanceProfiles
            .delete(&ctx(&c, &inv), &found[0])
            .await
            .unwrap();
        assert_eq!(out, Outcome::Deleted);
        let again = InstanceProfiles.discover(&ctx(&c, &inv)).await.unwrap();
        assert!(again.is_empty(), "{again:?}");
        assert_calls(&list, 1, "ListInstanceProfiles");
        assert_calls(&get, 1, "GetInstanceProfile");
    }
}
