//! `--use-service-account-credentials=true`: every controller talks to the API server as its
//! own ServiceAccount in `kube-system`, as upstream's `DynamicControllerClientBuilder`
//! (k8s.io/controller-manager `pkg/clientbuilder/client_builder_dynamic.go`) arranges it.
//!
//! - The ServiceAccount is the controller's upstream client name (`replicaset-controller`,
//!   `daemon-set-controller`, `pod-garbage-collector`, ... — the subjects of upstream's
//!   bootstrap `system:controller:<name>` ClusterRoleBindings). Building the client gets it or
//!   creates it (and the namespace, tolerating failure) with the manager's own identity.
//! - Tokens come from the TokenRequest API (3600 s asked for) with the manager's identity,
//!   on first use and again once 80 % of the token's lifetime has passed (a lifetime under
//!   10 minutes counts as 10 minutes, against clock skew); a 401 answer drops the cached token
//!   so the next request fetches a fresh one. A failed fetch is retried 4 times (0.5 s,
//!   doubling), then the request fails with an error naming the ServiceAccount: the
//!   controller logs it and retries its sync like any API error, the process stays up.
//! - The controller's client keeps its own QPS/burst bucket and user agent (with
//!   `/system:serviceaccount:kube-system:<name>` appended, as upstream appends it), and none
//!   of the manager's own credentials (client certificate, token, exec plugin).
//!
//! Shared informers and leader election keep the manager's identity, as upstream.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::time::Instant;
use tower::BoxError;

use rkcm_runtime::api::client::{Credential, RestClientLayer, user_agent};
use rkcm_runtime::queue::flowcontrol::RateLimiter;

/// Where the controllers' ServiceAccounts live (upstream `metav1.NamespaceSystem`).
pub const NAMESPACE: &str = "kube-system";
/// Upstream `defaultExpirationSeconds`.
pub const EXPIRATION_SECONDS: i64 = 3600;
/// Upstream `defaultLeewayPercent`: refresh with this share of the lifetime left.
pub const LEEWAY_PERCENT: u32 = 20;
/// A token claiming to live shorter than this is assumed to live this long (clock skew).
pub const MIN_LIFETIME: Duration = Duration::from_secs(600);
/// Upstream's token fetch backoff: 0.5 s, doubling, 4 attempts.
const FETCH_ATTEMPTS: u32 = 4;
const FETCH_FIRST_DELAY: Duration = Duration::from_millis(500);

/// Why a controller's client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("controller {controller} has no upstream ServiceAccount name")]
    UnknownController { controller: String },
    #[error("getting or creating ServiceAccount {NAMESPACE}/{name}: {source}")]
    ServiceAccount {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("building the client of {controller}: {reason}")]
    Client { controller: String, reason: String },
}

/// Upstream's client (= ServiceAccount) name of each controller rkcm implements, by
/// canonical controller name (`cmd/kube-controller-manager/app/*.go`, `ClientOrDie(...)`).
pub fn service_account(controller: &str) -> Option<&'static str> {
    Some(match controller {
        "replicaset-controller" => "replicaset-controller",
        "replicationcontroller-controller" => "replication-controller",
        "deployment-controller" => "deployment-controller",
        "statefulset-controller" => "statefulset-controller",
        "daemonset-controller" => "daemon-set-controller",
        "job-controller" => "job-controller",
        "cronjob-controller" => "cronjob-controller",
        "ttl-after-finished-controller" => "ttl-after-finished-controller",
        "pod-garbage-collector-controller" => "pod-garbage-collector",
        "garbage-collector-controller" => "generic-garbage-collector",
        _ => return None,
    })
}

/// When to fetch the next token: after `lifetime` (at least [`MIN_LIFETIME`]) less the
/// leeway, counted from `now`.
pub fn refresh_after(lifetime: Duration) -> Duration {
    let lifetime = lifetime.max(MIN_LIFETIME);
    lifetime - lifetime * LEEWAY_PERCENT / 100
}

