//! A request budget per AWS account: a token bucket (calls per second, burst) that every session
//! of one account shares, whatever its region, so deleting a hundred clusters at once never
//! storms one account's API quota. [`crate::throttle`] reacts after AWS has throttled; the
//! budget keeps sweeper from getting there.
//!
//! Why per account, not per (account, region): AWS throttles each account per region per API
//! (EC2's non-mutating calls refill at 20/s, mutating at 5/s, per account and region), so per
//! (account, region) is the unit AWS counts in. But a platform engineer asks "how hard does
//! sweeper hit this account", the account's quota is shared with everything else running in it
//! (CAPA, Karpenter, the console), and IAM, which every pass asks, is global: one budget per
//! account is the conservative choice, it keeps every region of the account under the limit at
//! once, and it is the figure the fleet benchmark checks. With few regions per account it costs
//! little: a teardown's calls are sequential and already slower than the budget.
//!
//! A session's [`crate::throttle::Throttle`] carries its account's budget; `errors::call` takes
//! a token before every attempt (retries included) of a pass's calls. The session's one
//! `sts:GetCallerIdentity` and the leak scan are not budgeted (they are not a teardown's storm).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The budget of one account: `qps` calls per second after a burst of `burst`. `qps` 0 is no
/// budget at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccountBudget {
    pub qps: u32,
    pub burst: u32,
}

impl AccountBudget {
    /// No budget: calls wait only on AWS's own throttling.
    pub const UNLIMITED: AccountBudget = AccountBudget { qps: 0, burst: 0 };

    /// `sweeper run`'s default: EC2's non-mutating refill rate (20/s per account and region,
    /// per API), counted over all of the account's APIs and regions at once, and one second's
    /// worth of burst (EC2's buckets hold 100 and 200). See docs/capa.md, "Where each cluster is torn down".
    pub const DEFAULT: AccountBudget = AccountBudget { qps: 20, burst: 20 };

    pub fn is_unlimited(&self) -> bool {
        self.qps == 0
    }
}

/// The token bucket's arithmetic, with the clock passed in. Tokens may go below zero: each call
/// reserves the next free slot and is told how long to wait for it, so waiting calls are served
/// in the order they asked and none of them spins.
#[derive(Debug)]
pub struct Bucket {
    /// Tokens per second.
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket at `now`. A burst below one would never let a call through: it is one.
    pub fn new(budget: AccountBudget, now: Instant) -> Self {
        let burst = f64::from(budget.burst.max(1));
        Bucket {
            rate: f64::from(budget.qps),
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// Takes a token for a call made at `now`: how long the call must wait before it is sent.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if now > self.at {
            let refill = now.duration_since(self.at).as_secs_f64() * self.rate;
            self.tokens = (self.tokens + refill).min(self.burst);
            self.at = now;
        }
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }
}

/// One account's budget, shared by its sessions.
#[derive(Debug)]
pub struct Budget {
    account: String,
    bucket: Mutex<Bucket>,
    /// Nanoseconds calls have waited on this budget, in all.
    waited: AtomicU64,
}

impl Budget {
    /// `None` for an unlimited budget: no call waits, and none takes the lock.
    pub fn new(account: &str, budget: AccountBudget) -> Option<Self> {
        (!budget.is_unlimited()).then(|| Budget {
            account: account.to_string(),
            bucket: Mutex::new(Bucket::new(budget, Instant::now())),
            waited: AtomicU64::new(0),
        })
    }

    pub fn account(&self) -> &str {
        &self.account
    }

    /// Waits for this account's next token; returns how long it waited.
    pub async fn acquire(&self, call: &str) -> Duration {
        let wait = self
            .bucket
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reserve(Instant::now());
        if !wait.is_zero() {
            tracing::trace!(call, account = %self.account, ?wait, "account's request budget: waiting");
            let nanos = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
            self.waited.fetch_add(nanos, Ordering::Relaxed);
            tokio::time::sleep(wait).await;
        }
        wait
    }

