//! Group commit for the cascade workers: each worker asks for its object to be archived and
//! waits; requests that arrive while a batch is being written (or within the gather window of
//! each other: [`GATHER`], or [`gather_window`] under a client rate limit) go into the next batch
//! together. So twenty workers deleting a 1,000-dependent cascade
//! share one read and one record per batch instead of a GET and a create each.

use super::store::{ArchiveError, Archiver, Item, Prepared};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long a batch waits for more requests after the last one arrived, without a client rate
/// limit: busy workers then ask within microseconds of each other.
pub const GATHER: Duration = Duration::from_millis(5);

/// The gather window under a client rate limit of `qps` requests/s (0: none).
///
/// Under a limit, workers come back from their DELETEs one token apart (1/qps), so a 5 ms window
/// closes each batch on two or three workers, and each costs a record create and a settle: at
/// 20 requests/s a quarter of the tokens went to the archive. A window of two tokens gathers the
/// workers into one batch. Waiting costs no throughput: the token bucket keeps what is not spent
/// (up to its burst), and the batch's DELETEs spend it at once. Capped so that a lone deletion
/// under a very low limit does not wait long.
pub fn gather_window(qps: f64) -> Duration {
    if qps > 0.0 {
        Duration::from_secs_f64(2.0 / qps).clamp(GATHER, Duration::from_millis(250))
    } else {
        GATHER
    }
}

type Job = (Item, oneshot::Sender<Prepared>);

#[derive(Clone)]
pub struct Batcher {
    tx: mpsc::Sender<Job>,
    pub archiver: Arc<Archiver>,
}

impl Batcher {
    /// Starts the batching task; batches hold at most `max_batch` objects, and close when no
    /// request came for `gather`.
    pub fn start(archiver: Arc<Archiver>, max_batch: usize, gather: Duration) -> Self {
        let (tx, rx) = mpsc::channel(max_batch.max(1) * 4);
        tokio::spawn(run(archiver.clone(), rx, max_batch.max(1), gather));
        Batcher { tx, archiver }
    }

    /// Archives `item` (in whatever batch it joins) and says what to do with it.
    pub async fn prepare(&self, item: Item) -> Prepared {
        let (reply, rx) = oneshot::channel();
        if self.tx.send((item, reply)).await.is_err() {
            return Prepared::Failed(ArchiveError::ShuttingDown.into());
        }
        rx.await
            .unwrap_or_else(|_| Prepared::Failed(ArchiveError::ShuttingDown.into()))
    }
}

async fn run(
    archiver: Arc<Archiver>,
    mut rx: mpsc::Receiver<Job>,
    max_batch: usize,
    gather: Duration,
) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < max_batch {
            match tokio::time::timeout(gather, rx.recv()).await {
                Ok(Some(job)) => jobs.push(job),
                _ => break,
            }
        }
        let (items, replies): (Vec<Item>, Vec<oneshot::Sender<Prepared>>) =
            jobs.into_iter().unzip();
        let prepared = archiver.record(items).await;
        for (reply, p) in replies.into_iter().zip(prepared) {
            // A worker that went away (shutdown) will not delete: its entry must not stay.
            if let Err(Prepared::Recorded(t)) = reply.send(p) {
                archiver.settle(&t, false).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gather_window_spans_two_tokens_of_the_rate_limit_within_bounds() {
        assert_eq!(gather_window(0.0), GATHER, "unthrottled");
        assert_eq!(gather_window(20.0), Duration::from_millis(100));
        assert_eq!(
            gather_window(1000.0),
            GATHER,
            "never below the unthrottled window"
        );
        assert_eq!(gather_window(1.0), Duration::from_millis(250), "capped");
    }
}
