//! The API server's defaulting of a StatefulSet's pod template, as kube-controller-manager
//! v1.37 applies it before comparing the set with its newest revision (gate
//! `StatefulSetSemanticRevisionComparison`, `setMatchesLatestExistingRevision` in
//! `pkg/controller/statefulset/stateful_set_control.go`). Pure.
//!
//! Mirrors the pod-template part of `SetObjectDefaults_StatefulSet`
//! (`pkg/apis/apps/v1/zz_generated.defaults.go`) and the functions it calls from
//! `pkg/apis/core/v1/defaults.go` (`SetDefaults_PodSpec`, `_Container`, `_Probe`,
//! `_HTTPGetAction`, `_Volume`, `_SecretVolumeSource`, ...), with `ImageVolume` (GA, locked on).
//!
//! Not repeated: `SetDefaults_ResourceList`, which rounds quantities up to milli-units. Every
//! template the comparison sees was defaulted by an API server that already rounded them (the
//! rounding predates every release rkcm can meet), so it never changes one.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, HTTPGetAction, Lifecycle, ObjectFieldSelector, PodSpec, PodTemplateSpec,
    Probe, Volume,
};

/// Applies the API server's defaults to `template` in place.
pub fn default_pod_template(template: &mut PodTemplateSpec) {
    let spec = template.spec.get_or_insert_with(PodSpec::default);
    default_pod_spec(spec);
    for v in spec.volumes.iter_mut().flatten() {
        default_volume(v);
    }
    for c in spec.init_containers.iter_mut().flatten() {
        default_container(c);
    }
    for c in &mut spec.containers {
        default_container(c);
    }
    for e in spec.ephemeral_containers.iter_mut().flatten() {
        // `SetDefaults_EphemeralContainer` is `SetDefaults_Container` on the common part.
        default_image_pull_policy(&e.image, &mut e.image_pull_policy);
        default_termination_message(
            &mut e.termination_message_path,
            &mut e.termination_message_policy,
        );
        default_ports_env_probes(
            e.ports.iter_mut().flatten().map(|p| &mut p.protocol),
            e.env.iter_mut().flatten(),
            [
                e.liveness_probe.as_mut(),
                e.readiness_probe.as_mut(),
                e.startup_probe.as_mut(),
            ],
            e.lifecycle.as_mut(),
        );
    }
}

/// `SetDefaults_PodSpec`.
fn default_pod_spec(spec: &mut PodSpec) {
    // `serviceAccount` is the deprecated alias of `serviceAccountName`; the name wins.
    if spec
        .service_account_name
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        spec.service_account_name = spec.service_account.clone();
    }
    spec.service_account = spec.service_account_name.clone();
    set_if_empty(&mut spec.dns_policy, "ClusterFirst");
    set_if_empty(&mut spec.restart_policy, "Always");
    spec.security_context.get_or_insert_with(Default::default);
    spec.termination_grace_period_seconds.get_or_insert(30);
    set_if_empty(&mut spec.scheduler_name, "default-scheduler");
}

