//! One row of the demo: what was created for it (its items), which of them are done (deleted, or
//! orphaned for the orphan tree), and when the last one was.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// One thing a step must see done. `key` is unique within the step.
#[derive(Clone, Debug)]
pub struct Item {
    pub kind: String,
    pub key: String,
}

impl Item {
    pub fn new(kind: impl Into<String>, name: impl AsRef<str>) -> Self {
        let kind = kind.into();
        let key = format!("{kind}/{}", name.as_ref());
        Item { kind, key }
    }
}

/// What one look at the world found for a step.
#[derive(Debug, Default)]
pub struct Observation {
    /// Keys of the items that are done.
    pub done: BTreeSet<String>,
    /// What the world says about the step (e.g. "root waits for 40 dependents").
    pub hint: String,
}

/// A step as the live table and the report show it.
pub struct StepState {
    pub title: String,
    pub items: Vec<Item>,
    pub done: BTreeSet<String>,
    pub hint: String,
    /// The object sweeper's `/status` names for this step's teardown (`Tenant/111111`), if any.
    pub teardown_object: Option<String>,
    /// The last phase the leader reported for that teardown, and its passes.
    pub sweeper_phase: Option<String>,
    pub passes: u64,
    pub finished: Option<Duration>,
}

impl StepState {
    pub fn new(
        title: impl Into<String>,
        items: Vec<Item>,
        teardown_object: Option<String>,
    ) -> Self {
        StepState {
            title: title.into(),
            items,
            done: BTreeSet::new(),
            hint: "waiting".into(),
            teardown_object,
            sweeper_phase: None,
            passes: 0,
            finished: None,
        }
    }

    /// Records an observation made `elapsed` after the deletes were sent.
    pub fn apply(&mut self, obs: Observation, elapsed: Duration) {
        if self.finished.is_some() {
            return;
        }
        self.done = obs.done;
        self.hint = obs.hint;
        if self.is_complete() {
            self.finished = Some(elapsed);
        }
    }

    pub fn is_complete(&self) -> bool {
        self.items.iter().all(|i| self.done.contains(&i.key))
    }

    pub fn done_count(&self) -> usize {
        self.items
            .iter()
            .filter(|i| self.done.contains(&i.key))
            .count()
    }

    /// Done items counted by kind, in creation order of the kinds.
    pub fn done_by_kind(&self) -> Vec<(String, usize)> {
        count_by_kind(self.items.iter().filter(|i| self.done.contains(&i.key)))
    }

    /// Items not done yet.
    pub fn left(&self) -> Vec<&Item> {
        self.items
            .iter()
            .filter(|i| !self.done.contains(&i.key))
            .collect()
    }

    /// The phase column: sweeper's own word while it works on it, else what the world shows.
    pub fn phase(&self) -> String {
        if self.finished.is_some() {
            return "done".into();
        }
        match &self.sweeper_phase {
            Some(p) => p.clone(),
            None => self.hint.clone(),
        }
    }
}

/// Counts items by kind, kinds in first-seen order.
pub fn count_by_kind<'a>(items: impl Iterator<Item = &'a Item>) -> Vec<(String, usize)> {
    let mut order: Vec<String> = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for i in items {
        if !counts.contains_key(&i.kind) {
            order.push(i.kind.clone());
        }
        *counts.entry(i.kind.clone()).or_default() += 1;
    }
    order
        .into_iter()
        .map(|k| {
            let n = counts[&k];
            (k, n)
        })
        .collect()
}

/// `ConfigMap 10, Secret 90`.
pub fn format_counts(counts: &[(String, usize)]) -> String {
    counts
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
