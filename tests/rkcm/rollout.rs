//! kubectl rollout parity (DESIGN.md testing tier 3): one scripted
//! `kubectl` session — `rollout status`, `history` (and `--revision`), `undo` (and
//! `--to-revision`), `pause`/`resume`, `restart`, `scale` — runs twice at the same time, once
//! in a namespace managed by upstream kube-controller-manager and once in a namespace managed
//! by the rkcm binary (both with `--controllers=deployment-controller,replicaset-controller`),
//! and the two normalised transcripts must be equal.
//!
//! Pods really run: kube-scheduler binds them to the kwok nodes (`type=kwok`) and kwok marks
//! them Running and Ready. Each manager reaches the API server through its own
//! [`ScopedProxy`], so it sees and writes only its own namespace.
//!
//! Normalised, because they legitimately differ: pod-template-hash values (rkcm's hash
//! differs from upstream's by design; each hash becomes `<H1>`, `<H2>`, ... in order of
//! first appearance, which the script makes deterministic), timestamps (`rollout restart`),
//! and the progress lines `rollout status` prints while it waits (how many depends on
//! timing; each must still be one of kubectl's messages, and the final line is compared).
//!
//! `RKCM_PARITY_SUBJECT=upstream` runs upstream on both sides: a dry run of the comparison
//! that validates the normalisation.
//!
//! This module also holds what the takeover tests share: [`start_manager`] (the testkit's
//! [`Manager`] with this suite's controllers), [`Kubectl`], the Deployment manifest and the
//! settle and snapshot helpers.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, ServiceAccount};
use kube::api::ListParams;
use rkcm_testkit::harness::{e2e_bin, kwok_template};

use crate::serve::stdin_for;
pub(crate) use rkcm_testkit::harness::{Manager, ManagerKind as Kind};
use rkcm_testkit::{TestCluster, TestNamespace, wait_for};
use tokio::io::AsyncWriteExt as _;

/// Bound for one rollout (or scale) to complete on the kwok nodes.
pub(crate) const ROLLOUT: Duration = Duration::from_secs(60);

pub(crate) const REVISION: &str = "deployment.kubernetes.io/revision";
pub(crate) const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub(crate) const DESIRED: &str = "deployment.kubernetes.io/desired-replicas";
pub(crate) const MAX: &str = "deployment.kubernetes.io/max-replicas";
pub(crate) const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";
pub(crate) const HASH_LABEL: &str = "pod-template-hash";

/// The controllers both managers run.
const CONTROLLERS: &str = "deployment-controller,replicaset-controller";

/// A controller-manager of `kind` running the Deployment and ReplicaSet controllers,
/// confined to `namespace`.
pub(crate) async fn start_manager(
    kind: Kind,
    cluster: &TestCluster,
    namespace: &str,
) -> anyhow::Result<Manager> {
    Manager::start(kind, cluster, namespace, CONTROLLERS).await
}

/// What one kubectl invocation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The pinned kubectl, as the admin, in one namespace.
#[derive(Clone)]
pub(crate) struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    namespace: String,
}

impl Kubectl {
    pub(crate) fn new(cluster: &TestCluster, namespace: &str) -> anyhow::Result<Self> {
        Ok(Self {
            bin: e2e_bin("kubectl")?,
            kubeconfig: cluster.kubeconfig_path().to_path_buf(),
            namespace: namespace.to_owned(),
        })
    }

    pub(crate) async fn run(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Out> {
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!("--namespace={}", self.namespace))
            .args(args)
            .stdin(stdin_for(stdin))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("running {}", self.bin.display()))?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).await?;
        }
        // Every kubectl call in these tests is bounded (rollout status has --timeout).
        let out = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
            .await
            .with_context(|| format!("kubectl {args:?} did not finish"))??;
        Ok(Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// Runs and requires exit code 0.
    pub(crate) async fn ok(&self, args: &[&str]) -> anyhow::Result<Out> {
        let out = self.run(args, None).await?;
        if out.code != 0 {
            bail!("kubectl {args:?} failed ({}): {}", out.code, out.stderr);
        }
        Ok(out)
    }
}

/// A Deployment whose pods land on the kwok nodes.
pub(crate) fn deployment_manifest(
    name: &str,
    replicas: i32,
    image: &str,
    extra_spec: serde_json::Value,
) -> serde_json::Value {
    let mut d = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": kwok_template(name, image),
        },
    });
    if let (Some(spec), Some(extra)) = (d["spec"].as_object_mut(), extra_spec.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    d
}

/// Pods need the namespace's default ServiceAccount (the plane's kube-controller-manager
/// creates it); without it the first pod creates fail and are retried with backoff, which
/// would make the two sides' timelines differ for no reason of theirs.
pub(crate) async fn wait_default_service_account(ns: &TestNamespace) -> anyhow::Result<()> {
    let sa = ns.api::<ServiceAccount>();
    wait_for(
        "the namespace's default ServiceAccount",
        Duration::from_secs(30),
        || async { Ok(sa.get_opt("default").await?.map(|_| ())) },
    )
    .await
}

