//! ControllerRevision history and the revision/template hashes (mirrors upstream
//! `pkg/controller/history/controller_history.go`, `ComputeHash` in
//! `pkg/controller/controller_utils.go` and `SafeEncodeString` in apimachinery
//! `pkg/util/rand`, as used by `pkg/controller/statefulset/stateful_set_utils.go`,
//! `pkg/controller/daemon/update.go` and `pkg/controller/deployment/util/deployment_util.go`).
//!
//! Guarantees:
//! - [`hash_controller_revision`] is byte-for-byte upstream's `HashControllerRevision`:
//!   32-bit **FNV-1** (not 1a) over the revision's raw data, then the decimal collision count
//!   when given, rendered as [`safe_encode_string`] of the decimal sum. Given the same
//!   `data.raw` bytes it yields the same name as upstream, so a cluster moves from upstream to
//!   rkcm without new StatefulSet revisions. [`go_json_bytes`] re-encodes a JSON value exactly
//!   as Go's `encoding/json` marshals a generic map (sorted keys, HTML-safe escaping, float64
//!   numbers), which is how upstream produces `data.raw`; the test vectors below come from
//!   upstream v1.37.1 code. Revisions are created and updated with request bodies encoded
//!   the same way ([`revision_request_body`]): the API server stores a `RawExtension` as the
//!   bytes it received, and upstream compares those bytes.
//! - [`hash_dump`] is exactly upstream `ComputeHash` after its object dump: FNV-1a, then
//!   8 collision bytes (little-endian u32 + 4 zero bytes) when a count is given, safe-encoded.
//! - [`compute_hash`] (pod-template-hash, DaemonSet revision names) is **not** upstream's value
//!   for the same template. Upstream hashes a go-spew `%#v` dump of the Go struct, which
//!   prints every Go field in declaration order with Go type names (so it changes with every
//!   Kubernetes release that adds a PodSpec field) and the private internals of
//!   `resource.Quantity` (so it even changes when a quantity's string cache is filled: a
//!   template with `cpu: 0.1` hashes `65bdf95c55` before and `79bfbc9849` after
//!   `Quantity.String()` is called, measured on v1.37.1). Neither is reproducible from the API
//!   object. Upstream itself does not rely on the value: Deployments find their ReplicaSet by
//!   template equality and DaemonSets their revision by data equality, and both read the hash
//!   label back from the found object; collisions are resolved by `collisionCount`. So rkcm
//!   uses the same FNV-1a/collision/encoding tail over a deterministic dump of its own
//!   ([`canonical_template_dump`]: the template's canonical JSON), which only has to be
//!   stable across restarts and rkcm versions.
//! - Revisions sort by `.revision`, ties by older `creationTimestamp`, then name (stable).
//! - Creation retries a taken name with the next collision count, reusing an existing
//!   revision with identical data, as upstream; updates of `.revision` retry on conflict.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::Resource;
use kube::api::{Api, DeleteParams};

use crate::error::Error;
use crate::workload::controller_ref::{controller_of, controller_owner_ref};

/// Label carrying a revision's hash (`history.ControllerRevisionHashLabel`).
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// Alphabet of `SafeEncodeString` (apimachinery `rand.alphanums`): no vowels, no 0/1/3.
pub const SAFE_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// Revision name prefixes are cut to this many bytes so `<prefix>-<hash>` fits 253.
pub const MAX_REVISION_PREFIX_LEN: usize = 223;

/// Create attempts before giving up on name collisions (upstream loops without bound).
pub const MAX_CREATE_ATTEMPTS: u32 = 100;

const FNV32_OFFSET: u32 = 0x811c_9dc5;
const FNV32_PRIME: u32 = 0x0100_0193;

/// 32-bit FNV-1 (Go `fnv.New32`), continuing from `h`.
fn fnv1_32(mut h: u32, data: &[u8]) -> u32 {
    for b in data {
        h = h.wrapping_mul(FNV32_PRIME) ^ u32::from(*b);
    }
    h
}

/// 32-bit FNV-1a (Go `fnv.New32a`), continuing from `h`.
fn fnv1a_32(mut h: u32, data: &[u8]) -> u32 {
    for b in data {
        h = (h ^ u32::from(*b)).wrapping_mul(FNV32_PRIME);
    }
    h
}

/// apimachinery `rand.SafeEncodeString`: each character `c` becomes
/// `SAFE_ALPHABET[c % 27]`. Upstream only feeds it decimal digits, for which this is exact.
pub fn safe_encode_string(s: &str) -> String {
    s.chars()
        .map(|c| char::from(SAFE_ALPHABET[(c as usize) % SAFE_ALPHABET.len()]))
        .collect()
}

