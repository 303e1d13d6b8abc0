//! [`FakeApi`]: a scripted stand-in for the kube API server in unit tests.
//!
//! It hands out a real [`kube::Client`] ([`FakeApi::client`]) whose every request stays in
//! the process: nothing listens on a socket, so it works on tokio's paused clock too. Every
//! request is recorded ([`FakeApi::requests`]) with its method, path, query and body (parsed
//! as JSON), and answered from a script:
//!
//! - rules, tried in the order they were added: [`FakeApi::on`] (always the same [`Reply`]),
//!   [`FakeApi::once`] (the first matching request only), [`FakeApi::on_fn`] (a closure
//!   that sees the [`Request`]);
//! - then, if [`FakeApi::echo_writes`] was called, an API server that accepts every write
//!   (creates get a name, a UID and a resourceVersion; updates and patches come back with a
//!   new resourceVersion; deletes succeed);
//! - then the default answer: 404 `NotFound` as a `Status` ([`FakeApi::otherwise`] changes
//!   it).
//!
//! Rules match a method (`"*"` for any) and a path pattern whose segments are literal,
//! `*` (exactly one segment) or `**` (any number of segments, also none):
//! `/api/v1/namespaces/*/pods`, `**/status`, `/apis/apps/v1/**`. The query is not part of
//! the pattern; a closure can look at it ([`Request::param`]).
//!
//! [`Reply`] has constructors for the `Status` bodies the API server sends, with upstream's
//! reasons and message shapes (`k8s.io/apimachinery/pkg/api/errors/errors.go`): 404
//! `NotFound`, 409 `Conflict` and `AlreadyExists`, 410 `Expired`/`Gone`, 422 `Invalid`, 403
//! `Forbidden` (also the namespace-terminating refusal), 500 `InternalError`, plus transport
//! failures.
//!
//! ```
//! # async fn demo() -> anyhow::Result<()> {
//! use k8s_openapi::api::core::v1::Pod;
//! use rkcm_testkit::fake_api::{FakeApi, Reply};
//!
//! let api = FakeApi::new();
//! api.once("PUT", "**/status", Reply::conflict("pods", "web-1"))
//!     .echo_writes();
//! let pods: kube::Api<Pod> = kube::Api::namespaced(api.client(), "ns");
//! assert!(pods.get("web-1").await.is_err()); // 404 by default
//! assert_eq!(api.requests_to("GET", "/api/v1/namespaces/ns/pods/*").len(), 1);
//! # Ok(())
//! # }
//! ```

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};

/// One request the client sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`.
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The raw query string (`""` if none), e.g. `labelSelector=app%3Dweb&watch=true`.
    pub query: String,
    /// The `Content-Type` header (`""` if none): tells the patch types apart.
    pub content_type: String,
    /// The body as JSON (`Null` when empty or not JSON).
    pub body: Value,
}

impl Request {
    /// The decoded value of query parameter `key`, if present.
    pub fn param(&self, key: &str) -> Option<String> {
        form_urlencoded::parse(self.query.as_bytes())
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    }

    /// Whether this request has `method` (`"*"`: any) and a path matching `pattern`.
    pub fn is(&self, method: &str, pattern: &str) -> bool {
        (method == "*" || method.eq_ignore_ascii_case(&self.method))
            && path_matches(pattern, &self.path)
    }

    /// `metadata.name` of the body, or `""`.
    pub fn body_name(&self) -> &str {
        self.body["metadata"]["name"].as_str().unwrap_or_default()
    }
}

/// The answer to one request: an HTTP status and a JSON body, or a transport failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    answer: Answer,
}

#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Json(u16, Value),
    Fail(String),
}

impl Reply {
    /// `code` with `body`.
    pub fn json(code: u16, body: Value) -> Self {
        Self {
            answer: Answer::Json(code, body),
        }
    }

    /// 200 with `body`.
    pub fn ok(body: Value) -> Self {
        Self::json(200, body)
    }

    /// 201 with `body`.
    pub fn created(body: Value) -> Self {
        Self::json(201, body)
    }

