//! `rkcm explain` finds the cluster as kubectl does: `KUBECONFIG`, else `~/.kube/config`;
//! `--context` picks a context, whose namespace is the default; `-n` wins; `KIND/NAME` and
//! `KIND NAME` name the object; a `kubectl-rkcm` link on the PATH makes it
//! `kubectl rkcm explain`. Only reads: no manager runs.

use std::process::Stdio;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use kube::config::{Kubeconfig, NamedContext};
use rkcm_testkit::TestCluster;
use rkcm_testkit::harness::e2e_bin;
use serde_json::Value;

use crate::job_takeover::job_manifest;
use crate::serve::rkcm_bin;

const CONTEXT: &str = "rkcm-explain-manners";

/// `rkcm explain ARGS -o json` with exactly `env` for KUBECONFIG and HOME (no
/// `--kubeconfig`); its parsed output, or its standard error.
async fn explain_env(
    args: &[&str],
    env: &[(&str, &std::path::Path)],
) -> anyhow::Result<Result<Value, String>> {
    let mut cmd = tokio::process::Command::new(rkcm_bin());
    cmd.arg("explain").args(args).args(["-o", "json"]);
    cmd.env_remove("KUBECONFIG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .context("running rkcm explain")?;
    if !out.status.success() {
        return Ok(Err(String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    Ok(Ok(
        serde_json::from_slice(&out.stdout).context("parsing explain -o json")?
    ))
}

fn object(e: &Result<Value, String>) -> anyhow::Result<(String, String)> {
    match e {
        Ok(v) => Ok((
            v["object"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            v["object"]["name"].as_str().unwrap_or_default().to_owned(),
        )),
        Err(stderr) => bail!("explain failed: {stderr}"),
    }
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn explain_reads_kubeconfig_context_and_namespace_as_kubectl() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-explain-manners").await?;
    let jobs: Api<Job> = Api::namespaced(cluster.client(), ns.name());
    let job: Job = serde_json::from_value(job_manifest("pi", false, 1, 1))?;
    jobs.create(&PostParams::default(), &job)
        .await
        .context("creating Job pi")?;

    // A kubeconfig with one more context: the current one's, with the test's namespace.
    let mut kc = Kubeconfig::read_from(cluster.kubeconfig_path()).context("reading kubeconfig")?;
    let current = kc.current_context.clone().context("no current context")?;
    let mut ctx: NamedContext = kc
        .contexts
        .iter()
        .find(|c| c.name == current)
        .cloned()
        .context("the current context is not listed")?;
    ctx.name = CONTEXT.to_owned();
    if let Some(c) = ctx.context.as_mut() {
        c.namespace = Some(ns.name().to_owned());
    }
    kc.contexts.push(ctx);
    let dir = std::env::temp_dir().join(ns.name());
    std::fs::create_dir_all(&dir)?;
    let result = check(&dir, &kc, ns.name()).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn check(dir: &std::path::Path, kc: &Kubeconfig, ns: &str) -> anyhow::Result<()> {
    let file = dir.join("config");
    std::fs::write(&file, serde_yaml::to_string(kc)?)?;
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".kube"))?;
    std::fs::copy(&file, home.join(".kube/config"))?;
    let empty_home = dir.join("empty");
    std::fs::create_dir_all(&empty_home)?;
    let want = (ns.to_owned(), "pi".to_owned());

    // KUBECONFIG, --context: the context's namespace.
    let e = explain_env(
        &["job/pi", "--context", CONTEXT],
        &[("KUBECONFIG", &file), ("HOME", &empty_home)],
    )
    .await?;
    ensure!(object(&e)? == want, "KUBECONFIG + --context: {e:?}");
    // ~/.kube/config, KIND NAME and -n.
    let e = explain_env(&["job", "pi", "-n", ns], &[("HOME", &home)]).await?;
    ensure!(object(&e)? == want, "~/.kube/config + -n: {e:?}");
    // The current context has no namespace: "default", where no such Job is.
    let e = explain_env(&["job/pi"], &[("HOME", &home)]).await?;
    match e {
        Err(stderr) => ensure!(stderr.contains("Job default/pi not found"), "{stderr}"),
        Ok(v) => bail!("found in the default namespace: {v}"),
    }
    // As a kubectl plugin: `kubectl rkcm explain ...` runs `kubectl-rkcm explain ...`.
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins)?;
    std::os::unix::fs::symlink(rkcm_bin(), plugins.join("kubectl-rkcm"))?;
    let path = std::env::join_paths(std::iter::once(plugins.clone()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))?;
    let out = tokio::process::Command::new(e2e_bin("kubectl")?)
        .args(["rkcm", "explain", "job", "pi", "-n", ns, "-o", "json"])
        .env("PATH", path)
        .env("KUBECONFIG", &file)
        .env("HOME", &empty_home)
        .kill_on_drop(true)
        .output()
        .await
        .context("running kubectl rkcm explain")?;
    let plugin = if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).context("parsing kubectl rkcm explain")?)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    };
    ensure!(object(&plugin)? == want, "kubectl rkcm explain: {plugin:?}");
    // No kubeconfig anywhere (and not in a cluster): a plain error naming where it looked.
    let e = explain_env(&["job/pi"], &[("HOME", &empty_home)]).await?;
    match e {
        Err(stderr) => ensure!(
            stderr.contains("KUBECONFIG") && stderr.contains("~/.kube/config"),
            "{stderr}"
        ),
        Ok(v) => bail!("explained without a kubeconfig: {v}"),
    }
    Ok(())
}