/// `SetDefaults_Volume` and the defaults of the volume sources.
fn default_volume(v: &mut Volume) {
    let no_source = v.aws_elastic_block_store.is_none()
        && v.azure_disk.is_none()
        && v.azure_file.is_none()
        && v.cephfs.is_none()
        && v.cinder.is_none()
        && v.config_map.is_none()
        && v.csi.is_none()
        && v.downward_api.is_none()
        && v.empty_dir.is_none()
        && v.ephemeral.is_none()
        && v.fc.is_none()
        && v.flex_volume.is_none()
        && v.flocker.is_none()
        && v.gce_persistent_disk.is_none()
        && v.git_repo.is_none()
        && v.glusterfs.is_none()
        && v.host_path.is_none()
        && v.image.is_none()
        && v.iscsi.is_none()
        && v.nfs.is_none()
        && v.persistent_volume_claim.is_none()
        && v.photon_persistent_disk.is_none()
        && v.portworx_volume.is_none()
        && v.projected.is_none()
        && v.quobyte.is_none()
        && v.rbd.is_none()
        && v.scale_io.is_none()
        && v.secret.is_none()
        && v.storageos.is_none()
        && v.vsphere_volume.is_none();
    if no_source {
        v.empty_dir = Some(Default::default());
    }
    if let Some(image) = v.image.as_mut() {
        default_image_pull_policy(&image.reference, &mut image.pull_policy);
    }
    if let Some(h) = v.host_path.as_mut() {
        h.type_.get_or_insert_with(String::new);
    }
    if let Some(s) = v.secret.as_mut() {
        s.default_mode.get_or_insert(0o644);
    }
    if let Some(i) = v.iscsi.as_mut() {
        set_if_empty(&mut i.iscsi_interface, "default");
    }
    if let Some(r) = v.rbd.as_mut() {
        set_if_empty(&mut r.pool, "rbd");
        set_if_empty(&mut r.user, "admin");
        set_if_empty(&mut r.keyring, "/etc/ceph/keyring");
    }
    if let Some(d) = v.downward_api.as_mut() {
        d.default_mode.get_or_insert(0o644);
        for item in d.items.iter_mut().flatten() {
            if let Some(f) = item.field_ref.as_mut() {
                default_field_selector(f);
            }
        }
    }
    if let Some(c) = v.config_map.as_mut() {
        c.default_mode.get_or_insert(0o644);
    }
    if let Some(a) = v.azure_disk.as_mut() {
        a.caching_mode.get_or_insert_with(|| "ReadWrite".to_owned());
        a.fs_type.get_or_insert_with(|| "ext4".to_owned());
        a.read_only.get_or_insert(false);
        a.kind.get_or_insert_with(|| "Shared".to_owned());
    }
    if let Some(p) = v.projected.as_mut() {
        p.default_mode.get_or_insert(0o644);
        for source in p.sources.iter_mut().flatten() {
            if let Some(d) = source.downward_api.as_mut() {
                for item in d.items.iter_mut().flatten() {
                    if let Some(f) = item.field_ref.as_mut() {
                        default_field_selector(f);
                    }
                }
            }
            if let Some(t) = source.service_account_token.as_mut() {
                t.expiration_seconds.get_or_insert(3600);
            }
        }
    }
    if let Some(s) = v.scale_io.as_mut() {
        set_if_empty(&mut s.storage_mode, "ThinProvisioned");
        set_if_empty(&mut s.fs_type, "xfs");
    }
    if let Some(spec) = v
        .ephemeral
        .as_mut()
        .and_then(|e| e.volume_claim_template.as_mut())
        .map(|t| &mut t.spec)
    {
        // `SetDefaults_PersistentVolumeClaimSpec`.
        spec.volume_mode
            .get_or_insert_with(|| "Filesystem".to_owned());
    }
}

/// `SetDefaults_Container` and the per-field defaults the generated code adds.
fn default_container(c: &mut Container) {
    default_image_pull_policy(&c.image, &mut c.image_pull_policy);
    default_termination_message(
        &mut c.termination_message_path,
        &mut c.termination_message_policy,
    );
    default_ports_env_probes(
        c.ports.iter_mut().flatten().map(|p| &mut p.protocol),
        c.env.iter_mut().flatten(),
        [
            c.liveness_probe.as_mut(),
            c.readiness_probe.as_mut(),
            c.startup_probe.as_mut(),
        ],
        c.lifecycle.as_mut(),
    );
}

fn default_termination_message(path: &mut Option<String>, policy: &mut Option<String>) {
    set_if_empty(path, "/dev/termination-log");
    set_if_empty(policy, "File");
}

fn default_ports_env_probes<'a>(
    protocols: impl Iterator<Item = &'a mut Option<String>>,
    env: impl Iterator<Item = &'a mut EnvVar>,
    probes: [Option<&'a mut Probe>; 3],
    lifecycle: Option<&'a mut Lifecycle>,
) {
    for protocol in protocols {
        set_if_empty(protocol, "TCP");
    }
    for e in env {
        let Some(from) = e.value_from.as_mut() else {
            continue;
        };
        if let Some(f) = from.field_ref.as_mut() {
            default_field_selector(f);
        }
        if let Some(k) = from.file_key_ref.as_mut() {
            k.optional.get_or_insert(false);
        }
    }
    for probe in probes.into_iter().flatten() {
        default_probe(probe);
    }
    if let Some(l) = lifecycle {
        for handler in [l.post_start.as_mut(), l.pre_stop.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Some(h) = handler.http_get.as_mut() {
                default_http_get(h);
            }
        }
    }
}

/// `SetDefaults_Probe` (a zero counts as unset), with its handler's defaults.
fn default_probe(p: &mut Probe) {
    for (field, default) in [
        (&mut p.timeout_seconds, 1),
        (&mut p.period_seconds, 10),
        (&mut p.success_threshold, 1),
        (&mut p.failure_threshold, 3),
    ] {
        if field.unwrap_or(0) == 0 {
            *field = Some(default);
        }
    }
    if let Some(h) = p.http_get.as_mut() {
        default_http_get(h);
    }
    if let Some(g) = p.grpc.as_mut() {
        g.service.get_or_insert_with(String::new);
    }
}

/// `SetDefaults_HTTPGetAction`.
fn default_http_get(h: &mut HTTPGetAction) {
    set_if_empty(&mut h.path, "/");
    set_if_empty(&mut h.scheme, "HTTP");
}

/// `SetDefaults_ObjectFieldSelector`.
fn default_field_selector(f: &mut ObjectFieldSelector) {
    set_if_empty(&mut f.api_version, "v1");
}

