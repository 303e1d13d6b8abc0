//! Writes that do not decode the object the API server sends back.
//!
//! The API server answers a create, a status update or a delete with the whole object,
//! `managedFields` included. kube's `Api` decodes that answer into the typed object, which
//! for a pod costs more CPU than the rest of the write (in a PodGC run, decoding the answers
//! of the deletes was a sixth of the manager's CPU). Controllers read at most the identity of
//! what they wrote (its resourceVersion for the stale-cache guard, its name and UID for
//! references), so these writes decode only that and skip the rest unbuilt.
//!
//! The answer is asked for in protobuf (as upstream's clients do for built-in types), with
//! JSON as the fallback the server picks for a type it cannot encode so: the API server spends
//! a fraction of the CPU on the protobuf of an object that it spends on its JSON. Which of
//! the two came back is read from the answer's content type. A pod is also created with a
//! protobuf body ([`protobuf::encode`]), falling back to JSON for a pod the encoder cannot
//! write whole; other bodies are JSON (patches always are). [`accept_protobuf`] turns protobuf
//! off for both (`--kube-api-content-type=application/json`).
//!
//! Errors are kube's, as `Api` gives them: a status other than 2xx becomes `kube::Error::Api`
//! with the server's `Status`, decoded from either encoding.

use kube::core::Request;
use kube::core::params::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::api::protobuf;
use crate::api::written::Written;

/// Whether writes ask for their answer in protobuf and create pods in it (the default, as
/// upstream's).
static PROTOBUF: AtomicBool = AtomicBool::new(true);

/// The `Accept` header of a write: protobuf, else JSON.
const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// Makes later writes use protobuf (`true`, the default: answers asked for in it, pods created
/// in it) or JSON only.
pub fn accept_protobuf(on: bool) {
    PROTOBUF.store(on, Ordering::Relaxed);
}

/// Only `metadata` of the answer is built; serde skips the other fields without allocating.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    metadata: Written,
}

fn identity(text: &str) -> Result<Written, kube::Error> {
    serde_json::from_str::<Answer>(text)
        .map(|a| a.metadata)
        .map_err(kube::Error::SerdeError)
}

/// Sends a write; the answer's bytes on success, and whether they are protobuf.
async fn answer(
    client: &Client,
    request: http::Request<Vec<u8>>,
) -> Result<(bool, bytes::Bytes), kube::Error> {
    let (mut parts, body) = request.into_parts();
    if PROTOBUF.load(Ordering::Relaxed) {
        parts
            .headers
            .insert(http::header::ACCEPT, http::HeaderValue::from_static(ACCEPT));
    }
    let response = client
        .send(http::Request::from_parts(
            parts,
            kube::client::Body::from(body),
        ))
        .await?;
    let code = response.status();
    let is_protobuf = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(protobuf::MEDIA_TYPE));
    let bytes = response.into_body().collect_bytes().await?;
    if !code.is_success() {
        return Err(kube::Error::Api(Box::new(protobuf::error_status(
            code.as_u16(),
            &bytes,
        ))));
    }
    Ok((is_protobuf, bytes))
}

/// Sends a write and reads the identity of the object in its answer, whatever its encoding.
async fn send(client: &Client, request: http::Request<Vec<u8>>) -> Result<Written, kube::Error> {
    let (is_protobuf, bytes) = answer(client, request).await?;
    if is_protobuf {
        protobuf::identity(&bytes).map_err(|e| kube::Error::Service(Box::new(e)))
    } else {
        identity(&String::from_utf8_lossy(&bytes))
    }
}

fn collection<K: Resource<DynamicType = ()>>(namespace: Option<&str>) -> Request {
    Request::new(K::url_path(&(), namespace))
}

fn body<K: Serialize>(obj: &K) -> Result<Vec<u8>, kube::Error> {
    serde_json::to_vec(obj).map_err(kube::Error::SerdeError)
}

/// `POST` of `obj` into `namespace` (`None`: cluster-scoped).
pub async fn create<K>(
    client: &Client,
    namespace: Option<&str>,
    obj: &K,
) -> Result<Written, kube::Error>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let (data, is_protobuf) = create_body(obj)?;
    let mut req = collection::<K>(namespace)
        .create(&PostParams::default(), data)
        .map_err(kube::Error::BuildRequest)?;
    if is_protobuf {
        req.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(protobuf::MEDIA_TYPE),
        );
    }
    send(client, req).await
}

