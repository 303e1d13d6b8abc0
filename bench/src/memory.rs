//! `rkcm-bench memory`: what one cached object costs rkcm, per type, measured in process.
//!
//! For each type, N realistic objects (shaped like the ones the bench scenarios and kwok
//! produce) are serialised to JSON, as they arrive from the API server, then decoded and fed
//! to a detached shared informer exactly as its watch would. The live heap (bytes requested
//! from the allocator, counted by the bench's global allocator) before and after, divided by
//! N, is the cost of one cached object: the object, its key, and its entries in the
//! informer's indexes. Measured for whole objects and for each projection the controllers
//! declare (see `rkcm_runtime::cache::projection`). No API server is needed.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use k8s_openapi::api::apps::v1::{ControllerRevision, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1 as core;
use kube::runtime::watcher;
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::cache::projection::{self, Fields};
use rkcm_runtime::cache::{INDEX_NODE_NAME, Informable, Informer, pods_by_node};
use serde_json::{Value, json};

/// Live heap bytes and allocation counts, kept by the bench's global allocator.
pub static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
pub static LIVE_ALLOCS: AtomicI64 = AtomicI64::new(0);
pub static TOTAL_ALLOCS: AtomicU64 = AtomicU64::new(0);

/// The global allocator of rkcm-bench: the system allocator, counting what is live.
pub struct Counting;

