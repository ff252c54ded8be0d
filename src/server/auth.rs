//! Who may read /metrics, /status and /graph: a bearer token the API server authenticates
//! (TokenReview) and authorizes for the path (SubjectAccessReview on the non-resource URL, verb
//! `get`), as controller-runtime's `filters.WithAuthenticationAndAuthorization` (kubebuilder's
//! secure metrics serving). /healthz and /readyz never pass through here: probes carry no token.
//!
//! Every answer is cached by the SHA-256 of (token, path): a granted one for [`ALLOW_TTL`], a
//! refused one for [`DENY_TTL`], so a Prometheus scrape every 30 s costs the API server two
//! calls a minute, not two per scrape, and a stream of bad tokens cannot turn into a stream of
//! reviews faster than one per token and path every 10 s. An API server that cannot be asked is
//! a 503 and is not cached. The token itself is never kept or logged.

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a granted review is reused (controller-runtime's delegating authenticator caches a
/// TokenReview for 1 minute too). A revoked token or binding stops working within it.
pub const ALLOW_TTL: Duration = Duration::from_secs(60);
/// How long a refusal is reused (controller-runtime's authorizer: 30 s; shorter here, so a
/// binding just made is seen soon).
pub const DENY_TTL: Duration = Duration::from_secs(10);
/// At most this many cached answers; expired ones are dropped first, and past it a new answer
/// is simply not cached.
const CACHE_CAP: usize = 4096;

/// What the API server said of one token on one path.
#[derive(Clone, Debug, PartialEq)]
pub enum Review {
    Allowed {
        user: String,
    },
    /// TokenReview: not authenticated (unknown, expired or revoked token).
    Unauthenticated,
    /// SubjectAccessReview: authenticated as `user`, but not allowed `get` on the path.
    Forbidden {
        user: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("TokenReview failed: {0}")]
    TokenReview(#[source] kube::Error),
    #[error("SubjectAccessReview of {user} on {path} failed: {source}")]
    AccessReview {
        user: String,
        path: String,
        source: kube::Error,
    },
}

/// Reviews by the digest of (token, path), with when they were given.
type Cache = HashMap<[u8; 32], (Instant, Review)>;

/// Asks the API server, and remembers its answers for a while.
#[derive(Clone)]
pub struct Reviewer {
    client: kube::Client,
    cache: Arc<Mutex<Cache>>,
}

impl Reviewer {
    /// `client` must not be fenced by leadership or a pause: a standby answers scrapes too, and
    /// a review writes nothing.
    pub fn new(client: kube::Client) -> Reviewer {
        Reviewer {
            client,
            cache: Arc::default(),
        }
    }

    /// The review on `token` reading `path`, from the cache or the API server.
    pub async fn review(&self, token: &str, path: &str) -> Result<Review, ReviewError> {
        let key = cache_key(token, path);
        if let Some(v) = self.cached(&key) {
            return Ok(v);
        }
        let review = self.ask(token, path).await?;
        self.remember(key, review.clone());
        Ok(review)
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Review> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let (at, v) = cache.get(key)?;
        let ttl = match v {
            Review::Allowed { .. } => ALLOW_TTL,
            _ => DENY_TTL,
        };
        (at.elapsed() < ttl).then(|| v.clone())
    }

    fn remember(&self, key: [u8; 32], review: Review) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= CACHE_CAP {
            cache.retain(|_, (at, _)| at.elapsed() < ALLOW_TTL);
        }
        if cache.len() < CACHE_CAP {
            cache.insert(key, (Instant::now(), review));
        }
    }

    async fn ask(&self, token: &str, path: &str) -> Result<Review, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(ReviewError::TokenReview)?;
        let status = reviewed.status.unwrap_or_default();
        let (true, Some(who)) = (status.authenticated.unwrap_or(false), status.user) else {
            return Ok(Review::Unauthenticated);
        };
        let user = who.username.unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.clone()),
                groups: who.groups,
                uid: who.uid,
                extra: who.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some("get".to_string()),
                }),
                resource_attributes: None,
            },
            ..Default::default()
        };
        let answered = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(|source| ReviewError::AccessReview {
                user: user.clone(),
                path: path.to_string(),
                source,
            })?;
        Ok(match answered.status.is_some_and(|s| s.allowed) {
            true => Review::Allowed { user },
            false => Review::Forbidden { user },
        })
    }
}

fn cache_key(token: &str, path: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(token.as_bytes());
    // A separator no token contains, so (token, path) pairs cannot collide by concatenation.
    h.update([0u8]);
    h.update(path.as_bytes());
    h.finalize().into()
}

