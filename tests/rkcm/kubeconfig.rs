//! Kubeconfig files the black-box tests hand to rkcm, and reading YAML values by path.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_yaml::Value;

pub(crate) fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(*k))
}

pub(crate) fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path)?.as_str()
}

/// A kubeconfig for the cluster of `RKCM_TEST_KUBECONFIG` (same server and CA) that
/// authenticates with `token` only.
pub(crate) fn token_kubeconfig(
    token: &str,
    namespace: &str,
    dir: &Path,
) -> anyhow::Result<PathBuf> {
    let path = PathBuf::from(std::env::var(rkcm_testkit::KUBECONFIG_ENV)?);
    let original: Value = serde_yaml::from_str(&std::fs::read_to_string(&path)?)?;
    let context_name = str_at(&original, &["current-context"]).context("no current-context")?;
    let find = |list: &str, name: &str| -> anyhow::Result<Value> {
        original
            .get(list)
            .and_then(Value::as_sequence)
            .and_then(|l| l.iter().find(|e| str_at(e, &["name"]) == Some(name)))
            .cloned()
            .with_context(|| format!("no {list} entry {name}"))
    };
    let context = find("contexts", context_name)?;
    let cluster_name =
        str_at(&context, &["context", "cluster"]).context("context has no cluster")?;
    let mut cluster = find("clusters", cluster_name)?
        .get("cluster")
        .cloned()
        .context("cluster entry")?;
    // A relative CA path is relative to the original kubeconfig's directory.
    if let Some(ca) = str_at(&cluster, &["certificate-authority"]) {
        let ca = Path::new(ca);
        if ca.is_relative() {
            let abs = path.parent().unwrap_or(Path::new(".")).join(ca);
            cluster["certificate-authority"] = Value::String(abs.display().to_string());
        }
    }
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": serde_json::to_value(&cluster)?}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa", "namespace": namespace}}],
        "current-context": "sa",
    });
    let out = dir.join("kubeconfig");
    std::fs::write(&out, serde_json::to_vec_pretty(&config)?)?;
    Ok(out)
}

/// A kubeconfig for the proxy authenticating with `token`.
pub(crate) fn proxy_kubeconfig(dir: &Path, url: &str, token: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join("controller-manager.conf");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: plane\n  cluster: {{server: \"{url}\"}}\n\
         users:\n- name: manager\n  user: {{token: \"{token}\"}}\ncontexts:\n- name: plane\n  \
         context: {{cluster: plane, user: manager}}\ncurrent-context: plane\n"
    );
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