pub(crate) fn annotation<'a>(meta: &'a kube::core::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn revision_of(rs: &ReplicaSet) -> i64 {
    annotation(&rs.metadata, REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(-1)
}

fn hash_of(rs: &ReplicaSet) -> Option<&str> {
    rs.metadata
        .labels
        .as_ref()?
        .get(HASH_LABEL)
        .map(String::as_str)
}

fn image_of_template(t: Option<&k8s_openapi::api::core::v1::PodTemplateSpec>) -> String {
    t.and_then(|t| t.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

fn controlled_by(rs: &ReplicaSet, d: &Deployment) -> bool {
    rs.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true)
            && o.kind == "Deployment"
            && Some(&o.uid) == d.metadata.uid.as_ref()
    })
}

/// The Deployment and the ReplicaSets it controls (sorted by revision).
pub(crate) async fn read_state(
    ns: &TestNamespace,
    name: &str,
) -> anyhow::Result<(Deployment, Vec<ReplicaSet>)> {
    let d = ns.api::<Deployment>().get(name).await?;
    let mut rss: Vec<ReplicaSet> = ns
        .api::<ReplicaSet>()
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|rs| controlled_by(rs, &d))
        .collect();
    rss.sort_by_key(revision_of);
    Ok((d, rss))
}

fn template_without_hash(
    t: Option<&k8s_openapi::api::core::v1::PodTemplateSpec>,
) -> serde_json::Value {
    strip_hash(serde_json::to_value(t).unwrap_or_default())
}

/// A pod template (as JSON) without the `pod-template-hash` label.
pub(crate) fn strip_hash(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(labels) = v
        .pointer_mut("/metadata/labels")
        .and_then(|l| l.as_object_mut())
    {
        labels.remove(HASH_LABEL);
    }
    v
}

/// Why the Deployment is not settled yet, or `None` when it is: the manager observed the
/// latest generation; every ReplicaSet has as many pods as it wants, all available, and
/// reports its latest generation; the Deployment's status adds up; and unless it is paused,
/// the rollout is complete (one RS carries the template and all replicas, the revision
/// bookkeeping is done, `Progressing` says `NewReplicaSetAvailable`).
pub(crate) fn unsettled(d: &Deployment, rss: &[ReplicaSet]) -> Option<String> {
    let st = d.status.clone().unwrap_or_default();
    let spec = d.spec.clone();
    let want = spec.replicas.unwrap_or(1);
    if st.observed_generation < d.metadata.generation {
        return Some(format!(
            "observedGeneration {:?} < generation {:?}",
            st.observed_generation, d.metadata.generation
        ));
    }
    let (mut replicas, mut available, mut ready) = (0, 0, 0);
    for rs in rss {
        let rst = rs.status.clone().unwrap_or_default();
        let rspec = rs.spec.replicas.unwrap_or(1);
        if rst.observed_generation < rs.metadata.generation
            || rst.replicas != rspec
            || rst.available_replicas.unwrap_or(0) != rspec
            || rst.ready_replicas.unwrap_or(0) != rspec
            || rst.terminating_replicas.unwrap_or(0) != 0
        {
            return Some(format!(
                "rs {:?} spec.replicas={rspec} status={rst:?}",
                rs.metadata.name
            ));
        }
        replicas += rst.replicas;
        available += rst.available_replicas.unwrap_or(0);
        ready += rst.ready_replicas.unwrap_or(0);
    }
    if st.replicas.unwrap_or(0) != replicas
        || st.available_replicas.unwrap_or(0) != available
        || st.ready_replicas.unwrap_or(0) != ready
        || st.terminating_replicas.unwrap_or(0) != 0
    {
        return Some(format!(
            "deployment status {st:?} does not add up to rs replicas={replicas} available={available} ready={ready}"
        ));
    }
    if spec.paused == Some(true) {
        return None;
    }
    // Revision-history cleanup runs one sync after the rollout completes.
    if let Some(limit) = spec.revision_history_limit
        && rss.len() > usize::try_from(limit).unwrap_or(0) + 1
    {
        return Some(format!("{} ReplicaSets, history limit {limit}", rss.len()));
    }
    let template = template_without_hash(Some(&spec.template));
    let new: Vec<&ReplicaSet> = rss
        .iter()
        .filter(|rs| template_without_hash(rs.spec.template.as_ref()) == template)
        .collect();
    let [new] = new.as_slice() else {
        return Some(format!("{} ReplicaSets carry the template", new.len()));
    };
    let new_replicas = new.spec.replicas.unwrap_or(1);
    let old_replicas: i32 = rss
        .iter()
        .filter(|rs| rs.metadata.uid != new.metadata.uid)
        .map(|rs| rs.spec.replicas.unwrap_or(1))
        .sum();
    if new_replicas != want || old_replicas != 0 {
        return Some(format!(
            "new RS has {new_replicas}, old ones {old_replicas}"
        ));
    }
    if st.updated_replicas.unwrap_or(0) != want
        || st.available_replicas.unwrap_or(0) != want
        || st.replicas.unwrap_or(0) != want
    {
        return Some(format!("rollout incomplete: {st:?}"));
    }
    if annotation(&d.metadata, REVISION) != annotation(&new.metadata, REVISION) {
        return Some("deployment revision annotation not yet copied from its new RS".into());
    }
    for key in [CHANGE_CAUSE] {
        if annotation(&d.metadata, key) != annotation(&new.metadata, key) {
            return Some(format!("annotation {key} not yet copied to the new RS"));
        }
    }
    let progressing = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_.as_deref() == Some("Progressing"))
        .and_then(|c| c.reason.clone());
    if want > 0 && progressing.as_deref() != Some("NewReplicaSetAvailable") {
        return Some(format!("Progressing reason {progressing:?}"));
    }
    None
}

