//! Group commit for the cascade workers: each worker asks for its object to be archived and
//! waits; requests that arrive while a batch is being written (or within [`GATHER`] of each
//! other) go into the next batch together. So twenty workers deleting a 1,000-dependent cascade
//! share one read and one record per batch instead of a GET and a create each.

use super::store::{ArchiveError, Archiver, Item, Prepared};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long a batch waits for more requests after the last one arrived.
const GATHER: Duration = Duration::from_millis(5);

type Job = (Item, oneshot::Sender<Prepared>);

#[derive(Clone)]
pub struct Batcher {
    tx: mpsc::Sender<Job>,
    pub archiver: Arc<Archiver>,
}

impl Batcher {
    /// Starts the batching task; batches hold at most `max_batch` objects.
    pub fn start(archiver: Arc<Archiver>, max_batch: usize) -> Self {
        let (tx, rx) = mpsc::channel(max_batch.max(1) * 4);
        tokio::spawn(run(archiver.clone(), rx, max_batch.max(1)));
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

async fn run(archiver: Arc<Archiver>, mut rx: mpsc::Receiver<Job>, max_batch: usize) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < max_batch {
            match tokio::time::timeout(GATHER, rx.recv()).await {
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
