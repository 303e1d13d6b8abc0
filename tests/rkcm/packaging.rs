//! Black-box tests of the packaging: the Helm chart (`charts/rkcm`), the plain manifests
//! generated from it (`deploy/rkcm.yaml`, by `e2e/render-deploy.sh`) and the least-privilege
//! RBAC they grant (as upstream's
//! `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go`).
//!
//! - Without a cluster: `helm lint`; rendering with several value sets; `values.schema.json`
//!   rejecting bad values; `deploy/` equal to the chart's output; RBAC rendered for exactly the
//!   controllers `controllers` enables, each equal to upstream's bootstrap policy; the
//!   Deployment's hardening. helm comes from `RKCM_E2E_BIN` (the pinned build of the local
//!   control plane) or `PATH`; when neither has it and no test cluster is configured, these
//!   tests say so and pass (a plain `cargo test` without the e2e toolchain).
//! - Against the apiserver: server-side dry runs of several renders, and the RBAC proof: rkcm
//!   runs with a token of the chart's ServiceAccount, bound only to the chart's roles, with
//!   the container arguments the chart renders, and PodGC must do its work with them.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use rkcm_testkit::builders::pod;
use rkcm_testkit::{NodeBuilder, ScopedProxy, TestCluster, unique_name, wait_for};
use serde::Deserialize as _;
use serde_yaml::Value;

use crate::kubeconfig::{at, str_at};

use crate::serve::{
    AcceptAnyCert, STARTUP, TempDir, client_config, free_port, https_get, https_request, isolated,
    rkcm_bin, sample, stdin_for,
};

/// The workspace root the test runs for (cargo and e2e/run-tests.py set
/// `CARGO_MANIFEST_DIR`), not the one it was built in: a target directory shared by two
/// checkouts of one commit keeps the binary built in the other.
fn root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The controllers the chart knows (it grants RBAC to these only), canonical names.
const IN_SCOPE: &[&str] = &[
    "cronjob-controller",
    "daemonset-controller",
    "deployment-controller",
    "garbage-collector-controller",
    "job-controller",
    "pod-garbage-collector-controller",
    "replicaset-controller",
    "replicationcontroller-controller",
    "statefulset-controller",
    "ttl-after-finished-controller",
];

// ---------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------

/// `name` from `RKCM_E2E_BIN`, else from `PATH`.
fn tool(name: &str) -> Option<PathBuf> {
    let from_e2e = std::env::var_os("RKCM_E2E_BIN").map(|d| PathBuf::from(d).join(name));
    from_e2e
        .into_iter()
        .chain(std::env::var_os("PATH").into_iter().flat_map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .collect::<Vec<_>>()
        }))
        .find(|p| p.is_file())
}

/// helm, or `None` (with a message) when a plain `cargo test` has no e2e toolchain. Missing
/// helm is an error where tests against a cluster run (`RKCM_TEST_KUBECONFIG` set).
pub(crate) fn helm_or_skip(test: &str) -> anyhow::Result<Option<PathBuf>> {
    match tool("helm") {
        Some(h) => Ok(Some(h)),
        None if std::env::var_os(rkcm_testkit::KUBECONFIG_ENV).is_some() => {
            bail!("helm not found in RKCM_E2E_BIN or PATH (make e2e-bins builds the pinned one)")
        }
        None => {
            eprintln!(
                "skipping {test}: helm not found (set RKCM_E2E_BIN: eval \"$(make -s cluster-env)\")"
            );
            Ok(None)
        }
    }
}