/// Waits until [`unsettled`] says nothing, and returns that state.
pub(crate) async fn wait_settled(
    ns: &TestNamespace,
    name: &str,
) -> anyhow::Result<(Deployment, Vec<ReplicaSet>)> {
    wait_for(&format!("deployment {name} to settle"), ROLLOUT, || async {
        let (d, rss) = read_state(ns, name).await?;
        match unsettled(&d, &rss) {
            None => Ok(Some((d, rss))),
            Some(why) => Err(anyhow::anyhow!(why)),
        }
    })
    .await
}

/// Waits until the manager has observed the Deployment's latest generation.
pub(crate) async fn wait_observed(ns: &TestNamespace, name: &str) -> anyhow::Result<Deployment> {
    let api = ns.api::<Deployment>();
    wait_for(
        &format!("deployment {name}: observedGeneration to catch up"),
        ROLLOUT,
        || async {
            let d = api.get(name).await?;
            let observed = d.status.as_ref().and_then(|s| s.observed_generation);
            Ok((observed >= d.metadata.generation).then_some(d))
        },
    )
    .await
}

/// Strings that legitimately differ between the sides (pod-template-hash values, revision
/// hashes and names), each replaced by a name given in order of first appearance.
#[derive(Default, Debug)]
pub(crate) struct Hashes {
    names: BTreeMap<String, String>,
}

impl Hashes {
    /// Names each of `hashes` not seen before `<{prefix}N>`, N counting from 1, in order.
    pub(crate) fn name_new<'a>(&mut self, hashes: impl IntoIterator<Item = &'a str>, prefix: &str) {
        for h in hashes {
            if !self.names.contains_key(h) {
                let n = self.names.len() + 1;
                self.names.insert(h.to_owned(), format!("<{prefix}{n}>"));
            }
        }
    }

    /// Names `text` `name` unless it has a name already.
    pub(crate) fn name(&mut self, text: String, name: String) {
        self.names.entry(text).or_insert(name);
    }

    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    pub(crate) fn contains(&self, text: &str) -> bool {
        self.names.contains_key(text)
    }

    /// Names the pod-template hashes of RSs not seen before `<H1>`, `<H2>`, ... (oldest first).
    pub(crate) fn learn(&mut self, rss: &[ReplicaSet]) {
        let mut fresh: Vec<&ReplicaSet> = rss
            .iter()
            .filter(|rs| hash_of(rs).is_some_and(|h| !self.names.contains_key(h)))
            .collect();
        fresh.sort_by_key(|rs| {
            (
                rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
                revision_of(rs),
            )
        });
        self.name_new(fresh.into_iter().filter_map(hash_of), "H");
    }

    pub(crate) fn apply(&self, text: &str) -> String {
        // Longest first, so a hash that contains another is replaced whole.
        let mut hashes: Vec<(&String, &String)> = self.names.iter().collect();
        hashes.sort_by_key(|(h, _)| std::cmp::Reverse(h.len()));
        let mut out = text.to_owned();
        for (h, name) in hashes {
            out = out.replace(h.as_str(), name);
        }
        out
    }
}