/// Upstream `HashControllerRevision` over `data.raw` bytes and an optional collision count
/// ("probe"). Exact.
pub fn hash_controller_revision(raw: &[u8], probe: Option<i32>) -> String {
    let mut h = fnv1_32(FNV32_OFFSET, raw);
    if let Some(p) = probe {
        h = fnv1_32(h, p.to_string().as_bytes());
    }
    safe_encode_string(&h.to_string())
}

/// [`hash_controller_revision`] of a revision object, hashing the Go encoding of its data.
pub fn hash_revision(revision: &ControllerRevision, probe: Option<i32>) -> String {
    hash_controller_revision(&revision_data_bytes(revision), probe)
}

/// The bytes upstream would hold in `data.raw` for this revision's data.
pub fn revision_data_bytes(revision: &ControllerRevision) -> Vec<u8> {
    go_json_bytes(&revision.data.0)
}

/// Upstream `ControllerRevisionName`: `<prefix>-<hash>`, the prefix cut to 223 bytes.
pub fn controller_revision_name(prefix: &str, hash: &str) -> String {
    let mut end = prefix.len().min(MAX_REVISION_PREFIX_LEN);
    // Object names are ASCII; the boundary check only guards against a panic on bad input.
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{hash}", &prefix[..end])
}

/// Upstream `ComputeHash` after `DeepHashObject`: FNV-1a over `dump`, then, when a collision
/// count is given, its little-endian u32 bytes and four zero bytes; safe-encoded decimal.
/// Exact for a given dump.
pub fn hash_dump(dump: &[u8], collision_count: Option<i32>) -> String {
    let mut h = fnv1a_32(FNV32_OFFSET, dump);
    if let Some(c) = collision_count {
        let mut bytes = [0u8; 8];
        // Go converts with uint32(*collisionCount): two's complement for negatives.
        bytes[..4].copy_from_slice(&(c as u32).to_le_bytes());
        h = fnv1a_32(h, &bytes);
    }
    safe_encode_string(&h.to_string())
}

/// rkcm's deterministic dump of a pod template: its canonical JSON (sorted keys, Go
/// escaping). See the module docs for why this is not upstream's go-spew dump.
pub fn canonical_template_dump(template: &PodTemplateSpec) -> Vec<u8> {
    match serde_json::to_value(template) {
        Ok(v) => go_json_bytes(&v),
        // Serialising a k8s-openapi struct cannot fail; an empty dump still hashes.
        Err(_) => Vec::new(),
    }
}

/// The pod-template-hash / DaemonSet revision hash rkcm uses for `template` and
/// `collisionCount`: deterministic, in upstream's alphabet, with upstream's collision
/// handling; not upstream's value (module docs).
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    hash_dump(&canonical_template_dump(template), collision_count)
}

/// Encodes `v` exactly as Go's `json.Marshal` encodes the same value decoded into
/// `interface{}`: object keys sorted bytewise, `<`, `>`, `&`, U+2028 and U+2029 escaped as
/// `\u00XX`/`\u20XX`, other control characters as Go writes them, and every number as the
/// float64 Go would hold (integers beyond 2^53 lose precision exactly as upstream's do).
pub fn go_json_bytes(v: &serde_json::Value) -> Vec<u8> {
    let mut out = String::new();
    write_go_json(&mut out, v);
    out.into_bytes()
}

fn write_go_json(out: &mut String, v: &serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or_default();
            write_go_float(out, f);
        }
        Value::String(s) => write_go_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, val)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(out, k);
                out.push(':');
                write_go_json(out, val);
            }
            out.push('}');
        }
    }
}

/// Go's `floatEncoder` for float64: `'f'` format with shortest digits, `'e'` format for
/// magnitudes below 1e-6 or from 1e21, exponent without leading zeros and with a sign.
fn write_go_float(out: &mut String, f: f64) {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let e = format!("{f:e}");
        match e.split_once('e') {
            Some((mantissa, exp)) => {
                out.push_str(mantissa);
                out.push('e');
                if !exp.starts_with('-') {
                    out.push('+');
                }
                out.push_str(exp);
            }
            None => out.push_str(&e),
        }
    } else {
        let _ = write!(out, "{f}");
    }
}

/// Go's `encoding/json` string encoding with HTML escaping (Go ≥ 1.22 short escapes).
fn write_go_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{00}'..='\u{1f}' => {
                let b = c as u32 as u8;
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xf)]));
            }
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            _ => out.push(c),
        }
    }
    out.push('"');
}

