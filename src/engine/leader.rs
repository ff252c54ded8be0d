//! Leader election on a `coordination.k8s.io/v1` Lease, client-go style, plus the fence that makes
//! "a replica that lost its lease stops deleting at once" hold even through a process pause.
//!
//! The protocol is client-go's `leaderelection` package:
//! - a candidate reads the Lease; if another identity holds it and the record has not changed for
//!   `lease_duration` *of this process's own clock* (never compare timestamps across machines), it
//!   is expired and may be taken with a resourceVersion-guarded update (409 = someone was faster);
//! - the leader renews every `retry_period`; if no renewal succeeds within `renew_deadline`, it
//!   steps down. `renew_deadline < lease_duration`, so it stops before anyone may take over;
//! - on SIGTERM the leader releases the Lease (empty holder) so the standby need not wait.
//!
//! The fence: every successful acquire/renew opens the [`Fence`] until `sent + renew_deadline`,
//! where `sent` is when the request *left*, so the window is conservative. Every mutating
//! Kubernetes request and every AWS call checks it ([`FenceLayer`](super::client::FenceLayer),
//! sweeper-aws's fence interceptor). A process frozen for longer than the renew deadline
//! (GC pause, SIGSTOP, a stalled node) therefore wakes up fenced before its elector has had a
//! chance to notice anything — the case where "check a flag set by the elector" fails.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Whether this process may change the world right now. Cheap to clone; clones share state.
///
/// One fence answers for two switches: the lease (above) and the operator's pause
/// ([`super::pause`]). A collector's fence is the process's lease fence joined with that
/// collector's pause flag ([`Fence::paused_by`]), so the same check on every write stops both a
/// replica that lost its lease and a paused collector.
#[derive(Clone, Debug)]
pub struct Fence {
    inner: Arc<FenceInner>,
    pause: Option<PauseFlag>,
}

/// One collector's pause switch: set while the operator has paused it (or until the switch was
/// first read).
#[derive(Clone, Debug)]
pub struct PauseFlag {
    pub collector: &'static str,
    pub paused: Arc<std::sync::atomic::AtomicBool>,
    /// Fires whenever the flag changes, so work parked on a paused fence resumes at once.
    pub changed: watch::Receiver<bool>,
}

/// Why the fence refused a write.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("this replica does not hold the leader lease")]
    NotLeader,
    #[error("the {0} collector is paused (sweeper resume)")]
    Paused(&'static str),
}

#[derive(Debug)]
struct FenceInner {
    base: Instant,
    /// Nanoseconds after `base` until which writes are allowed; `u64::MAX` = always (no leader
    /// election), 0 = closed.
    until: AtomicU64,
}

impl Fence {
    /// Always open: leader election is off, this process is the only writer by configuration.
    pub fn open() -> Self {
        Self::with(u64::MAX)
    }

    /// Closed until the first acquire.
    pub fn closed() -> Self {
        Self::with(0)
    }

    fn with(until: u64) -> Self {
        Fence {
            inner: Arc::new(FenceInner {
                base: Instant::now(),
                until: AtomicU64::new(until),
            }),
            pause: None,
        }
    }

    /// This fence, also closed while `flag` is set: a collector's own view of the fence.
    pub fn paused_by(&self, flag: PauseFlag) -> Fence {
        Fence {
            inner: self.inner.clone(),
            pause: Some(flag),
        }
    }

    pub fn permits(&self) -> bool {
        self.check().is_ok()
    }

    /// `Ok` if a write may leave now, else why not.
    pub fn check(&self) -> Result<(), Refusal> {
        if !self.permits_at(Instant::now()) {
            return Err(Refusal::NotLeader);
        }
        match &self.pause {
            Some(p) if p.paused.load(Ordering::Acquire) => Err(Refusal::Paused(p.collector)),
            _ => Ok(()),
        }
    }