/// Replaces RFC 3339 timestamps (`2025-01-02T03:04:05Z`, with optional fraction and offset)
/// by `<time>`.
pub(crate) fn normalise_times(text: &str) -> String {
    let b = text.as_bytes();
    let shape = b"dddd-dd-ddTdd:dd:dd";
    let matches_at = |i: usize| {
        i + shape.len() <= b.len()
            && shape.iter().enumerate().all(|(k, s)| match s {
                b'd' => b[i + k].is_ascii_digit(),
                c => b[i + k] == *c,
            })
    };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if matches_at(i) {
            let mut j = i + shape.len();
            if j < b.len() && b[j] == b'.' {
                j += 1;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
            }
            if j < b.len() && b[j] == b'Z' {
                j += 1;
            } else if j + 6 <= b.len()
                && (b[j] == b'+' || b[j] == b'-')
                && b[j + 3] == b':'
                && [1, 2, 4, 5].iter().all(|k| b[j + k].is_ascii_digit())
            {
                j += 6;
            }
            out.push_str("<time>");
            i = j;
        } else {
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// Whether `line` is one of the progress messages `kubectl rollout status` prints while it
/// waits (kubectl `polymorphichelpers/rollout_status.go`): `observed`, or `waiting` followed by
/// one of `counts`, word for word, where `#` stands for a number and `*x` for a word ending in
/// `x`.
pub(crate) fn is_progress(line: &str, observed: &str, waiting: &str, counts: &[&str]) -> bool {
    if line == observed {
        return true;
    }
    let Some(rest) = line.strip_prefix(waiting) else {
        return false;
    };
    let words: Vec<&str> = rest.split(' ').collect();
    let fits = |pattern: &str, word: &str| match pattern {
        "#" => !word.is_empty() && word.bytes().all(|c| c.is_ascii_digit()),
        p => p
            .strip_prefix('*')
            .map_or(p == word, |tail| word.ends_with(tail)),
    };
    counts.iter().any(|count| {
        let pattern: Vec<&str> = count.split(' ').collect();
        pattern.len() == words.len() && pattern.iter().zip(&words).all(|(p, w)| fits(p, w))
    })
}

/// The progress messages `kubectl rollout status` prints for Deployment `name`.
fn is_progress_line(line: &str, name: &str) -> bool {
    is_progress(
        line,
        "Waiting for deployment spec update to be observed...",
        &format!("Waiting for deployment \"{name}\" rollout to finish: "),
        &[
            "# out of # new replicas have been updated...",
            "# old replicas are pending termination...",
            "# of # updated replicas are available...",
        ],
    )
}

/// One normalised entry of a transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) step: String,
    pub(crate) text: String,
}

/// A kubectl session's record: each command with its exit code and output, and the
/// Deployment/ReplicaSet state after each settled step.
pub(crate) struct Transcript {
    pub(crate) kind: Kind,
    raw: Vec<Entry>,
    pub(crate) hashes: Hashes,
}

impl Transcript {
    pub(crate) fn new(kind: Kind) -> Self {
        Self {
            kind,
            raw: Vec::new(),
            hashes: Hashes::default(),
        }
    }

    pub(crate) fn push(&mut self, step: &str, text: String) {
        self.raw.push(Entry {
            step: step.to_owned(),
            text,
        });
    }

    pub(crate) fn record(&mut self, step: &str, out: &Out) {
        self.push(
            step,
            format!(
                "exit {}\nstdout:\n{}stderr:\n{}",
                out.code, out.stdout, out.stderr
            ),
        );
    }

    /// `rollout status` of Deployment `name` while things move: see
    /// [`Transcript::record_status_with`].
    fn record_status(&mut self, step: &str, name: &str, out: &Out) {
        self.record_status_with(step, out, str::to_owned, |l| is_progress_line(l, name));
    }

    /// `rollout status` while things move: the final line as `last` gives it; progress lines
    /// are checked with `is_progress`, then dropped.
    pub(crate) fn record_status_with(
        &mut self,
        step: &str,
        out: &Out,
        last: impl FnOnce(&str) -> String,
        is_progress: impl Fn(&str) -> bool,
    ) {
        let lines: Vec<&str> = out.stdout.lines().collect();
        let (final_line, progress) = lines.split_last().map_or(("", &[][..]), |(l, p)| (*l, p));
        let mut text = format!(
            "exit {}\nstdout (last line): {}\n",
            out.code,
            last(final_line)
        );
        for l in progress {
            if !is_progress(l) {
                let _ = writeln!(text, "UNEXPECTED progress line: {l}");
            }
        }
        let _ = write!(text, "stderr:\n{}", out.stderr);
        self.push(step, text);
    }

    /// Which events objects of `kind` got, as `name type reason` (kinds only: how many of
    /// each depends on timing).
    pub(crate) async fn record_event_kinds(
        &mut self,
        ns: &TestNamespace,
        kind: &str,
        step: &str,
    ) -> anyhow::Result<()> {
        let events = ns.api::<Event>().list(&ListParams::default()).await?;
        let kinds: BTreeSet<String> = events
            .items
            .iter()
            .filter(|e| e.involved_object.kind.as_deref() == Some(kind))
            .map(|e| {
                format!(
                    "{} {} {}",
                    e.involved_object.name.as_deref().unwrap_or(""),
                    e.type_.as_deref().unwrap_or(""),
                    e.reason.as_deref().unwrap_or("")
                )
            })
            .collect();
        self.push(step, kinds.into_iter().collect::<Vec<_>>().join("\n"));
        Ok(())
    }

    pub(crate) fn entries(&self) -> Vec<Entry> {
        self.raw
            .iter()
            .map(|e| Entry {
                step: e.step.clone(),
                text: normalise_times(&self.hashes.apply(&e.text)),
            })
            .collect()
    }
}

/// The state that must be equal on both sides, as text (hashes are normalised later).
pub(crate) fn describe_state(d: &Deployment, rss: &[ReplicaSet]) -> String {
    let st = d.status.clone().unwrap_or_default();
    let spec = d.spec.clone();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "deployment {}: generation={:?} observed={:?} paused={} spec.replicas={:?} revision={:?} change-cause={:?} image={}",
        d.metadata.name.as_deref().unwrap_or(""),
        d.metadata.generation,
        st.observed_generation,
        spec.paused.unwrap_or(false),
        spec.replicas,
        annotation(&d.metadata, REVISION),
        annotation(&d.metadata, CHANGE_CAUSE),
        image_of_template(Some(&spec.template)),
    );
    let _ = writeln!(
        s,
        "  status: replicas={:?} updated={:?} ready={:?} available={:?} unavailable={:?} terminating={:?} collisionCount={:?}",
        st.replicas,
        st.updated_replicas,
        st.ready_replicas,
        st.available_replicas,
        st.unavailable_replicas,
        st.terminating_replicas,
        st.collision_count,
    );
    // Upstream race, Recreate only: when the status write that records "Created new replica
    // set" conflicts (its cache lags its own previous write), the next sync finds
    // replicas == updatedReplicas == 0 with the previous rollout's NewReplicaSetAvailable
    // still in place, counts the rollout as complete and never rewrites the condition: it
    // keeps naming the *old* ReplicaSet, and the conditions' order differs. Which of the
    // two outcomes upstream shows depends on timing, so for Recreate the ReplicaSet named in
    // `Progressing` is masked.
    //
    // The conditions are compared sorted by type, for every strategy: a condition that
    // changes moves to the end of the list, so the order records which one changed last,
    // and that depends on timing in both managers. Scaling 0 → 3, say, ends with
    // `Available` last when no sync saw a partly available ReplicaSet (`Available` went
    // False and back to True while `Progressing` stayed), and with `Progressing` last when
    // one did (it went to ReplicaSetUpdated and back to NewReplicaSetAvailable). Types,
    // statuses, reasons and messages are still compared.
    let recreate = spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate");
    let mut conditions: Vec<String> = st
        .conditions
        .iter()
        .flatten()
        .map(|c| {
            let mut message = c.message.clone().unwrap_or_default();
            if recreate && c.type_.as_deref() == Some("Progressing") {
                message = mask_replicaset_name(&message);
            }
            format!(
                "  condition {} {} {} {:?}",
                c.type_.as_deref().unwrap_or(""),
                c.status.as_deref().unwrap_or(""),
                c.reason.as_deref().unwrap_or(""),
                message
            )
        })
        .collect();
    conditions.sort();
    for c in conditions {
        let _ = writeln!(s, "{c}");
    }
    for rs in rss {
        let rst = rs.status.clone().unwrap_or_default();
        let _ = writeln!(
            s,
            "  rs {} revision={:?} history={:?} image={} spec.replicas={:?} replicas={} ready={:?} available={:?} desired={:?} max={:?} change-cause={:?}",
            rs.metadata.name.as_deref().unwrap_or(""),
            annotation(&rs.metadata, REVISION),
            annotation(&rs.metadata, REVISION_HISTORY),
            image_of_template(rs.spec.template.as_ref()),
            rs.spec.replicas,
            rst.replicas,
            rst.ready_replicas,
            rst.available_replicas,
            annotation(&rs.metadata, DESIRED),
            annotation(&rs.metadata, MAX),
            annotation(&rs.metadata, CHANGE_CAUSE),
        );
    }
    s
}

