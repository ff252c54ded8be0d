//! Sessions against LocalStack: throttling is kept per account and region, so a throttled account
//! does not slow the teardowns of another (throttling injected by a test-only HTTP client on the
//! sessions' configuration, never in the production library).

use crate::fixtures::*;
use std::sync::Arc;
use std::time::Instant;
use sweeper_aws::phases::{AwsClients, PassRequest, teardown_pass};
use sweeper_aws::session::{Principal, SessionCache, SessionSpec, StaticKeys};
use sweeper_aws::testing::AccountThrottle;

const THROTTLED: &str = "444444444444";
const CALM: &str = "555555555555";

fn spec(account: &str, label: &str) -> SessionSpec {
    SessionSpec {
        region: None,
        principal: Principal::Static(StaticKeys {
            access_key_id: account.into(),
            secret_access_key: "test".into(),
            session_token: None,
        }),
        chain: vec![format!("AWSClusterStaticIdentity {label}")],
    }
}

/// Fixture clients acting as `account` in the default region.
async fn fixtures_as(account: &str) -> AwsClients {
    use sweeper_aws::testing::localstack;
    let base = sdk().await;
    let region = base.region().map(|r| r.to_string()).unwrap_or_default();
    localstack::retrying_clients(&localstack::sdk_as(&base, &region, account))
}

/// Three security groups the cloud provider made for cluster `n` in `account`.
async fn groups(account: &str, n: &str) -> (AwsClients, Vec<String>) {
    let c = fixtures_as(account).await;
    let (v, _) = byo_network(&c).await;
    let mut out = Vec::new();
    for i in 0..3 {
        out.push(sg(&c, &v, &format!("{n}-sg{i}"), &[cloud(n, "owned")]).await);
    }
    (c, out)
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn a_throttled_account_does_not_slow_another() {
    let throttle = AccountThrottle::new();
    let hook = throttle.clone();
    let sessions = SessionCache::new(sdk().await, None)
        .with_hook(Arc::new(move |_spec, sdk| hook.install(sdk)));
    let (slow, fast) = (cluster("thra"), cluster("thrb"));
    let (slow_fixtures, slow_groups) = groups(THROTTLED, &slow).await;
    let (fast_fixtures, fast_groups) = groups(CALM, &fast).await;
    let a = sessions.session(&spec(THROTTLED, "a")).await.unwrap();
    let b = sessions.session(&spec(CALM, "b")).await.unwrap();
    assert_eq!(a.scope.account, THROTTLED);
    assert_eq!(b.scope.account, CALM);
    // Sessions of one account and region share its throttle; other accounts have their own.
    let a2 = sessions.session(&spec(THROTTLED, "a2")).await.unwrap();
    let (ta, tb, ta2) = (
        a.clients.throttle.clone().unwrap(),
        b.clients.throttle.clone().unwrap(),
        a2.clients.throttle.clone().unwrap(),
    );
    assert!(Arc::ptr_eq(&ta, &ta2));
    assert!(!Arc::ptr_eq(&ta, &tb));

    // Every EC2 call of the throttled account is refused for a while.
    throttle.throttle(THROTTLED, "ec2", 5);
    let calm_before = throttle.sent(CALM);
    let (req_a, req_b) = (PassRequest::new(&slow), PassRequest::new(&fast));
    let (ra, rb) = futures::join!(
        teardown_pass(&a.clients, &req_a),
        teardown_pass(&b.clients, &req_b),
    );
    assert!(
        rb.phases.iter().all(|p| p.is_clear()),
        "the calm account's pass is not held up: {rb:#?}"
    );
    for g in &fast_groups {
        assert!(!sg_exists(&fast_fixtures, g).await, "{g} deleted");
    }
    assert_eq!(throttle.throttled(CALM), 0);
    let now = Instant::now();
    assert!(
        tb.wait_for("ec2", now).is_zero(),
        "no cool-down for the calm account"
    );
    assert!(throttle.throttled(THROTTLED) > 0, "{ra:#?}");
    assert!(
        throttle.sent(CALM) - calm_before < 30,
        "the calm account made no extra calls: {}",
        throttle.sent(CALM) - calm_before
    );

    // The throttled account gets there once AWS lets it.
    until_done(&a.clients, &PassRequest::new(&slow), 10).await;
    for g in &slow_groups {
        assert!(!sg_exists(&slow_fixtures, g).await, "{g} deleted");
    }
}
