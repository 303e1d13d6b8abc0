//! Kubernetes-side helpers shared by scenarios: client, retries of transient errors, bounded
//! concurrent request batches with progress, namespaces, a bench node, pod counting.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

/// The user agent of the bench's own requests.
pub const BENCH_AGENT: &str = "rkcm-bench";

/// A client from a kubeconfig file (its current context).
pub async fn client(kubeconfig: &Path) -> anyhow::Result<Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .context("loading the kubeconfig")?;
    // Deleting or listing 20 000 pods in one request takes a while on a busy plane.
    config.read_timeout = Some(Duration::from_secs(300));
    // The audit log tells the bench's own changes apart by this agent (reaction latency:
    // the plane's kwok writes with the same admin user).
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(BENCH_AGENT),
    ));
    Client::try_from(config).context("building the client")
}

/// Errors worth retrying: throttling, server hiccups, broken connections.
pub fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => matches!(s.code, 429 | 500 | 502 | 503 | 504),
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Runs `f` until it succeeds or fails with a non-transient error (at most 8 tries).
pub async fn retry<T, F, Fut>(mut f: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut delay = Duration::from_millis(100);
    let mut attempt = 1;
    loop {
        match f().await {
            Err(e) if attempt < 8 && is_transient(&e) => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(3));
                attempt += 1;
            }
            r => return r,
        }
    }
}

pub fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Deletes Lease `kube-system/<name>` if there is one, so that the next candidate takes it at
/// once instead of waiting out a holder that is gone.
pub async fn delete_lease(client: &Client, name: &str) -> anyhow::Result<()> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    match leases.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting Lease kube-system/{name}")),
    }
}

/// Runs `tasks` with at most `concurrency` in flight, printing progress every `every`
/// completions. Stops at the first error.
pub async fn bounded<Fut>(
    label: &str,
    total: usize,
    concurrency: usize,
    every: usize,
    tasks: impl Iterator<Item = Fut>,
) -> anyhow::Result<Duration>
where
    Fut: Future<Output = anyhow::Result<()>>,
{
    let start = Instant::now();
    let mut done = 0usize;
    let mut s = stream::iter(tasks).buffer_unordered(concurrency.max(1));
    while let Some(r) = s.next().await {
        r?;
        done += 1;
        if done.is_multiple_of(every.max(1)) || done == total {
            let secs = start.elapsed().as_secs_f64();
            say!(
                "{label}: {done}/{total} ({:.0}/s, {secs:.0} s)",
                done as f64 / secs.max(0.001)
            );
        }
    }
    Ok(start.elapsed())
}

/// Creates the namespace and its `default` ServiceAccount (the plane runs no upstream
/// manager, so nothing else creates it, and ServiceAccount admission rejects pods without
/// it). Existing objects are fine.
pub async fn ensure_namespace(client: &Client, ns: &str) -> anyhow::Result<()> {
    let nss: Api<Namespace> = Api::all(client.clone());
    let obj: Namespace = serde_json::from_value(json!({
        "metadata": {"name": ns, "labels": {"rkcm-bench": "true"}}
    }))?;
    let pp = PostParams::default();
    match retry(|| nss.create(&pp, &obj)).await {
        Ok(_) => {}
        Err(e) if is_status(&e, 409) => {}
        Err(e) => return Err(e).with_context(|| format!("creating namespace {ns}")),
    }
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "default"}}))?;
    match retry(|| sas.create(&pp, &sa)).await {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 409) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating ServiceAccount {ns}/default")),
    }
}

/// A Node no simulator manages (no kwok annotation), `Ready=True` through the status
/// subresource and tainted `NoSchedule` so the scheduler places nothing there. Pods bound to
/// it by `spec.nodeName` keep whatever status the bench gives them.
pub async fn ensure_static_node(client: &Client, name: &str) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {"rkcm-bench": "true", "kubernetes.io/hostname": name,
                       "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
        },
        "spec": {"taints": [{"key": "rkcm-bench/static", "value": "true", "effect": "NoSchedule"}]}
    }))?;
    let pp = PostParams::default();
    match retry(|| nodes.create(&pp, &node)).await {
        Ok(_) => {}
        Err(e) if is_status(&e, 409) => {}
        Err(e) => return Err(e).with_context(|| format!("creating node {name}")),
    }
    let now = jiff::Timestamp::now().to_string();
    let status = json!({"status": {
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "RkcmBench",
            "message": "static node of rkcm-bench (no kubelet)",
            "lastHeartbeatTime": now, "lastTransitionTime": now
        }],
        "capacity": {"cpu": "64", "memory": "256Gi", "pods": "100000"},
        "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "100000"}
    }});
    let (params, patch) = (PatchParams::default(), Patch::Merge(&status));
    retry(|| nodes.patch_status(name, &params, &patch))
        .await
        .with_context(|| format!("setting node {name} Ready"))?;
    Ok(())
}