    /// Waits until this fence's pause flag is clear (at once without one). Work refused by a
    /// pause parks here instead of spinning through retries, and resumes the moment the operator
    /// resumes.
    pub async fn resumed(&self) {
        let Some(p) = &self.pause else { return };
        let mut rx = p.changed.clone();
        while p.paused.load(Ordering::Acquire) {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    fn permits_at(&self, now: Instant) -> bool {
        let until = self.inner.until.load(Ordering::Acquire);
        until == u64::MAX || self.nanos(now) < until
    }

    /// Opens the fence until `deadline`. Never moves it back: the answer to an older renewal
    /// arriving late must not shorten the window a newer one earned.
    pub fn extend_until(&self, deadline: Instant) {
        let n = self.nanos(deadline).max(1);
        self.inner.until.fetch_max(n, Ordering::AcqRel);
    }

    /// Closes the fence now.
    pub fn revoke(&self) {
        self.inner.until.store(0, Ordering::Release);
    }

    /// Waits for the next resume: the pause flag going from set to clear. Never returns without
    /// a pause flag. Drives "retry everything now" when a collector is resumed.
    pub async fn next_resume(&self) {
        let Some(p) = &self.pause else {
            return std::future::pending().await;
        };
        let mut rx = p.changed.clone();
        while !p.paused.load(Ordering::Acquire) {
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
        self.resumed().await;
    }

    fn nanos(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.inner.base).as_nanos())
            .unwrap_or(u64::MAX - 1)
    }
}

#[derive(Clone, Debug)]
pub struct LeaderConfig {
    pub namespace: String,
    pub lease_name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LeaderConfigError {
    #[error(
        "--leader-elect-renew-deadline ({renew:?}) must be shorter than --leader-elect-lease-duration ({lease:?}): the leader must stop before anyone may take over"
    )]
    RenewNotBelowLease { renew: Duration, lease: Duration },
    #[error(
        "--leader-elect-retry-period ({retry:?}) must be shorter than --leader-elect-renew-deadline ({renew:?}): a leader must get more than one try to renew"
    )]
    RetryNotBelowRenew { retry: Duration, renew: Duration },
    #[error("--leader-elect-lease-duration must be at least 1s (the Lease stores whole seconds)")]
    LeaseTooShort,
    #[error("--leader-elect-namespace is empty and not running in a pod: set it")]
    NoNamespace,
    #[error("--leader-elect-lease-name is empty")]
    NoLeaseName,
}

impl LeaderConfig {
    pub fn validate(&self) -> Result<(), LeaderConfigError> {
        if self.lease_name.is_empty() {
            return Err(LeaderConfigError::NoLeaseName);
        }
        if self.namespace.is_empty() {
            return Err(LeaderConfigError::NoNamespace);
        }
        if self.lease_duration < Duration::from_secs(1) {
            return Err(LeaderConfigError::LeaseTooShort);
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(LeaderConfigError::RenewNotBelowLease {
                renew: self.renew_deadline,
                lease: self.lease_duration,
            });
        }
        if self.retry_period >= self.renew_deadline {
            return Err(LeaderConfigError::RetryNotBelowRenew {
                retry: self.retry_period,
                renew: self.renew_deadline,
            });
        }
        Ok(())
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

/// What this replica is, as published to the rest of the process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not yet talked to the API server.
    Starting,
    /// Someone else leads (or nobody yet, and we are waiting for the record to expire).
    Standby {
        holder: Option<String>,
    },
    Leading,
    /// Was leader and is not any more: stop everything (the process exits).
    Lost {
        reason: String,
    },
}

impl Role {
    pub fn name(&self) -> &'static str {
        match self {
            Role::Starting => "starting",
            Role::Standby { .. } => "standby",
            Role::Leading => "leader",
            Role::Lost { .. } => "lost",
        }
    }
}

/// The last record seen, and when (by our clock) it last changed.
#[derive(Debug, Default)]
struct Observed {
    key: Option<(Option<String>, Option<String>, Option<i32>)>,
    at: Option<Instant>,
}

