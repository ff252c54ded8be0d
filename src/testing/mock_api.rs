//! A scripted API server behind a real `kube::Client`, for unit tests of decisions that make API
//! calls (kube-rs controller-rs's `ApiServerVerifier`, built the same way on
//! `tower_test::mock::pair`).
//!
//! Each test says which calls it allows and what they answer; every request is recorded, so the
//! test can then assert the exact calls made (method, path, query, body) — as the Kubernetes GC's
//! `TestAttemptToDeleteItem` does — and, just as important for a garbage collector, the calls
//! NOT made. A request nothing was scripted for is answered with a 500 Status (so the code under
//! test fails the way it would against a broken server, instead of hanging) and makes
//! [`MockApi::finish`] panic with the call named.
//!
//! ```ignore
//! let (client, server) = MockApi::new();
//! server.expect(Method::DELETE, "/api/v1/namespaces/ns/configmaps/x").respond(200, json!({}));
//! do_something(&client).await;
//! let calls = server.finish(); // every expectation used, nothing unexpected
//! assert_eq!(calls[0].body["preconditions"]["uid"], "u-1");
//! ```

use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// One request the code under test made.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: Method,
    pub path: String,
    /// The raw query string ("" when none).
    pub query: String,
    /// The request's Content-Type: tells a JSON patch from a merge patch.
    pub content_type: String,
    /// The JSON body (`Null` when empty or not JSON).
    pub body: Value,
}

impl Call {
    /// The value of query parameter `key`, percent-decoded, if present.
    pub fn query_param(&self, key: &str) -> Option<String> {
        self.query.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k == key).then(|| percent_decode(v))
        })
    }

    /// `METHOD path`, how failures name a call.
    pub fn line(&self) -> String {
        if self.query.is_empty() {
            format!("{} {}", self.method, self.path)
        } else {
            format!("{} {}?{}", self.method, self.path, self.query)
        }
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

struct Rule {
    method: Method,
    /// Exact path, or a prefix when it ends with `*`.
    path: String,
    status: u16,
    body: Value,
    /// Answers any number of calls (e.g. Events); otherwise exactly one.
    repeat: bool,
    used: usize,
}

impl Rule {
    fn matches(&self, method: &Method, path: &str) -> bool {
        if self.method != method || (!self.repeat && self.used > 0) {
            return false;
        }
        match self.path.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => path == self.path,
        }
    }
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    calls: Vec<Call>,
    unexpected: Vec<String>,
}

/// The server side of a mocked `kube::Client`: scripts answers, records calls.
pub struct MockApi {
    state: Arc<Mutex<State>>,
    /// Woken at every call, for tests that must act between two calls.
    called: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

/// A scripted call waiting for its answer ([`Expectation::respond`]).
#[must_use = "an expectation is registered only by respond()"]
pub struct Expectation<'a> {
    server: &'a MockApi,
    method: Method,
    path: String,
    repeat: bool,
}

impl Expectation<'_> {
    /// Answer any number of matching calls, not just one; such a rule need not be used.
    pub fn repeatedly(mut self) -> Self {
        self.repeat = true;
        self
    }

    /// Registers the answer: `status` with `body` as JSON.
    pub fn respond(self, status: u16, body: Value) {
        self.server.lock().rules.push(Rule {
            method: self.method,
            path: self.path,
            status,
            body,
            repeat: self.repeat,
            used: 0,
        });
    }

    /// Registers an API error: a `Status` object with `code` and `reason`, as the API server
    /// sends (kube turns it into `kube::Error::Api` with that code).
    pub fn respond_status(self, code: u16, reason: &str) {
        let body = status(code, reason);
        self.respond(code, body);
    }
}

/// A `metav1.Status` failure body.
pub fn status(code: u16, reason: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("mock: {reason}"),
        "reason": reason,
        "code": code,
    })
}