    /// 200 with a `Status` of `Success` (what a DELETE may answer).
    pub fn success() -> Self {
        Self::ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}))
    }

    /// An error `Status` with this code, reason and message.
    pub fn status(code: u16, reason: &str, message: &str) -> Self {
        Self::json(code, status(code, reason, message))
    }

    /// 404 `NotFound`: `<resource> "<name>" not found`. `resource` is the plural with its
    /// group, as the API server names it (`pods`, `replicasets.apps`).
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self::status(404, "NotFound", &format!("{resource} \"{name}\" not found"))
    }

    /// 409 `Conflict` for a stale resourceVersion, with upstream's message.
    pub fn conflict(resource: &str, name: &str) -> Self {
        Self::status(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been \
                 modified; please apply your changes to the latest version and try again"
            ),
        )
    }

    /// 409 `Conflict` for a failed UID precondition (a delete or update of an object that was
    /// replaced by another of the same name).
    pub fn uid_precondition_failed(expected: &str, actual: &str) -> Self {
        Self::status(
            409,
            "Conflict",
            &format!(
                "Precondition failed: UID in precondition: {expected}, UID in object meta: {actual}"
            ),
        )
    }

    /// 409 `AlreadyExists`: `<resource> "<name>" already exists`.
    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self::status(
            409,
            "AlreadyExists",
            &format!("{resource} \"{name}\" already exists"),
        )
    }

    /// 410 `Expired`: a list or watch from a compacted resourceVersion.
    pub fn expired(requested: &str, current: &str) -> Self {
        Self::status(
            410,
            "Expired",
            &format!("too old resource version: {requested} ({current})"),
        )
    }

    /// 410 `Gone` with `message`.
    pub fn gone(message: &str) -> Self {
        Self::status(410, "Gone", message)
    }

    /// 422 `Invalid`: `<Kind> "<name>" is invalid: <field>: <message>, ...`, with one cause
    /// per `(field, message)`.
    pub fn invalid(kind: &str, name: &str, causes: &[(&str, &str)]) -> Self {
        let text: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let mut body = status(
            422,
            "Invalid",
            &format!("{kind} \"{name}\" is invalid: {}", text.join(", ")),
        );
        body["details"] = json!({
            "name": name,
            "kind": kind,
            "causes": causes.iter().map(|(f, m)| json!({
                "reason": "FieldValueInvalid", "message": m, "field": f,
            })).collect::<Vec<_>>(),
        });
        Self::json(422, body)
    }

    /// 403 `Forbidden` with `message` (quota, RBAC, admission).
    pub fn forbidden(message: &str) -> Self {
        Self::status(403, "Forbidden", message)
    }

    /// 403 `Forbidden` with the `NamespaceTerminating` cause: a create in a namespace that
    /// is being deleted.
    pub fn namespace_terminating(namespace: &str) -> Self {
        let mut body = status(
            403,
            "Forbidden",
            &format!(
                "unable to create new content in namespace {namespace} because it is being \
                 terminated"
            ),
        );
        body["details"] = json!({"causes": [{
            "reason": "NamespaceTerminating",
            "message": format!("namespace {namespace} is being terminated"),
            "field": "metadata.namespace",
        }]});
        Self::json(403, body)
    }

    /// 500 `InternalError` with `message`.
    pub fn internal(message: &str) -> Self {
        Self::status(500, "InternalError", message)
    }

    /// No HTTP answer at all: the client sees a transport error (connection refused).
    pub fn transport_error(message: &str) -> Self {
        Self {
            answer: Answer::Fail(message.to_owned()),
        }
    }

    /// The HTTP status, or `None` for a transport error.
    pub fn code(&self) -> Option<u16> {
        match &self.answer {
            Answer::Json(code, _) => Some(*code),
            Answer::Fail(_) => None,
        }
    }

    /// The JSON body, or `None` for a transport error.
    pub fn body(&self) -> Option<&Value> {
        match &self.answer {
            Answer::Json(_, body) => Some(body),
            Answer::Fail(_) => None,
        }
    }
}