/// The JSON body of a create or update request for `revision`, encoded with
/// [`go_json_bytes`] so that its `data` is exactly the bytes Go's `encoding/json` writes for
/// the same value (HTML-safe escapes, sorted keys, Go's numbers). The API server keeps a
/// `RawExtension` as the bytes it received, and upstream compares revisions by those bytes
/// (`EqualRevision`, `CreateControllerRevision`), so a revision written through serde
/// (`<` where Go writes `\u003c`) would look different to upstream: it would not reuse it on
/// a rollback and would answer its name with a collision. `apiVersion` and `kind` are set.
pub fn revision_request_body(revision: &ControllerRevision) -> Vec<u8> {
    let mut v = serde_json::to_value(revision).unwrap_or_else(|_| serde_json::json!({}));
    if let serde_json::Value::Object(map) = &mut v {
        map.insert("apiVersion".into(), serde_json::json!("apps/v1"));
        map.insert("kind".into(), serde_json::json!("ControllerRevision"));
    }
    go_json_bytes(&v)
}

/// Upstream `NewControllerRevision`: labels = template labels + hash label, the parent's
/// controllerRef, `data`, `revision`, and the name `<parent>-<hash>` for `collision_count`.
/// The namespace is the parent's.
pub fn new_controller_revision<O: Resource<DynamicType = ()>>(
    parent: &O,
    template_labels: Option<&BTreeMap<String, String>>,
    data: serde_json::Value,
    revision: i64,
    collision_count: Option<i32>,
) -> Result<ControllerRevision, Error> {
    let owner_ref = controller_owner_ref(parent).ok_or_else(|| {
        Error::Other(format!(
            "parent {} has no name or uid",
            crate::keys::key_of(parent)
        ))
    })?;
    let mut cr = ControllerRevision {
        metadata: ObjectMeta {
            namespace: parent.meta().namespace.clone(),
            owner_references: Some(vec![owner_ref]),
            ..ObjectMeta::default()
        },
        data: RawExtension(data),
        revision: Some(revision),
    };
    let hash = hash_revision(&cr, collision_count);
    let parent_name = parent.meta().name.as_deref().unwrap_or_default();
    cr.metadata.name = Some(controller_revision_name(parent_name, &hash));
    let mut labels = template_labels.cloned().unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH_LABEL.to_string(), hash);
    cr.metadata.labels = Some(labels);
    Ok(cr)
}

/// The `.revision` of a revision (0 when unset).
pub fn revision_number(r: &ControllerRevision) -> i64 {
    r.revision.unwrap_or(0)
}