    /// Seconds calls have waited on this budget since it was made.
    pub fn waited_seconds(&self) -> f64 {
        Duration::from_nanos(self.waited.load(Ordering::Relaxed)).as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_bucket_lets_a_burst_through_then_paces_at_its_rate() {
        let t0 = Instant::now();
        // (budget, calls at these offsets from t0 in ms, the waits they are told)
        let cases: &[(AccountBudget, &[u64], &[u64])] = &[
            // A burst of 2 goes at once; then one call per 100 ms (10/s), in the order asked.
            (
                AccountBudget { qps: 10, burst: 2 },
                &[0, 0, 0, 0],
                &[0, 0, 100, 200],
            ),
            // Time refills the bucket: 50 ms after the burst is half a token, 50 ms more to wait.
            (
                AccountBudget { qps: 10, burst: 2 },
                &[0, 0, 50, 300],
                &[0, 0, 50, 0],
            ),
            // An idle bucket never holds more than its burst.
            (
                AccountBudget { qps: 10, burst: 2 },
                &[0, 10_000, 10_000, 10_000],
                &[0, 0, 0, 100],
            ),
            // Burst 0 is read as 1 (a call must be able to go).
            (
                AccountBudget { qps: 20, burst: 0 },
                &[0, 0, 0],
                &[0, 50, 100],
            ),
            // The default: 20 at once, the 21st waits one token (50 ms).
            (
                AccountBudget::DEFAULT,
                &[0; 21],
                &[
                    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 50,
                ],
            ),
        ];
        for (budget, at, want) in cases {
            let mut b = Bucket::new(*budget, t0);
            let got: Vec<Duration> = at.iter().map(|&a| b.reserve(t0 + ms(a))).collect();
            let want: Vec<Duration> = want.iter().map(|&w| ms(w)).collect();
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    g.abs_diff(*w) < Duration::from_micros(1),
                    "{budget:?} at {at:?}: got {got:?}, want {want:?}"
                );
            }
        }
    }

    #[test]
    fn no_window_of_a_second_gets_more_than_burst_plus_rate() {
        // 200 calls asked at once and sent when told: in every 1-s window from the start at
        // most burst + qps of them go (the bound docs/capa.md states).
        let t0 = Instant::now();
        let budget = AccountBudget { qps: 20, burst: 5 };
        let mut b = Bucket::new(budget, t0);
        let sent: Vec<Duration> = (0..200).map(|_| b.reserve(t0)).collect();
        let last = sent.last().copied().unwrap_or_default();
        assert!(last >= Duration::from_secs_f64((200.0 - 5.0) / 20.0 - 0.001));
        for start in (0..last.as_millis() as u64).step_by(5) {
            let from = ms(start);
            let n = sent
                .iter()
                .filter(|s| **s >= from && **s < from + ms(1000))
                .count();
            assert!(n <= 25, "{n} calls in the second from {from:?}");
        }
    }

    #[test]
    fn an_unlimited_budget_is_none() {
        assert!(Budget::new("1", AccountBudget::UNLIMITED).is_none());
        assert!(
            Budget::new("1", AccountBudget { qps: 0, burst: 9 }).is_none(),
            "qps 0 is unlimited whatever the burst"
        );
        assert!(Budget::new("1", AccountBudget::DEFAULT).is_some());
    }

    /// Two accounts' passes through `errors::call` on mocked EC2: the account that spends its
    /// budget waits for tokens, the other one's calls go at once.
    #[tokio::test]
    async fn one_accounts_calls_wait_while_anothers_do_not() {
        use crate::errors::call;
        use crate::mocked::{self, RuleMode, assert_calls, mock};
        use crate::throttle::{Throttle, scope};
        use aws_sdk_ec2::Client;
        use std::sync::Arc;

        let describe = mock!(Client::describe_vpcs)
            .sequence()
            .output(|| aws_sdk_ec2::operation::describe_vpcs::DescribeVpcsOutput::builder().build())
            .times(5)
            .build();
        let c = mocked::clients(RuleMode::MatchAny, &[&describe]);
        let slow = AccountBudget { qps: 20, burst: 1 };
        let busy = Arc::new(Budget::new("111111111111", slow).unwrap());
        let calm = Arc::new(Budget::new("222222222222", slow).unwrap());
        let (ec2, busy_, calm_) = (&c.ec2, busy.clone(), calm.clone());
        let pass = |budget: Arc<Budget>, calls: usize| async move {
            let start = Instant::now();
            let t = Arc::new(Throttle::with_budget(Some(budget)));
            scope(t, async {
                for _ in 0..calls {
                    call("ec2.DescribeVpcs", || ec2.describe_vpcs().send())
                        .await
                        .unwrap();
                }
            })
            .await;
            start.elapsed()
        };
        // The busy account makes 4 calls: one from its burst, 3 paced at 20/s (>= 150 ms).
        let (busy_took, calm_took) = tokio::join!(pass(busy_, 4), pass(calm_, 1));
        assert_calls(&describe, 5, "DescribeVpcs");
        assert!(busy.waited_seconds() >= 0.1, "{}", busy.waited_seconds());
        assert!(busy_took >= ms(140), "{busy_took:?}");
        assert_eq!(calm.waited_seconds(), 0.0, "the calm account never waits");
        assert!(calm_took < ms(50), "{calm_took:?}");
    }
}