/// `ReplicaSet "x" has ...` -> `ReplicaSet "<some RS>" has ...`.
fn mask_replicaset_name(message: &str) -> String {
    match message
        .strip_prefix("ReplicaSet \"")
        .and_then(|r| r.split_once('"'))
    {
        Some((_, rest)) => format!("ReplicaSet \"<some RS>\"{rest}"),
        None => message.to_owned(),
    }
}

/// The scripted session, against whatever manages `ns`.
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn session(ns: &TestNamespace, k: &Kubectl, kind: Kind) -> anyhow::Result<Transcript> {
    let mut t = Transcript::new(kind);
    let status = ["rollout", "status", "deployment/web", "--timeout=90s"];

    // Settles, learns new hashes, records the state.
    async fn settle(
        t: &mut Transcript,
        ns: &TestNamespace,
        name: &str,
        step: &str,
    ) -> anyhow::Result<()> {
        let (d, rss) = wait_settled(ns, name)
            .await
            .with_context(|| format!("after step {step:?}"))?;
        t.hashes.learn(&rss);
        t.push(&format!("{step}: state"), describe_state(&d, &rss));
        Ok(())
    }

    // Revision 1.
    let mut manifest =
        deployment_manifest("web", 3, "registry.example/web:v1", serde_json::json!({}));
    manifest["metadata"]["annotations"] = serde_json::json!({ CHANGE_CAUSE: "create v1" });
    let out = k
        .run(&["create", "-f", "-"], Some(&manifest.to_string()))
        .await?;
    t.record("create", &out);
    let out = k.run(&status, None).await?;
    t.record_status("rollout status (v1)", "web", &out);
    settle(&mut t, ns, "web", "v1").await?;
    t.record(
        "history",
        &k.run(&["rollout", "history", "deployment/web"], None)
            .await?,
    );

    // Revisions 2 and 3: image changes, each with its change cause.
    for v in ["v2", "v3"] {
        let image = format!("app=registry.example/web:{v}");
        t.record(
            &format!("set image {v}"),
            &k.run(&["set", "image", "deployment/web", &image], None)
                .await?,
        );
        let cause = format!("{CHANGE_CAUSE}=set image {v}");
        t.record(
            &format!("annotate {v}"),
            &k.run(&["annotate", "deployment/web", &cause, "--overwrite"], None)
                .await?,
        );
        let out = k.run(&status, None).await?;
        t.record_status(&format!("rollout status ({v})"), "web", &out);
        settle(&mut t, ns, "web", v).await?;
    }
    t.record(
        "history 1..3",
        &k.run(&["rollout", "history", "deployment/web"], None)
            .await?,
    );
    t.record(
        "history --revision=1",
        &k.run(
            &["rollout", "history", "deployment/web", "--revision=1"],
            None,
        )
        .await?,
    );
    t.record(
        "history --revision=99",
        &k.run(
            &["rollout", "history", "deployment/web", "--revision=99"],
            None,
        )
        .await?,
    );

    // undo: back to v2 (revision 4), then --to-revision=1 (v1 again, revision 5).
    t.record(
        "undo",
        &k.run(&["rollout", "undo", "deployment/web"], None).await?,
    );
    let out = k.run(&status, None).await?;
    t.record_status("rollout status (undo)", "web", &out);
    settle(&mut t, ns, "web", "undo").await?;
    t.record(
        "undo --to-revision=1",
        &k.run(
            &["rollout", "undo", "deployment/web", "--to-revision=1"],
            None,
        )
        .await?,
    );
    let out = k.run(&status, None).await?;
    t.record_status("rollout status (undo to 1)", "web", &out);
    settle(&mut t, ns, "web", "undo to 1").await?;
    t.record(
        "history after undo",
        &k.run(&["rollout", "history", "deployment/web"], None)
            .await?,
    );
    t.record(
        "undo --to-revision=5 (current)",
        &k.run(
            &["rollout", "undo", "deployment/web", "--to-revision=5"],
            None,
        )
        .await?,
    );
    t.record(
        "undo --to-revision=99",
        &k.run(
            &["rollout", "undo", "deployment/web", "--to-revision=99"],
            None,
        )
        .await?,
    );
    t.record(
        "status --revision=4",
        &k.run(
            &[
                "rollout",
                "status",
                "deployment/web",
                "--revision=4",
                "--watch=false",
            ],
            None,
        )
        .await?,
    );

    // pause: a template change waits, a scale does not, undo and restart are refused.
    t.record(
        "pause",
        &k.run(&["rollout", "pause", "deployment/web"], None).await?,
    );
    t.record(
        "pause again",
        &k.run(&["rollout", "pause", "deployment/web"], None).await?,
    );
    wait_observed(ns, "web").await?;
    settle(&mut t, ns, "web", "paused").await?;
    t.record(
        "set image v4 (paused)",
        &k.run(
            &[
                "set",
                "image",
                "deployment/web",
                "app=registry.example/web:v4",
            ],
            None,
        )
        .await?,
    );
    wait_observed(ns, "web").await?;
    t.record(
        "status (paused, template changed)",
        &k.run(
            &["rollout", "status", "deployment/web", "--watch=false"],
            None,
        )
        .await?,
    );
    t.record(
        "undo (paused)",
        &k.run(&["rollout", "undo", "deployment/web"], None).await?,
    );
    t.record(
        "restart (paused)",
        &k.run(&["rollout", "restart", "deployment/web"], None)
            .await?,
    );
    t.record(
        "scale 5 (paused)",
        &k.run(&["scale", "deployment/web", "--replicas=5"], None)
            .await?,
    );
    wait_observed(ns, "web").await?;
    settle(&mut t, ns, "web", "scaled while paused").await?;
    t.record(
        "history (paused)",
        &k.run(&["rollout", "history", "deployment/web"], None)
            .await?,
    );

    // resume: the v4 rollout proceeds (revision 6).
    t.record(
        "resume",
        &k.run(&["rollout", "resume", "deployment/web"], None)
            .await?,
    );
    t.record(
        "resume again",
        &k.run(&["rollout", "resume", "deployment/web"], None)
            .await?,
    );
    let out = k.run(&status, None).await?;
    t.record_status("rollout status (resumed)", "web", &out);
    settle(&mut t, ns, "web", "resumed").await?;

    // restart: a new template annotation, so a new RS (revision 7).
    t.record(
        "restart",
        &k.run(&["rollout", "restart", "deployment/web"], None)
            .await?,
    );
    let out = k.run(&status, None).await?;
    t.record_status("rollout status (restart)", "web", &out);
    settle(&mut t, ns, "web", "restarted").await?;
    t.record(
        "history final",
        &k.run(&["rollout", "history", "deployment/web"], None)
            .await?,
    );
    t.record(
        "history --revision=7",
        &k.run(
            &["rollout", "history", "deployment/web", "--revision=7"],
            None,
        )
        .await?,
    );

    // scale: precondition failure, down, to zero, back up.
    t.record(
        "scale --current-replicas=3 (wrong)",
        &k.run(
            &[
                "scale",
                "deployment/web",
                "--current-replicas=3",
                "--replicas=2",
            ],
            None,
        )
        .await?,
    );
    for n in ["2", "0", "3"] {
        t.record(
            &format!("scale {n}"),
            &k.run(
                &["scale", "deployment/web", &format!("--replicas={n}")],
                None,
            )
            .await?,
        );
        let out = k.run(&status, None).await?;
        t.record_status(&format!("rollout status (scale {n})"), "web", &out);
        settle(&mut t, ns, "web", &format!("scale {n}")).await?;
    }
    t.record(
        "status settled",
        &k.run(
            &["rollout", "status", "deployment/web", "--watch=false"],
            None,
        )
        .await?,
    );
    lean_session(&mut t, ns, k).await?;

    let rs_columns = "custom-columns=NAME:.metadata.name,REVISION:.metadata.annotations.deployment\\.kubernetes\\.io/revision,DESIRED:.spec.replicas,CURRENT:.status.replicas,READY:.status.readyReplicas,IMAGE:.spec.template.spec.containers[0].image";
    let mut out = k.run(&["get", "rs", "-o", rs_columns], None).await?;
    // Rows are sorted by name, and names carry the hash: sort after normalising.
    out.stdout = {
        let normalised = t.hashes.apply(&out.stdout);
        // Column widths follow the name lengths: compare cells, not padding.
        let mut lines: Vec<String> = normalised
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        if lines.len() > 1 {
            lines[1..].sort_unstable();
        }
        lines.join("\n") + "\n"
    };
    t.record("get rs", &out);

    // Which events the Deployments got (kinds only: how many scaling steps a rollout takes
    // depends on timing).
    t.record_event_kinds(ns, "Deployment", "deployment event kinds")
        .await?;
    Ok(t)
}