impl Observed {
    fn see(&mut self, spec: &LeaseSpec, now: Instant) {
        let key = (
            spec.holder_identity.clone(),
            spec.renew_time.as_ref().map(|t| t.0.to_string()),
            spec.lease_duration_seconds,
        );
        if self.key.as_ref() != Some(&key) {
            self.key = Some(key);
            self.at = Some(now);
        }
    }
}

/// What to do with the Lease as read: pure, unit tested.
#[derive(Debug, PartialEq, Eq)]
pub enum LeaseDecision {
    /// Ours: renew it.
    Renew,
    /// Free (no holder) or expired: take it.
    Take,
    /// Someone else holds a live lease.
    Wait { holder: String },
}

pub fn decide(
    spec: &LeaseSpec,
    me: &str,
    observed_at: Instant,
    now: Instant,
    default_duration: Duration,
) -> LeaseDecision {
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder == me {
        return LeaseDecision::Renew;
    }
    if holder.is_empty() {
        return LeaseDecision::Take;
    }
    let duration = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map(Duration::from_secs)
        .unwrap_or(default_duration);
    if now.saturating_duration_since(observed_at) >= duration {
        LeaseDecision::Take
    } else {
        LeaseDecision::Wait {
            holder: holder.to_string(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum AttemptError {
    #[error("lease {0}: {1}")]
    Api(String, #[source] kube::Error),
}

enum Attempt {
    Acquired,
    HeldBy(String),
}

/// What the leader says in one annotation of its Lease at every write. The leader writes the
/// Lease every retry period anyway, so publishing costs no call and needs no permission beyond
/// the Lease's own: `sweeper check` reads the scheduled scan's state this way.
#[derive(Clone)]
pub struct LeaseNote {
    pub key: &'static str,
    /// Asked at every write.
    pub value: Arc<dyn Fn() -> Note + Send + Sync>,
}

/// A [`LeaseNote`]'s value for one write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// Leave the annotation as it is (e.g. a new leader with nothing to say yet keeps the
    /// previous leader's word).
    Keep,
    Set(String),
    Remove,
}

impl LeaseNote {
    fn apply(&self, annotations: &mut Option<BTreeMap<String, String>>) {
        match (self.value)() {
            Note::Keep => {}
            Note::Set(v) => {
                annotations
                    .get_or_insert_with(Default::default)
                    .insert(self.key.to_string(), v);
            }
            Note::Remove => {
                if let Some(a) = annotations.as_mut() {
                    a.remove(self.key);
                }
            }
        }
    }
}

pub struct Elector {
    api: Api<Lease>,
    cfg: LeaderConfig,
    fence: Fence,
    observed: Observed,
    notes: Vec<LeaseNote>,
}

impl Elector {
    /// `client` should be its own, unthrottled client: a collector saturating the shared rate
    /// limit must never starve the renewals (kube-controller-manager does the same).
    pub fn new(client: kube::Client, cfg: LeaderConfig, fence: Fence) -> Self {
        Elector {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            fence,
            observed: Observed::default(),
            notes: Vec::new(),
        }
    }

    /// Also keeps `note` on the Lease while leading.
    pub fn noting(mut self, note: LeaseNote) -> Self {
        self.notes.push(note);
        self
    }

    /// Runs until shutdown (then releases the lease if held) or until leadership is lost.
    /// Publishes every role change on `role`.
    pub async fn run(self, role: watch::Sender<Role>, shutdown: CancellationToken) {
        use tracing::Instrument;
        let span = tracing::info_span!(
            "leader_election",
            lease = %format!("{}/{}", self.cfg.namespace, self.cfg.lease_name),
            identity = %self.cfg.identity
        );
        self.run_inner(role, shutdown).instrument(span).await
    }

    async fn run_inner(mut self, role: watch::Sender<Role>, shutdown: CancellationToken) {
        let mut last_renew: Option<Instant> = None;
        loop {
            let sent = Instant::now();
            let result = self.attempt(sent).await;
            let leading = last_renew.is_some();
            match result {
                Ok(Attempt::Acquired) => {
                    self.fence.extend_until(sent + self.cfg.renew_deadline);
                    if !leading {
                        tracing::info!("acquired the lease: this replica is now the leader");
                        role.send_replace(Role::Leading);
                    }
                    last_renew = Some(sent);
                }
                Ok(Attempt::HeldBy(holder)) => {
                    if leading {
                        self.fence.revoke();
                        let reason = format!("the lease is now held by {holder}");
                        tracing::error!(%holder, "lost the lease; stopping all collectors");
                        role.send_replace(Role::Lost { reason });
                        return;
                    }
                    let changed = !matches!(&*role.borrow(), Role::Standby { holder: Some(h) } if *h == holder);
                    if changed {
                        tracing::info!(%holder, "standing by: another replica leads");
                        role.send_replace(Role::Standby {
                            holder: Some(holder),
                        });
                    }
                }
                Err(e) => {
                    if let Some(t) = last_renew {
                        if Instant::now() >= t + self.cfg.renew_deadline {
                            self.fence.revoke();
                            let reason = format!(
                                "could not renew within the renew deadline ({:?}): {e}",
                                self.cfg.renew_deadline
                            );
                            tracing::error!(error = %e, "lost the lease; stopping all collectors");
                            role.send_replace(Role::Lost { reason });
                            return;
                        }
                        tracing::warn!(error = %e, "lease renewal failed; retrying");
                    } else {
                        // Stays Starting (not ready) until the lease can be read: a replica that
                        // cannot reach it (RBAC, network) is no healthy standby.
                        tracing::warn!(error = %e, "cannot read or take the lease; retrying");
                    }
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
        if last_renew.is_some() {
            self.fence.revoke();
            match self.release().await {
                Ok(()) => tracing::info!("released the lease"),
                Err(e) => {
                    tracing::warn!(error = %e, "could not release the lease; the standby takes over when it expires")
                }
            }
        }
    }

    async fn attempt(&mut self, sent: Instant) -> Result<Attempt, AttemptError> {
        let name = self.cfg.lease_name.clone();
        let err = |e| AttemptError::Api(name.clone(), e);
        let now = MicroTime(Timestamp::now());
        let Some(mut lease) = self.api.get_opt(&name).await.map_err(err)? else {
            let mut metadata = ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            };
            self.notes
                .iter()
                .for_each(|n| n.apply(&mut metadata.annotations));
            let lease = Lease {
                metadata,
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.cfg.identity.clone()),
                    lease_duration_seconds: Some(self.cfg.lease_seconds()),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            self.api
                .create(&PostParams::default(), &lease)
                .await
                .map_err(err)?;
            return Ok(Attempt::Acquired);
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        self.observed.see(spec, Instant::now());
        let observed_at = self.observed.at.unwrap_or(sent);
        match decide(
            spec,
            &self.cfg.identity,
            observed_at,
            Instant::now(),
            self.cfg.lease_duration,
        ) {
            LeaseDecision::Wait { holder } => return Ok(Attempt::HeldBy(holder)),
            LeaseDecision::Renew => {}
            LeaseDecision::Take => {
                spec.holder_identity = Some(self.cfg.identity.clone());
                spec.acquire_time = Some(now.clone());
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
        }
        spec.renew_time = Some(now);
        spec.lease_duration_seconds = Some(self.cfg.lease_seconds());
        self.notes
            .iter()
            .for_each(|n| n.apply(&mut lease.metadata.annotations));
        // `replace` sends metadata.resourceVersion: a concurrent writer gets a 409 and we read
        // again on the next tick.
        self.api
            .replace(&name, &PostParams::default(), &lease)
            .await
            .map_err(err)?;
        Ok(Attempt::Acquired)
    }

    /// Empties the holder (client-go's ReleaseOnCancel), only if we still hold it.
    async fn release(&mut self) -> Result<(), AttemptError> {
        let name = self.cfg.lease_name.clone();
        let err = |e| AttemptError::Api(name.clone(), e);
        let Some(mut lease) = self.api.get_opt(&name).await.map_err(err)? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        self.api
            .replace(&name, &PostParams::default(), &lease)
            .await
            .map_err(err)?;
        Ok(())
    }
}

/// This process's identity when none is configured: `<hostname>_<random>`, like client-go, so two
/// processes on one host never share one.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "sweeper".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{host}_{:x}{:x}", std::process::id(), nanos & 0xffff_ffff)
}

/// The namespace for the Lease when none is configured: the pod's own (service account mount).
pub fn default_namespace() -> Option<String> {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Elector against a scripted API server: the exact Lease calls of taking, renewing,
    /// releasing and losing it (client-go's leaderelection protocol, as kube-controller-manager
    /// runs it).
    mod calls {
        use super::*;
        use crate::testing::MockApi;
        use http::Method;
        use serde_json::{Value, json};

        const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/ns/leases";
        const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/sweeper";

        fn cfg() -> LeaderConfig {
            LeaderConfig {
                namespace: "ns".into(),
                lease_name: "sweeper".into(),
                identity: "me".into(),
                lease_duration: Duration::from_secs(15),
                renew_deadline: Duration::from_millis(300),
                retry_period: Duration::from_millis(20),
            }
        }

        fn lease(holder: &str, rv: &str) -> Value {
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "sweeper", "namespace": "ns", "resourceVersion": rv},
                   "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                            "renewTime": "2026-11-26T08:00:00.000000Z", "leaseTransitions": 0}})
        }

        /// Runs an Elector on `client` until `stop`: its fence, its role, its task.
        fn start(
            client: kube::Client,
            stop: CancellationToken,
        ) -> (Fence, watch::Receiver<Role>, tokio::task::JoinHandle<()>) {
            let fence = Fence::closed();
            let (tx, role) = watch::channel(Role::Starting);
            let task = tokio::spawn(Elector::new(client, cfg(), fence.clone()).run(tx, stop));
            (fence, role, task)
        }

        /// The first tick: no Lease, so it is created.
        fn no_lease_then_created(server: &MockApi) {
            server
                .expect(Method::GET, LEASE)
                .respond_status(404, "NotFound");
            server
                .expect(Method::POST, LEASES)
                .respond(201, lease("me", "1"));
        }

        async fn role_becomes(role: &mut watch::Receiver<Role>, name: &str) {
            tokio::time::timeout(Duration::from_secs(5), role.wait_for(|r| r.name() == name))
                .await
                .unwrap_or_else(|_| panic!("role {name} within 5 s"))
                .unwrap();
        }

        #[tokio::test]
        async fn no_lease_is_created_then_renewed_by_replace_then_released_on_shutdown() {
            let (client, server) = MockApi::new();
            no_lease_then_created(&server);
            server
                .expect(Method::GET, LEASE)
                .respond(200, lease("me", "1"));
            server
                .expect(Method::PUT, LEASE)
                .respond(200, lease("me", "2"));
            // Every later tick renews the same way, and the release reads then replaces it.
            server
                .expect(Method::GET, LEASE)
                .repeatedly()
                .respond(200, lease("me", "2"));
            server
                .expect(Method::PUT, LEASE)
                .repeatedly()
                .respond(200, lease("me", "3"));
            let stop = CancellationToken::new();
            let (fence, mut role, task) = start(client, stop.clone());
            role_becomes(&mut role, "leader").await;
            assert!(fence.permits(), "the leader may write");
            server.wait_for_calls(4).await;
            stop.cancel();
            task.await.unwrap();
            assert!(!fence.permits(), "released: no more writes");
            let calls = server.finish();
            let created = &calls[1];
            assert_eq!(created.method, Method::POST);
            assert_eq!(created.body["spec"]["holderIdentity"], "me");
            assert_eq!(created.body["spec"]["leaseDurationSeconds"], 15);
            // Renewals send the resourceVersion read (a concurrent writer gets a 409).
            let renew = &calls[3];
            assert_eq!(renew.method, Method::PUT);
            assert_eq!(renew.body["metadata"]["resourceVersion"], "1");
            assert_eq!(renew.body["spec"]["holderIdentity"], "me");
            // The last call empties the holder (client-go's ReleaseOnCancel).
            let last = calls.last().unwrap();
            assert_eq!(last.method, Method::PUT);
            assert!(
                last.body["spec"]["holderIdentity"].is_null(),
                "{}",
                last.body
            );
            assert_eq!(last.body["spec"]["leaseDurationSeconds"], 1);
        }

        /// A note rides on every write of the Lease: set on create, kept as read, replaced,
        /// removed; the record's other annotations are never touched.
        #[tokio::test]
        async fn a_note_is_written_with_the_lease_and_nothing_else_is_touched() {
            let (client, server) = MockApi::new();
            no_lease_then_created(&server);
            let mut annotated = lease("me", "2");
            annotated["metadata"]["annotations"] = json!({"theirs": "x", "k": "old"});
            server
                .expect(Method::GET, LEASE)
                .repeatedly()
                .respond(200, annotated);
            server
                .expect(Method::PUT, LEASE)
                .repeatedly()
                .respond(200, lease("me", "3"));
            let value = Arc::new(std::sync::Mutex::new(Note::Set("new".into())));
            let note = LeaseNote {
                key: "k",
                value: {
                    let v = value.clone();
                    Arc::new(move || v.lock().unwrap().clone())
                },
            };
            let stop = CancellationToken::new();
            let (tx, mut role) = watch::channel(Role::Starting);
            let elector = Elector::new(client, cfg(), Fence::closed()).noting(note);
            let task = tokio::spawn(elector.run(tx, stop.clone()));
            role_becomes(&mut role, "leader").await;
            server.wait_for_calls(4).await;
            *value.lock().unwrap() = Note::Keep;
            server.wait_for_calls(12).await;
            *value.lock().unwrap() = Note::Remove;
            server.wait_for_calls(20).await;
            stop.cancel();
            task.await.unwrap();
            let calls = server.finish();
            let puts: Vec<&Value> = calls
                .iter()
                .filter(|c| c.method == Method::PUT)
                .map(|c| &c.body["metadata"]["annotations"])
                .collect();
            assert_eq!(calls[1].body["metadata"]["annotations"]["k"], "new");
            assert_eq!(puts[0], &json!({"theirs": "x", "k": "new"}));
            assert!(
                puts.contains(&&json!({"theirs": "x", "k": "old"})),
                "kept: {puts:?}"
            );
            assert!(puts.contains(&&json!({"theirs": "x"})), "removed: {puts:?}");
        }

        #[tokio::test]
        async fn a_leader_that_reads_another_holder_stops_at_once_and_does_not_release() {
            let (client, server) = MockApi::new();
            server
                .expect(Method::GET, LEASE)
                .respond(200, lease("", "1"));
            server
                .expect(Method::PUT, LEASE)
                .respond(200, lease("me", "2"));
            server
                .expect(Method::GET, LEASE)
                .repeatedly()
                .respond(200, lease("other", "3"));
            let (fence, mut role, task) = start(client, CancellationToken::new());
            role_becomes(&mut role, "lost").await;
            task.await.unwrap();
            assert!(!fence.permits());
            assert!(
                matches!(&*role.borrow(), Role::Lost { reason } if reason.contains("other")),
                "{:?}",
                role.borrow()
            );
            let calls = server.finish();
            // Taken (a free lease is taken with one replace), then only read: no write to a lease
            // someone else holds.
            assert_eq!(calls[1].body["spec"]["holderIdentity"], "me");
            assert!(calls[2..].iter().all(|c| c.method == Method::GET));
        }

        #[tokio::test]
        async fn a_leader_that_cannot_renew_within_its_deadline_stops() {
            let (client, server) = MockApi::new();
            no_lease_then_created(&server);
            server
                .expect(Method::GET, LEASE)
                .repeatedly()
                .respond_status(503, "ServiceUnavailable");
            let (fence, mut role, task) = start(client, CancellationToken::new());
            role_becomes(&mut role, "leader").await;
            role_becomes(&mut role, "lost").await;
            task.await.unwrap();
            assert!(!fence.permits());
            assert!(
                matches!(&*role.borrow(), Role::Lost { reason } if reason.contains("renew deadline")),
                "{:?}",
                role.borrow()
            );
        }
    }

    fn spec(holder: Option<&str>, secs: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(String::from),
            lease_duration_seconds: secs,
            ..Default::default()
        }
    }

    const D: Duration = Duration::from_secs(15);

    #[test]
    fn own_lease_is_renewed_and_a_free_one_taken() {
        let t = Instant::now();
        assert_eq!(
            decide(&spec(Some("me"), Some(15)), "me", t, t, D),
            LeaseDecision::Renew
        );
        assert_eq!(
            decide(&spec(None, Some(15)), "me", t, t, D),
            LeaseDecision::Take
        );
        assert_eq!(
            decide(&spec(Some(""), Some(1)), "me", t, t, D),
            LeaseDecision::Take
        );
    }

    #[test]
    fn another_holder_is_respected_until_the_record_is_stale_by_our_clock() {
        let t = Instant::now();
        let s = spec(Some("other"), Some(4));
        assert_eq!(
            decide(&s, "me", t, t + Duration::from_millis(3999), D),
            LeaseDecision::Wait {
                holder: "other".into()
            }
        );
        assert_eq!(
            decide(&s, "me", t, t + Duration::from_secs(4), D),
            LeaseDecision::Take
        );
        // Without a duration in the record, our own configured one applies.
        let s = spec(Some("other"), None);
        assert!(matches!(
            decide(&s, "me", t, t + Duration::from_secs(14), D),
            LeaseDecision::Wait { .. }
        ));
    }

    #[test]
    fn observation_time_moves_only_when_the_record_changes() {
        let t = Instant::now();
        let mut o = Observed::default();
        let s = spec(Some("a"), Some(15));
        o.see(&s, t);
        o.see(&s, t + Duration::from_secs(5));
        assert_eq!(o.at, Some(t));
        let mut renewed = s.clone();
        renewed.renew_time = Some(MicroTime(Timestamp::now()));
        o.see(&renewed, t + Duration::from_secs(6));
        assert_eq!(o.at, Some(t + Duration::from_secs(6)));
    }

    #[test]
    fn fence_opens_until_the_deadline_and_closes_on_revoke() {
        let f = Fence::closed();
        let t = Instant::now();
        assert!(!f.permits_at(t));
        f.extend_until(t + Duration::from_secs(10));
        assert!(f.permits_at(t + Duration::from_secs(9)));
        // Time alone closes it: a process frozen past the deadline wakes up fenced.
        assert!(!f.permits_at(t + Duration::from_secs(10)));
        // A late answer to an older renewal never shortens the window.
        f.extend_until(t + Duration::from_secs(5));
        assert!(f.permits_at(t + Duration::from_secs(9)));
        f.revoke();
        assert!(!f.permits_at(t));
        assert!(Fence::open().permits());
    }

    #[test]
    fn config_rejects_unsafe_timings_naming_the_flag() {
        let ok = LeaderConfig {
            namespace: "ns".into(),
            lease_name: "sweeper".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        };
        assert_eq!(ok.validate(), Ok(()));
        let bad = LeaderConfig {
            renew_deadline: Duration::from_secs(15),
            ..ok.clone()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("--leader-elect-renew-deadline")
        );
        let bad = LeaderConfig {
            retry_period: Duration::from_secs(10),
            ..ok.clone()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("--leader-elect-retry-period")
        );
        let bad = LeaderConfig {
            namespace: String::new(),
            ..ok
        };
        assert_eq!(bad.validate(), Err(LeaderConfigError::NoNamespace));
    }
}