/// The bearer token of a request, if it carries one.
fn bearer(req: &Request) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The middleware in front of every route but the probes: 401 without a token or with one the
/// API server does not authenticate, 403 when it refuses `get` on the path, 503 when it cannot
/// be asked.
pub async fn require(State(reviewer): State<Reviewer>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    // Owned: the request (whose body is not Sync) must not be borrowed across the review.
    let Some(token) = bearer(&req).map(str::to_owned) else {
        return unauthorized("a bearer token is required (Authorization: Bearer <token>)");
    };
    match reviewer.review(&token, &path).await {
        Ok(Review::Allowed { .. }) => next.run(req).await,
        Ok(Review::Unauthenticated) => {
            unauthorized("the API server did not authenticate the token")
        }
        Ok(Review::Forbidden { user }) => {
            tracing::debug!(%user, %path, "refused: no get on the non-resource URL");
            (
                StatusCode::FORBIDDEN,
                format!("{user} may not get {path} (grant it with the sweeper-metrics-reader ClusterRole)\n"),
            )
                .into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, %path, "cannot review a request's token");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "cannot ask the API server to review the token\n",
            )
                .into_response()
        }
    }
}

fn unauthorized(why: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        format!("{why}\n"),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MockApi;
    use http::Method;
    use serde_json::json;

    const TR: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
    const SAR: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

    fn token_review(authenticated: bool) -> serde_json::Value {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {},
               "status": {"authenticated": authenticated,
                          "user": {"username": "system:serviceaccount:monitoring:prometheus",
                                   "groups": ["system:serviceaccounts"]}}})
    }

    fn access_review(allowed: bool) -> serde_json::Value {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {}, "status": {"allowed": allowed}})
    }

    #[tokio::test]
    async fn a_granted_token_is_reviewed_once_then_served_from_the_cache() {
        let (client, server) = MockApi::new();
        server
            .expect(Method::POST, TR)
            .respond(201, token_review(true));
        server
            .expect(Method::POST, SAR)
            .respond(201, access_review(true));
        let reviewer = Reviewer::new(client);
        for _ in 0..3 {
            assert_eq!(
                reviewer.review("t0ken", "/metrics").await.unwrap(),
                Review::Allowed {
                    user: "system:serviceaccount:monitoring:prometheus".into()
                }
            );
        }
        let calls = server.finish();
        assert_eq!(
            calls.len(),
            2,
            "one TokenReview and one SubjectAccessReview"
        );
        assert_eq!(calls[0].body["spec"]["token"], "t0ken");
        let attrs = &calls[1].body["spec"]["nonResourceAttributes"];
        assert_eq!(
            (attrs["path"].as_str(), attrs["verb"].as_str()),
            (Some("/metrics"), Some("get"))
        );
        assert_eq!(
            calls[1].body["spec"]["user"],
            "system:serviceaccount:monitoring:prometheus"
        );
        assert_eq!(
            calls[1].body["spec"]["groups"],
            json!(["system:serviceaccounts"])
        );
    }

    #[tokio::test]
    async fn each_path_is_authorized_on_its_own_and_a_refusal_names_the_user() {
        let (client, server) = MockApi::new();
        server
            .expect(Method::POST, TR)
            .respond(201, token_review(true));
        server
            .expect(Method::POST, SAR)
            .respond(201, access_review(true));
        server
            .expect(Method::POST, TR)
            .respond(201, token_review(true));
        server
            .expect(Method::POST, SAR)
            .respond(201, access_review(false));
        let reviewer = Reviewer::new(client);
        assert!(matches!(
            reviewer.review("t", "/metrics").await.unwrap(),
            Review::Allowed { .. }
        ));
        assert!(matches!(
            reviewer.review("t", "/status").await.unwrap(),
            Review::Forbidden { .. }
        ));
        assert_eq!(server.finish().len(), 4);
    }

    #[tokio::test]
    async fn an_unauthenticated_token_is_never_authorized() {
        let (client, server) = MockApi::new();
        server
            .expect(Method::POST, TR)
            .respond(201, token_review(false));
        let reviewer = Reviewer::new(client);
        assert_eq!(
            reviewer.review("bad", "/metrics").await.unwrap(),
            Review::Unauthenticated
        );
        // Cached: the same bad token again costs nothing for DENY_TTL.
        assert_eq!(
            reviewer.review("bad", "/metrics").await.unwrap(),
            Review::Unauthenticated
        );
        assert_eq!(
            server.finish().len(),
            1,
            "no SubjectAccessReview for an unknown token"
        );
    }

    #[tokio::test]
    async fn an_api_server_error_is_not_cached() {
        let (client, server) = MockApi::new();
        server
            .expect(Method::POST, TR)
            .respond_status(500, "InternalError");
        server
            .expect(Method::POST, TR)
            .respond(201, token_review(true));
        server
            .expect(Method::POST, SAR)
            .respond(201, access_review(true));
        let reviewer = Reviewer::new(client);
        assert!(reviewer.review("t", "/metrics").await.is_err());
        assert!(matches!(
            reviewer.review("t", "/metrics").await.unwrap(),
            Review::Allowed { .. }
        ));
        server.finish();
    }

    #[test]
    fn only_a_bearer_token_counts() {
        let req = |v: &str| {
            Request::builder()
                .header(header::AUTHORIZATION, v)
                .body(axum::body::Body::empty())
                .unwrap()
        };
        assert_eq!(bearer(&req("Bearer abc")), Some("abc"));
        assert_eq!(bearer(&req("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(&req("Basic abc")), None);
        assert_eq!(bearer(&req("Bearer ")), None);
        assert_ne!(cache_key("ab", "/c"), cache_key("a", "b/c"));
    }
}