// SAFETY: every method forwards to the system allocator with the caller's arguments; the
// counters are plain atomics.
#[allow(unsafe_code)] // a counting allocator is the only way to see the live heap
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { std::alloc::System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as i64, 1);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: forwarded as is.
        unsafe { std::alloc::System.dealloc(ptr, layout) };
        count(-(layout.size() as i64), -1);
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { std::alloc::System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as i64, 1);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { std::alloc::System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

fn count(bytes: i64, allocs: i64) {
    LIVE_BYTES.fetch_add(bytes, Ordering::Relaxed);
    LIVE_ALLOCS.fetch_add(allocs, Ordering::Relaxed);
    if allocs > 0 {
        TOTAL_ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

fn live() -> (i64, i64) {
    (
        LIVE_BYTES.load(Ordering::Relaxed),
        LIVE_ALLOCS.load(Ordering::Relaxed),
    )
}

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Objects per type.
    #[arg(long, default_value_t = 20_000)]
    pub count: usize,
    /// Markdown report to write.
    #[arg(long, default_value = "bench/reports/memory.md")]
    pub out: PathBuf,
}

/// One measured row.
struct Row {
    object: &'static str,
    cache: String,
    json_bytes: usize,
    bytes: f64,
    allocs: f64,
}

/// Every cached-object row: pods in each projection, nodes, Jobs, ReplicaSets, revisions.
fn measure_rows(n: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    let all_pods = [
        ("no declaration (every group)", None),
        ("base (PodGC, Deployment)", Some(Fields::BASE)),
        (
            "+ container statuses (Job, ReplicaSet)",
            Some(projection::pod::CONTAINER_STATUSES),
        ),
        (
            "+ claim volumes (StatefulSet)",
            Some(projection::pod::VOLUME_CLAIMS),
        ),
        ("+ affinity (DaemonSet)", Some(projection::pod::AFFINITY)),
        ("every group", Some(projection::pod::ALL)),
    ];
    for (object, make) in [
        (
            "Pod: PodGC scenario (terminated)",
            podgc_pod as fn(usize) -> Value,
        ),
        ("Pod: ReplicaSet (running, kwok)", replica_pod),
        ("Pod: Job (succeeded)", job_pod),
    ] {
        rows.push(measure::<core::Pod>(
            object,
            "k8s-openapi `Pod`, whole (before)",
            n,
            make,
            &|_| {},
        ));
        for (cache, keep) in all_pods {
            let declare = |pods: &Informer<Pod>| {
                if let Some(keep) = keep {
                    pods.keep(keep);
                }
            };
            rows.push(measure::<Pod>(object, cache, n, make, &declare));
        }
    }
    rows.push(measure::<core::Node>(
        "Node (kwok)",
        "k8s-openapi `Node`, whole (before)",
        n,
        node,
        &|_| {},
    ));
    rows.push(measure::<Node>(
        "Node (kwok)",
        "cached `Node`",
        n,
        node,
        &|_| {},
    ));
    for (cache, keep) in [
        ("whole", None),
        ("base (CronJob, TTL-after-finished)", Some(Fields::BASE)),
        ("+ template (Job)", Some(projection::job::TEMPLATE)),
    ] {
        let declare = |jobs: &Informer<Job>| {
            if let Some(keep) = keep {
                jobs.keep(keep);
            }
        };
        rows.push(measure::<Job>(
            "Job (CronJob's, finished)",
            cache,
            n,
            job,
            &declare,
        ));
    }
    rows.push(measure::<ReplicaSet>(
        "ReplicaSet",
        "whole",
        n,
        replica_set,
        &|_| {},
    ));
    rows.push(measure::<ControllerRevision>(
        "ControllerRevision (DaemonSet)",
        "whole",
        n,
        revision,
        &|_| {},
    ));
    rows
}

/// Runs every measurement and writes the report.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let n = args.count.max(1);
    let rows = measure_rows(n);
    let events = measure_events(n.min(rkcm_runtime::events::consts::LRU_CACHE_ENTRIES));

    let mut md = String::new();
    let _ = writeln!(md, "# Memory per cached object\n");
    let _ = writeln!(
        md,
        "Generated by `rkcm-bench memory --count {n}` (in process, no API server): {n} objects \
         per row, serialised to JSON as the API server sends them, decoded and fed to a shared \
         informer (namespace, controller-UID and orphan indexes; pods also by node). *Heap* is \
         the live heap the objects add, per object, in bytes requested from the allocator (the \
         allocator rounds each request up to its size class on top); it includes the cache key \
         and index entries. *Projection* is what the cache keeps: pods and nodes are held as \
         `rkcm_runtime::cache::cached` types (the fields some controller reads; the k8s-openapi row \
         is what a whole object costs), trimmed to the base plus the groups the enabled \
         controllers declare (`rkcm_runtime::cache::projection`).\n"
    );
    let _ = writeln!(
        md,
        "| object | projection | JSON bytes | heap bytes | allocations |\n|---|---|---:|---:|---:|"
    );
    for r in &rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} | {:.1} |",
            r.object, r.cache, r.json_bytes, r.bytes, r.allocs
        );
    }
    let _ = writeln!(
        md,
        "\n## Events remembered by a recorder\n\n\
         Each controller's event recorder keeps client-go's three correlation caches (spam \
         buckets per object, aggregation records per object and reason, the logger's last \
         Event per distinct message), 4 096 entries each, as upstream's. A churn of pods fills \
         the logger's cache with one entry per `Created pod: <name>` message until it is full. \
         Measured: {} distinct events (ten per ReplicaSet, as `SuccessfulCreate`) through one \
         correlator, the live heap they leave per event: **{:.0} bytes** ({:.1} allocations); a \
         full logger cache of one recorder: {:.1} MiB.",
        events.count,
        events.bytes,
        events.allocs,
        events.bytes * rkcm_runtime::events::consts::LRU_CACHE_ENTRIES as f64 / 1048576.0
    );
    if let Some(d) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(&args.out, md)?;
    Ok(())
}

/// The live heap per event left in a correlator's caches by `n` distinct events.
struct EventsRow {
    count: usize,
    bytes: f64,
    allocs: f64,
}

/// Feeds `n` distinct `SuccessfulCreate` events (ten per ReplicaSet, as a scale-up makes
/// them) through one correlator, as one recorder sees them, and returns the heap they leave.
fn measure_events(n: usize) -> EventsRow {
    use k8s_openapi::api::core::v1::Event;
    use rkcm_runtime::events::EventCorrelator;

    let now = jiff::Timestamp::now();
    let event = |i: usize| -> Option<Event> {
        let rs = format!("web-{:05}-7d9f8c6b5", i / 10);
        let pod = format!("{rs}-{:05x}", i);
        serde_json::from_value(json!({
            "metadata": {"name": format!("{rs}.{:x}", now.as_nanosecond() + i as i128),
                         "namespace": "bench"},
            "involvedObject": {"kind": "ReplicaSet", "namespace": "bench", "name": rs,
                               "uid": uid(9, i / 10), "apiVersion": "apps/v1"},
            "reason": "SuccessfulCreate",
            "message": format!("Created pod: {pod}"),
            "source": {"component": "replicaset-controller"},
            "firstTimestamp": now.to_string(),
            "lastTimestamp": now.to_string(),
            "count": 1,
            "type": "Normal",
            "reportingComponent": "replicaset-controller",
            "reportingInstance": "",
        }))
        .ok()
    };
    let mut correlator = EventCorrelator::new(rkcm_runtime::clock::system());
    // Each event is built, correlated and dropped in turn: what stays is the caches' share.
    let (bytes0, allocs0) = live();
    let mut count = 0;
    for i in 0..n {
        if let Some(e) = event(i) {
            let _ = correlator.correlate(e);
            count += 1;
        }
    }
    let (bytes1, allocs1) = live();
    drop(correlator);
    let per = |d: i64| d as f64 / count.max(1) as f64;
    say!("memory: {count} events through one correlator");
    EventsRow {
        count,
        bytes: per(bytes1 - bytes0),
        allocs: per(allocs1 - allocs0),
    }
}