/// `get` the ServiceAccount, or create it (after making sure the namespace exists), as
/// upstream's `getOrCreateServiceAccount`.
async fn get_or_create_service_account(root: &kube::Client, name: &str) -> Result<(), kube::Error> {
    let sas: Api<ServiceAccount> = Api::namespaced(root.clone(), NAMESPACE);
    if sas.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let namespaces: Api<Namespace> = Api::all(root.clone());
    if let Ok(None) = namespaces.get_opt(NAMESPACE).await {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(NAMESPACE.to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        // Tolerated: we may lack the permission, and someone else may create it.
        if let Err(error) = namespaces.create(&PostParams::default(), &ns).await {
            tracing::info!(namespace = NAMESPACE, %error, "create non-existent namespace failed");
        }
    }
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match sas.create(&PostParams::default(), &sa).await {
        Ok(_) => {
            tracing::info!(
                service_account = name,
                namespace = NAMESPACE,
                "created ServiceAccount"
            );
            Ok(())
        }
        // Raced with another creator: it exists now.
        Err(kube::Error::Api(e)) if e.code == 409 => sas.get(name).await.map(|_| ()),
        Err(e) => Err(e),
    }
}

struct Cached {
    value: HeaderValue,
    refresh_at: Instant,
}

/// Tokens of one ServiceAccount, fetched with the manager's client and cached.
pub struct TokenSource {
    root: kube::Client,
    name: &'static str,
    cached: tokio::sync::Mutex<Option<Cached>>,
}

impl TokenSource {
    pub fn new(root: kube::Client, name: &'static str) -> Self {
        Self {
            root,
            name,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// The `Authorization` header value to send now.
    async fn header(&self) -> Result<HeaderValue, String> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref()
            && Instant::now() < c.refresh_at
        {
            return Ok(c.value.clone());
        }
        let fresh = self.fetch().await?;
        let value = fresh.value.clone();
        *cached = Some(fresh);
        Ok(value)
    }

    /// Forgets the cached token (after a 401).
    async fn reset(&self) {
        *self.cached.lock().await = None;
    }

    async fn fetch(&self) -> Result<Cached, String> {
        let mut delay = FETCH_FIRST_DELAY;
        let mut last = String::new();
        for attempt in 1..=FETCH_ATTEMPTS {
            match self.fetch_once().await {
                Ok(c) => return Ok(c),
                Err(e) => {
                    tracing::info!(
                        namespace = NAMESPACE,
                        service_account = self.name,
                        error = %e,
                        attempt,
                        "get token failed"
                    );
                    last = e;
                }
            }
            if attempt < FETCH_ATTEMPTS {
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
        Err(format!(
            "failed to get token for {NAMESPACE}/{}: {last}",
            self.name
        ))
    }

    async fn fetch_once(&self) -> Result<Cached, String> {
        get_or_create_service_account(&self.root, self.name)
            .await
            .map_err(|e| format!("get or create service account: {e}"))?;
        let sas: Api<ServiceAccount> = Api::namespaced(self.root.clone(), NAMESPACE);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(EXPIRATION_SECONDS),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let answer = sas
            .create_token_request(self.name, &PostParams::default(), &request)
            .await
            .map_err(|e| e.to_string())?;
        let status = answer.status.unwrap_or_default();
        let token = status
            .token
            .filter(|t| !t.is_empty())
            .ok_or_else(|| "token request answered without a token".to_owned())?;
        let now = jiff::Timestamp::now();
        let lifetime = match status.expiration_timestamp {
            Some(t) if t.0 > now => t.0.duration_since(now).unsigned_abs(),
            _ => Duration::ZERO,
        };
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|e| format!("token is not a valid header value: {e}"))?;
        value.set_sensitive(true);
        Ok(Cached {
            value,
            refresh_at: Instant::now() + refresh_after(lifetime),
        })
    }
}

impl Credential for TokenSource {
    fn header(&self) -> Pin<Box<dyn Future<Output = Result<HeaderValue, BoxError>> + Send + '_>> {
        Box::pin(async move { TokenSource::header(self).await.map_err(BoxError::from) })
    }

    fn reset(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(TokenSource::reset(self))
    }
}

/// Builds per-controller clients authenticating as the controllers' ServiceAccounts.
pub struct ControllerClientBuilder {
    root: kube::Client,
    anonymous: kube::Config,
}

impl ControllerClientBuilder {
    /// `root_config` is the manager's config; `root` a client with the manager's identity
    /// (it gets ServiceAccounts and tokens).
    pub fn new(root: kube::Client, root_config: &kube::Config) -> Self {
        let mut anonymous = root_config.clone();
        // Upstream `AnonymousClientConfig`: keep the server and its CA, drop every credential.
        anonymous.auth_info = kube::config::AuthInfo::default();
        // Our layer implements client-go's Retry-After handling; see `make_client`.
        anonymous.default_retry = false;
        Self { root, anonymous }
    }

    /// The client of `controller` (canonical name): gets or creates its ServiceAccount now
    /// (an error here stops the start, as upstream's `ClientOrDie`), tokens on first use.
    /// `limiter` is the client's token bucket (`None`: unlimited); `fence` (sharded mode)
    /// puts it behind the shard write fence ([`rkcm_runtime::shard::fence`]).
    pub async fn client(
        &self,
        controller: &str,
        limiter: Option<Arc<RateLimiter>>,
        fence: Option<Arc<rkcm_runtime::shard::Shards>>,
    ) -> Result<kube::Client, CredentialsError> {
        let sa =
            service_account(controller).ok_or_else(|| CredentialsError::UnknownController {
                controller: controller.to_owned(),
            })?;
        get_or_create_service_account(&self.root, sa)
            .await
            .map_err(|source| CredentialsError::ServiceAccount {
                name: sa.to_owned(),
                source,
            })?;
        let token = Arc::new(TokenSource::new(self.root.clone(), sa));
        let rest = RestClientLayer::new(
            limiter,
            user_agent(&format!(
                "{controller}/system:serviceaccount:{NAMESPACE}:{sa}"
            )),
            self.anonymous
                .cluster_url
                .authority()
                .map(|a| a.to_string())
                .unwrap_or_default(),
        );
        let builder =
            kube::client::ClientBuilder::try_from(self.anonymous.clone()).map_err(|e| {
                CredentialsError::Client {
                    controller: controller.to_owned(),
                    reason: e.to_string(),
                }
            })?;
        let builder = builder
            .with_layer(&rkcm_runtime::api::inflight::InflightLayer::configured())
            .with_layer(&rest.with_credential(token));
        Ok(match fence {
            None => builder.build(),
            Some(shards) => builder
                .with_layer(&rkcm_runtime::shard::FenceLayer::new(shards))
                .build(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response, StatusCode, header};
    use kube::client::Body;
    use parking_lot::Mutex;
    use tower::{Layer, Service};

    #[test]
    fn service_accounts_are_upstreams() {
        assert_eq!(
            service_account("daemonset-controller"),
            Some("daemon-set-controller")
        );
        assert_eq!(
            service_account("replicationcontroller-controller"),
            Some("replication-controller")
        );
        assert_eq!(
            service_account("pod-garbage-collector-controller"),
            Some("pod-garbage-collector")
        );
        assert_eq!(service_account("namespace-controller"), None);
        // Every controller rkcm implements has one.
        for def in crate::registry::CONTROLLERS {
            if def.implementation.is_some() {
                assert!(service_account(def.name).is_some(), "{}", def.name);
            }
        }
    }

    #[tokio::test]
    async fn the_token_is_sent_and_dropped_after_a_401() {
        let root = kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:9".parse().expect("url"),
        ))
        .expect("client");
        let source = Arc::new(TokenSource::new(root, "replicaset-controller"));
        *source.cached.lock().await = Some(Cached {
            value: HeaderValue::from_static("Bearer first"),
            refresh_at: Instant::now() + Duration::from_secs(60),
        });
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let record = seen.clone();
        let inner = tower::service_fn(move |req: Request<Body>| {
            let auth = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            record.lock().push(auth);
            async move {
                let mut resp = Response::new(());
                *resp.status_mut() = StatusCode::UNAUTHORIZED;
                Ok::<_, BoxError>(resp)
            }
        });
        let mut svc = RestClientLayer::new(None, HeaderValue::from_static("test"), String::new())
            .with_credential(source.clone())
            .layer(inner);
        let resp = svc.call(Request::new(Body::empty())).await.expect("answer");
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(*seen.lock(), ["Bearer first"]);
        assert!(
            source.cached.lock().await.is_none(),
            "a 401 drops the cached token"
        );
    }

    #[test]
    fn refresh_at_eighty_percent_with_a_floor() {
        assert_eq!(
            refresh_after(Duration::from_secs(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(
            refresh_after(Duration::from_secs(60)),
            Duration::from_secs(480),
            "a short lifetime counts as 10 minutes"
        );
        assert_eq!(refresh_after(Duration::ZERO), Duration::from_secs(480));
    }
}