/// The pull policy `SetDefaults_Container` (and, for image volumes, `SetDefaults_Volume`)
/// picks when none is set: `Always` for the tag `latest` (also implied by a reference with
/// neither tag nor digest), `IfNotPresent` otherwise (`parsers.ParseImageName`).
fn default_image_pull_policy(image: &Option<String>, policy: &mut Option<String>) {
    if !policy.as_deref().unwrap_or_default().is_empty() {
        return;
    }
    let latest = image_tag(image.as_deref().unwrap_or_default()) == Some("latest");
    *policy = Some(if latest { "Always" } else { "IfNotPresent" }.to_owned());
}

/// The tag of an image reference as `ParseImageName` reads it: `latest` when the reference has
/// neither tag nor digest, none for a digest without tag or an empty reference. The tag follows
/// the last `:` after the last `/`, so a registry port is never taken for one.
fn image_tag(reference: &str) -> Option<&str> {
    if reference.is_empty() {
        return None;
    }
    let (name, digest) = match reference.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (reference, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => Some(tag),
        None if digest.is_none() => Some("latest"),
        None => None,
    }
}

fn set_if_empty(field: &mut Option<String>, default: &str) {
    if field.as_deref().unwrap_or_default().is_empty() {
        *field = Some(default.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defaulted(template: serde_json::Value) -> serde_json::Value {
        let mut t: PodTemplateSpec = serde_json::from_value(template).expect("template");
        default_pod_template(&mut t);
        serde_json::to_value(t).expect("encode")
    }

    #[test]
    fn image_tags_are_read_as_parse_image_name_does() {
        for (image, tag) in [
            ("nginx", Some("latest")),
            ("nginx:1.27", Some("1.27")),
            ("nginx:latest", Some("latest")),
            ("registry.local:5000/team/app", Some("latest")),
            ("registry.local:5000/team/app:v2", Some("v2")),
            ("nginx@sha256:0123", None),
            ("nginx:1.27@sha256:0123", Some("1.27")),
            ("", None),
        ] {
            assert_eq!(image_tag(image), tag, "{image}");
        }
    }

    /// A template as an API server of an older release stored it, without fields later
    /// releases default, gets every v1.37 default; one that has them is left as it is.
    #[test]
    fn a_bare_template_gets_the_api_servers_defaults() {
        let bare = json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "serviceAccount": "legacy",
                "containers": [{
                    "name": "c", "image": "nginx",
                    "ports": [{"containerPort": 80}],
                    "env": [
                        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                        {"name": "F", "valueFrom": {"fileKeyRef": {"volumeName": "v", "path": "p", "key": "k"}}}
                    ],
                    "readinessProbe": {"httpGet": {"port": 80}},
                    "livenessProbe": {"grpc": {"port": 9000}, "periodSeconds": 5},
                    "lifecycle": {"preStop": {"httpGet": {"port": 80}}}
                }],
                "initContainers": [{"name": "i", "image": "busybox:1.36"}],
                "volumes": [
                    {"name": "scratch"},
                    {"name": "s", "secret": {"secretName": "x"}},
                    {"name": "cm", "configMap": {"name": "x", "defaultMode": 256}},
                    {"name": "h", "hostPath": {"path": "/tmp"}},
                    {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
                    {"name": "img", "image": {"reference": "quay.io/x/y:v1"}}
                ]
            }
        });
        let want = json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "serviceAccount": "legacy", "serviceAccountName": "legacy",
                "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
                "securityContext": {}, "terminationGracePeriodSeconds": 30,
                "schedulerName": "default-scheduler",
                "containers": [{
                    "name": "c", "image": "nginx", "imagePullPolicy": "Always",
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "env": [
                        {"name": "NODE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
                        {"name": "F", "valueFrom": {"fileKeyRef": {"volumeName": "v", "path": "p", "key": "k", "optional": false}}}
                    ],
                    "readinessProbe": {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
                        "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                    "livenessProbe": {"grpc": {"port": 9000, "service": ""},
                        "timeoutSeconds": 1, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 3},
                    "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}}}
                }],
                "initContainers": [{"name": "i", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
                "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "s", "secret": {"secretName": "x", "defaultMode": 420}},
                    {"name": "cm", "configMap": {"name": "x", "defaultMode": 256}},
                    {"name": "h", "hostPath": {"path": "/tmp", "type": ""}},
                    {"name": "p", "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 3600}}]}},
                    {"name": "img", "image": {"reference": "quay.io/x/y:v1", "pullPolicy": "IfNotPresent"}}
                ]
            }
        });
        assert_eq!(defaulted(bare), want);
        assert_eq!(defaulted(want.clone()), want, "defaults are idempotent");
    }
}
