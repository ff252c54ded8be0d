//! CAPA's bootstrap secrets in Secrets Manager (see the module above for the rule and the calls).

use super::{RECOVERY_DAYS, SECRETS, judged};
use crate::cleaners::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::call;
use crate::locate::describe;
use crate::policy::bootstrap_data::{BootstrapStore, decide};
use async_trait::async_trait;

pub struct BootstrapSecrets;

#[async_trait]
impl Cleaner for BootstrapSecrets {
    /// The secret's ARN (also the target's id).
    type Detail = String;

    fn descriptor(&self) -> &'static Descriptor {
        &SECRETS
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<String>>, CleanError> {
        use aws_sdk_secretsmanager::types::{Filter, FilterNameStringType as F};
        let store = BootstrapStore::SecretsManager;
        let filters = vec![
            Filter::builder()
                .key(F::Name)
                .values(store.prefix())
                .build(),
            Filter::builder()
                .key(F::TagKey)
                .values(ctx.capa_key())
                .build(),
        ];
        let filters = &filters;
        let found = describe::all_pages(|token| async move {
            let page = call("secretsmanager.ListSecrets", || {
                ctx.clients
                    .secrets
                    .list_secrets()
                    .set_filters(Some(filters.clone()))
                    .max_results(100)
                    .set_next_token(token.clone())
                    .send()
            })
            .await
            .map_err(CleanError::discover(SECRETS.kind, "ListSecrets"))?;
            let mut out = Vec::new();
            for s in page.secret_list() {
                let (Some(name), Some(arn)) = (s.name(), s.arn()) else {
                    continue;
                };
                if s.deleted_date().is_some() {
                    // Already scheduled for deletion (by sweeper or anyone).
                    continue;
                }
                let tags: Vec<(&str, &str)> = s
                    .tags()
                    .iter()
                    .filter_map(|t| Some((t.key()?, t.value()?)))
                    .collect();
                let verdict = decide(store, name, &tags, ctx.capa_cluster);
                let t = Target::new(arn, arn.to_string()).with_tags(tags.iter().copied());
                out.extend(judged(t, verdict));
            }
            Ok((out, page.next_token().map(str::to_string)))
        })
        .await?;
        Ok(found)
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<String>) -> Result<Outcome, CleanError> {
        let res = call("secretsmanager.DeleteSecret", || {
            ctx.clients
                .secrets
                .delete_secret()
                .secret_id(&t.detail)
                .recovery_window_in_days(RECOVERY_DAYS)
                .send()
        })
        .await;
        settle(res, SECRETS.kind, &t.id, "DeleteSecret")
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, CAPA_KEY, CLOUD_KEY, assert_calls, mock};
    use aws_sdk_secretsmanager::Client as Secrets;
    use aws_sdk_secretsmanager::operation::delete_secret::DeleteSecretOutput;
    use aws_sdk_secretsmanager::operation::list_secrets::ListSecretsOutput;
    use aws_sdk_secretsmanager::types::{FilterNameStringType, SecretListEntry, Tag};

    const UUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

    fn secret(name: &str, tags: &[(&str, &str)]) -> SecretListEntry {
        let mut b = SecretListEntry::builder().name(name).arn(format!(
            "arn:aws:secretsmanager:us-east-1:0:secret:{name}-AbCdEf"
        ));
        for (k, v) in tags {
            b = b.tags(Tag::builder().key(*k).value(*v).build());
        }
        b.build()
    }

    #[tokio::test]
    async fn capas_secrets_of_the_cluster_go_with_a_recovery_window_and_nothing_else() {
        let ours = format!("aws.cluster.x-k8s.io/{UUID}-0");
        let list = mock!(Secrets::list_secrets)
            .match_requests(|r| {
                let f = r.filters();
                f.len() == 2
                    && f[0].key() == Some(&FilterNameStringType::Name)
                    && f[0].values() == ["aws.cluster.x-k8s.io/"]
                    && f[1].key() == Some(&FilterNameStringType::TagKey)
                    && f[1].values() == [CAPA_KEY]
            })
            .then_output(move || {
                let both = [(CAPA_KEY, "owned"), (CLOUD_KEY, "owned")];
                let c10 = "sigs.k8s.io/cluster-api-provider-aws/cluster/c10";
                ListSecretsOutput::builder()
                    .secret_list(secret(&format!("aws.cluster.x-k8s.io/{UUID}-0"), &both))
                    // The prefix-matching tag filter finds c10's too: foreign.
                    .secret_list(secret(
                        &format!("aws.cluster.x-k8s.io/{UUID}-1"),
                        &[(c10, "owned")],
                    ))
                    // Our key on a name CAPA never gives: reported.
                    .secret_list(secret("aws.cluster.x-k8s.io/hand-made", &both))
                    .build()
            });
        let arn = format!("arn:aws:secretsmanager:us-east-1:0:secret:{ours}-AbCdEf");
        let want = arn.clone();
        let delete = mock!(Secrets::delete_secret)
            .match_requests(move |r| {
                r.secret_id() == Some(want.as_str())
                    && r.recovery_window_in_days() == Some(RECOVERY_DAYS)
                    && r.force_delete_without_recovery().is_none()
            })
            .then_output(|| DeleteSecretOutput::builder().build());
        let c = mocked::in_order(&[&list, &delete]);
        let inv = Inventory::default();
        let cx = ctx(&c, &inv);
        let found = BootstrapSecrets.discover(&cx).await.unwrap();
        let (kept, del): (Vec<_>, Vec<_>) = found.iter().partition(|t| t.kept.is_some());
        assert_eq!(
            del.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            [arn.as_str()]
        );
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(
            BootstrapSecrets.delete(&cx, del[0]).await.unwrap(),
            Outcome::Deleted
        );
        assert_calls(&delete, 1, "DeleteSecret");
    }
}