impl MockApi {
    /// A client whose every request goes to the returned server. Needs a Tokio runtime (the
    /// server answers from a task; kube's client buffers requests in another).
    pub fn new() -> (Client, MockApi) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let state: Arc<Mutex<State>> = Arc::default();
        let shared = state.clone();
        let called = Arc::new(tokio::sync::Notify::new());
        let notify = called.clone();
        let task = tokio::spawn(async move {
            while let Some((req, send)) = handle.next_request().await {
                let (parts, body) = req.into_parts();
                let bytes = body.collect_bytes().await.unwrap_or_default();
                let call = Call {
                    method: parts.method.clone(),
                    path: parts.uri.path().to_string(),
                    query: parts.uri.query().unwrap_or_default().to_string(),
                    content_type: parts
                        .headers
                        .get(http::header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string(),
                    body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                };
                let (code, body) = {
                    let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
                    let answer = s
                        .rules
                        .iter_mut()
                        .find(|r| r.matches(&call.method, &call.path))
                        .map(|r| {
                            r.used += 1;
                            (r.status, r.body.clone())
                        });
                    let answer = answer.unwrap_or_else(|| {
                        s.unexpected.push(call.line());
                        (500, status(500, "UnexpectedCall"))
                    });
                    s.calls.push(call);
                    answer
                };
                let response = Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
                    .unwrap_or_else(|_| Response::new(Body::empty()));
                send.send_response(response);
                notify.notify_waiters();
            }
        });
        (
            Client::new(service, "default"),
            MockApi {
                state,
                called,
                task,
            },
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Allows one `method` call to `path` (exact, or a prefix ending in `*`); answer it with
    /// [`Expectation::respond`]. Rules are tried in the order they were registered, and each
    /// answers once unless [`Expectation::repeatedly`].
    pub fn expect(&self, method: Method, path: &str) -> Expectation<'_> {
        Expectation {
            server: self,
            method,
            path: path.to_string(),
            repeat: false,
        }
    }

    /// Answers every Event the code publishes (events.k8s.io POSTs), so a test about other calls
    /// need not script them; they are still recorded (see [`MockApi::events`]).
    pub fn allow_events(&self) {
        self.expect(Method::POST, "/apis/events.k8s.io/v1/*")
            .repeatedly()
            .respond(201, json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}}));
    }

    /// Waits until `n` calls were made (panics after 5 s): lets a test change the world between
    /// a call and the retry it causes.
    pub async fn wait_for_calls(&self, n: usize) {
        let wait = async {
            loop {
                let woken = self.called.notified();
                if self.lock().calls.len() >= n {
                    return;
                }
                woken.await;
            }
        };
        if tokio::time::timeout(std::time::Duration::from_secs(5), wait)
            .await
            .is_err()
        {
            panic!(
                "waited 5 s for {n} API calls; made: {:#?}",
                self.lines_all()
            );
        }
    }

    fn lines_all(&self) -> Vec<String> {
        self.lock().calls.iter().map(Call::line).collect()
    }

    /// Every call so far, in the order received.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The `reason`s of the Events published so far.
    pub fn events(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == Method::POST && c.path.starts_with("/apis/events.k8s.io/"))
            .map(|c| c.body["reason"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Ends the test's conversation: panics if a call was not scripted or a scripted one-shot
    /// call was never made; returns every call, in order, for the test's own assertions.
    pub fn finish(&self) -> Vec<Call> {
        let s = self.lock();
        let calls: Vec<String> = s.calls.iter().map(Call::line).collect();
        assert!(
            s.unexpected.is_empty(),
            "unexpected API calls: {:?}\nall calls: {calls:#?}",
            s.unexpected
        );
        let unused: Vec<String> = s
            .rules
            .iter()
            .filter(|r| !r.repeat && r.used == 0)
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert!(
            unused.is_empty(),
            "expected API calls not made: {unused:?}\nall calls: {calls:#?}"
        );
        s.calls.clone()
    }
}

impl Drop for MockApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use kube::api::DeleteParams;

    #[tokio::test]
    async fn scripted_calls_are_answered_and_recorded() {
        let (client, server) = MockApi::new();
        server
            .expect(Method::GET, "/api/v1/namespaces/ns/configmaps/a")
            .respond(200, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "uid": "u"}}));
        server
            .expect(Method::DELETE, "/api/v1/namespaces/ns/configmaps/b")
            .respond_status(404, "NotFound");
        let api: Api<ConfigMap> = Api::namespaced(client, "ns");
        let a = api.get("a").await.unwrap();
        assert_eq!(a.metadata.uid.as_deref(), Some("u"));
        let err = api
            .delete("b", &DeleteParams::foreground())
            .await
            .unwrap_err();
        assert!(matches!(err, kube::Error::Api(s) if s.code == 404));
        let calls = server.finish();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].body["propagationPolicy"], "Foreground");
    }

    #[tokio::test]
    #[should_panic(expected = "unexpected API calls")]
    async fn an_unscripted_call_fails_the_test() {
        let (client, server) = MockApi::new();
        let api: Api<ConfigMap> = Api::namespaced(client, "ns");
        let err = api.get("x").await.unwrap_err();
        assert!(matches!(err, kube::Error::Api(s) if s.code == 500));
        server.finish();
    }

    #[tokio::test]
    #[should_panic(expected = "expected API calls not made")]
    async fn a_scripted_call_never_made_fails_the_test() {
        let (_client, server) = MockApi::new();
        server
            .expect(Method::DELETE, "/api/v1/namespaces/ns/configmaps/x")
            .respond(200, json!({}));
        server.finish();
    }

    #[test]
    fn query_parameters_are_decoded() {
        let c = Call {
            method: Method::GET,
            path: "/".into(),
            query: "labelSelector=a%3Db%2Cc&limit=500".into(),
            content_type: String::new(),
            body: Value::Null,
        };
        assert_eq!(c.query_param("labelSelector").as_deref(), Some("a=b,c"));
        assert_eq!(c.query_param("limit").as_deref(), Some("500"));
        assert_eq!(c.query_param("none"), None);
    }
}
