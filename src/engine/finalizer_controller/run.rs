//! Running a [`FinalizerController`]: its watches (one cluster-wide, or one per namespace of a
//! scope), the triggers (a resume, related changes), and its bound on concurrent reconciles.

use super::{FinalizerController, Pick, Reconciler, error_policy, reconcile};
use crate::engine::guard::{self, Guarded, WatchHealth};
use crate::engine::health::Health;
use futures::StreamExt;
use futures::stream::BoxStream;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// What a finalizer controller watches: every object of its kind, or only those of some
/// namespaces (one namespaced watch each, never a cluster-wide one filtered here, so the role
/// it needs can be namespaced), or only those a label selector selects (on the server).
pub struct Watches<K: Resource> {
    apis: Vec<Api<Guarded<K>>>,
    config: watcher::Config,
}

impl<K> Watches<K>
where
    K: Resource<DynamicType = ()>,
{
    /// Every object of the kind (one cluster-wide watch).
    pub fn all(client: Client) -> Self {
        Watches {
            apis: vec![Api::all(client)],
            config: watcher::Config::default(),
        }
    }

    /// The objects in `namespaces` (one watch each); every namespace when the list is empty.
    pub fn namespaces(client: Client, namespaces: &[String]) -> Self
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    {
        if namespaces.is_empty() {
            return Self::all(client);
        }
        Watches {
            apis: namespaces
                .iter()
                .map(|ns| Api::namespaced(client.clone(), ns))
                .collect(),
            config: watcher::Config::default(),
        }
    }

    /// Only the objects label selector `selector` selects (empty: all), asked of the server so
    /// the others are never seen.
    pub fn labelled(mut self, selector: &str) -> Self {
        if !selector.trim().is_empty() {
            self.config = self.config.labels(selector);
        }
        self
    }
}

impl<T: Reconciler> FinalizerController<T>
where
    <T::Object as Resource>::DynamicType: Default + Eq + Hash + Clone + Debug + Unpin,
{
    /// Runs the controller until `shutdown`; its watch health is `component` on `state`.
    /// `related`: called once per watch, each item of its stream reconciles at once the cached
    /// objects it picks. With several watches (a namespace scope) each runs its own controller,
    /// and one bound shared by all keeps the concurrency of one.
    pub async fn run(
        self: Arc<Self>,
        watches: Watches<T::Object>,
        state: Health,
        component: &'static str,
        shutdown: CancellationToken,
        related: impl Fn() -> Option<BoxStream<'static, Pick<T::Object>>>,
    ) {
        let shared = (watches.apis.len() > 1 && self.concurrency > 0)
            .then(|| Arc::new(Semaphore::new(usize::from(self.concurrency))));
        let runs = watches.apis.into_iter().map(|api| {
            self.clone().run_one(
                api,
                watches.config.clone(),
                WatchHealth {
                    state: state.clone(),
                    component,
                },
                shutdown.clone(),
                related(),
                shared.clone(),
            )
        });
        futures::future::join_all(runs).await;
    }

    async fn run_one(
        self: Arc<Self>,
        api: Api<Guarded<T::Object>>,
        config: watcher::Config,
        health: WatchHealth,
        shutdown: CancellationToken,
        related: Option<BoxStream<'static, Pick<T::Object>>>,
        shared: Option<Arc<Semaphore>>,
    ) {
        let collector = self.collector;
        // Work refused while paused waits out its retry delay; a resume retries it all at once.
        let resumes = futures::stream::unfold(self.fence.clone(), |fence| async move {
            fence.next_resume().await;
            Some(((), fence))
        });
        let forget = {
            let driver = self.clone();
            move |g: &Guarded<T::Object>| {
                if let Ok(obj) = &g.0 {
                    driver.reconciler.forget(obj);
                }
            }
        };
        let controller = guard::controller(api, config, health, forget);
        let store = controller.store();
        let picked = related
            .unwrap_or_else(|| futures::stream::empty().boxed())
            .flat_map(move |pick| {
                let refs: Vec<_> = store
                    .state()
                    .into_iter()
                    .filter(|g| g.0.as_ref().is_ok_and(|o| pick(o)))
                    .map(|g| ObjectRef::from_obj(&*g))
                    .collect();
                futures::stream::iter(refs)
            });
        controller
            .with_config(kube::runtime::controller::Config::default().concurrency(self.concurrency))
            .reconcile_all_on(resumes)
            .reconcile_on(picked)
            .graceful_shutdown_on(async move { shutdown.cancelled().await })
            .run(
                move |g, driver| {
                    let shared = shared.clone();
                    async move {
                        // Held for the reconcile; a closed semaphore (never) bounds nothing.
                        let _permit = match shared {
                            Some(s) => s.acquire_owned().await.ok(),
                            None => None,
                        };
                        reconcile::<T>(g, driver).await
                    }
                },
                error_policy::<T>,
                self,
            )
            .for_each(|r| async move {
                if let Err(e) = r {
                    tracing::debug!(collector, error = %e, "reconcile");
                }
            })
            .await;
    }
}
