//! Phase 2 (task `oidc-provider`, EKS only): the IAM OIDC provider CAPA made for the cluster's
//! IRSA (`associateOIDCProvider`). CAPA deletes it only while `status.oidcProvider.arn` is set,
//! and a `clusterctl move` loses that status (CAPA#3972); a leaked provider counts against the
//! account's limit of 100.
//!
//! Which provider is the cluster's, and when it must wait for a live EKS cluster that may still
//! use its issuer, is `policy::oidc_providers`'s: this cleaner lists, describes, asks EKS and
//! deletes.

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::{ErrorClass, call};
use crate::locate::eks::{self, issuer_key};
use crate::model::{GcTask, Phase};
use crate::policy::Verdict;
use crate::policy::oidc_providers::{self as policy, Use};
use async_trait::async_trait;

/// Selects the IRSA OIDC provider (on by default: it is CAPA's, made for this cluster only).
pub const TASK: GcTask = GcTask::new("oidc-provider");

pub struct OidcProviders;

const KIND: &str = "oidc-provider";
/// The account-wide listing of provider ARNs (`session::listings`).
const LISTING: &str = "iam.ListOpenIDConnectProviders";

/// The issuer an IAM OIDC provider ARN names: `arn:aws:iam::<account>:oidc-provider/<issuer>`
/// (IAM makes the ARN from the URL, so there is at most one provider per issuer and account).
pub fn issuer_of_arn(arn: &str) -> Option<&str> {
    arn.split_once(":oidc-provider/").map(|(_, i)| i)
}

/// Nothing in AWS depends on it; with the other IAM kind, after the nodes (order 30).
pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &[
        "iam:ListOpenIDConnectProviders",
        "iam:GetOpenIDConnectProvider",
        // Whether a live EKS cluster still reports the issuer.
        "eks:ListClusters",
        "eks:DescribeCluster",
        "iam:DeleteOpenIDConnectProvider",
    ],
    ..Descriptor::new("iam", KIND, Phase::Tagged, 30)
};

#[async_trait]
impl Cleaner for OidcProviders {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        let Some(recorded) = ctx.eks.and_then(|e| e.oidc_issuer.as_deref()) else {
            return Ok(Vec::new());
        };
        let issuer = issuer_key(recorded);
        // The account's listing, shared by its clusters' passes (`session::listings`).
        let listed = ctx
            .clients
            .listed(LISTING, || async {
                let out = call("iam.ListOpenIDConnectProviders", || {
                    ctx.clients.iam.list_open_id_connect_providers().send()
                })
                .await
                .map_err(CleanError::discover(KIND, "ListOpenIDConnectProviders"))?;
                Ok(out
                    .open_id_connect_provider_list()
                    .iter()
                    .filter_map(|p| p.arn().map(str::to_string))
                    .collect())
            })
            .await?;
        // The ARN names the URL: only the recorded issuer's provider is read.
        let arns: Vec<String> = listed
            .iter()
            .filter(|a| issuer_of_arn(a).is_some_and(|i| issuer_key(i) == issuer))
            .cloned()
            .collect();
        let mut found = Vec::new();
        for arn in arns {
            let got = call("iam.GetOpenIDConnectProvider", || {
                ctx.clients
                    .iam
                    .get_open_id_connect_provider()
                    .open_id_connect_provider_arn(&arn)
                    .send()
            })
            .await;
            let p = match got {
                Ok(p) => p,
                // Gone since the listing.
                Err(f) if f.class == ErrorClass::NotFound => continue,
                Err(f) => return Err(CleanError::discover(KIND, "GetOpenIDConnectProvider")(f)),
            };
            let pairs: Vec<(&str, &str)> = p.tags().iter().map(|t| (t.key(), t.value())).collect();
            let described = policy::Provider {
                url: p.url().unwrap_or_default(),
                tags: &pairs,
            };
            let verdict = policy::decide(&described, ctx.cluster, recorded);
            if !verdict.is_delete() {
                tracing::info!(%arn, ?verdict, "not the cluster's provider: kept");
                continue;
            }
            found.push(Target::plain(arn).with_tags(pairs.iter().copied()));
        }
        if found.is_empty() {
            return Ok(found);
        }
        let verdict = in_use(ctx, &issuer).await?;
        Ok(found
            .into_iter()
            .filter_map(|t| t.judged(verdict.clone()))
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("iam.DeleteOpenIDConnectProvider", || {
            ctx.clients
                .iam
                .delete_open_id_connect_provider()
                .open_id_connect_provider_arn(&t.id)
                .send()
        })
        .await;
        let outcome = settle(res, KIND, &t.id, "DeleteOpenIDConnectProvider")?;
        if matches!(outcome, Outcome::Deleted | Outcome::Gone) {
            ctx.clients.unlisted(LISTING, &t.id).await;
        }
        Ok(outcome)
    }
}

