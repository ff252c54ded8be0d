//! CAPA's bootstrap parameters in SSM Parameter Store (see the module above for the rule and the
//! calls).

use super::{PARAMETERS, judged};
use crate::cleaners::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::{ApiFailure, ErrorClass, FailureKind, call};
use crate::locate::describe;
use crate::policy::bootstrap_data::{BootstrapStore, decide};
use crate::policy::tags::OWNED;
use async_trait::async_trait;

/// DeleteParameters' limit.
const PARAMETERS_PER_CALL: usize = 10;

pub struct BootstrapParameters;

#[async_trait]
impl Cleaner for BootstrapParameters {
    /// The parameter's name (the target's id is its ARN when SSM gives one).
    type Detail = String;

    fn descriptor(&self) -> &'static Descriptor {
        &PARAMETERS
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<String>>, CleanError> {
        use aws_sdk_ssm::types::ParameterStringFilter as F;
        let store = BootstrapStore::Ssm;
        let capa = ctx.capa_key();
        let filters = [
            F::builder()
                .key("Name")
                .option("BeginsWith")
                .values(store.prefix())
                .build(),
            F::builder()
                .key(format!("tag:{capa}"))
                .option("Equals")
                .values(OWNED)
                .build(),
        ]
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        // Never listed without them: every parameter found is taken to carry CAPA's owned tag
        // (the server's filter says so), so an empty filter list would claim other clusters'.
        .map_err(|e| CleanError::Discover {
            kind: PARAMETERS.kind,
            op: "DescribeParameters",
            source: ApiFailure {
                class: ErrorClass::Fatal,
                code: None,
                message: format!("building the parameter filters: {e}"),
                kind: FailureKind::Other,
            },
        })?;
        let (filters, capa) = (&filters, &capa);
        describe::all_pages(|token| async move {
            let page = call("ssm.DescribeParameters", || {
                ctx.clients
                    .ssm
                    .describe_parameters()
                    .set_parameter_filters(Some(filters.clone()))
                    .max_results(50)
                    .set_next_token(token.clone())
                    .send()
            })
            .await
            .map_err(CleanError::discover(PARAMETERS.kind, "DescribeParameters"))?;
            let mut out = Vec::new();
            for p in page.parameters() {
                let Some(name) = p.name() else { continue };
                // The server's filter matched CAPA's key with the value `owned` exactly.
                let tags = [(capa.as_str(), OWNED)];
                let verdict = decide(store, name, &tags, ctx.capa_cluster);
                let id = p.arn().unwrap_or(name);
                let t = Target::new(id, name.to_string()).with_tags(tags);
                out.extend(judged(t, verdict));
            }
            Ok((out, page.next_token().map(str::to_string)))
        })
        .await
    }

    /// Ten at a time: one outcome per target, in their order.
    async fn delete_together(
        &self,
        ctx: &CleanCtx<'_>,
        targets: &[Target<String>],
    ) -> Option<Vec<Result<Outcome, CleanError>>> {
        let mut out = Vec::with_capacity(targets.len());
        for chunk in targets.chunks(PARAMETERS_PER_CALL) {
            let names: Vec<String> = chunk.iter().map(|t| t.detail.clone()).collect();
            let res = call("ssm.DeleteParameters", || {
                ctx.clients
                    .ssm
                    .delete_parameters()
                    .set_names(Some(names.clone()))
                    .send()
            })
            .await;
            match res {
                Ok(done) => {
                    for t in chunk {
                        // Named as invalid: not found (already gone).
                        let gone = done.invalid_parameters().contains(&t.detail);
                        out.push(Ok(if gone {
                            Outcome::Gone
                        } else {
                            Outcome::Deleted
                        }));
                    }
                }
                Err(f) => {
                    for t in chunk {
                        out.push(settle::<()>(
                            Err(f.clone()),
                            PARAMETERS.kind,
                            &t.id,
                            "DeleteParameters",
                        ));
                    }
                }
            }
        }
        Some(out)
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<String>) -> Result<Outcome, CleanError> {
        let one = std::slice::from_ref(t);
        match self
            .delete_together(ctx, one)
            .await
            .and_then(|mut v| v.pop())
        {
            Some(o) => o,
            None => Ok(Outcome::Gone),
        }
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, CAPA_KEY, mock};
    use aws_sdk_ssm::Client as Ssm;
    use aws_sdk_ssm::operation::delete_parameters::DeleteParametersOutput;
    use aws_sdk_ssm::operation::describe_parameters::DescribeParametersOutput;
    use aws_sdk_ssm::types::ParameterMetadata;

    const UUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

    #[tokio::test]
    async fn capas_parameters_go_ten_at_a_time() {
        let list = mock!(Ssm::describe_parameters)
            .match_requests(|r| {
                let f = r.parameter_filters();
                f.len() == 2
                    && f[0].key() == "Name"
                    && f[0].option() == Some("BeginsWith")
                    && f[0].values() == ["/cluster.x-k8s.io/"]
                    && f[1].key() == format!("tag:{CAPA_KEY}")
                    && f[1].option() == Some("Equals")
                    && f[1].values() == ["owned"]
            })
            .then_output(|| {
                let mut b = DescribeParametersOutput::builder();
                for i in 0..11 {
                    b = b.parameters(
                        ParameterMetadata::builder()
                            .name(format!("/cluster.x-k8s.io/{UUID}/{i}"))
                            .build(),
                    );
                }
                b.parameters(
                    ParameterMetadata::builder()
                        .name("/cluster.x-k8s.io/mine")
                        .build(),
                )
                .build()
            });
        let first = mock!(Ssm::delete_parameters)
            .match_requests(|r| r.names().len() == 10)
            .then_output(|| DeleteParametersOutput::builder().build());
        let second = mock!(Ssm::delete_parameters)
            .match_requests(|r| r.names() == [format!("/cluster.x-k8s.io/{UUID}/10")])
            .then_output(|| {
                DeleteParametersOutput::builder()
                    .invalid_parameters(format!("/cluster.x-k8s.io/{UUID}/10"))
                    .build()
            });
        let c = mocked::in_order(&[&list, &first, &second]);
        let inv = Inventory::default();
        let cx = ctx(&c, &inv);
        let found = BootstrapParameters.discover(&cx).await.unwrap();
        let (kept, del): (Vec<_>, Vec<_>) = found.into_iter().partition(|t| t.kept.is_some());
        assert_eq!(del.len(), 11);
        assert_eq!(kept.len(), 1, "another name shape: reported");
        let outcomes = BootstrapParameters
            .delete_together(&cx, &del)
            .await
            .unwrap();
        let outcomes: Vec<Outcome> = outcomes.into_iter().map(Result::unwrap).collect();
        assert_eq!(outcomes[..10], [const { Outcome::Deleted }; 10]);
        assert_eq!(outcomes[10], Outcome::Gone, "named invalid: already gone");
    }
}
