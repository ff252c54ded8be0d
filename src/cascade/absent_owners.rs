//! Owners known to be gone (upstream's absentOwnerCache): filled when a watch sees a delete and
//! when a live lookup finds nothing, so the many dependents of one deleted owner cost no lookups.
//! Bounded: the oldest entries fall out first; a miss only costs a live lookup, never a wrong answer.
//! Consulted only for uids the graph does not hold as observed: a uid seen again (a force-deleted
//! CRD re-created over custom resources still in etcd) is present whatever this cache remembers.

use crate::engine::graph::uid::Uid;
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

pub struct AbsentOwners {
    inner: Mutex<(HashSet<Uid>, VecDeque<Uid>)>,
    capacity: usize,
}

impl AbsentOwners {
    pub fn new(capacity: usize) -> Self {
        AbsentOwners {
            inner: Mutex::new((HashSet::new(), VecDeque::new())),
            capacity: capacity.max(1),
        }
    }

    pub fn insert(&self, uid: Uid) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if !g.0.insert(uid) {
            return;
        }
        g.1.push_back(uid);
        while g.1.len() > self.capacity {
            if let Some(old) = g.1.pop_front() {
                g.0.remove(&old);
            }
        }
    }

    pub fn contains(&self, uid: &Uid) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .contains(uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_entries_fall_out_first() {
        let c = AbsentOwners::new(2);
        c.insert(Uid([0, 1]));
        c.insert(Uid([0, 2]));
        c.insert(Uid([0, 1]));
        c.insert(Uid([0, 3]));
        assert!(!c.contains(&Uid([0, 1])));
        assert!(c.contains(&Uid([0, 2])) && c.contains(&Uid([0, 3])));
    }
}