/// Recreate with `revisionHistoryLimit: 1`: cleanup shows in `rollout history` and `undo`.
async fn lean_session(t: &mut Transcript, ns: &TestNamespace, k: &Kubectl) -> anyhow::Result<()> {
    let status = ["rollout", "status", "deployment/lean", "--timeout=60s"];
    let manifest = deployment_manifest(
        "lean",
        2,
        "registry.example/lean:v1",
        serde_json::json!({"strategy": {"type": "Recreate"}, "revisionHistoryLimit": 1}),
    );
    t.record(
        "lean: create",
        &k.run(&["create", "-f", "-"], Some(&manifest.to_string()))
            .await?,
    );
    let out = k.run(&status, None).await?;
    t.record_status("lean: rollout status (v1)", "lean", &out);
    let settle = async |t: &mut Transcript, step: &str| -> anyhow::Result<()> {
        let (d, rss) = wait_settled(ns, "lean")
            .await
            .with_context(|| format!("after step {step:?}"))?;
        t.hashes.learn(&rss);
        t.push(&format!("{step}: state"), describe_state(&d, &rss));
        Ok(())
    };
    settle(t, "lean: v1").await?;
    for v in ["v2", "v3"] {
        let image = format!("app=registry.example/lean:{v}");
        t.record(
            &format!("lean: set image {v}"),
            &k.run(&["set", "image", "deployment/lean", &image], None)
                .await?,
        );
        let out = k.run(&status, None).await?;
        t.record_status(&format!("lean: rollout status ({v})"), "lean", &out);
        settle(t, &format!("lean: {v}")).await?;
    }
    t.record(
        "lean: history",
        &k.run(&["rollout", "history", "deployment/lean"], None)
            .await?,
    );
    t.record(
        "lean: undo --to-revision=1 (cleaned up)",
        &k.run(
            &["rollout", "undo", "deployment/lean", "--to-revision=1"],
            None,
        )
        .await?,
    );
    t.record(
        "lean: undo",
        &k.run(&["rollout", "undo", "deployment/lean"], None).await?,
    );
    let out = k.run(&status, None).await?;
    t.record_status("lean: rollout status (undo)", "lean", &out);
    settle(t, "lean: undo").await?;
    t.record(
        "lean: history after undo",
        &k.run(&["rollout", "history", "deployment/lean"], None)
            .await?,
    );
    Ok(())
}