/// Every pod of `ns` (metadata only), paginated.
pub async fn list_pod_meta(
    client: &Client,
    ns: Option<&str>,
) -> anyhow::Result<Vec<kube::core::PartialObjectMeta<Pod>>> {
    let pods: Api<Pod> = match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut out = Vec::new();
    let mut lp = ListParams::default().limit(2000);
    loop {
        let page = retry(|| pods.list_metadata(&lp))
            .await
            .context("listing pods")?;
        out.extend(page.items);
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    Ok(out)
}

/// Force-deletes every pod of `ns` and waits until none is left.
pub async fn delete_all_pods(client: &Client, ns: &str, timeout: Duration) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let deadline = Instant::now() + timeout;
    loop {
        let one = ListParams::default().limit(1);
        let left = retry(|| pods.list_metadata(&one))
            .await
            .context("listing pods")?;
        if left.items.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "pods of {ns} still present after {timeout:?}"
        );
        // One deletecollection request; its response (the deleted objects) is dropped.
        match pods.delete_collection(&dp, &ListParams::default()).await {
            Ok(_) => {}
            Err(e) if is_transient(&e) => tokio::time::sleep(Duration::from_secs(1)).await,
            Err(e) => return Err(e).with_context(|| format!("deleting the pods of {ns}")),
        }
    }
}

/// What a [`PodWatch`] has seen.
#[derive(Clone, Copy, Debug, Default)]
pub struct PodCount {
    /// Pods present; `None` until the initial list is complete.
    pub count: Option<usize>,
    /// When the first pod deletion was observed after the initial list.
    pub first_delete: Option<Instant>,
    /// When the most recent pod deletion was observed.
    pub last_delete: Option<Instant>,
    /// Pods whose controller is the owner given to [`PodWatch::start_owned`] (all pods when
    /// none was given), terminating ones included; `None` until the initial list is complete.
    pub owned: Option<usize>,
    /// The largest `owned` seen since the initial list.
    pub max_owned: usize,
}

/// Counts the pods of a namespace with a metadata-only watch (cheap for the apiserver,
/// unlike polling a 20 000-pod list), following deletions as they happen.
pub struct PodWatch {
    rx: watch::Receiver<PodCount>,
    task: tokio::task::JoinHandle<()>,
}

impl PodWatch {
    pub fn start(client: &Client, ns: &str) -> Self {
        Self::start_owned(client, ns, None)
    }

    /// Like [`PodWatch::start`], and also counts the pods whose controller owner reference
    /// has `owner_uid` (`PodCount::owned`, `PodCount::max_owned`).
    /// Watches the pods `owner_uid` owns and waits (120 s at most) until the watch has listed
    /// them; fails unless there are none yet.
    pub async fn start_owned_empty(
        client: &Client,
        ns: &str,
        owner_uid: String,
    ) -> anyhow::Result<Self> {
        let mut pods = Self::start_owned(client, ns, Some(owner_uid));
        let c = tokio::time::timeout(
            Duration::from_secs(120),
            pods.wait_for(|c| c.count.is_some()),
        )
        .await
        .context("the pod watch did not sync within 120 s")??;
        anyhow::ensure!(c.count == Some(0), "{ns} has {:?} pods at start", c.count);
        Ok(pods)
    }