fn required_tool(name: &str) -> anyhow::Result<PathBuf> {
    tool(name).with_context(|| {
        format!("{name} not found in RKCM_E2E_BIN or PATH (make e2e-bins builds the pinned one)")
    })
}

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` to completion, feeding `stdin`.
fn run(cmd: &mut Command, stdin: Option<&str>) -> anyhow::Result<Output> {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(stdin_for(stdin))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {what}"))?;
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().context("stdin pipe")?;
        let input = input.to_owned();
        // A writer thread, so a child that fills its stdout before reading all of stdin
        // cannot deadlock against us.
        std::thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        });
    }
    let out = child
        .wait_with_output()
        .with_context(|| format!("waiting for {what}"))?;
    Ok(Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Runs `cmd`; fails with its output unless it succeeds.
fn run_ok(cmd: &mut Command, stdin: Option<&str>) -> anyhow::Result<Output> {
    let what = format!("{cmd:?}");
    let out = run(cmd, stdin)?;
    ensure!(
        out.ok,
        "{what} failed:\n{}\n{}",
        out.stdout.trim(),
        out.stderr.trim()
    );
    Ok(out)
}

fn helm_cmd(helm: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(helm);
    c.current_dir(root()).args(args);
    c
}

fn template_cmd(helm: &Path, release: &str, namespace: &str, sets: &[&str]) -> Command {
    let mut c = helm_cmd(
        helm,
        &["template", release, "charts/rkcm", "--namespace", namespace],
    );
    for s in sets {
        c.arg("--set").arg(s);
    }
    c
}

/// `helm template` of the chart with `--set` values, as parsed documents.
pub(crate) fn render(
    helm: &Path,
    release: &str,
    namespace: &str,
    sets: &[&str],
) -> anyhow::Result<Docs> {
    let out = run_ok(&mut template_cmd(helm, release, namespace, sets), None)?;
    Docs::parse(&out.stdout)
}

fn kubectl_cmd(kubectl: &Path, args: &[&str]) -> anyhow::Result<Command> {
    let kubeconfig = std::env::var(rkcm_testkit::KUBECONFIG_ENV)
        .with_context(|| format!("{} is not set", rkcm_testkit::KUBECONFIG_ENV))?;
    let mut c = Command::new(kubectl);
    c.arg(format!("--kubeconfig={kubeconfig}"))
        .args(args)
        .env_remove("KUBECONFIG");
    Ok(c)
}

// ---------------------------------------------------------------------------------------------
// Rendered documents
// ---------------------------------------------------------------------------------------------

pub(crate) struct Docs(Vec<Value>);

impl Docs {
    fn parse(yaml: &str) -> anyhow::Result<Self> {
        let mut docs = Vec::new();
        for d in serde_yaml::Deserializer::from_str(yaml) {
            let v = Value::deserialize(d).context("parsing rendered YAML")?;
            if !v.is_null() {
                docs.push(v);
            }
        }
        Ok(Self(docs))
    }

    fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.0
            .iter()
            .filter(move |d| str_at(d, &["kind"]) == Some(kind))
    }

    pub(crate) fn one<'a>(&'a self, kind: &'a str) -> anyhow::Result<&'a Value> {
        let all: Vec<_> = self.of_kind(kind).collect();
        ensure!(all.len() == 1, "expected one {kind}, found {}", all.len());
        Ok(all[0])
    }

    /// The names of the ClusterRoles, by the controller label.
    fn controller_roles(&self) -> BTreeMap<String, &Value> {
        self.of_kind("ClusterRole")
            .filter_map(|r| {
                let c = str_at(r, &["metadata", "labels", "rkcm/controller"])?;
                Some((c.to_owned(), r))
            })
            .collect()
    }

    /// The rkcm container's arguments.
    fn args(&self) -> anyhow::Result<Vec<String>> {
        let d = self.one("Deployment")?;
        let c = container(d)?;
        Ok(c.get("args")
            .and_then(Value::as_sequence)
            .context("container has no args")?
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect())
    }
}

fn container(deployment: &Value) -> anyhow::Result<&Value> {
    at(deployment, &["spec", "template", "spec", "containers"])
        .and_then(Value::as_sequence)
        .and_then(|c| c.first())
        .context("deployment has no container")
}

/// A role's rules flattened to `(apiGroup, resource, verb, resourceName)` tuples, so rules
/// can be compared however they are grouped.
fn grants(role: &Value) -> BTreeSet<(String, String, String, String)> {
    let list = |r: &Value, k: &str| -> Vec<String> {
        r.get(k)
            .and_then(Value::as_sequence)
            .map(|s| {
                s.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = BTreeSet::new();
    for rule in role
        .get("rules")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
    {
        let names = list(rule, "resourceNames");
        let names = if names.is_empty() {
            vec![String::new()]
        } else {
            names
        };
        for g in list(rule, "apiGroups") {
            for r in list(rule, "resources") {
                for v in list(rule, "verbs") {
                    for n in &names {
                        out.insert((g.clone(), r.clone(), v.clone(), n.clone()));
                    }
                }
            }
        }
    }
    out
}

/// `(groups, resources, verbs)` rows to grant tuples.
fn expand(rows: &[(&[&str], &[&str], &[&str])]) -> BTreeSet<(String, String, String, String)> {
    let mut out = BTreeSet::new();
    for (groups, resources, verbs) in rows {
        for g in *groups {
            for r in *resources {
                for v in *verbs {
                    out.insert((g.to_string(), r.to_string(), v.to_string(), String::new()));
                }
            }
        }
    }
    out
}

const EVENTS: (&[&str], &[&str], &[&str]) = (
    &["", "events.k8s.io"],
    &["events"],
    &["create", "update", "patch"],
);

/// Upstream's bootstrap policy per controller (controller_policy.go, `system:controller:<sa>`),
/// written out independently of the chart's templates.
#[allow(
    clippy::too_many_lines,
    reason = "upstream's RBAC rules, one table of test data"
)]
fn upstream_policy(controller: &str) -> BTreeSet<(String, String, String, String)> {
    const EXT_APPS: &[&str] = &["extensions", "apps"];
    const CORE: &[&str] = &[""];
    const BATCH: &[&str] = &["batch"];
    const APPS: &[&str] = &["apps"];
    match controller {
        "cronjob-controller" => expand(&[
            (BATCH, &["cronjobs"], &["get", "list", "watch", "update"]),
            (
                BATCH,
                &["jobs"],
                &[
                    "get", "list", "watch", "create", "update", "delete", "patch",
                ],
            ),
            (
                BATCH,
                &["cronjobs/status", "cronjobs/finalizers"],
                &["update"],
            ),
            (CORE, &["pods"], &["list", "watch", "delete"]),
            EVENTS,
        ]),
        "daemonset-controller" => expand(&[
            (EXT_APPS, &["daemonsets"], &["get", "list", "watch"]),
            (
                EXT_APPS,
                &["daemonsets/status", "daemonsets/finalizers"],
                &["update"],
            ),
            (CORE, &["nodes"], &["list", "watch"]),
            (
                CORE,
                &["pods"],
                &["list", "watch", "create", "delete", "patch"],
            ),
            (CORE, &["pods/binding"], &["create"]),
            (
                APPS,
                &["controllerrevisions"],
                &[
                    "get", "list", "watch", "create", "delete", "update", "patch",
                ],
            ),
            EVENTS,
        ]),
        "deployment-controller" => expand(&[
            (
                EXT_APPS,
                &["deployments"],
                &["get", "list", "watch", "update"],
            ),
            (
                EXT_APPS,
                &["deployments/status", "deployments/finalizers"],
                &["update"],
            ),
            (
                EXT_APPS,
                &["replicasets"],
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
            ),
            (CORE, &["pods"], &["get", "list", "watch", "update"]),
            EVENTS,
        ]),
        "garbage-collector-controller" => expand(&[
            (
                &["*"],
                &["*"],
                &["get", "list", "watch", "patch", "update", "delete"],
            ),
            EVENTS,
        ]),
        "job-controller" => expand(&[
            (
                BATCH,
                &["jobs"],
                &["get", "list", "watch", "update", "patch"],
            ),
            (BATCH, &["jobs/status", "jobs/finalizers"], &["update"]),
            (
                CORE,
                &["pods"],
                &["list", "watch", "create", "delete", "patch"],
            ),
            EVENTS,
        ]),
        "pod-garbage-collector-controller" => expand(&[
            (CORE, &["pods"], &["list", "watch", "delete"]),
            (CORE, &["nodes"], &["get", "list", "watch"]),
            (CORE, &["pods/status"], &["patch"]),
        ]),
        "replicaset-controller" => expand(&[
            (
                EXT_APPS,
                &["replicasets"],
                &["get", "list", "watch", "update"],
            ),
            (
                EXT_APPS,
                &["replicasets/status", "replicasets/finalizers"],
                &["update"],
            ),
            (
                CORE,
                &["pods"],
                &["list", "watch", "patch", "create", "delete"],
            ),
            EVENTS,
        ]),
        "replicationcontroller-controller" => expand(&[
            (
                CORE,
                &["replicationcontrollers"],
                &["get", "list", "watch", "update"],
            ),
            (
                CORE,
                &[
                    "replicationcontrollers/status",
                    "replicationcontrollers/finalizers",
                ],
                &["update"],
            ),
            (
                CORE,
                &["pods"],
                &["list", "watch", "patch", "create", "delete"],
            ),
            EVENTS,
        ]),
        "statefulset-controller" => expand(&[
            (
                CORE,
                &["pods"],
                &[
                    "list", "watch", "get", "create", "delete", "update", "patch",
                ],
            ),
            (APPS, &["statefulsets"], &["get", "list", "watch"]),
            (
                APPS,
                &["statefulsets/status", "statefulsets/finalizers"],
                &["update"],
            ),
            (
                APPS,
                &["controllerrevisions"],
                &[
                    "get", "create", "delete", "update", "patch", "list", "watch",
                ],
            ),
            (
                CORE,
                &["persistentvolumeclaims"],
                &["get", "create", "list", "watch", "update", "delete"],
            ),
            (CORE, &["pods/finalizers"], &["update"]),
            // rkcm's addition: the stuck-rollout recovery reads nodes (README, Permissions).
            (CORE, &["nodes"], &["list", "watch"]),
            EVENTS,
        ]),
        "ttl-after-finished-controller" => expand(&[
            (BATCH, &["jobs"], &["get", "list", "watch", "delete"]),
            EVENTS,
        ]),
        other => panic!("no upstream policy written down for {other}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Tests without a cluster
// ---------------------------------------------------------------------------------------------

#[test]
fn chart_passes_helm_lint() -> anyhow::Result<()> {
    let Some(helm) = helm_or_skip("chart_passes_helm_lint")? else {
        return Ok(());
    };
    for sets in [
        &[][..],
        &[
            "controllers={*}",
            "serviceMonitor.enabled=true",
            "namespace.create=true",
        ][..],
        &[
            "dashboard.enabled=true",
            "prometheusRule.enabled=true",
            "prometheusRule.alerts.RkcmNoLeader.enabled=false",
        ][..],
        &[
            "replicaCount=1",
            "leaderElection.enabled=false",
            "podDisruptionBudget.enabled=false",
            "service.enabled=false",
        ][..],
    ] {
        let mut cmd = helm_cmd(&helm, &["lint", "--strict", "charts/rkcm"]);
        for s in sets {
            cmd.arg("--set").arg(s);
        }
        let out = run_ok(&mut cmd, None)?;
        ensure!(
            out.stdout.contains("0 chart(s) failed"),
            "helm lint {sets:?}: {}",
            out.stdout
        );
    }
    Ok(())
}

/// deploy/rkcm.yaml is exactly what `e2e/render-deploy.sh` renders from the chart now.
#[test]
fn deploy_manifests_match_the_chart() -> anyhow::Result<()> {
    let Some(helm) = helm_or_skip("deploy_manifests_match_the_chart")? else {
        return Ok(());
    };
    let helm_dir = helm.parent().context("helm has no directory")?;
    let out = run_ok(
        Command::new("bash")
            .current_dir(root())
            .args(["e2e/render-deploy.sh", "-"])
            .env("RKCM_E2E_BIN", helm_dir),
        None,
    )?;
    let committed = std::fs::read_to_string(root().join("deploy/rkcm.yaml"))
        .context("reading deploy/rkcm.yaml")?;
    if committed != out.stdout {
        let first = committed
            .lines()
            .zip(out.stdout.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(out.stdout.lines().count()));
        bail!(
            "deploy/rkcm.yaml differs from the chart's output from line {} on \
             (deploy: {:?}, chart: {:?}): run `make deploy-manifests`",
            first + 1,
            committed.lines().nth(first),
            out.stdout.lines().nth(first)
        );
    }
    Ok(())
}

/// The shipped manifests (no helm needed): two replicas with leader election, HTTPS probes,
/// resources, the restricted security context, PDB, metrics Service, PodGC's role.
#[test]
fn deploy_manifests_are_hardened() -> anyhow::Result<()> {
    let yaml = std::fs::read_to_string(root().join("deploy/rkcm.yaml"))?;
    let docs = Docs::parse(&yaml)?;
    let ns = docs.one("Namespace")?;
    assert_eq!(str_at(ns, &["metadata", "name"]), Some("rkcm"));
    assert_eq!(
        str_at(
            ns,
            &["metadata", "labels", "pod-security.kubernetes.io/enforce"]
        ),
        Some("restricted")
    );
    docs.one("ServiceAccount")?;

    let d = docs.one("Deployment")?;
    assert_eq!(
        at(d, &["spec", "replicas"]).and_then(Value::as_u64),
        Some(2)
    );
    let args = docs.args()?;
    for want in [
        "--leader-elect=true",
        "--leader-elect-resource-namespace=rkcm",
        "--leader-elect-resource-name=rkcm",
        "--secure-port=10257",
        "--controllers=pod-garbage-collector-controller",
        "--terminated-pod-gc-threshold=12500",
    ] {
        assert!(args.iter().any(|a| a == want), "{want} not in {args:?}");
    }
    let c = container(d)?;
    for (probe, path) in [("livenessProbe", "/livez"), ("readinessProbe", "/readyz")] {
        let get = at(c, &[probe, "httpGet"]).with_context(|| format!("no {probe}"))?;
        assert_eq!(str_at(get, &["path"]), Some(path));
        assert_eq!(str_at(get, &["scheme"]), Some("HTTPS"));
        assert_eq!(str_at(get, &["port"]), Some("https"));
    }
    let ports = c
        .get("ports")
        .and_then(Value::as_sequence)
        .context("ports")?;
    assert!(ports.iter().any(|p| {
        str_at(p, &["name"]) == Some("https")
            && p.get("containerPort").and_then(Value::as_u64) == Some(10257)
    }));
    for k in ["requests", "limits"] {
        for r in ["cpu", "memory"] {
            assert!(
                at(c, &["resources", k, r]).is_some(),
                "resources.{k}.{r} unset"
            );
        }
    }
    let sc = c.get("securityContext").context("no securityContext")?;
    assert_eq!(
        at(sc, &["allowPrivilegeEscalation"]).and_then(Value::as_bool),
        Some(false)
    );
    assert_eq!(
        at(sc, &["readOnlyRootFilesystem"]).and_then(Value::as_bool),
        Some(true)
    );
    assert_eq!(
        at(sc, &["runAsNonRoot"]).and_then(Value::as_bool),
        Some(true)
    );
    assert_eq!(
        at(sc, &["capabilities", "drop"]),
        Some(&serde_yaml::from_str::<Value>("[ALL]")?)
    );
    assert_eq!(
        str_at(sc, &["seccompProfile", "type"]),
        Some("RuntimeDefault")
    );
    let pod_sc = at(d, &["spec", "template", "spec", "securityContext"]).context("pod sc")?;
    assert_eq!(
        at(pod_sc, &["runAsNonRoot"]).and_then(Value::as_bool),
        Some(true)
    );

    let pdb = docs.one("PodDisruptionBudget")?;
    assert_eq!(
        at(pdb, &["spec", "selector", "matchLabels"]),
        at(d, &["spec", "selector", "matchLabels"])
    );
    let svc = docs.one("Service")?;
    let port = at(svc, &["spec", "ports"])
        .and_then(Value::as_sequence)
        .and_then(|p| p.first())
        .context("service port")?;
    assert_eq!(str_at(port, &["name"]), Some("https-metrics"));
    assert_eq!(str_at(port, &["targetPort"]), Some("https"));

    let roles = docs.controller_roles();
    assert_eq!(
        roles.keys().collect::<Vec<_>>(),
        ["pod-garbage-collector-controller"]
    );
    let role = docs.one("Role")?;
    assert_eq!(str_at(role, &["metadata", "namespace"]), Some("rkcm"));
    Ok(())
}

/// Every in-scope controller's ClusterRole equals upstream's bootstrap policy for it.
#[test]
fn chart_controller_roles_equal_upstream_policy() -> anyhow::Result<()> {
    let Some(helm) = helm_or_skip("chart_controller_roles_equal_upstream_policy")? else {
        return Ok(());
    };
    let docs = render(&helm, "rkcm", "rkcm", &["controllers={*}"])?;
    let roles = docs.controller_roles();
    assert_eq!(
        roles.keys().map(String::as_str).collect::<Vec<_>>(),
        IN_SCOPE
    );
    for (name, role) in &roles {
        assert_eq!(
            str_at(role, &["metadata", "name"]),
            Some(format!("rkcm:{name}").as_str())
        );
        assert_eq!(grants(role), upstream_policy(name), "rules of {name}");
    }
    // Each role is bound to the chart's ServiceAccount, and to nothing else.
    let bindings: BTreeMap<_, _> = docs
        .of_kind("ClusterRoleBinding")
        .filter_map(|b| Some((str_at(b, &["metadata", "name"])?, b)))
        .collect();
    for name in roles.keys() {
        let b = bindings
            .get(format!("rkcm:{name}").as_str())
            .with_context(|| format!("no binding for {name}"))?;
        assert_eq!(
            str_at(b, &["roleRef", "name"]),
            Some(format!("rkcm:{name}").as_str())
        );
        let subjects = b
            .get("subjects")
            .and_then(Value::as_sequence)
            .context("subjects")?;
        assert_eq!(subjects.len(), 1);
        assert_eq!(str_at(&subjects[0], &["kind"]), Some("ServiceAccount"));
        assert_eq!(str_at(&subjects[0], &["name"]), Some("rkcm"));
        assert_eq!(str_at(&subjects[0], &["namespace"]), Some("rkcm"));
    }
    // The manager's own Role: its Lease by name (create cannot be restricted by name) and
    // events next to it.
    let role = docs.one("Role")?;
    let want: BTreeSet<_> = [
        ("coordination.k8s.io", "leases", "create", ""),
        ("coordination.k8s.io", "leases", "get", "rkcm"),
        ("coordination.k8s.io", "leases", "update", "rkcm"),
        ("", "events", "create", ""),
        ("", "events", "update", ""),
        ("", "events", "patch", ""),
    ]
    .into_iter()
    .map(|(a, b, c, d)| (a.into(), b.into(), c.into(), d.into()))
    .collect();
    assert_eq!(grants(role), want);
    Ok(())
}

/// RBAC is rendered for exactly the controllers `--controllers` enables (upstream evaluation:
/// first entry naming a controller decides, aliases resolved, `*` for the rest).
#[test]
fn chart_grants_nothing_to_disabled_controllers() -> anyhow::Result<()> {
    let Some(helm) = helm_or_skip("chart_grants_nothing_to_disabled_controllers")? else {
        return Ok(());
    };
    let all_but_podgc: Vec<&str> = IN_SCOPE
        .iter()
        .copied()
        .filter(|c| *c != "pod-garbage-collector-controller")
        .collect();
    let all_but_gc: Vec<&str> = IN_SCOPE
        .iter()
        .copied()
        .filter(|c| *c != "garbage-collector-controller")
        .collect();
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["controllers={replicaset-controller}"],
            vec!["replicaset-controller"],
        ),
        (
            vec!["controllers={*,-pod-garbage-collector-controller}"],
            all_but_podgc.clone(),
        ),
        // Alias, and a disabling entry before the star.
        (vec!["controllers={-podgc,*}"], all_but_podgc),
        // The first entry naming a controller decides.
        (
            vec!["controllers={podgc,-pod-garbage-collector-controller}"],
            vec!["pod-garbage-collector-controller"],
        ),
        (
            vec!["controllers={-podgc,podgc,replicaset}"],
            vec!["replicaset-controller"],
        ),
        // A controller rkcm does not implement gets nothing; neither do the in-scope ones.
        (vec!["controllers={bootstrap-signer-controller}"], vec![]),
        (
            vec!["controllers={*}", "enableGarbageCollector=false"],
            all_but_gc,
        ),
    ];
    for (sets, want) in cases {
        let docs = render(&helm, "rkcm", "rkcm", &sets)?;
        let roles = docs.controller_roles();
        assert_eq!(
            roles.keys().map(String::as_str).collect::<Vec<_>>(),
            want,
            "{sets:?}"
        );
        let bound: BTreeSet<&str> = docs
            .of_kind("ClusterRoleBinding")
            .filter_map(|b| str_at(b, &["metadata", "labels", "rkcm/controller"]))
            .collect();
        assert_eq!(
            bound,
            want.iter().copied().collect(),
            "bindings for {sets:?}"
        );
        // No grant of a disabled controller leaks in through another object.
        let everything: BTreeSet<_> = roles.values().flat_map(|r| grants(r)).collect();
        if !want.contains(&"pod-garbage-collector-controller")
            && !want.contains(&"garbage-collector-controller")
        {
            assert!(
                !everything.iter().any(|(_, r, _, _)| r == "pods/status"),
                "{sets:?} grants pods/status"
            );
        }
        if want.is_empty() {
            assert_eq!(docs.of_kind("ClusterRole").count(), 0, "{sets:?}");
            // Only the delegated authentication/authorization binding remains.
            let names: Vec<&str> = docs
                .of_kind("ClusterRoleBinding")
                .filter_map(|b| str_at(b, &["metadata", "name"]))
                .collect();
            assert_eq!(names, ["rkcm:auth-delegator"], "{sets:?}");
        }
        let controllers = sets[0]
            .trim_start_matches("controllers={")
            .trim_end_matches('}');
        assert!(
            docs.args()?
                .contains(&format!("--controllers={controllers}")),
            "{sets:?}"
        );
    }
    Ok(())
}

/// Values map to flags; values.schema.json and the templates refuse bad values.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
fn chart_values_map_to_flags_and_bad_values_are_refused() -> anyhow::Result<()> {
    let Some(helm) = helm_or_skip("chart_values_map_to_flags_and_bad_values_are_refused")? else {
        return Ok(());
    };
    let docs = render(
        &helm,
        "r",
        "ns1",
        &[
            "concurrency.deployment=11",
            "concurrency.replicaset=12",
            "concurrency.replicationcontroller=13",
            "concurrency.statefulset=14",
            "concurrency.daemonset=15",
            "concurrency.job=16",
            "concurrency.cronjob=17",
            "concurrency.ttlAfterFinished=18",
            "concurrency.garbageCollector=19",
            "kubeAPI.qps=55.5",
            "kubeAPI.burst=1000000",
            "podGC.terminatedPodGCThreshold=2000000",
            "logging.format=json",
            "logging.verbosity=4",
            "leaderElection.resourceName=my-lease",
            "leaderElection.resourceNamespace=kube-system",
            "extraArgs={--min-resync-period=6h}",
            "serviceMonitor.enabled=true",
        ],
    )?;
    let args = docs.args()?;
    for want in [
        "--concurrent-deployment-syncs=11",
        "--concurrent-replicaset-syncs=12",
        "--concurrent-rc-syncs=13",
        "--concurrent-statefulset-syncs=14",
        "--concurrent-daemonset-syncs=15",
        "--concurrent-job-syncs=16",
        "--concurrent-cron-job-syncs=17",
        "--concurrent-ttl-after-finished-syncs=18",
        "--concurrent-gc-syncs=19",
        "--kube-api-qps=55.5",
        // Large integers stay integers (not 1e+06).
        "--kube-api-burst=1000000",
        "--terminated-pod-gc-threshold=2000000",
        "--logging-format=json",
        "--v=4",
        "--leader-elect-resource-name=my-lease",
        "--leader-elect-resource-namespace=kube-system",
        "--min-resync-period=6h",
    ] {
        assert!(args.iter().any(|a| a == want), "{want} not in {args:?}");
    }
    // The Lease Role goes where the Lease is; the binding names the release's SA.
    let role = docs.one("Role")?;
    assert_eq!(
        str_at(role, &["metadata", "namespace"]),
        Some("kube-system")
    );
    let rb = docs
        .of_kind("RoleBinding")
        .find(|b| str_at(b, &["metadata", "name"]) == Some("r-rkcm:leader-election"))
        .context("the leader-election RoleBinding")?;
    assert_eq!(str_at(rb, &["metadata", "namespace"]), Some("kube-system"));
    let subject = at(rb, &["subjects"])
        .and_then(Value::as_sequence)
        .and_then(|s| s.first())
        .context("subject")?;
    assert_eq!(str_at(subject, &["namespace"]), Some("ns1"));
    assert_eq!(str_at(subject, &["name"]), Some("r-rkcm"));
    let sm = docs.one("ServiceMonitor")?;
    let ep = at(sm, &["spec", "endpoints"])
        .and_then(Value::as_sequence)
        .and_then(|e| e.first())
        .context("endpoint")?;
    assert_eq!(str_at(ep, &["port"]), Some("https-metrics"));
    assert_eq!(str_at(ep, &["scheme"]), Some("https"));

    // Without leader election: one replica, no Role, --leader-elect=false.
    let docs = render(
        &helm,
        "r",
        "ns1",
        &["replicaCount=1", "leaderElection.enabled=false"],
    )?;
    assert_eq!(docs.of_kind("Role").count(), 0);
    assert!(docs.args()?.contains(&"--leader-elect=false".to_owned()));

    // Sharded: the flag, and a Lease Role that may list, watch and update every Lease there.
    let docs = render(&helm, "r", "ns1", &["shards=64", "replicaCount=3"])?;
    assert!(docs.args()?.contains(&"--rkcm-shards=64".to_owned()));
    let rules = at(docs.one("Role")?, &["rules"])
        .and_then(Value::as_sequence)
        .context("the Lease Role's rules")?;
    assert!(
        rules.iter().any(|r| {
            let verbs: Vec<&str> = at(r, &["verbs"])
                .and_then(Value::as_sequence)
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            at(r, &["resourceNames"]).is_none()
                && ["get", "list", "watch", "update"]
                    .iter()
                    .all(|v| verbs.contains(v))
        }),
        "sharded replicas may get, list, watch and update any Lease of the namespace: {rules:?}"
    );
    // And list the namespaces (once, on a ring nobody has counted), through a ClusterRole
    // bound to the chart's service account.
    let listers: Vec<&Value> = docs
        .of_kind("ClusterRole")
        .filter(|r| {
            at(r, &["rules"])
                .and_then(Value::as_sequence)
                .is_some_and(|rules| {
                    rules.iter().any(|rule| {
                        let has = |key: &str, want: &str| {
                            at(rule, &[key])
                                .and_then(Value::as_sequence)
                                .is_some_and(|v| v.iter().any(|x| x.as_str() == Some(want)))
                        };
                        has("resources", "namespaces") && has("verbs", "list")
                    })
                })
        })
        .collect();
    ensure!(
        listers.len() == 1,
        "one ClusterRole lists namespaces: {listers:?}"
    );
    let lister = str_at(listers[0], &["metadata", "name"]).context("its name")?;
    ensure!(
        docs.of_kind("ClusterRoleBinding").any(|b| {
            str_at(b, &["roleRef", "name"]) == Some(lister)
                && at(b, &["subjects"])
                    .and_then(Value::as_sequence)
                    .is_some_and(|s| {
                        s.iter()
                            .any(|s| str_at(s, &["kind"]) == Some("ServiceAccount"))
                    })
        }),
        "{lister} is bound"
    );
    let docs = render(&helm, "r", "ns1", &[])?;
    assert!(!docs.args()?.iter().any(|a| a.starts_with("--rkcm-shards")));

    for (bad, why) in [
        (&["shards=2000"][..], "/shards"),
        (
            &["shards=8", "replicaCount=1", "leaderElection.enabled=false"][..],
            "shards needs leaderElection",
        ),
        (&["logging.format=xml"][..], "/logging/format"),
        (&["concurrency.job=0"][..], "/concurrency/job"),
        (&["kubeAPI.qps=0"][..], "/kubeAPI/qps"),
        (&["controllers={Bad_Name}"][..], "/controllers/0"),
        (&["securePort=0"][..], "/securePort"),
        (&["replicaCount=0"][..], "/replicaCount"),
        (
            &["leaderElection.leaseDuration=15"][..],
            "/leaderElection/leaseDuration",
        ),
        (&["unknownValue=1"][..], "unknownValue"),
        (
            &["replicaCount=2", "leaderElection.enabled=false"][..],
            "leaderElection",
        ),
        (
            &["serviceAccount.create=false"][..],
            "serviceAccount.name is required",
        ),
    ] {
        let out = run(&mut template_cmd(&helm, "r", "ns1", bad), None)?;
        ensure!(!out.ok, "helm template {bad:?} should fail");
        ensure!(
            out.stderr.contains(why),
            "helm template {bad:?} failed without naming {why}: {}",
            out.stderr
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Tests against the apiserver
// ---------------------------------------------------------------------------------------------

/// Deletes the cluster-scoped objects of a release (ClusterRoles and -Bindings) when dropped;
/// its namespaced objects go with the test namespace.
struct ClusterScoped {
    kubectl: PathBuf,
    release: String,
}

impl Drop for ClusterScoped {
    fn drop(&mut self) {
        if std::env::var(rkcm_testkit::KEEP_ENV).is_ok_and(|v| v == "1" || v == "true") {
            return;
        }
        let selector = format!("app.kubernetes.io/instance={}", self.release);
        if let Ok(mut cmd) = kubectl_cmd(
            &self.kubectl,
            &[
                "delete",
                "clusterrole,clusterrolebinding",
                "-l",
                &selector,
                "--ignore-not-found",
                "--wait=false",
            ],
        ) {
            match run(&mut cmd, None) {
                Ok(o) if o.ok => {}
                Ok(o) => eprintln!("cleanup of {selector} failed: {}", o.stderr),
                Err(e) => eprintln!("cleanup of {selector} failed: {e:#}"),
            }
        }
        // The delegated-authentication RoleBinding lives in kube-system.
        if let Ok(mut cmd) = kubectl_cmd(
            &self.kubectl,
            &[
                "delete",
                "role,rolebinding",
                "-n",
                "kube-system",
                "-l",
                &selector,
                "--ignore-not-found",
                "--wait=false",
            ],
        ) {
            let _ = run(&mut cmd, None);
        }
    }
}

/// Several renders pass the apiserver's validation and admission (including Pod Security
/// "restricted" warnings) in a server-side dry run.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn chart_renders_pass_server_side_dry_run() -> anyhow::Result<()> {
    let helm = required_tool("helm")?;
    let kubectl = required_tool("kubectl")?;
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-pkg-dry").await?;
    let n = ns.name();
    // Pod Security admission warns about workloads whose pods would break "restricted".
    run_ok(
        &mut kubectl_cmd(
            &kubectl,
            &[
                "label",
                "namespace",
                n,
                "pod-security.kubernetes.io/warn=restricted",
                "pod-security.kubernetes.io/enforce=restricted",
            ],
        )?,
        None,
    )?;
    let release = format!("{n}-r");
    let fullname = format!("fullnameOverride={release}");
    let value_sets: Vec<Vec<String>> = vec![
        // The defaults, as in deploy/ (the Namespace object applies to the existing one).
        vec!["namespace.create=true".into()],
        // Everything in scope, tuned.
        vec![
            "controllers={*}".into(),
            "replicaCount=3".into(),
            "logging.format=json".into(),
            "logging.verbosity=4".into(),
            "concurrency.replicaset=10".into(),
            "kubeAPI.qps=50".into(),
            "kubeAPI.burst=100".into(),
            "podGC.terminatedPodGCThreshold=100".into(),
            "resources.limits.memory=1Gi".into(),
            "nodeSelector.kubernetes\\.io/os=linux".into(),
            "tolerations[0].key=node-role.kubernetes.io/control-plane".into(),
            "tolerations[0].operator=Exists".into(),
            "tolerations[0].effect=NoSchedule".into(),
            "priorityClassName=system-cluster-critical".into(),
            "podAnnotations.example\\.com/a=b".into(),
            format!("leaderElection.resourceNamespace={n}"),
            "leaderElection.resourceName=other-lease".into(),
            "extraArgs={--min-resync-period=6h}".into(),
            "podDisruptionBudget.maxUnavailable=50%".into(),
        ],
        // One replica, no election, no PDB, no Service, an existing ServiceAccount.
        vec![
            "replicaCount=1".into(),
            "leaderElection.enabled=false".into(),
            "podDisruptionBudget.enabled=false".into(),
            "service.enabled=false".into(),
            "serviceAccount.create=false".into(),
            "serviceAccount.name=default".into(),
        ],
    ];
    for sets in value_sets {
        let mut sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        sets.push(&fullname);
        let out = run_ok(&mut template_cmd(&helm, &release, n, &sets), None)?;
        let docs = Docs::parse(&out.stdout)?;
        ensure!(docs.one("Deployment").is_ok(), "{sets:?}: no Deployment");
        let applied = run_ok(
            &mut kubectl_cmd(&kubectl, &["apply", "--dry-run=server", "-f", "-"])?,
            Some(&out.stdout),
        )?;
        ensure!(
            !applied.stderr.contains("PodSecurity"),
            "{sets:?}: Pod Security warnings: {}",
            applied.stderr
        );
        for kind in ["deployment.apps", "serviceaccount", "clusterrole.rbac"] {
            if kind == "serviceaccount" && sets.contains(&"serviceAccount.create=false") {
                continue;
            }
            if kind == "clusterrole.rbac" && docs.of_kind("ClusterRole").count() == 0 {
                continue;
            }
            ensure!(
                applied.stdout.contains(kind),
                "{sets:?}: kubectl did not report {kind}: {}",
                applied.stdout
            );
        }
    }
    Ok(())
}

/// A running rkcm process with its own kubeconfig; killed (and its log tail printed when the
/// test fails) on drop.
struct Proc {
    child: Child,
    log_path: PathBuf,
}

impl Proc {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            eprintln!(
                "---- last log lines of rkcm ({}) ----",
                self.log_path.display()
            );
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        } else {
            let _ = std::fs::remove_file(&self.log_path);
        }
    }
}

/// Removes the test's finalizer from its pods and force-deletes them when dropped (pass or
/// fail), so the namespace can go: a pod on the test's kubelet-less node would otherwise
/// wait forever for a kubelet if PodGC did not get to it. kubectl, because the test's runtime
/// may be gone by then.
struct Finalized {
    kubectl: PathBuf,
    namespace: String,
    names: Vec<String>,
}

impl Drop for Finalized {
    fn drop(&mut self) {
        for name in &self.names {
            let unhold = [
                "patch",
                "pod",
                name,
                "-n",
                &self.namespace,
                "--type=merge",
                "-p",
                r#"{"metadata":{"finalizers":null}}"#,
            ];
            let delete = [
                "delete",
                "pod",
                name,
                "-n",
                &self.namespace,
                "--grace-period=0",
                "--force",
                "--ignore-not-found",
                "--wait=false",
            ];
            for args in [&unhold[..], &delete[..]] {
                match kubectl_cmd(&self.kubectl, args).and_then(|mut c| run(&mut c, None)) {
                    Ok(o) if o.ok || o.stderr.contains("NotFound") => {}
                    Ok(o) => eprintln!("cleanup of pod {name}: {}", o.stderr.trim()),
                    Err(e) => eprintln!("cleanup of pod {name}: {e:#}"),
                }
            }
        }
    }
}

/// The RBAC proof. The chart's ServiceAccount and RBAC (PodGC only, unique names) are created
/// for real; rkcm runs with a token of that ServiceAccount and the container arguments the
/// chart renders; PodGC must then do its work with nothing else:
///
/// - the apiserver's own view (`kubectl auth can-i --as`): PodGC's upstream verbs yes, and a
///   sample of what it must not do (get pods, create pods, delete nodes, read secrets,
///   events, another Lease) no;
/// - leader election creates and holds the Lease in the test namespace (the Role) and records
///   its LeaderElection event there;
/// - `/readyz` turns 200 (informers for pods and nodes listed and watching);
/// - an unscheduled terminating pod (held by a finalizer) and a terminating pod on a NotReady
///   node tainted `node.kubernetes.io/out-of-service` (held too) are marked Failed and force
///   deleted, counted by *this* process's PodGC metrics for the namespace with no error.
///
/// rkcm reaches the API server through the credential-passing proxy, so it acts in the test
/// namespace only while every request is still authenticated as the chart's account.
///
/// Why these scenarios: both are namespace-local (the node is the test's own) and quick (the
/// first sweep runs as soon as the caches sync; the next after 20 s). Orphans wait out a
/// 40 s quarantine. The terminated-pods sweep is not driven: it deletes the *oldest*
/// terminated pods of the whole cluster above the threshold, i.e. other tests' pods, never
/// ours, so a lowered threshold on a shared plane would be both destructive and useless as a
/// check; rkcm keeps the chart's default (12500), which this plane never reaches. The
/// finalizers keep the pods visible after PodGC's delete, so every sweep of this process sees
/// them again and its counters prove its own permissions even if another PodGC on the plane
/// got there first.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn chart_rbac_is_sufficient_for_podgc() -> anyhow::Result<()> {
    chart_rbac_scenario(false).await
}

/// The same with `useServiceAccountCredentials: true`: PodGC then talks to the API server as
/// ServiceAccount `kube-system/pod-garbage-collector` (upstream's bootstrap role), which rkcm
/// creates if missing and gets tokens for with the chart's `kube-system` Role.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn chart_rbac_is_sufficient_for_podgc_with_service_account_credentials() -> anyhow::Result<()>
{
    chart_rbac_scenario(true).await
}

#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn chart_rbac_scenario(sa_credentials: bool) -> anyhow::Result<()> {
    const FINALIZER: &str = "rkcm.test/hold";
    let helm = required_tool("helm")?;
    let kubectl = required_tool("kubectl")?;
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-pkg-rbac").await?;
    let n = ns.name().to_owned();
    let release = n.clone();
    let lease_name = unique_name("rkcm-pkg-lease");

    let rendered = run_ok(
        &mut template_cmd(
            &helm,
            &release,
            &n,
            &[
                &format!("fullnameOverride={release}"),
                "controllers={pod-garbage-collector-controller}",
                &format!("leaderElection.resourceName={lease_name}"),
                "logging.format=json",
                &format!("useServiceAccountCredentials={sa_credentials}"),
            ],
        ),
        None,
    )?;
    let docs = Docs::parse(&rendered.stdout)?;
    let rbac_kinds = [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
    ];
    let mut rbac = String::new();
    for d in docs
        .0
        .iter()
        .filter(|d| rbac_kinds.contains(&str_at(d, &["kind"]).unwrap_or_default()))
    {
        rbac.push_str("---\n");
        rbac.push_str(&serde_yaml::to_string(d)?);
    }
    let _cluster_scoped = ClusterScoped {
        kubectl: kubectl.clone(),
        release: release.clone(),
    };
    run_ok(
        &mut kubectl_cmd(&kubectl, &["apply", "-f", "-"])?,
        Some(&rbac),
    )?;
    let sa = str_at(docs.one("ServiceAccount")?, &["metadata", "name"])
        .context("ServiceAccount name")?
        .to_owned();
    let user = format!("system:serviceaccount:{n}:{sa}");

    // The apiserver's view of the ServiceAccount's rights. Bindings take effect at once
    // (the RBAC authorizer reads through a watch cache: poll for the first grant).
    let can = |verb: &str, resource: &str, scope: &[&str]| -> anyhow::Result<bool> {
        let mut args = vec!["auth", "can-i", verb, resource, "--as", user.as_str()];
        args.extend_from_slice(scope);
        let out = run(&mut kubectl_cmd(&kubectl, &args)?, None)?;
        match out.stdout.trim() {
            "yes" => Ok(true),
            "no" => Ok(false),
            other => bail!("kubectl auth can-i {args:?}: {other:?} {}", out.stderr),
        }
    };
    wait_for(
        "the PodGC ClusterRoleBinding to take effect",
        STARTUP,
        || async { Ok(can("list", "pods", &["-A"])?.then_some(())) },
    )
    .await?;
    let lease_ref = format!("leases/{lease_name}");
    let all = ["-A"];
    let here = ["-n", n.as_str()];
    let elsewhere = ["-n", "default"];
    let status_elsewhere = ["-n", "default", "--subresource=status"];
    let expectations: &[(&str, &str, &[&str], bool)] = &[
        ("list", "pods", &all, true),
        ("watch", "pods", &all, true),
        ("delete", "pods", &elsewhere, true),
        ("patch", "pods", &status_elsewhere, true),
        ("get", "nodes", &[], true),
        ("list", "nodes", &[], true),
        ("watch", "nodes", &[], true),
        ("create", "leases", &here, true),
        ("get", &lease_ref, &here, true),
        ("update", &lease_ref, &here, true),
        ("create", "events", &here, true),
        // Not PodGC's, nor the manager's.
        ("get", "pods", &elsewhere, false),
        ("create", "pods", &elsewhere, false),
        ("patch", "pods", &elsewhere, false),
        ("update", "pods", &status_elsewhere, false),
        ("delete", "nodes", &[], false),
        ("get", "secrets", &all, false),
        ("list", "replicasets.apps", &all, false),
        ("create", "events", &elsewhere, false),
        ("update", "leases/someone-else", &here, false),
        ("create", "leases", &elsewhere, false),
    ];
    let kube_system = ["-n", "kube-system"];
    let token_sub = ["-n", "kube-system", "--subresource=token"];
    let credentials: &[(&str, &str, &[&str], bool)] = &[
        ("create", "serviceaccounts", &kube_system, sa_credentials),
        ("create", "serviceaccounts", &token_sub, sa_credentials),
        (
            "get",
            "configmaps/extension-apiserver-authentication",
            &kube_system,
            true,
        ),
        ("create", "tokenreviews.authentication.k8s.io", &[], true),
        (
            "create",
            "subjectaccessreviews.authorization.k8s.io",
            &[],
            true,
        ),
    ];
    for (verb, resource, scope, want) in expectations.iter().chain(credentials) {
        let got = can(verb, resource, scope)?;
        ensure!(
            got == *want,
            "{user} can-i {verb} {resource} {scope:?}: {got}, want {want}"
        );
    }

    let token = run_ok(
        &mut kubectl_cmd(
            &kubectl,
            &["create", "token", &sa, "-n", &n, "--duration=1h"],
        )?,
        None,
    )?
    .stdout
    .trim()
    .to_owned();
    let dir = TempDir::new("rkcm-pkg")?;
    // Through the credential-passing proxy: the API server authenticates and authorizes the
    // chart's account itself, while rkcm sees only this namespace (an unscoped PodGC would
    // fail other tests' unscheduled terminating pods on its first sweep).
    let proxy =
        ScopedProxy::start_passing_credentials(&cluster, &n, &[crate::kubeadm::SA_WRITES]).await?;
    let kubeconfig = crate::kubeconfig::proxy_kubeconfig(dir.path(), proxy.url(), &token)?;

    // The pods PodGC must handle, created before rkcm starts so its first sweep sees them.
    let node = cluster
        .create_node(
            NodeBuilder::new(&unique_name("rkcm-pkg-oos"))
                .ready(false)
                .taint(
                    "node.kubernetes.io/out-of-service",
                    "nodeshutdown",
                    "NoExecute",
                ),
        )
        .await?;
    let pods: Api<Pod> = ns.api();
    let mut held = Finalized {
        kubectl: kubectl.clone(),
        namespace: n.clone(),
        names: Vec::new(),
    };
    for p in [
        pod(&n, "unscheduled")
            .unschedulable()
            .finalizer(FINALIZER)
            .build(),
        pod(&n, "out-of-service")
            .node(node.name())
            .finalizer(FINALIZER)
            .build(),
    ] {
        let name = p.metadata.name.clone().unwrap_or_default();
        pods.create(&PostParams::default(), &p).await?;
        held.names.push(name.clone());
        pods.delete(&name, &DeleteParams::default()).await?;
    }
    let oos = pods.get("out-of-service").await?;
    ensure!(
        oos.metadata.deletion_grace_period_seconds == Some(30),
        "the bound pod should be terminating gracefully: {:?}",
        oos.metadata.deletion_grace_period_seconds
    );

    // rkcm with the chart's arguments, its own kubeconfig, loopback serving on a free port.
    let port = free_port()?;
    let mut args: Vec<String> = docs
        .args()?
        .into_iter()
        .filter(|a| !a.starts_with("--secure-port="))
        .collect();
    // In a pod the delegated reviews use the in-cluster config; here, the same account's
    // kubeconfig, so the chart's delegation RBAC is what is tested.
    args.extend([
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--authentication-kubeconfig={}", kubeconfig.display()),
        format!("--authorization-kubeconfig={}", kubeconfig.display()),
    ]);
    // A scraper: the same account, granted `get` on /metrics (removed with the release's
    // cluster-scoped objects).
    let reader = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {release}:metrics-reader\n  \
         labels: {{app.kubernetes.io/instance: {release}}}\nrules:\n- nonResourceURLs: [/metrics]\n  verbs: [get]\n\
         ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {release}:metrics-reader\n  \
         labels: {{app.kubernetes.io/instance: {release}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {release}:metrics-reader}}\n\
         subjects:\n- {{kind: ServiceAccount, name: {sa}, namespace: {n}}}\n"
    );
    run_ok(
        &mut kubectl_cmd(&kubectl, &["apply", "-f", "-"])?,
        Some(&reader),
    )?;
    wait_for(
        "the metrics reader binding to take effect",
        STARTUP,
        || async { Ok(can("get", "/metrics", &[])?.then_some(())) },
    )
    .await?;
    let log_path = std::env::temp_dir().join(format!("{}.log", unique_name("rkcm-pkg")));
    let log = std::fs::File::create(&log_path)?;
    let child = isolated(Command::new(rkcm_bin()).args(&args))
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("spawning rkcm")?;
    let proc = Proc { child, log_path };

    // The Role: the Lease is created and held in the test namespace.
    let leases: Api<Lease> = ns.api();
    let holder = wait_for(
        &format!("lease {n}/{lease_name} to be held"),
        STARTUP,
        || async {
            Ok(leases
                .get_opt(&lease_name)
                .await?
                .and_then(|l| l.spec?.holder_identity)
                .filter(|h| !h.is_empty()))
        },
    )
    .await?;

    // Informers synced with these credentials.
    let verifier = Arc::new(AcceptAnyCert::new());
    wait_for("/readyz to answer 200", STARTUP, || {
        let verifier = verifier.clone();
        async move {
            let r = https_get(port, "/readyz", verifier).await?;
            Ok((r.status == 200).then_some(()))
        }
    })
    .await?;

    // PodGC acted on both pods, with no error, by this process's own account; /metrics is
    // scraped with a token RBAC allows `get` on the /metrics URL (reviewed by rkcm through
    // the chart's delegation grants).
    let series = |name: &str, reason: &str| {
        format!("pod_gc_collector_{name}{{namespace=\"{n}\",reason=\"{reason}\"}}")
    };
    let metrics = wait_for(
        "this rkcm's PodGC to force delete both pods",
        Duration::from_secs(60),
        || {
            let verifier = verifier.clone();
            let (unscheduled, oos) = (
                series("force_delete_pods_total", "unscheduled"),
                series("force_delete_pods_total", "out-of-service"),
            );
            let bearer = format!("Authorization: Bearer {}", token.trim());
            async move {
                let m =
                    https_request(port, "/metrics", &[bearer], client_config(verifier)?).await?;
                ensure!(
                    m.status == 200,
                    "/metrics answered {}: {}",
                    m.status,
                    m.body
                );
                let done = sample(&m.body, &unscheduled).unwrap_or(0.0) >= 1.0
                    && sample(&m.body, &oos).unwrap_or(0.0) >= 1.0;
                Ok(done.then_some(m.body))
            }
        },
    )
    .await?;
    for reason in ["unscheduled", "out-of-service"] {
        let errors = sample(&metrics, &series("force_delete_pod_errors_total", reason));
        ensure!(
            errors.unwrap_or(0.0) == 0.0,
            "PodGC errors for {reason} pods: {errors:?}\n{}",
            proc.log()
        );
    }
    for name in ["unscheduled", "out-of-service"] {
        let p = pods.get(name).await?;
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        ensure!(phase == Some("Failed"), "{name}: phase {phase:?}");
    }
    let oos = pods.get("out-of-service").await?;
    ensure!(
        oos.metadata.deletion_grace_period_seconds == Some(0),
        "out-of-service pod not force deleted: grace {:?}",
        oos.metadata.deletion_grace_period_seconds
    );

    // The LeaderElection event was recorded next to the Lease (events in the Role).
    let events: Api<Event> = ns.api();
    wait_for("the LeaderElection event", STARTUP, || async {
        let list = events.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("LeaderElection")
                    && e.message.as_deref().is_some_and(|m| m.contains(&holder))
            })
            .then_some(()))
    })
    .await?;

    // Nothing this process asked for was refused.
    let log = proc.log();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("forbidden") || l.contains("Forbidden"))
        .collect();
    ensure!(
        refused.is_empty(),
        "rkcm was refused:\n{}",
        refused.join("\n")
    );
    if sa_credentials {
        ensure!(
            docs.args()?
                .contains(&"--use-service-account-credentials=true".to_owned()),
            "the chart did not pass the flag"
        );
        let sa: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(cluster.client(), "kube-system");
        ensure!(
            sa.get_opt("pod-garbage-collector").await?.is_some(),
            "no ServiceAccount kube-system/pod-garbage-collector"
        );
        ensure!(
            !log.contains("get token failed"),
            "token requests failed:\n{log}"
        );
    }

    Ok(())
}
