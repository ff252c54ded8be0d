//! Backing off from AWS throttling per (account, region, service). AWS throttles an account's
//! calls to one service in one region; when it does, every teardown in that account and region
//! waits out one shared cool-down for that service before its next call, instead of each adding
//! to the storm, while teardowns in other accounts and regions never wait on it.
//!
//! A session's clients carry their [`Throttle`]; `errors::call` asks it before every attempt and
//! tells it of every throttling answer (through [`scope`], a task-local set for one pass). The
//! throttle also carries its account's request budget ([`crate::budget`]), which `errors::call`
//! takes a token from before every attempt.

use crate::budget::Budget;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The first cool-down after a throttling answer; it doubles with each one in a row.
const FIRST: Duration = Duration::from_millis(200);
/// The longest cool-down.
const MAX: Duration = Duration::from_secs(10);

/// One account and region's cool-downs, per service (`ec2`, `elasticloadbalancing`, ...).
#[derive(Debug, Default)]
pub struct Throttle {
    services: Mutex<HashMap<String, CoolDown>>,
    /// The account's request budget, shared with its sessions in other regions.
    budget: Option<Arc<Budget>>,
}

#[derive(Debug, Clone, Copy)]
struct CoolDown {
    until: Instant,
    next: Duration,
}

impl Throttle {
    /// A throttle whose calls also take tokens from their account's `budget`.
    pub fn with_budget(budget: Option<Arc<Budget>>) -> Self {
        Throttle {
            services: Mutex::default(),
            budget,
        }
    }

    /// The account's request budget, if it has one.
    pub fn budget(&self) -> Option<&Arc<Budget>> {
        self.budget.as_ref()
    }

    /// How long a call to `service` must wait now (zero when it need not).
    pub fn wait_for(&self, service: &str, now: Instant) -> Duration {
        let map = self.services.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(service)
            .map(|c| c.until.saturating_duration_since(now))
            .unwrap_or_default()
    }

    /// AWS throttled a call to `service`: every call to it in this account and region waits.
    pub fn throttled(&self, service: &str, now: Instant) {
        let mut map = self.services.lock().unwrap_or_else(PoisonError::into_inner);
        let c = map.entry(service.to_string()).or_insert(CoolDown {
            until: now,
            next: FIRST,
        });
        // Answers to calls sent before the cool-down began belong to the same burst: only a
        // throttling after it has run out makes the next one longer.
        if now >= c.until {
            c.until = now + c.next;
            c.next = (c.next * 2).min(MAX);
        }
    }

    /// A call to `service` went through: the next throttling starts from the first cool-down.
    pub fn succeeded(&self, service: &str) {
        let mut map = self.services.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = map.get_mut(service) {
            c.next = FIRST;
        }
    }
}

tokio::task_local! {
    static CURRENT: Arc<Throttle>;
}

/// Runs `f` (one teardown pass) with `throttle` as the one its AWS calls consult.
pub async fn scope<F: Future>(throttle: Arc<Throttle>, f: F) -> F::Output {
    CURRENT.scope(throttle, f).await
}

/// The throttle of the pass this task runs, if any.
pub fn current() -> Option<Arc<Throttle>> {
    CURRENT.try_with(Arc::clone).ok()
}

/// The service part of a call's name (`ec2.DescribeVpcs` -> `ec2`).
pub fn service_of(call: &str) -> &str {
    call.split_once('.').map_or(call, |(s, _)| s)
}

/// AWS's throttling codes (a subset of the transient ones: dependency errors do not slow an
/// account down).
pub fn is_throttling(code: Option<&str>, status: Option<u16>) -> bool {
    matches!(
        code,
        Some(
            "Throttling"
                | "ThrottlingException"
                | "ThrottledException"
                | "RequestLimitExceeded"
                | "RequestThrottled"
                | "RequestThrottledException"
                | "TooManyRequests"
                | "TooManyRequestsException"
        )
    ) || status == Some(429)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throttled_service_waits_and_others_do_not() {
        let t = Throttle::default();
        let now = Instant::now();
        assert_eq!(t.wait_for("ec2", now), Duration::ZERO);
        t.throttled("ec2", now);
        assert_eq!(t.wait_for("ec2", now), FIRST);
        assert_eq!(t.wait_for("elasticloadbalancing", now), Duration::ZERO);
        t.throttled("ec2", now);
        assert_eq!(t.wait_for("ec2", now), FIRST, "one burst, one cool-down");
        let after = now + FIRST;
        t.throttled("ec2", after);
        assert_eq!(t.wait_for("ec2", after), FIRST * 2, "cool-downs grow");
        t.succeeded("ec2");
        let later = now + MAX * 2;
        assert_eq!(t.wait_for("ec2", later), Duration::ZERO);
        t.throttled("ec2", later);
        assert_eq!(
            t.wait_for("ec2", later),
            FIRST,
            "a success resets the growth"
        );
    }

    #[test]
    fn cool_downs_are_bounded() {
        let t = Throttle::default();
        let mut now = Instant::now();
        for _ in 0..20 {
            now += t.wait_for("ec2", now);
            t.throttled("ec2", now);
        }
        assert_eq!(t.wait_for("ec2", now), MAX);
        assert_eq!(service_of("ec2.DescribeVpcs"), "ec2");
        assert!(is_throttling(Some("RequestLimitExceeded"), Some(400)));
        assert!(!is_throttling(Some("DependencyViolation"), Some(400)));
    }
}