/// A `Status` body as the API server sends it with an error.
pub fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "code": code, "reason": reason, "message": message,
    })
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

struct Rule {
    method: String,
    pattern: String,
    /// How many more requests it answers (`None`: any number).
    left: Option<usize>,
    answer: Arc<Handler>,
}

struct State {
    rules: Vec<Rule>,
    delays: Vec<(String, String, std::time::Duration)>,
    in_flight: usize,
    max_in_flight: usize,
    echo: bool,
    fallback: Arc<Handler>,
    log: Vec<Request>,
    /// The resourceVersion the next echoed write gets.
    next_rv: u64,
    /// Objects echoed as created so far (names and UIDs of generated objects count it).
    created: u64,
}

/// A scripted fake API server; cloning shares the script and the log. See the module
/// documentation.
#[derive(Clone)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
}

impl Default for FakeApi {
    fn default() -> Self {
        Self::new()
    }
}

/// The first resourceVersion [`FakeApi::echo_writes`] hands out.
pub const FIRST_ECHO_RESOURCE_VERSION: u64 = 100;

impl FakeApi {
    /// An API server that answers 404 `NotFound` to everything until told otherwise.
    pub fn new() -> Self {
        let fallback: Arc<Handler> = Arc::new(|req: &Request| {
            Reply::status(
                404,
                "NotFound",
                &format!(
                    "fake API: no answer scripted for {} {}",
                    req.method, req.path
                ),
            )
        });
        Self {
            state: Arc::new(Mutex::new(State {
                rules: Vec::new(),
                delays: Vec::new(),
                in_flight: 0,
                max_in_flight: 0,
                echo: false,
                fallback,
                log: Vec::new(),
                next_rv: FIRST_ECHO_RESOURCE_VERSION,
                created: 0,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn add(&self, method: &str, pattern: &str, left: Option<usize>, answer: Arc<Handler>) -> &Self {
        self.lock().rules.push(Rule {
            method: method.to_owned(),
            pattern: pattern.to_owned(),
            left,
            answer,
        });
        self
    }

    /// Answers every request matching `method` and `pattern` with `reply`.
    pub fn on(&self, method: &str, pattern: &str, reply: Reply) -> &Self {
        self.add(
            method,
            pattern,
            None,
            Arc::new(move |_: &Request| reply.clone()),
        )
    }

    /// Answers the first request matching `method` and `pattern` with `reply`; later ones go
    /// on to the next rules.
    pub fn once(&self, method: &str, pattern: &str, reply: Reply) -> &Self {
        self.times(1, method, pattern, reply)
    }

    /// Answers the first `n` requests matching `method` and `pattern` with `reply`.
    pub fn times(&self, n: usize, method: &str, pattern: &str, reply: Reply) -> &Self {
        self.add(
            method,
            pattern,
            Some(n),
            Arc::new(move |_: &Request| reply.clone()),
        )
    }

    /// Answers requests matching `method` and `pattern` with what `f` returns.
    pub fn on_fn(
        &self,
        method: &str,
        pattern: &str,
        f: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> &Self {
        self.add(method, pattern, None, Arc::new(f))
    }

    /// Accepts every write no rule answered, as the API server would: a POST comes back
    /// (201) with `metadata.name` filled from `generateName` if empty, a UID `uid-<n>` and
    /// the next resourceVersion; PUT and PATCH come back (200) with the next
    /// resourceVersion; DELETE answers a `Success` Status. Resource versions count up from
    /// [`FIRST_ECHO_RESOURCE_VERSION`], one per write. GETs still get the default answer.
    pub fn echo_writes(&self) -> &Self {
        self.lock().echo = true;
        self
    }

    /// Holds requests matching `method` and `pattern` for `delay` (tokio time: the paused
    /// clock applies) before the server sees them: they are recorded and answered only
    /// then, so a request whose client gave up meanwhile never shows in the log. The first
    /// matching delay applies.
    pub fn delay(&self, method: &str, pattern: &str, delay: std::time::Duration) -> &Self {
        self.lock()
            .delays
            .push((method.to_owned(), pattern.to_owned(), delay));
        self
    }

    /// The most requests that were in the fake at once (held by [`FakeApi::delay`] or being
    /// answered).
    pub fn max_in_flight(&self) -> usize {
        self.lock().max_in_flight
    }

    /// Replaces the default answer (404 `NotFound`) given when nothing else answers.
    pub fn otherwise(&self, f: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> &Self {
        self.lock().fallback = Arc::new(f);
        self
    }

    /// A client whose requests all go to this fake (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        let api = self.clone();
        let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let api = api.clone();
            async move {
                let (parts, body) = req.into_parts();
                let bytes = body.collect_bytes().await.unwrap_or_default();
                let request = Request {
                    method: parts.method.to_string(),
                    path: parts.uri.path().to_owned(),
                    query: parts.uri.query().unwrap_or_default().to_owned(),
                    content_type: parts
                        .headers
                        .get(http::header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned(),
                    body: read_body(&parts.headers, &bytes),
                };
                let delay = api.enter(&request);
                let _leave = InFlight(api.clone());
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                match api.answer(request).answer {
                    Answer::Json(code, body) => {
                        let mut resp = http::Response::new(kube::client::Body::from(
                            serde_json::to_vec(&body).unwrap_or_default(),
                        ));
                        *resp.status_mut() = http::StatusCode::from_u16(code)
                            .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
                        resp.headers_mut().insert(
                            http::header::CONTENT_TYPE,
                            http::HeaderValue::from_static("application/json"),
                        );
                        Ok(resp)
                    }
                    Answer::Fail(message) => Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        message,
                    )),
                }
            }
        });
        kube::Client::new(svc, "default")
    }

    /// Counts `request` in flight and returns how long to hold it.
    fn enter(&self, request: &Request) -> std::time::Duration {
        let mut state = self.lock();
        state.in_flight += 1;
        state.max_in_flight = state.max_in_flight.max(state.in_flight);
        state
            .delays
            .iter()
            .find(|(m, p, _)| request.is(m, p))
            .map(|(_, _, d)| *d)
            .unwrap_or_default()
    }

    /// Records `request` and works out the reply. The handler runs without the lock held,
    /// so a closure may use the fake (e.g. look at earlier requests).
    fn answer(&self, request: Request) -> Reply {
        let (handler, echo) = {
            let mut state = self.lock();
            state.log.push(request.clone());
            let found = state
                .rules
                .iter_mut()
                .find(|r| r.left != Some(0) && request.is(&r.method, &r.pattern));
            match found {
                Some(rule) => {
                    if let Some(left) = rule.left.as_mut() {
                        *left -= 1;
                    }
                    (Some(rule.answer.clone()), false)
                }
                None => (None, state.echo && request.method != "GET"),
            }
        };
        if let Some(handler) = handler {
            return handler(&request);
        }
        if echo {
            return self.echo(&request);
        }
        let fallback = self.lock().fallback.clone();
        fallback(&request)
    }

    fn echo(&self, req: &Request) -> Reply {
        let mut state = self.lock();
        if req.method == "DELETE" {
            return Reply::success();
        }
        let rv = state.next_rv;
        state.next_rv += 1;
        let mut body = req.body.clone();
        if !body.is_object() {
            body = json!({});
        }
        body["metadata"]["resourceVersion"] = json!(rv.to_string());
        if req.method != "POST" {
            return Reply::ok(body);
        }
        let n = state.created;
        state.created += 1;
        if body["metadata"]["name"].as_str().is_none_or(str::is_empty) {
            let prefix = body["metadata"]["generateName"]
                .as_str()
                .unwrap_or("object-")
                .to_owned();
            body["metadata"]["name"] = json!(format!("{prefix}{n}"));
        }
        body["metadata"]["uid"] = json!(format!("uid-{n}"));
        if let Some(ns) = namespace_of(&req.path) {
            body["metadata"]["namespace"] = json!(ns);
        }
        Reply::created(body)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.lock().log.clone()
    }

    /// Requests so far with `method` (`"*"`: any) and a path matching `pattern`.
    pub fn requests_to(&self, method: &str, pattern: &str) -> Vec<Request> {
        self.lock()
            .log
            .iter()
            .filter(|r| r.is(method, pattern))
            .cloned()
            .collect()
    }

    /// `(method, path)` of every request but GETs, in arrival order.
    pub fn writes(&self) -> Vec<(String, String)> {
        self.lock()
            .log
            .iter()
            .filter(|r| r.method != "GET")
            .map(|r| (r.method.clone(), r.path.clone()))
            .collect()
    }

    /// How many requests arrived so far.
    pub fn count(&self) -> usize {
        self.lock().log.len()
    }

    /// Forgets the requests recorded so far (the script stays).
    pub fn clear(&self) {
        self.lock().log.clear();
    }
}

/// Leaves the in-flight count when the request is answered or its client gives up.
struct InFlight(FakeApi);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
    }
}

/// The namespace in a namespaced path (`/api/v1/namespaces/<ns>/...`).
/// A request's body as JSON: a protobuf pod (rkcm creates pods in protobuf) is read back into
/// the JSON it was written from; anything else that is not JSON is `null`.
fn read_body(headers: &http::HeaderMap, bytes: &[u8]) -> Value {
    let protobuf = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(rkcm_runtime::api::protobuf::MEDIA_TYPE));
    if protobuf {
        rkcm_runtime::api::protobuf::encode::pod_json(bytes).unwrap_or(Value::Null)
    } else {
        serde_json::from_slice(bytes).unwrap_or(Value::Null)
    }
}