/// Upstream `SortControllerRevisions`: by `.revision`, ties by older creationTimestamp, then
/// by name. Stable.
pub fn sort_controller_revisions<R: Borrow<ControllerRevision>>(revisions: &mut [R]) {
    revisions.sort_by(|a, b| {
        let (a, b) = (a.borrow(), b.borrow());
        revision_number(a)
            .cmp(&revision_number(b))
            .then_with(|| {
                let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
                let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
                ta.cmp(&tb)
            })
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// The number for a new revision: one more than the highest existing, 1 for none (upstream
/// `nextRevision` over a sorted list; DaemonSet's `max(old) + 1`).
pub fn next_revision<R: Borrow<ControllerRevision>>(revisions: &[R]) -> i64 {
    revisions
        .iter()
        .map(|r| revision_number(r.borrow()))
        .max()
        .map_or(1, |m| m.saturating_add(1))
}

/// Upstream `EqualRevision` (v1.37 `pkg/controller/history/controller_history.go`): the data
/// must be identical; the hash labels are not compared (earlier releases compared them when
/// both parsed as integers). The data is compared as parsed JSON: the informers read it as
/// JSON, which does not show the stored bytes upstream compares.
pub fn equal_revision(lhs: &ControllerRevision, rhs: &ControllerRevision) -> bool {
    lhs.data.0 == rhs.data.0
}

/// Upstream `FindEqualRevisions`: every revision equal to `needle`, in input order.
pub fn find_equal_revisions<R: Borrow<ControllerRevision> + Clone>(
    revisions: &[R],
    needle: &ControllerRevision,
) -> Vec<R> {
    revisions
        .iter()
        .filter(|r| equal_revision((*r).borrow(), needle))
        .cloned()
        .collect()
}

/// Upstream `ListControllerRevisions` over cached candidates (the caller passes the parent's
/// namespace): those matching the selector and controlled by `parent_uid` or by nobody.
pub fn owned_or_orphan_revisions(
    candidates: &[Arc<ControllerRevision>],
    parent_uid: &str,
    matches: impl Fn(&ControllerRevision) -> bool,
) -> Vec<Arc<ControllerRevision>> {
    candidates
        .iter()
        .filter(|r| matches(r))
        .filter(|r| controller_of(&r.metadata).is_none_or(|c| c.uid == parent_uid))
        .cloned()
        .collect()
}

/// Writes of ControllerRevisions (upstream `realHistory`). Adoption and release go through
/// [`crate::workload::controller_ref::ControllerRefManager`].
#[derive(Clone)]
pub struct History {
    client: kube::Client,
}

impl History {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, namespace: &str) -> Api<ControllerRevision> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Sends `revision` as a create (POST) or update (PUT of `name`), its body encoded by
    /// [`revision_request_body`] so that `data.raw` holds Go's bytes.
    async fn send(
        &self,
        namespace: &str,
        name: Option<&str>,
        revision: &ControllerRevision,
    ) -> Result<ControllerRevision, kube::Error> {
        let collection = format!("/apis/apps/v1/namespaces/{namespace}/controllerrevisions");
        let builder = match name {
            None => http::Request::post(collection),
            Some(n) => http::Request::put(format!("{collection}/{n}")),
        };
        let request = builder
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(revision_request_body(revision))
            .map_err(kube::Error::HttpError)?;
        self.client.request::<ControllerRevision>(request).await
    }

    /// Creates `revision` under `parent`, named `<parent>-<hash(data, collision_count)>`. On a
    /// name taken by identical data the existing revision is returned; by different data
    /// `collision_count` is incremented and the next name tried (the caller persists the new
    /// count in its status). As upstream, the hash label keeps the value
    /// [`new_controller_revision`] computed; only the name follows the collision count.
    pub async fn create_controller_revision<O: Resource<DynamicType = ()>>(
        &self,
        parent: &O,
        revision: &ControllerRevision,
        collision_count: &mut i32,
    ) -> Result<ControllerRevision, Error> {
        let namespace = parent.meta().namespace.clone().unwrap_or_default();
        let parent_name = parent.meta().name.clone().unwrap_or_default();
        let api = self.api(&namespace);
        let data = revision_data_bytes(revision);
        let mut clone = revision.clone();
        clone.metadata.namespace = Some(namespace.clone());
        for _ in 0..MAX_CREATE_ATTEMPTS {
            let hash = hash_controller_revision(&data, Some(*collision_count));
            let name = controller_revision_name(&parent_name, &hash);
            clone.metadata.name = Some(name.clone());
            let key = crate::keys::key(Some(&namespace), &name);
            match self.send(&namespace, None, &clone).await {
                Ok(created) => return Ok(created),
                Err(kube::Error::Api(s)) if s.is_already_exists() => {
                    let existing = api
                        .get(&name)
                        .await
                        .map_err(|e| Error::api("get", "ControllerRevision", key.clone(), e))?;
                    if existing.data.0 == clone.data.0 {
                        return Ok(existing);
                    }
                    tracing::debug!(revision = %key, collision_count = *collision_count, "controller revision name collision");
                    *collision_count = collision_count.saturating_add(1);
                }
                Err(e) => return Err(Error::api("create", "ControllerRevision", key, e)),
            }
        }
        Err(Error::Other(format!(
            "creating a ControllerRevision for {}: {MAX_CREATE_ATTEMPTS} name collisions in a row",
            crate::keys::key_of(parent)
        )))
    }

    /// Sets `.revision` to `new_revision` (upstream `UpdateControllerRevision`), retrying on
    /// conflict against a fresh read with client-go's default backoff (10 ms ×5, 4 tries).
    pub async fn update_controller_revision(
        &self,
        revision: &ControllerRevision,
        new_revision: i64,
    ) -> Result<ControllerRevision, Error> {
        let namespace = revision.metadata.namespace.clone().unwrap_or_default();
        let name = revision.metadata.name.clone().unwrap_or_default();
        let key = crate::keys::key(Some(&namespace), &name);
        let api = self.api(&namespace);
        let mut current = revision.clone();
        let mut delay = Duration::from_millis(10);
        let mut attempt = 0;
        loop {
            if current.revision == Some(new_revision) {
                return Ok(current);
            }
            let mut updated = current.clone();
            updated.revision = Some(new_revision);
            match self.send(&namespace, Some(&name), &updated).await {
                Ok(r) => return Ok(r),
                Err(kube::Error::Api(s)) if s.is_conflict() && attempt < 3 => {
                    attempt += 1;
                    tokio::time::sleep(delay).await;
                    delay *= 5;
                    current = api
                        .get(&name)
                        .await
                        .map_err(|e| Error::api("get", "ControllerRevision", key.clone(), e))?;
                }
                Err(e) => return Err(Error::api("update", "ControllerRevision", key, e)),
            }
        }
    }

    /// Deletes a revision (background propagation is the server default; revisions own nothing).
    pub async fn delete_controller_revision(
        &self,
        revision: &ControllerRevision,
    ) -> Result<(), Error> {
        let namespace = revision.metadata.namespace.clone().unwrap_or_default();
        let name = revision.metadata.name.clone().unwrap_or_default();
        crate::api::write::delete::<ControllerRevision>(
            &self.client,
            Some(&namespace),
            &name,
            &DeleteParams::default(),
        )
        .await
        .map_err(|e| {
            Error::api(
                "delete",
                "ControllerRevision",
                crate::keys::key(Some(&namespace), &name),
                e,
            )
        })
    }
}

#[cfg(test)]
mod tests;
