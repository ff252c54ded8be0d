//! A deduplicating work queue with per-item exponential backoff (client-go's workqueue semantics):
//! an item queued twice is processed once; an item being processed is never handed to a second
//! worker (re-adds while processing are deferred until `done`); failures requeue after a delay
//! that doubles per consecutive failure, up to a cap, with jitter.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

struct State<T> {
    queue: VecDeque<T>,
    dirty: HashSet<T>,
    processing: HashSet<T>,
    failures: HashMap<T, u32>,
    shutdown: bool,
}

pub struct WorkQueue<T> {
    state: Mutex<State<T>>,
    notify: Notify,
    base_delay: Duration,
    max_delay: Duration,
}

impl<T: Clone + Eq + Hash + Send + 'static> WorkQueue<T> {
    pub fn new(base_delay: Duration, max_delay: Duration) -> Arc<Self> {
        Arc::new(WorkQueue {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                failures: HashMap::new(),
                shutdown: false,
            }),
            notify: Notify::new(),
            base_delay,
            max_delay,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn add(&self, item: T) {
        let mut s = self.lock();
        if s.shutdown || !s.dirty.insert(item.clone()) {
            return;
        }
        if !s.processing.contains(&item) {
            s.queue.push_back(item);
            drop(s);
            self.notify.notify_one();
        }
    }

    /// Requeues after the item's backoff; call when processing failed and should be retried.
    pub fn add_rate_limited(self: &Arc<Self>, item: T) {
        let delay = {
            let mut s = self.lock();
            let n = s.failures.entry(item.clone()).or_insert(0);
            *n = n.saturating_add(1);
            backoff(self.base_delay, self.max_delay, *n)
        };
        self.add_after(item, delay);
    }

    pub fn add_after(self: &Arc<Self>, item: T, delay: Duration) {
        let q = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            q.add(item);
        });
    }

    /// Clears the item's failure count (call after success, or when giving up).
    pub fn forget(&self, item: &T) {
        self.lock().failures.remove(item);
    }

    pub fn failures(&self, item: &T) -> u32 {
        self.lock().failures.get(item).copied().unwrap_or(0)
    }

    /// Waits for an item; `None` once the queue is shut down.
    pub async fn get(&self) -> Option<T> {
        loop {
            let notified = self.notify.notified();
            {
                let mut s = self.lock();
                if s.shutdown {
                    return None;
                }
                if let Some(item) = s.queue.pop_front() {
                    s.dirty.remove(&item);
                    s.processing.insert(item.clone());
                    if !s.queue.is_empty() {
                        self.notify.notify_one();
                    }
                    return Some(item);
                }
            }
            notified.await;
        }
    }

    /// Marks processing finished; an item re-added meanwhile is queued now.
    pub fn done(&self, item: &T) {
        let mut s = self.lock();
        s.processing.remove(item);
        if s.dirty.contains(item) {
            s.queue.push_back(item.clone());
            drop(s);
            self.notify.notify_one();
        }
    }

    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queued plus in progress: zero means idle.
    pub fn pending(&self) -> usize {
        let s = self.lock();
        s.queue.len() + s.processing.len()
    }

    pub fn shutdown(&self) {
        self.lock().shutdown = true;
        self.notify.notify_waiters();
    }
}

/// `base * 2^(n-1)`, capped, with up to 10% jitter so retries of many items spread out.
pub fn backoff(base: Duration, max: Duration, failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(30);
    let d = base.saturating_mul(1u32 << exp).min(max);
    let jitter = d.mul_f64(rand_fraction() * 0.1);
    (d + jitter).min(max)
}

fn rand_fraction() -> f64 {
    rand::random::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn duplicates_are_processed_once() {
        let q = WorkQueue::new(Duration::from_millis(1), Duration::from_secs(1));
        q.add(1);
        q.add(1);
        q.add(2);
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, Some(1));
        assert_eq!(q.get().await, Some(2));
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn item_in_progress_is_not_handed_out_twice() {
        let q = WorkQueue::new(Duration::from_millis(1), Duration::from_secs(1));
        q.add(7);
        let item = q.get().await.unwrap();
        q.add(7);
        assert!(q.is_empty(), "re-add while processing waits for done");
        q.done(&item);
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some(7));
    }

    #[tokio::test]
    async fn rate_limited_items_come_back_with_growing_delays() {
        let q = WorkQueue::new(Duration::from_millis(5), Duration::from_millis(50));
        q.add_rate_limited(3);
        assert_eq!(q.failures(&3), 1);
        let got = tokio::time::timeout(Duration::from_secs(2), q.get())
            .await
            .unwrap();
        assert_eq!(got, Some(3));
        q.done(&3);
        q.forget(&3);
        assert_eq!(q.failures(&3), 0);
    }

    #[tokio::test]
    async fn shutdown_wakes_waiters() {
        let q: Arc<WorkQueue<u8>> =
            WorkQueue::new(Duration::from_millis(1), Duration::from_secs(1));
        let q2 = q.clone();
        let waiter = tokio::spawn(async move { q2.get().await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        q.shutdown();
        assert_eq!(waiter.await.unwrap(), None);
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Duration::from_millis(10);
        let m = Duration::from_secs(1);
        assert!(backoff(b, m, 1) >= b && backoff(b, m, 1) <= b.mul_f64(1.1));
        assert!(backoff(b, m, 3) >= Duration::from_millis(40));
        assert_eq!(backoff(b, m, 30), m);
    }
}