fn namespace_of(path: &str) -> Option<&str> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["api", _, "namespaces", ns, _, ..] | ["apis", _, _, "namespaces", ns, _, ..] => Some(ns),
        _ => None,
    }
}

/// Whether `path` matches `pattern` (segments: literal, `*` one, `**` any number).
pub fn path_matches(pattern: &str, path: &str) -> bool {
    let pat: Vec<&str> = pattern.trim_start_matches('/').split('/').collect();
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    segments_match(&pat, &segs)
}

fn segments_match(pat: &[&str], segs: &[&str]) -> bool {
    match pat.split_first() {
        None => segs.is_empty(),
        Some((&"**", rest)) => (0..=segs.len()).any(|skip| segments_match(rest, &segs[skip..])),
        Some((first, rest)) => segs.split_first().is_some_and(|(seg, segs)| {
            (*first == "*" || first == seg) && segments_match(rest, segs)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

    fn pod_json(generate: &str) -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": generate, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }))
        .expect("pod")
    }

    #[test]
    fn patterns_match_segments() {
        assert!(path_matches(
            "/api/v1/namespaces/*/pods",
            "/api/v1/namespaces/ns/pods"
        ));
        assert!(!path_matches(
            "/api/v1/namespaces/*/pods",
            "/api/v1/namespaces/ns/pods/a"
        ));
        assert!(path_matches(
            "**/status",
            "/apis/apps/v1/namespaces/ns/replicasets/web/status"
        ));
        assert!(!path_matches("**/status", "/api/v1/namespaces/ns/pods/a"));
        assert!(path_matches("/apis/apps/v1/**", "/apis/apps/v1"));
        assert!(path_matches("**", "/anything/at/all"));
        assert!(path_matches(
            "/api/v1/**/pods/*",
            "/api/v1/namespaces/ns/pods/a"
        ));
        assert!(!path_matches("/api/v1/pods", "/api/v1/pods/x"));
    }

    #[test]
    fn query_parameters_are_decoded() {
        let r = Request {
            method: "GET".into(),
            path: "/api/v1/pods".into(),
            query: "labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=true&x".into(),
            content_type: String::new(),
            body: Value::Null,
        };
        assert_eq!(
            r.param("labelSelector").as_deref(),
            Some("app=web,tier in (a)")
        );
        assert_eq!(r.param("watch").as_deref(), Some("true"));
        assert_eq!(r.param("x").as_deref(), Some(""));
        assert_eq!(r.param("y"), None);
        assert!(r.is("get", "/api/v1/*"));
        assert!(!r.is("POST", "/api/v1/*"));
    }

    #[tokio::test]
    async fn unscripted_requests_get_404_and_are_recorded() {
        let api = FakeApi::new();
        let pods: Api<Pod> = Api::namespaced(api.client(), "ns");
        let err = pods.get("a").await.expect_err("404");
        assert!(
            matches!(&err, kube::Error::Api(s) if s.code == 404 && s.reason == "NotFound"),
            "{err}"
        );
        let lp = ListParams::default().labels("app=web");
        assert!(pods.list(&lp).await.is_err());
        let reqs = api.requests();
        assert_eq!(reqs.len(), 2);
        assert_eq!(
            (reqs[0].method.as_str(), reqs[0].path.as_str()),
            ("GET", "/api/v1/namespaces/ns/pods/a")
        );
        assert_eq!(reqs[1].param("labelSelector").as_deref(), Some("app=web"));
    }

    #[tokio::test]
    async fn rules_answer_in_order_and_once_rules_run_out() {
        let api = FakeApi::new();
        api.once("PUT", "**/status", Reply::conflict("pods", "a"))
            .on(
                "PUT",
                "**/status",
                Reply::ok(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}})),
            )
            .on("*", "**", Reply::internal("etcd is sad"));
        let pods: Api<Pod> = Api::namespaced(api.client(), "ns");
        let pod = pod_json("a-");
        let first = pods.replace_status("a", &PostParams::default(), &pod).await;
        match first {
            Err(kube::Error::Api(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
                assert!(
                    s.message
                        .starts_with("Operation cannot be fulfilled on pods \"a\""),
                    "{}",
                    s.message
                );
            }
            other => panic!("want conflict, got {other:?}"),
        }
        let second = pods.replace_status("a", &PostParams::default(), &pod).await;
        assert_eq!(second.expect("ok").metadata.name.as_deref(), Some("a"));
        let other = pods
            .delete("a", &DeleteParams::default())
            .await
            .expect_err("500");
        assert!(
            matches!(other, kube::Error::Api(s) if s.code == 500 && s.reason == "InternalError")
        );
        assert_eq!(api.requests_to("PUT", "**").len(), 2);
        assert_eq!(api.writes().len(), 3);
    }

    #[tokio::test]
    async fn closures_see_the_request() {
        let api = FakeApi::new();
        api.on_fn("PATCH", "/api/v1/namespaces/*/pods/*", |req| {
            Reply::ok(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": req.path.rsplit('/').next(), "labels": req.body["metadata"]["labels"]},
            }))
        });
        let pods: Api<Pod> = Api::namespaced(api.client(), "ns");
        let patched = pods
            .patch(
                "b",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
            )
            .await
            .expect("patched");
        assert_eq!(patched.metadata.name.as_deref(), Some("b"));
        assert_eq!(
            patched
                .metadata
                .labels
                .and_then(|l| l.get("x").cloned())
                .as_deref(),
            Some("y")
        );
        assert_eq!(
            api.requests()[0].content_type,
            "application/merge-patch+json"
        );
    }

    #[tokio::test]
    async fn echo_fills_names_uids_and_resource_versions() {
        let api = FakeApi::new();
        api.echo_writes();
        let pods: Api<Pod> = Api::namespaced(api.client(), "ns");
        let a = pods
            .create(&PostParams::default(), &pod_json("web-"))
            .await
            .expect("a");
        let b = pods
            .create(&PostParams::default(), &pod_json("web-"))
            .await
            .expect("b");
        assert_eq!(a.metadata.name.as_deref(), Some("web-0"));
        assert_eq!(b.metadata.name.as_deref(), Some("web-1"));
        assert_eq!(a.metadata.uid.as_deref(), Some("uid-0"));
        assert_eq!(a.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(a.metadata.resource_version.as_deref(), Some("100"));
        assert_eq!(b.metadata.resource_version.as_deref(), Some("101"));
        let cms: Api<ConfigMap> = Api::namespaced(api.client(), "ns");
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}})).expect("cm");
        let replaced = cms
            .replace("c", &PostParams::default(), &cm)
            .await
            .expect("put");
        assert_eq!(replaced.metadata.resource_version.as_deref(), Some("102"));
        pods.delete("web-0", &DeleteParams::default())
            .await
            .expect("delete");
        assert!(pods.get("web-0").await.is_err(), "GETs are not echoed");
    }

    #[tokio::test]
    async fn status_helpers_carry_upstream_reasons() {
        let api = FakeApi::new();
        api.once(
            "POST",
            "**",
            Reply::already_exists("replicasets.apps", "web-x"),
        )
        .once(
            "POST",
            "**",
            Reply::invalid("Pod", "p", &[("spec.containers", "Required value")]),
        )
        .once("POST", "**", Reply::namespace_terminating("ns"))
        .once("POST", "**", Reply::expired("5", "9"))
        .once("POST", "**", Reply::uid_precondition_failed("u1", "u2"))
        .once("POST", "**", Reply::transport_error("connection refused"));
        let pods: Api<Pod> = Api::namespaced(api.client(), "ns");
        let mut seen = Vec::new();
        for _ in 0..5 {
            match pods.create(&PostParams::default(), &pod_json("p-")).await {
                Err(kube::Error::Api(s)) => seen.push((s.code, s.reason, s.message)),
                other => panic!("want an API error, got {other:?}"),
            }
        }
        assert_eq!(
            seen[0],
            (
                409,
                "AlreadyExists".into(),
                "replicasets.apps \"web-x\" already exists".into()
            )
        );
        assert_eq!(
            seen[1],
            (
                422,
                "Invalid".into(),
                "Pod \"p\" is invalid: spec.containers: Required value".into()
            )
        );
        assert_eq!(seen[2].0, 403);
        assert!(seen[2].2.contains("because it is being terminated"));
        assert_eq!(
            seen[3],
            (
                410,
                "Expired".into(),
                "too old resource version: 5 (9)".into()
            )
        );
        assert_eq!(
            seen[4],
            (
                409,
                "Conflict".into(),
                "Precondition failed: UID in precondition: u1, UID in object meta: u2".into()
            )
        );
        let err = pods
            .create(&PostParams::default(), &pod_json("p-"))
            .await
            .expect_err("transport");
        assert!(!matches!(err, kube::Error::Api(_)), "{err:?}");
        assert_eq!(api.count(), 6);
        api.clear();
        assert!(api.requests().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn delays_hold_requests_and_count_them_in_flight() {
        let api = FakeApi::new();
        api.delay("DELETE", "**", std::time::Duration::from_secs(5))
            .echo_writes();
        let pods: Api<Pod> = Api::namespaced(api.client(), "ns");
        let start = tokio::time::Instant::now();
        let dp = DeleteParams::default();
        let (a, b) = tokio::join!(pods.delete("a", &dp), pods.delete("b", &dp));
        assert!(a.is_ok() && b.is_ok());
        assert_eq!(start.elapsed(), std::time::Duration::from_secs(5));
        assert_eq!(api.max_in_flight(), 2);
        // A client that gives up before the delay ends leaves no trace in the log.
        let gave_up =
            tokio::time::timeout(std::time::Duration::from_secs(1), pods.delete("c", &dp)).await;
        assert!(gave_up.is_err());
        assert_eq!(api.requests().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn works_on_the_paused_clock() {
        let api = FakeApi::new();
        api.otherwise(|_| {
            Reply::ok(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}))
        });
        let cms: Api<ConfigMap> = Api::namespaced(api.client(), "ns");
        assert_eq!(
            cms.get("x").await.expect("x").metadata.name.as_deref(),
            Some("x")
        );
    }
}