/// One side of a comparison: its transcript, and its manager and namespace, alive until the
/// comparison is done so that a failing comparison can point at the manager's log.
pub(crate) struct Side {
    pub(crate) transcript: Transcript,
    pub(crate) manager: Manager,
    _ns: TestNamespace,
}

/// Runs `session` in a namespace of its own, with kubectl on that namespace, against a
/// freshly started manager of `kind` running `controllers`; the manager must still run
/// afterwards and must not have tried to write outside its namespace.
pub(crate) async fn run_side(
    cluster: &TestCluster,
    kind: Kind,
    prefix: &str,
    controllers: &str,
    session: impl AsyncFnOnce(&TestNamespace, &Kubectl) -> anyhow::Result<Transcript>,
) -> anyhow::Result<Side> {
    let ns = cluster.namespace(prefix).await?;
    wait_default_service_account(&ns).await?;
    let mut manager = Manager::start(kind, cluster, ns.name(), controllers).await?;
    let result = match Kubectl::new(cluster, ns.name()) {
        Ok(k) => session(&ns, &k).await,
        Err(e) => Err(e),
    };
    let result = match (result, manager.check_running_in_namespace()) {
        (Ok(t), Ok(())) => Ok(t),
        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
    };
    let transcript = Manager::with_logs(result, &mut [&mut manager])
        .with_context(|| format!("{} side (namespace {})", kind.name(), ns.name()))?;
    Ok(Side {
        transcript,
        manager,
        _ns: ns,
    })
}

