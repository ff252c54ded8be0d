//! The tasks that watch the world while sweeper works: one per kind of step, each recording what
//! it sees on the board, and the optional failover that stops the leader partway.

use crate::kube_util::Res;
use crate::live::{Shared, lock};
use crate::step::Observation;
use crate::{aws_world, tenant, trees, workload};
use kube::Client;
use std::time::Duration;
use sweeper_aws::phases::AwsClients;

/// When `--failover` stops the leader, counted from the deletes.
const FAILOVER_AT: Duration = Duration::from_secs(3);

/// Runs `observe` every `every` and records it, until the rows `rows` are finished.
async fn watch<F, Fut>(board: Shared, rows: std::ops::Range<usize>, every: Duration, mut observe: F)
where
    F: FnMut(Vec<Vec<String>>) -> Fut,
    Fut: std::future::Future<Output = Res<Vec<Observation>>>,
{
    loop {
        let keys: Vec<Vec<String>> = {
            let b = lock(&board);
            if b.steps[rows.clone()].iter().all(|s| s.finished.is_some()) {
                return;
            }
            b.steps[rows.clone()]
                .iter()
                .map(|s| s.items.iter().map(|i| i.key.clone()).collect())
                .collect()
        };
        match observe(keys).await {
            Ok(obs) => {
                let mut b = lock(&board);
                let t = b.t0.elapsed();
                for (s, o) in b.steps[rows.clone()].iter_mut().zip(obs) {
                    s.apply(o, t);
                }
            }
            Err(e) => {
                let mut b = lock(&board);
                for s in b.steps[rows.clone()].iter_mut() {
                    s.hint = format!("cannot look: {e}");
                }
            }
        }
        tokio::time::sleep(every).await;
    }
}

pub async fn watch_trees(board: Shared, c: Client) {
    watch(board, 0..3, Duration::from_millis(250), |keys| {
        let c = c.clone();
        async move { trees::observe(&c, &keys).await }
    })
    .await
}

pub async fn watch_tenant(board: Shared, c: Client) {
    watch(board, 3..4, Duration::from_millis(250), |keys| {
        let c = c.clone();
        async move { Ok(vec![tenant::observe(&c, &keys[0]).await?]) }
    })
    .await
}

pub async fn watch_workload(board: Shared, c: Client, aws: AwsClients, wl: Vec<aws_world::AwsRes>) {
    watch(board, 4..5, Duration::from_millis(500), |_| {
        let (c, aws, wl) = (c.clone(), aws.clone(), wl.clone());
        async move { Ok(vec![workload::observe(&c, &aws, &wl).await?]) }
    })
    .await
}

/// Stops the leader with SIGTERM (as Kubernetes stops a pod) while the teardowns run: it
/// releases the Lease and the standby takes over and resumes them.
pub async fn failover(board: Shared) {
    tokio::time::sleep(FAILOVER_AT).await;
    let target = {
        let b = lock(&board);
        if b.all_finished() {
            return;
        }
        b.leader().and_then(|r| r.pid.map(|p| (r.name.clone(), p)))
    };
    let Some((name, pid)) = target else { return };
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    let mut b = lock(&board);
    let t = b.t0.elapsed();
    let what = if sent {
        format!("SIGTERM to {name} (the leader): it releases the Lease, the standby takes over")
    } else {
        format!("could not signal {name} (pid {pid})")
    };
    b.events.push((t, what));
}