    pub fn start_owned(client: &Client, ns: &str, owner_uid: Option<String>) -> Self {
        let api: Api<PartialObjectMeta<Pod>> = Api::namespaced(client.clone(), ns);
        let (tx, rx) = watch::channel(PodCount::default());
        let owned_by = move |o: &PartialObjectMeta<Pod>| match &owner_uid {
            None => true,
            Some(uid) => o
                .owner_references()
                .iter()
                .any(|r| r.controller == Some(true) && &r.uid == uid),
        };
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            futures::pin_mut!(stream);
            // name → owned by the owner; `owned` counts the `true`s of `live`.
            let mut live: HashMap<String, bool> = HashMap::new();
            let mut pending: HashMap<String, bool> = HashMap::new();
            let mut owned = 0usize;
            let mut synced = false;
            loop {
                let ev = match stream.try_next().await {
                    Ok(Some(ev)) => ev,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "pod watch error (retrying)");
                        continue;
                    }
                };
                match ev {
                    watcher::Event::Init => pending.clear(),
                    watcher::Event::InitApply(o) => {
                        pending.insert(o.name_any(), owned_by(&o));
                    }
                    watcher::Event::InitDone => {
                        live = std::mem::take(&mut pending);
                        owned = live.values().filter(|&&o| o).count();
                        synced = true;
                    }
                    watcher::Event::Apply(o) => {
                        let now_owned = owned_by(&o);
                        if live.insert(o.name_any(), now_owned) == Some(true) {
                            owned -= 1;
                        }
                        if now_owned {
                            owned += 1;
                        }
                    }
                    watcher::Event::Delete(o) => {
                        if live.remove(&o.name_any()) == Some(true) {
                            owned -= 1;
                        }
                        let now = Instant::now();
                        tx.send_modify(|c| {
                            c.first_delete.get_or_insert(now);
                            c.last_delete = Some(now);
                        });
                    }
                }
                if synced {
                    let n = live.len();
                    tx.send_if_modified(|c| {
                        let changed = c.count != Some(n) || c.owned != Some(owned);
                        c.count = Some(n);
                        c.owned = Some(owned);
                        c.max_owned = c.max_owned.max(owned);
                        changed
                    });
                }
            }
        });
        Self { rx, task }
    }

    pub fn current(&self) -> PodCount {
        *self.rx.borrow()
    }

    /// The current count, marking it seen for [`PodWatch::changed`].
    pub fn latest(&mut self) -> PodCount {
        *self.rx.borrow_and_update()
    }

    /// Waits for the next change after the last [`PodWatch::latest`].
    pub async fn changed(&mut self) -> anyhow::Result<()> {
        self.rx.changed().await.context("pod watch ended")
    }

    /// Waits until `pred` holds for the current count.
    pub async fn wait_for(
        &mut self,
        mut pred: impl FnMut(&PodCount) -> bool,
    ) -> anyhow::Result<PodCount> {
        let c = self
            .rx
            .wait_for(|c| pred(c))
            .await
            .context("pod watch ended")?;
        Ok(*c)
    }
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The image of the bench's pods.
pub const PAUSE: &str = "registry.k8s.io/pause:3.10";

/// The spec of a bench pod: one `image` container named `main` requesting 10m CPU and
/// 16 MiB, no service account token, 30 s grace, plus the fields of `extra` (where it runs:
/// `nodeSelector` or `nodeName`; its restart policy).
pub fn pod_spec(image: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut spec = json!({
        "automountServiceAccountToken": false,
        "terminationGracePeriodSeconds": 30,
        "containers": [{
            "name": "main",
            "image": image,
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}
        }]
    });
    if let (Some(spec), serde_json::Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    spec
}

/// The next event of a watcher stream, `None` once it ends. An error is logged with `what`
/// (the kind watched) and skipped: the watcher retries by itself.
pub async fn next_event<K, S>(stream: &mut S, what: &'static str) -> Option<watcher::Event<K>>
where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Unpin,
{
    loop {
        match stream.try_next().await {
            Ok(ev) => return ev,
            Err(e) => tracing::warn!(error = %e, kind = what, "watch error (retrying)"),
        }
    }
}

/// A namespaced kind the helpers below list, watch and delete.
pub trait Namespaced:
    kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
{
}

impl<K> Namespaced for K where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
{
}

/// Every `K` of namespace `ns` (`what`: its kind, plural, for the error).
pub async fn list_all<K>(client: &Client, ns: &str, what: &str) -> anyhow::Result<Vec<K>>
where
    K: Namespaced,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default();
    let list = retry(|| api.list(&lp))
        .await
        .with_context(|| format!("listing the {what} of {ns}"))?;
    Ok(list.items)
}

