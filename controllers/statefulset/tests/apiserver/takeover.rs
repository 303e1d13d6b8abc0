//! Handover between upstream kube-controller-manager and rkcm without churn: the same
//! ControllerRevision names and `data.raw` bytes, so neither side creates a revision or
//! replaces a pod (the lib docs' takeover guarantee; upstream
//! `pkg/controller/history/controller_history.go` names revisions by a hash of the raw bytes
//! and `EqualRevision` compares them).
//!
//! The template carries `<`, `>` and `&`, which Go's `encoding/json` escapes. Upstream
//! v1.37 tolerates other bytes for the *newest* revision (`StatefulSetSemanticRevisionComparison`
//! re-encodes it), but not for older ones: a rollback to a revision rkcm stored with other
//! bytes would make upstream create a new revision (and raise `collisionCount`, its name
//! being taken). So the scenario ends with upstream rolling back to a revision rkcm created.
//!
//! Upstream runs as the testkit's [`Manager`], confined to the test's namespace.

use anyhow::{Context, Result, ensure};
use futures::AsyncReadExt as _;
use k8s_openapi::api::apps::v1::ControllerRevision;
use rkcm_runtime::workload::history::hash_controller_revision;
use rkcm_testkit::holds_for;
use serde_json::json;

use crate::harness::*;

/// An annotation Go escapes in the revision data.
const HTML_NOTE: &str = "a<b>&c \"q\"";

/// Upstream kube-controller-manager running only the StatefulSet controller, confined to
/// the test namespace.
async fn start_upstream(env: &Env<'_>) -> Result<Manager> {
    Manager::start(
        ManagerKind::Upstream,
        &env.cluster,
        env.name(),
        "statefulset-controller",
    )
    .await
}

/// Revision names with their `.revision`, and the pod UIDs, sorted.
async fn snapshot(env: &Env<'_>) -> Result<(Vec<(String, i64)>, Vec<Option<String>>)> {
    let revs = env
        .revision_list()
        .await?
        .into_iter()
        .map(|r| (r.metadata.name.unwrap_or_default(), r.revision.unwrap_or(0)))
        .collect();
    let mut pods = env.pod_uids().await?;
    pods.sort();
    Ok((revs, pods))
}

/// Reads varint-prefixed protobuf fields: `(field number, wire type, payload)`; for wire
/// type 2 the payload is the bytes, for others it is empty.
fn proto_fields(mut b: &[u8]) -> Result<Vec<(u64, u8, &[u8])>> {
    fn varint(b: &mut &[u8]) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = b.split_first().context("truncated varint")?;
            *b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        anyhow::bail!("varint too long")
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b)?;
        let (field, wire) = (key >> 3, (key & 7) as u8);
        match wire {
            0 => {
                varint(&mut b)?;
                out.push((field, wire, &b[..0]));
            }
            2 => {
                let len = usize::try_from(varint(&mut b)?)?;
                ensure!(len <= b.len(), "field {field} longer than the message");
                out.push((field, wire, &b[..len]));
                b = &b[len..];
            }
            _ => anyhow::bail!("unexpected wire type {wire}"),
        }
    }
    Ok(out)
}

fn proto_field(b: &[u8], field: u64) -> Result<&[u8]> {
    proto_fields(b)?
        .into_iter()
        .find(|(f, w, _)| *f == field && *w == 2)
        .map(|(_, _, p)| p)
        .with_context(|| format!("no field {field}"))
}

/// The `data.raw` bytes the API server stores for revision `name`. Read as protobuf, which
/// carries them unchanged (JSON output re-escapes `<`, `>`, `&` whatever was stored):
/// `k8s\0` + `runtime.Unknown{2: raw object}`, `ControllerRevision{2: data}`,
/// `RawExtension{1: raw}`.
async fn stored_data(env: &Env<'_>, name: &str) -> Result<Vec<u8>> {
    let mut req = kube::core::Request::new(format!(
        "/apis/apps/v1/namespaces/{}/controllerrevisions",
        env.name()
    ))
    .get(name, &Default::default())?;
    req.headers_mut()
        .insert("accept", "application/vnd.kubernetes.protobuf".parse()?);
    let mut body = Vec::new();
    env.cluster
        .client()
        .request_stream(req)
        .await?
        .read_to_end(&mut body)
        .await?;
    let unknown = body
        .strip_prefix(b"k8s\0")
        .context("not a protobuf answer")?;
    let object = proto_field(unknown, 2)?;
    let data = proto_field(object, 2)?;
    Ok(proto_field(data, 1)?.to_vec())
}