/// The body of a create: a v1 Pod in protobuf when protobuf is on and the encoder knows every
/// field of the pod, else JSON. The flag says which.
fn create_body<K>(obj: &K) -> Result<(Vec<u8>, bool), kube::Error>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    if PROTOBUF.load(Ordering::Relaxed) && K::group(&()).is_empty() && K::kind(&()) == "Pod" {
        let value = serde_json::to_value(obj).map_err(kube::Error::SerdeError)?;
        match protobuf::encode::pod(&value) {
            Ok(bytes) => return Ok((bytes, true)),
            Err(e) => tracing::debug!(error = %e, "pod create sent as JSON"),
        }
    }
    Ok((body(obj)?, false))
}

/// `PUT` of `obj`'s status subresource (the object's name and namespace address it).
pub async fn replace_status<K>(client: &Client, obj: &K) -> Result<Written, kube::Error>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let name = obj.meta().name.as_deref().unwrap_or_default();
    let req = collection::<K>(obj.meta().namespace.as_deref())
        .replace_subresource("status", name, &PostParams::default(), body(obj)?)
        .map_err(kube::Error::BuildRequest)?;
    send(client, req).await
}

/// `PUT` of `obj`'s status subresource, answered with `obj` as the server now keeps it. A
/// status write changes neither the spec nor the generation, and the precondition on the
/// resourceVersion means the rest of `obj` is what the server had: only the new
/// resourceVersion is read from the answer, and `managedFields` are dropped (a cached object
/// has none).
pub async fn replace_status_object<K>(client: &Client, mut obj: K) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let written = replace_status(client, &obj).await?;
    let meta = obj.meta_mut();
    meta.resource_version = written.resource_version;
    meta.managed_fields = None;
    Ok(obj)
}

/// `PATCH` of `name` in `namespace`.
pub async fn patch<K, P>(
    client: &Client,
    namespace: Option<&str>,
    name: &str,
    patch: &Patch<P>,
) -> Result<Written, kube::Error>
where
    K: Resource<DynamicType = ()>,
    P: Serialize,
{
    let req = collection::<K>(namespace)
        .patch(name, &PatchParams::default(), patch)
        .map_err(kube::Error::BuildRequest)?;
    send(client, req).await
}

/// `DELETE` of `name` in `namespace` with `params`. Whatever the server answers on success
/// (the object, now terminating, or a `Status`) is not read.
pub async fn delete<K>(
    client: &Client,
    namespace: Option<&str>,
    name: &str,
    params: &DeleteParams,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()>,
{
    let req = collection::<K>(namespace)
        .delete(name, params)
        .map_err(kube::Error::BuildRequest)?;
    answer(client, req).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn the_identity_is_read_and_the_rest_skipped() {
        let answer = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-1",
            "generateName":"web-","namespace":"ns","uid":"u-1","resourceVersion":"42",
            "creationTimestamp":"2026-11-24T16:00:00Z",
            "labels":{"app":"web"},"managedFields":[{"manager":"rkcm","operation":"Update",
            "fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{}}}}}]},
            "spec":{"containers":[{"name":"c","image":"nginx"}]},"status":{"phase":"Pending"}}"#;
        assert_eq!(
            identity(answer).ok(),
            Some(Written {
                name: Some("web-1".into()),
                namespace: Some("ns".into()),
                uid: Some("u-1".into()),
                resource_version: Some("42".into()),
                creation_timestamp: "2026-11-24T16:00:00Z".parse().ok().map(Time),
            })
        );
        let meta = identity(answer).map(Written::into_meta).unwrap_or_default();
        assert_eq!(meta.resource_version.as_deref(), Some("42"));
        assert!(meta.labels.is_none() && meta.managed_fields.is_none());
    }

    #[test]
    fn an_answer_without_metadata_has_no_identity_and_garbage_is_an_error() {
        assert_eq!(
            identity(r#"{"kind":"Status","status":"Success"}"#).ok(),
            Some(Written::default())
        );
        assert!(matches!(
            identity("not json"),
            Err(kube::Error::SerdeError(_))
        ));
    }
}
