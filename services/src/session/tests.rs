use super::*;

#[test]
fn request_ids_are_dropped_from_failure_texts() {
    let a = stable("AccessDenied: not allowed (request id: 7c8a619b-6d64-42e1-a840-ba637b25338b)");
    let b = stable("AccessDenied: not allowed (request id: 0d2a6c1e-1111-4222-8333-944444444444)");
    assert_eq!(a, b);
    assert!(a.contains("AccessDenied: not allowed"), "{a}");
    assert_eq!(
        stable("eu-west-1 role/capa-manager"),
        "eu-west-1 role/capa-manager"
    );
}

#[test]
fn only_the_sessions_own_partition_region_and_account_are_in_scope() {
    let scope = Scope {
        partition: "aws".into(),
        region: "eu-west-1".into(),
        account: "111111111111".into(),
    };
    let arn = |s: &str| s.parse::<Arn>().unwrap();
    assert_eq!(
        scope.foreign(&arn(
            "arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/net/a/1"
        )),
        None
    );
    for other in [
        "arn:aws:elasticloadbalancing:eu-west-1:222222222222:loadbalancer/net/a/1",
        "arn:aws:elasticloadbalancing:us-east-1:111111111111:loadbalancer/net/a/1",
        "arn:aws-cn:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/net/a/1",
        "arn:aws:ec2::111111111111:security-group/sg-1",
    ] {
        assert!(scope.foreign(&arn(other)).is_some(), "{other}");
    }
}

fn cache_holding(spec: &SessionSpec) -> SessionCache {
    let sdk = SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(Region::new("eu-west-1"))
        .build();
    let cache = SessionCache::new(sdk.clone(), None);
    let session = Session {
        clients: AwsClients::new(&sdk),
        scope: Scope {
            partition: "aws".into(),
            region: "eu-west-1".into(),
            account: "111111111111".into(),
        },
        caller: "arn:aws:iam::111111111111:user/sweeper".into(),
        chain: spec.chain_label(),
    };
    cache
        .sessions
        .lock()
        .unwrap()
        .insert(spec.clone(), (Arc::new(session), Instant::now()));
    cache
}

#[test]
fn a_session_is_forgotten_exactly_for_a_credential_failure() {
    use FailureKind::*;
    let spec = SessionSpec::controller(Some("eu-west-1".into()));
    for (kind, forgotten) in [
        (Credential, true),
        (Throttled, false),
        (NotFound, false),
        (Dependency, false),
        (LeaderLost, false),
        (Other, false),
    ] {
        let cache = cache_holding(&spec);
        // The text is the same for every kind: only the kind may decide.
        let failure = Failure::new(kind, "AuthFailure: ExpiredToken (leader lease)");
        let failures = [Failure::from("a text naming no cause"), failure];
        assert_eq!(
            cache.forget_if_credentials_failed(&spec, &failures),
            forgotten,
            "{kind:?}"
        );
        assert_eq!(cache.cached(&spec).is_none(), forgotten, "{kind:?}");
    }
    let cache = cache_holding(&spec);
    assert!(!cache.forget_if_credentials_failed(&spec, &[]));
    assert!(cache.cached(&spec).is_some());
}

#[test]
fn a_fenced_proof_is_unavailable_by_type_not_by_its_words() {
    use aws_sdk_sts::operation::get_caller_identity::GetCallerIdentityError;
    let fenced: SdkError<GetCallerIdentityError, HttpResponse> =
        SdkError::construction_failure(crate::fence::NotLeader);
    assert!(matches!(proof_failure(&fenced), Proof::Unavailable(_)));
    let same_words: SdkError<GetCallerIdentityError, HttpResponse> =
        SdkError::construction_failure(crate::fence::NotLeader.to_string());
    assert!(matches!(proof_failure(&same_words), Proof::Refused(_)));
}