/// Decodes `n` objects made by `make` into a fresh informer on which `declare` declared its
/// projection (or nothing) and returns the live heap they add per object.
fn measure<K: Informable>(
    object: &'static str,
    cache: &str,
    n: usize,
    make: fn(usize) -> Value,
    declare: &dyn Fn(&Informer<K>),
) -> Row {
    let wire: Vec<Vec<u8>> = (0..n)
        .map(|i| serde_json::to_vec(&make(i)).unwrap_or_default())
        .collect();
    let json_bytes = wire.iter().map(Vec::len).sum::<usize>() / n;
    let (bytes0, allocs0) = live();
    let informer = Informer::<K>::detached();
    declare(&informer);
    add_node_index(&informer);
    informer.feed(watcher::Event::Init);
    for body in &wire {
        if let Ok(obj) = serde_json::from_slice::<K>(body) {
            informer.feed(watcher::Event::InitApply(obj));
        }
    }
    informer.feed(watcher::Event::InitDone);
    let (bytes1, allocs1) = live();
    let cached = informer.store().len();
    drop(informer);
    drop(wire);
    let per = |d: i64| d as f64 / cached.max(1) as f64;
    say!("memory: {object} / {cache}: {cached} cached");
    Row {
        object,
        cache: cache.to_owned(),
        json_bytes,
        bytes: per(bytes1 - bytes0),
        allocs: per(allocs1 - allocs0),
    }
}

/// Pods are also indexed by node (DaemonSet, PodGC); other types have no such index.
fn add_node_index<K: Informable>(informer: &Informer<K>) {
    if let Some(pods) = (informer as &dyn std::any::Any).downcast_ref::<Informer<Pod>>() {
        pods.add_index(INDEX_NODE_NAME, pods_by_node);
    }
}

fn uid(kind: u32, i: usize) -> String {
    format!(
        "{kind:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        i >> 16,
        i & 0xfff,
        i & 0xfff,
        i
    )
}

const NOW: &str = "2026-11-24T12:00:00Z";

fn condition(t: &str, s: &str) -> Value {
    json!({"type": t, "status": s, "lastProbeTime": null, "lastTransitionTime": NOW})
}

/// The kube-api-access volume every pod with a service account token gets.
fn token_volume(i: usize) -> Value {
    json!({"name": format!("kube-api-access-{:05}", i % 100000), "projected": {"defaultMode": 420,
    "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
    ]}})
}

fn tolerations() -> Value {
    json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    ])
}

/// The PodGC scenario's pod: bound to the static node, terminated by the status subresource.
fn podgc_pod(i: usize) -> Value {
    let ok = i.is_multiple_of(2);
    let ip = format!("10.{}.{}.{}", 200 + i / 65536, (i / 256) % 256, i % 256);
    let cid = format!("containerd://{i:064x}");
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("podgc-{i:06}"), "namespace": "rkcm-bench-podgc",
            "uid": uid(1, i), "resourceVersion": (1000 + i).to_string(),
            "creationTimestamp": NOW,
            "labels": {"app": "rkcm-bench-podgc", "batch": format!("b{}", i / 1000)},
            "annotations": {"rkcm-bench/index": i.to_string()}},
        "spec": {
            "nodeName": "bench-node", "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "tolerations": [{"key": "rkcm-bench/static", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
                "command": ["/bin/sh", "-c", "exit 0"],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"}],
            "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "schedulerName": "default-scheduler",
            "securityContext": {}, "serviceAccountName": "default", "serviceAccount": "default",
            "terminationGracePeriodSeconds": 30, "priority": 0, "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": if ok { "Succeeded" } else { "Failed" },
            "conditions": [
                condition("PodReadyToStartContainers", "False"), condition("Initialized", "True"),
                condition("Ready", "False"), condition("ContainersReady", "False"),
                condition("PodScheduled", "True")
            ],
            "hostIP": "10.255.0.1", "hostIPs": [{"ip": "10.255.0.1"}],
            "podIP": ip, "podIPs": [{"ip": ip}], "startTime": NOW, "qosClass": "Burstable",
            "containerStatuses": [{
                "name": "main", "image": "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
                "imageID": "registry.k8s.io/e2e-test-images/busybox@sha256:a9155b13325b2abef48e71de77bb8ac015412a566829f621d06bfae5c699b1b9",
                "containerID": cid, "ready": false, "started": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": if ok { 0 } else { 1 },
                    "reason": if ok { "Completed" } else { "Error" },
                    "startedAt": NOW, "finishedAt": NOW, "containerID": cid}}
            }]
        }
    })
}