/// Fails unless the stored bytes of `rev` are what upstream writes: they hash (FNV-1 with
/// collision count 0) to the revision's name, and hold Go's escapes of [`HTML_NOTE`].
async fn check_stored_bytes(env: &Env<'_>, rev: &ControllerRevision) -> Result<()> {
    let name = rev.metadata.name.clone().unwrap_or_default();
    let raw = stored_data(env, &name).await?;
    let text = String::from_utf8_lossy(&raw);
    ensure!(
        name == format!("web-{}", hash_controller_revision(&raw, Some(0))),
        "revision {name}: the stored data.raw does not hash to the name upstream gives it: {text}"
    );
    ensure!(
        text.contains(r#""note":"a\u003cb\u003e\u0026c \"q\"""#),
        "revision {name}: the stored data.raw lacks Go's escapes: {text}"
    );
    Ok(())
}

rkcm_testkit::scenario! {
    handover_with_upstream_creates_no_revision, "sts-takeover", handover
}

/// Upstream builds V1; rkcm takes over (creates nothing) and rolls V2 and V3; upstream takes
/// back (creates nothing) and rolls back to V2, reusing rkcm's revision.
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn handover(base: &Base) -> Result<()> {
    if std::env::var_os(E2E_BIN_ENV).is_none() {
        eprintln!(
            "skipped: needs the local plane's upstream kube-controller-manager ({E2E_BIN_ENV})"
        );
        return Ok(());
    }
    let mut env = Env::new(base);
    env.stop_controller().await?;
    let r = async {
        let upstream = start_upstream(&env).await?;
        env.create_set(merge(
            sts("web", 3),
            json!({"spec": {"template": {"metadata": {"annotations": {"note": HTML_NOTE}}}}}),
        ))
        .await?;
        let by_upstream = env.wait_settled("web", 3).await?;
        let before = snapshot(&env).await?;
        ensure!(before.0.len() == 1, "upstream made {:?}", before.0);
        check_stored_bytes(&env, &env.revision_list().await?[0])
            .await
            .context("upstream's own revision (checks the check)")?;
        upstream.stop().await?;

        env.start_controller();
        holds_for("rkcm keeps upstream's revision and pods", HOLDS, || async {
            Ok(snapshot(&env).await? == before)
        })
        .await?;
        let st = env.status("web").await?;
        ensure!(st.update_revision == by_upstream.update_revision, "{st:?}");

        let mut rolled = Vec::new();
        for image in [V2, V3] {
            // The revision before the change: read after it, a fast rollout may already have
            // moved it, and the wait below would never end.
            let prev = env.status("web").await?.update_revision;
            env.set_image("web", image).await?;
            rolled.push(
                env.wait_status("web", &format!("rkcm rolled {image}"), |s, st| {
                    st.observed_generation == s.metadata.generation
                        && st.update_revision != prev
                        && st.current_revision == st.update_revision
                        && st.ready_replicas == Some(3)
                        && st.updated_replicas == Some(3)
                })
                .await?,
            );
        }
        let revisions = env.revision_list().await?;
        ensure!(revisions.len() == 3, "revisions: {revisions:?}");
        for rev in &revisions[1..] {
            check_stored_bytes(&env, rev).await?;
        }
        let after_rkcm = snapshot(&env).await?;
        env.stop_controller().await?;

        let upstream = start_upstream(&env).await?;
        // A spec change outside the template: once upstream reports its generation, it has
        // compared its revision with the stored ones.
        env.patch_set("web", json!({"spec": {"minReadySeconds": 1}}))
            .await?;
        env.wait_status("web", "upstream observed the new generation", |s, st| {
            st.observed_generation == s.metadata.generation
        })
        .await?;
        holds_for(
            "upstream keeps rkcm's revisions and pods",
            HOLDS,
            || async { Ok(snapshot(&env).await? == after_rkcm) },
        )
        .await?;
        let st = env.status("web").await?;
        ensure!(
            st.update_revision == rolled[1].update_revision,
            "{st:?} vs {:?}",
            rolled[1]
        );

        // Rollback to V2, a revision rkcm created and not the newest: upstream finds it only
        // by its bytes.
        env.set_image("web", V2).await?;
        let back = env
            .wait_status("web", "upstream rolled back to V2", |s, st| {
                st.observed_generation == s.metadata.generation
                    && st.current_revision == st.update_revision
                    && st.updated_replicas == Some(3)
                    && st.ready_replicas == Some(3)
            })
            .await?;
        let names = |revs: &[ControllerRevision]| -> Vec<String> {
            revs.iter()
                .map(|r| r.metadata.name.clone().unwrap_or_default())
                .collect()
        };
        let mut want = names(&revisions);
        want.sort();
        let mut have = names(&env.revision_list().await?);
        have.sort();
        ensure!(
            have == want && back.update_revision == rolled[0].update_revision,
            "upstream's rollback to V2 made revisions {have:?} (before: {want:?}), update \
             revision {:?} (rkcm's V2: {:?}), collisionCount {:?}",
            back.update_revision,
            rolled[0].update_revision,
            back.collision_count
        );
        ensure!(back.collision_count.unwrap_or(0) == 0, "{back:?}");
        upstream.stop().await?;
        Ok(())
    }
    .await;
    env.finish(r).await
}
