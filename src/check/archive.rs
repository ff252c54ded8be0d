//! The archive's size against its budget, and whether expiry keeps up.
//!
//! Records are ConfigMaps and Secrets in etcd, whose whole database is 2 GiB by default (8 GiB is
//! the most etcd recommends). The archive has no cap of its own: `--archive-ttl` bounds it in
//! time, and this check bounds it in bytes, against `--archive-budget` (default 256 MiB, an eighth
//! of a default etcd). Records whose expiry passed more than an hour ago mean expiry is not
//! running (sweeper stopped, or it may not deletecollection).

use super::{Config, Line, kube_message};
use crate::archive::{ANNOTATION_EXPIRES, LABEL_ARCHIVE};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};

const CATEGORY: &str = "archive";
/// How late an expired record may still be there before expiry counts as stuck: sweeper expires
/// on a timer, not at the second.
const GRACE_S: i64 = 3600;

/// What was counted of the records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub records: u64,
    pub bytes: u64,
    /// Records whose expiry passed more than [`GRACE_S`] ago.
    pub overdue: u64,
}

pub fn judge(t: &Tally, budget: u64) -> Vec<Line> {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let mut lines = vec![if t.bytes > budget {
        Line::fail(
            CATEGORY,
            format!(
                "{} records hold {:.1} MiB, over the budget of {:.1} MiB",
                t.records,
                mib(t.bytes),
                mib(budget)
            ),
            "shorten --archive-ttl (Helm: archive.ttl), archive less (--archive=selector=…), or \
             raise --archive-budget if etcd has room (etcd's quota is 2 GiB by default)",
        )
    } else {
        Line::pass(
            CATEGORY,
            format!(
                "{} records hold {:.1} MiB of the budget of {:.1} MiB",
                t.records,
                mib(t.bytes),
                mib(budget)
            ),
        )
    }];
    if t.overdue > 0 {
        lines.push(Line::warn(
            CATEGORY,
            format!(
                "{} records expired more than an hour ago and are still there",
                t.overdue
            ),
            "expiry runs in the leading replica: is sweeper running, and may it deletecollection \
             configmaps and secrets?",
        ));
    }
    lines
}

fn expired_long_ago(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    now: k8s_openapi::jiff::Timestamp,
) -> bool {
    annotations
        .and_then(|a| a.get(ANNOTATION_EXPIRES))
        .and_then(|v| v.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .is_some_and(|t| now.duration_since(t).as_secs() > GRACE_S)
}

/// Adds every record of kind `K` to `t`, a page at a time; `size` is a record's payload bytes.
async fn tally<K>(
    client: &kube::Client,
    t: &mut Tally,
    now: k8s_openapi::jiff::Timestamp,
    size: impl Fn(&K) -> u64,
) -> Result<(), kube::Error>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let mut lp = ListParams::default()
        .labels(&format!("{LABEL_ARCHIVE}=true"))
        .limit(500);
    loop {
        let list = api.list(&lp).await?;
        for o in &list.items {
            t.records += 1;
            t.bytes += size(o);
            t.overdue += u64::from(expired_long_ago(o.meta().annotations.as_ref(), now));
        }
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => return Ok(()),
        }
    }
}

pub async fn check(client: &kube::Client, cfg: &Config) -> Vec<Line> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut t = Tally::default();
    let configmaps = tally::<ConfigMap>(client, &mut t, now, |cm| {
        cm.data
            .iter()
            .flatten()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum()
    })
    .await;
    let secrets = tally::<Secret>(client, &mut t, now, |s| {
        s.data
            .iter()
            .flatten()
            .map(|(k, v)| (k.len() + v.0.len()) as u64)
            .sum()
    })
    .await;
    if let Err(e) = configmaps.and(secrets) {
        return vec![Line::warn(
            CATEGORY,
            format!("cannot list the archive's records: {}", kube_message(&e)),
            "see the rbac section",
        )];
    }
    judge(&t, cfg.archive_budget_bytes)
}