/// A ReplicaSet's pod as kwok runs it: token volume, probe, ports, Running and Ready.
fn replica_pod(i: usize) -> Value {
    let ip = format!("10.{}.{}.{}", 64 + i / 65536, (i / 256) % 256, i % 256);
    let node = format!("kwok-node-{}", i % 30);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("web-7d9c5b8f6d-{i:05x}"), "generateName": "web-7d9c5b8f6d-",
            "namespace": "rkcm-bench-replicaset", "uid": uid(2, i),
            "resourceVersion": (1000 + i).to_string(), "creationTimestamp": NOW,
            "labels": {"app": "web", "pod-template-hash": "7d9c5b8f6d"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": format!("web-7d9c5b8f6d-{}", i / 1000), "uid": uid(3, i / 1000),
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": {
            "containers": [{"name": "web", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "args": ["netexec", "--http-port=8080"],
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                    "failureThreshold": 3, "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1},
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
                "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "name": format!("kube-api-access-{:05}", i % 100000), "readOnly": true}]}],
            "nodeName": node, "dnsPolicy": "ClusterFirst", "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always",
            "schedulerName": "default-scheduler", "securityContext": {}, "serviceAccount": "default",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "tolerations": tolerations(), "volumes": [token_volume(i)]
        },
        "status": {
            "phase": "Running",
            "conditions": [condition("Initialized", "True"), condition("Ready", "True"),
                condition("ContainersReady", "True"), condition("PodScheduled", "True")],
            "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}], "podIP": ip, "podIPs": [{"ip": ip}],
            "qosClass": "Burstable", "startTime": NOW,
            "containerStatuses": [{"name": "web", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "imageID": "", "ready": true, "restartCount": 0, "started": true,
                "state": {"running": {"startedAt": NOW}}}]
        }
    })
}

/// An Indexed Job's pod after kwok completed it: tracking finalizer, index annotation.
fn job_pod(i: usize) -> Value {
    let mut pod = replica_pod(i);
    let index = (i % 1000).to_string();
    pod["metadata"]["name"] = json!(format!("work-{}-{:05x}", index, i));
    pod["metadata"]["labels"] = json!({
        "batch.kubernetes.io/controller-uid": uid(4, i / 1000),
        "batch.kubernetes.io/job-name": format!("work-{}", i / 1000),
        "controller-uid": uid(4, i / 1000), "job-name": format!("work-{}", i / 1000),
        "batch.kubernetes.io/job-completion-index": index});
    pod["metadata"]["annotations"] = json!({"batch.kubernetes.io/job-completion-index": index});
    pod["metadata"]["finalizers"] = json!(["batch.kubernetes.io/job-tracking"]);
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
        "name": format!("work-{}", i / 1000), "uid": uid(4, i / 1000),
        "controller": true, "blockOwnerDeletion": true}]);
    pod["spec"]["restartPolicy"] = json!("Never");
    pod["spec"]["hostname"] = json!(format!("work-{}", index));
    pod["spec"]["subdomain"] = json!("work");
    pod["status"]["phase"] = json!("Succeeded");
    pod["status"]["containerStatuses"][0]["state"] = json!({"terminated": {"exitCode": 0,
        "reason": "Completed", "startedAt": NOW, "finishedAt": NOW}});
    pod
}