/// The pod template of a workload on kwok's nodes: `labels` and `annotations`, and a
/// [`pod_spec`] of [`PAUSE`] selecting kwok nodes.
pub fn kwok_template(
    labels: &serde_json::Value,
    annotations: serde_json::Value,
) -> serde_json::Value {
    json!({
        "metadata": {"labels": labels, "annotations": annotations},
        "spec": pod_spec(PAUSE, json!({"nodeSelector": {"type": "kwok"}}))
    })
}

/// Deletes every `A`, then every `B`, then every pod of namespace `ns` (see [`delete_every`]
/// and [`delete_all_pods`]); `what` names `A` and `B` in the plural.
pub async fn delete_workloads<A, B>(
    client: &Client,
    ns: &str,
    what: (&str, &str),
) -> anyhow::Result<()>
where
    A: Namespaced,
    B: Namespaced,
{
    delete_every::<A>(client, ns, what.0).await?;
    delete_every::<B>(client, ns, what.1).await?;
    delete_all_pods(client, ns, Duration::from_secs(600)).await
}

/// Deletes every workload object of namespace `ns` (CronJobs and Jobs first, then
/// Deployments, StatefulSets, DaemonSets, ReplicaSets and revisions), each kind until none is
/// left; pods are the caller's.
pub async fn delete_workload_objects(client: &Client, ns: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::apps::v1::{
        ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
    };
    use k8s_openapi::api::batch::v1::{CronJob, Job};
    delete_every::<CronJob>(client, ns, "cronjobs").await?;
    delete_every::<Job>(client, ns, "jobs").await?;
    delete_every::<Deployment>(client, ns, "deployments").await?;
    delete_every::<StatefulSet>(client, ns, "statefulsets").await?;
    delete_every::<DaemonSet>(client, ns, "daemonsets").await?;
    delete_every::<ReplicaSet>(client, ns, "replicasets").await?;
    delete_every::<ControllerRevision>(client, ns, "controllerrevisions").await
}

/// Deletes every `K` (`what`: its kind, plural) of namespace `ns`, again every 200 ms until
/// none is left; fails when some are still there after 60 s. Background propagation: no
/// garbage collector runs on the plane, so no finalizer may wait for one.
pub async fn delete_every<K>(client: &Client, ns: &str, what: &str) -> anyhow::Result<()>
where
    K: Namespaced,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let dp = &DeleteParams {
        propagation_policy: Some(kube::api::PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    let all = ListParams::default();
    let one = ListParams::default().limit(1);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = retry(|| api.list_metadata(&one))
            .await
            .with_context(|| format!("listing the {what} of {ns}"))?;
        if left.items.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{what} of {ns} still present 60 s after their deletion (e.g. {})",
            left.items[0].name_any()
        );
        retry(|| api.delete_collection(dp, &all))
            .await
            .with_context(|| format!("deleting the {what} of {ns}"))?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Follows one object of `ns` by name with a watch (field selector on its name), keeping a
/// summary of its latest state.
pub struct NamedWatch<S> {
    /// The summaries, for waiting on a change.
    pub rx: watch::Receiver<S>,
    task: tokio::task::JoinHandle<()>,
}

impl<S: Copy + Default + PartialEq + Send + Sync + 'static> NamedWatch<S> {
    /// Starts watching the `K` named `name`; `kind` names it in the log of watch errors.
    pub fn start<K>(
        client: &Client,
        ns: &str,
        name: &str,
        kind: &'static str,
        summary: fn(&K) -> S,
    ) -> Self
    where
        K: Namespaced + Send + 'static,
    {
        let api: Api<K> = Api::namespaced(client.clone(), ns);
        let (tx, rx) = watch::channel(S::default());
        let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let task = tokio::spawn(async move {
            let stream = watcher(api, cfg).default_backoff().applied_objects();
            futures::pin_mut!(stream);
            loop {
                match stream.try_next().await {
                    Ok(Some(obj)) => {
                        let seen = summary(&obj);
                        tx.send_if_modified(|c| std::mem::replace(c, seen) != seen);
                    }
                    Ok(None) => break,
                    Err(e) => tracing::warn!(error = %e, kind, "watch error (retrying)"),
                }
            }
        });
        Self { rx, task }
    }

    /// The latest summary, marking it seen.
    pub fn latest(&mut self) -> S {
        *self.rx.borrow_and_update()
    }
}

impl<S> Drop for NamedWatch<S> {
    fn drop(&mut self) {
        self.task.abort();
    }
}