/// The verdict on the provider of `issuer` once EKS is asked whether a live cluster still
/// reports it (`policy::oidc_providers::by_use`). A transient EKS failure keeps it for the next
/// pass; any other failure is an error of the locate step, so nothing is deleted and the reason is
/// reported.
async fn in_use(ctx: &CleanCtx<'_>, issuer: &str) -> Result<Verdict, CleanError> {
    let session_region = ctx.clients.eks.config().region().map(|r| r.to_string());
    // EKS is regional: a session of another region cannot tell whether the issuer's cluster
    // lives. Not expected (CAPA makes the provider in the cluster's region), so kept and said.
    if let Some(elsewhere) = policy::other_region(issuer, session_region.as_deref()) {
        return Ok(policy::by_use(issuer, elsewhere));
    }
    match eks::cluster_reporting(ctx.clients, issuer, ctx.cluster).await {
        Ok(None) => Ok(policy::by_use(issuer, Use::Unused)),
        Ok(Some(name)) => Ok(policy::by_use(issuer, Use::UsedBy(&name))),
        Err(f) if f.class == ErrorClass::Transient => {
            Ok(policy::by_use(issuer, Use::Unknown(&f.to_string())))
        }
        Err(f) => Err(CleanError::Discover {
            kind: KIND,
            op: "eks:ListClusters/DescribeCluster (kept: no live cluster may use it)",
            source: f,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locate::inventory::Inventory;
    use crate::model::{AwsClients, EksFacts, PhaseReport};
    use crate::phases::runner::run_cleaner;
    use aws_sdk_eks::operation::describe_cluster::{DescribeClusterError, DescribeClusterOutput};
    use aws_sdk_eks::operation::list_clusters::ListClustersOutput;
    use aws_sdk_eks::types::{Cluster, ClusterStatus, Identity, Oidc};
    use aws_sdk_iam::operation::delete_open_id_connect_provider::DeleteOpenIdConnectProviderOutput;
    use aws_sdk_iam::operation::get_open_id_connect_provider::GetOpenIdConnectProviderOutput;
    use aws_sdk_iam::operation::list_open_id_connect_providers::ListOpenIdConnectProvidersOutput;
    use aws_sdk_iam::types::{OpenIdConnectProviderListEntry, Tag};
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
    use aws_smithy_types::error::ErrorMetadata;

    const EKS_NAME: &str = "ns_ek1";
    const HOST: &str = "oidc.eks.us-east-1.amazonaws.com/id/";

    fn arn(id: &str) -> String {
        format!("arn:aws:iam::123456789012:oidc-provider/{HOST}{id}")
    }

    /// IAM holding one provider per `(id, tags)`; deletes are answered and counted by the rule
    /// returned last.
    fn iam(providers: &[(&str, &[(&str, &str)])]) -> (aws_sdk_iam::Client, Rule) {
        let list: Vec<OpenIdConnectProviderListEntry> = providers
            .iter()
            .map(|(id, _)| {
                OpenIdConnectProviderListEntry::builder()
                    .arn(arn(id))
                    .build()
            })
            .collect();
        let listed =
            mock!(aws_sdk_iam::Client::list_open_id_connect_providers).then_output(move || {
                ListOpenIdConnectProvidersOutput::builder()
                    .set_open_id_connect_provider_list(Some(list.clone()))
                    .build()
            });
        let owned: Vec<(String, Vec<(String, String)>)> = providers
            .iter()
            .map(|(id, t)| {
                (
                    arn(id),
                    t.iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                )
            })
            .collect();
        let get = mock!(aws_sdk_iam::Client::get_open_id_connect_provider).then_compute_output(
            move |req| {
                let asked = req.open_id_connect_provider_arn().unwrap_or_default();
                let (a, tags) = owned
                    .iter()
                    .find(|(a, _)| a == asked)
                    .expect("a listed ARN");
                let mut out =
                    GetOpenIdConnectProviderOutput::builder().url(issuer_of_arn(a).unwrap());
                for (k, v) in tags {
                    out = out.tags(Tag::builder().key(k).value(v).build().unwrap());
                }
                out.build()
            },
        );
        let delete = mock!(aws_sdk_iam::Client::delete_open_id_connect_provider)
            .then_output(|| DeleteOpenIdConnectProviderOutput::builder().build());
        let client = mock_client!(aws_sdk_iam, RuleMode::MatchAny, [&listed, &get, &delete]);
        (client, delete)
    }

    fn live(name: &str, issuer_id: &str) -> DescribeClusterOutput {
        DescribeClusterOutput::builder()
            .cluster(
                Cluster::builder()
                    .name(name)
                    .status(ClusterStatus::Active)
                    .identity(
                        Identity::builder()
                            .oidc(
                                Oidc::builder()
                                    .issuer(format!("https://{HOST}{issuer_id}"))
                                    .build(),
                            )
                            .build(),
                    )
                    .build(),
            )
            .build()
    }

    fn not_found() -> DescribeClusterError {
        DescribeClusterError::ResourceNotFoundException(
            aws_sdk_eks::types::error::ResourceNotFoundException::builder()
                .message("No cluster found")
                .meta(
                    ErrorMetadata::builder()
                        .code("ResourceNotFoundException")
                        .build(),
                )
                .build(),
        )
    }

    /// EKS where `live_clusters` (name, issuer id) exist, and the cluster being torn down does not.
    fn eks(live_clusters: &'static [(&'static str, &'static str)]) -> aws_sdk_eks::Client {
        let list = mock!(aws_sdk_eks::Client::list_clusters).then_output(|| {
            ListClustersOutput::builder()
                .set_clusters(Some(
                    live_clusters.iter().map(|(n, _)| n.to_string()).collect(),
                ))
                .build()
        });
        let describe = mock!(aws_sdk_eks::Client::describe_cluster).then_compute_response(|req| {
            match live_clusters.iter().find(|(n, _)| Some(*n) == req.name()) {
                Some((n, id)) => aws_smithy_mocks::MockResponse::Output(live(n, id)),
                None => aws_smithy_mocks::MockResponse::Error(not_found()),
            }
        });
        mock_client!(aws_sdk_eks, RuleMode::MatchAny, [&list, &describe])
    }

    /// An EKS that answers every call with `code`.
    fn eks_failing(code: &'static str) -> aws_sdk_eks::Client {
        let describe = mock!(aws_sdk_eks::Client::describe_cluster).then_error(move || {
            DescribeClusterError::generic(ErrorMetadata::builder().code(code).message("no").build())
        });
        mock_client!(aws_sdk_eks, RuleMode::MatchAny, [&describe], |c| c
            .retry_config(aws_sdk_eks::config::retry::RetryConfig::disabled()))
    }

    async fn pass(clients: &AwsClients, issuer: Option<&str>) -> PhaseReport {
        let inv = Inventory::default();
        let facts = EksFacts {
            oidc_issuer: issuer.map(str::to_string),
        };
        let ctx = CleanCtx {
            clients,
            cluster: EKS_NAME,
            capa_cluster: "ek1",
            inventory: &inv,
            vpc_ids: &[],
            byo_vpcs: &[],
            cluster_vpcs: &[],
            snapshot_volumes: false,
            eks: Some(&facts),
            tasks: &[],
            external_dns_owner: None,
            s3_bucket: None,
            view: &Default::default(),
            alternative_discovery: false,
        };
        run_cleaner(&OidcProviders, &ctx, false).await
    }

    const TAGGED: &[(&str, &str)] = &[OWNED];

    #[tokio::test]
    async fn the_recorded_issuers_provider_goes_once_no_live_cluster_reports_it() {
        let (iam, deletes) = iam(&[
            ("AAAA1111", TAGGED),
            ("BBBB2222", TAGGED),
            ("CCCC3333", &[]),
        ]);
        let c = AwsClients::mocked(iam, eks(&[("other", "BBBB2222")]));
        let r = pass(&c, Some(&format!("https://{HOST}AAAA1111"))).await;
        assert!(r.errors.is_empty(), "{r:#?}");
        assert_eq!(
            r.deleted.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
            [arn("AAAA1111")],
            "only the recorded issuer's provider: {r:#?}"
        );
        assert_eq!(deletes.num_calls(), 1);
        assert!(r.audit[0].tags.as_ref().unwrap().contains_key(OWNED.0));
    }

    #[tokio::test]
    async fn look_alikes_and_a_provider_in_use_stay() {
        // Another issuer's provider with the cluster's tag (BBBB), the recorded issuer's without
        // it (CCCC): neither is the cluster's.
        let (iam_, deletes) = iam(&[("BBBB2222", TAGGED), ("CCCC3333", &[])]);
        let c = AwsClients::mocked(iam_, eks(&[]));
        let r = pass(&c, Some(&format!("{HOST}CCCC3333"))).await;
        assert!(
            r.deleted.is_empty() && r.remaining.is_empty() && r.errors.is_empty(),
            "{r:#?}"
        );
        assert_eq!(deletes.num_calls(), 0);

        // A live cluster (not the deleted one: its name was reused, or the issuer is shared by
        // a restore) still reports the issuer: kept, and said why.
        let (iam_, deletes) = iam(&[("AAAA1111", TAGGED)]);
        let c = AwsClients::mocked(iam_, eks(&[("restored", "AAAA1111")]));
        let r = pass(&c, Some(&format!("{HOST}AAAA1111"))).await;
        assert_eq!(deletes.num_calls(), 0);
        assert!(r.deleted.is_empty(), "{r:#?}");
        assert!(
            r.remaining[0]
                .1
                .message
                .contains("EKS cluster restored still reports"),
            "{r:#?}"
        );

        // No issuer recorded (not asked for, or the status was lost): nothing is looked at.
        let (iam_, deletes) = iam(&[("AAAA1111", TAGGED)]);
        let c = AwsClients::mocked(iam_, eks(&[]));
        let r = pass(&c, None).await;
        assert!(r.deleted.is_empty() && r.remaining.is_empty(), "{r:#?}");
        assert_eq!(deletes.num_calls(), 0);
    }

    #[tokio::test]
    async fn a_provider_is_kept_while_eks_cannot_be_asked() {
        let issuer = format!("{HOST}AAAA1111");
        let (iam_, deletes) = iam(&[("AAAA1111", TAGGED)]);
        let c = AwsClients::mocked(iam_, eks_failing("AccessDeniedException"));
        let r = pass(&c, Some(&issuer)).await;
        assert_eq!(deletes.num_calls(), 0);
        assert!(r.deleted.is_empty(), "{r:#?}");
        assert!(
            r.errors[0].message.contains("AccessDeniedException"),
            "{r:#?}"
        );

        let (iam_, deletes) = iam(&[("AAAA1111", TAGGED)]);
        let c = AwsClients::mocked(iam_, eks_failing("ThrottlingException"));
        let r = pass(&c, Some(&issuer)).await;
        assert_eq!(deletes.num_calls(), 0);
        assert!(
            r.remaining[0].1.message.contains("EKS cannot be asked"),
            "{r:#?}"
        );
    }

    const OWNED: (&str, &str) = ("kubernetes.io/cluster/ns_ek1", "owned");

    #[test]
    fn the_arn_names_the_issuer() {
        assert_eq!(
            issuer_of_arn(
                "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/AAAA1111"
            ),
            Some("oidc.eks.us-east-1.amazonaws.com/id/AAAA1111")
        );
        assert_eq!(
            issuer_of_arn("arn:aws:iam::123456789012:instance-profile/x"),
            None
        );
    }
}