fn node(i: usize) -> Value {
    let name = format!("kwok-node-{i}");
    let cond = |t: &str, s: &str, reason: &str, message: &str| {
        json!({"type": t, "status": s, "reason": reason, "message": message,
            "lastHeartbeatTime": NOW, "lastTransitionTime": NOW})
    };
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": uid(5, i), "resourceVersion": (1000 + i).to_string(),
            "creationTimestamp": NOW,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux", "type": "kwok"}},
        "spec": {"podCIDR": format!("10.{}.{}.0/24", 64 + i / 256, i % 256),
            "podCIDRs": [format!("10.{}.{}.0/24", 64 + i / 256, i % 256)]},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "conditions": [
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                cond("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route")
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": {"architecture": "amd64", "bootID": "", "containerRuntimeVersion": "kwok-0.8.0",
                "kernelVersion": "kwok-0.8.0", "kubeProxyVersion": "fake", "kubeletVersion": "fake",
                "machineID": "", "operatingSystem": "linux", "osImage": "", "systemUUID": ""},
            "phase": "Running"
        }
    })
}

fn pod_template(labels: &Value) -> Value {
    json!({"metadata": {"labels": labels, "creationTimestamp": null},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
            "command": ["/bin/sh", "-c", "sleep 1"],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Never", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
            "securityContext": {}, "terminationGracePeriodSeconds": 30}})
}

/// A CronJob's finished Job: owner reference, template, Complete status.
fn job(i: usize) -> Value {
    let name = format!("every-minute-{}-{}", i % 500, 29_000_000 + i / 500);
    let labels = json!({"batch.kubernetes.io/controller-uid": uid(6, i),
        "batch.kubernetes.io/job-name": name, "controller-uid": uid(6, i), "job-name": name});
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "rkcm-bench-cronjob", "uid": uid(6, i),
            "resourceVersion": (1000 + i).to_string(), "creationTimestamp": NOW, "generation": 1,
            "labels": labels,
            "annotations": {"batch.kubernetes.io/cronjob-scheduled-timestamp": NOW},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                "name": format!("every-minute-{}", i % 500), "uid": uid(7, i % 500),
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"backoffLimit": 6, "completionMode": "NonIndexed", "completions": 1,
            "manualSelector": false, "parallelism": 1, "podReplacementPolicy": "TerminatingOrFailed",
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid(6, i)}},
            "suspend": false, "template": pod_template(&labels)},
        "status": {"completionTime": NOW, "startTime": NOW, "succeeded": 1, "ready": 0, "terminating": 0,
            "uncountedTerminatedPods": {},
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods", "lastProbeTime": NOW, "lastTransitionTime": NOW},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods", "lastProbeTime": NOW, "lastTransitionTime": NOW}
            ]}
    })
}

fn replica_set(i: usize) -> Value {
    let labels = json!({"app": format!("web-{i}"), "pod-template-hash": "7d9c5b8f6d"});
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": format!("web-{i}-7d9c5b8f6d"), "namespace": "rkcm-bench-deployment",
            "uid": uid(8, i), "resourceVersion": (1000 + i).to_string(), "creationTimestamp": NOW,
            "generation": 2, "labels": labels,
            "annotations": {"deployment.kubernetes.io/desired-replicas": "20",
                "deployment.kubernetes.io/max-replicas": "25", "deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": format!("web-{i}"),
                "uid": uid(9, i), "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"replicas": 20, "selector": {"matchLabels": labels}, "template": pod_template(&labels)},
        "status": {"replicas": 20, "fullyLabeledReplicas": 20, "readyReplicas": 20,
            "availableReplicas": 20, "terminatingReplicas": 0, "observedGeneration": 2}
    })
}

/// A DaemonSet's revision: the template patch, as upstream stores it.
fn revision(i: usize) -> Value {
    let labels = json!({"app": format!("agent-{i}")});
    let mut template = pod_template(&labels);
    template["$patch"] = json!("replace");
    json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": format!("agent-{i}-5b6d8c9f7"), "namespace": "rkcm-bench-daemonset",
            "uid": uid(10, i), "resourceVersion": (1000 + i).to_string(), "creationTimestamp": NOW,
            "labels": {"app": format!("agent-{i}"), "controller-revision-hash": "5b6d8c9f7"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": format!("agent-{i}"),
                "uid": uid(11, i), "controller": true, "blockOwnerDeletion": true}]},
        "data": {"spec": {"template": template}},
        "revision": 1
    })
}