/// The two sides' transcripts must be equal (`RKCM_PARITY_PRINT` prints the reference's).
pub(crate) fn sides_match(
    reference: anyhow::Result<Side>,
    tested: anyhow::Result<Side>,
) -> anyhow::Result<()> {
    let mut reference = reference?;
    let mut tested = tested?;
    if std::env::var_os("RKCM_PARITY_PRINT").is_some() {
        for e in reference.transcript.entries() {
            eprintln!("=== {}\n{}", e.step, e.text);
        }
    }
    let result = compare(&reference.transcript, &tested.transcript);
    Manager::with_logs(result, &mut [&mut reference.manager, &mut tested.manager])
}

/// Which manager plays rkcm's part (`RKCM_PARITY_SUBJECT=upstream` for a dry run of the
/// comparisons with upstream on both sides).
pub(crate) fn subject() -> Kind {
    match std::env::var("RKCM_PARITY_SUBJECT").as_deref() {
        Ok("upstream") => Kind::Upstream,
        _ => Kind::Rkcm,
    }
}

pub(crate) fn compare(reference: &Transcript, subject: &Transcript) -> anyhow::Result<()> {
    let (a, b) = (reference.entries(), subject.entries());
    let mut report = String::new();
    for i in 0..a.len().max(b.len()) {
        match (a.get(i), b.get(i)) {
            (Some(x), Some(y)) if x == y => {}
            (x, y) => {
                let _ = writeln!(
                    report,
                    "=== step {i}: {}\n--- {} (reference)\n{}\n+++ {} (subject)\n{}",
                    x.or(y).map_or("", |e| e.step.as_str()),
                    reference.kind.name(),
                    x.map_or("<missing>", |e| e.text.as_str()),
                    subject.kind.name(),
                    y.map_or("<missing>", |e| e.text.as_str()),
                );
            }
        }
    }
    // The reference itself must be sane: kubectl's messages only, nothing unexpected.
    for e in &a {
        if e.text.contains("UNEXPECTED") {
            let _ = writeln!(report, "reference step {:?}: {}", e.step, e.text);
        }
    }
    if report.is_empty() {
        Ok(())
    } else {
        bail!("kubectl sessions differ:\n{report}")
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn kubectl_rollout_session_matches_upstream() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let side = |kind: Kind, prefix: &'static str| {
        let cluster = &cluster;
        run_side(
            cluster,
            kind,
            prefix,
            CONTROLLERS,
            async move |ns: &TestNamespace, k: &Kubectl| session(ns, k, kind).await,
        )
    };
    let (reference, tested) = tokio::join!(
        side(Kind::Upstream, "rollout-upstream"),
        side(subject(), "rollout-subject"),
    );
    sides_match(reference, tested)
}

#[test]
fn normalisation_helpers() {
    assert_eq!(
        normalise_times("at 2025-01-02T03:04:05Z and 2025-01-02T03:04:05.123456+01:00."),
        "at <time> and <time>."
    );
    assert_eq!(
        normalise_times("no time 2025-01-02 here"),
        "no time 2025-01-02 here"
    );
    assert_eq!(
        mask_replicaset_name("ReplicaSet \"lean-<H6>\" has successfully progressed."),
        "ReplicaSet \"<some RS>\" has successfully progressed."
    );
    assert_eq!(
        mask_replicaset_name("Deployment is paused"),
        "Deployment is paused"
    );
    assert!(is_progress_line(
        "Waiting for deployment \"web\" rollout to finish: 1 out of 3 new replicas have been updated...",
        "web"
    ));
    assert!(is_progress_line(
        "Waiting for deployment \"web\" rollout to finish: 2 old replicas are pending termination...",
        "web"
    ));
    assert!(is_progress_line(
        "Waiting for deployment \"web\" rollout to finish: 2 of 3 updated replicas are available...",
        "web"
    ));
    assert!(!is_progress_line(
        "deployment \"web\" successfully rolled out",
        "web"
    ));
}
