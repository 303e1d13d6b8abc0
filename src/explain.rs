//! `rkcm explain KIND/NAMESPACE/NAME`: what the controller would do with one object now and
//! what it waits on, computed by the controller's own pure plan over the live objects. It
//! only reads, so it works on any cluster, whichever manager runs the controller. Installed
//! as `kubectl-rkcm`, it also runs as `kubectl rkcm explain ...`.
//!
//! Kinds so far: `deployment`. Output: text for a person, or `-o json` (the schema of
//! [`rkcm_runtime::explain::Explanation`]).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::Api;
use kube::api::ListParams;
use rkcm_runtime::api::client::{ClientOptions, build_config, make_client};
use rkcm_runtime::explain::Explanation;
use rkcm_runtime::workload::controller_ref::{Claim, OwnerInfo, classify};
use rkcm_runtime::workload::selector::Selector;

const USAGE: &str = "usage: rkcm explain KIND/NAMESPACE/NAME [--kubeconfig PATH] [-o text|json]
  KIND: deployment (deploy)";

/// A parsed `explain` command line.
#[derive(Debug, PartialEq, Eq)]
pub struct Args {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub kubeconfig: Option<PathBuf>,
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Deployment,
}

/// Parses the arguments after `explain`.
pub fn parse(args: &[String]) -> Result<Args, String> {
    let mut target = None;
    let mut kubeconfig = None;
    let mut json = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f, Some(v.to_owned())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("flag {name} needs a value\n{USAGE}"))
        };
        match flag {
            "--kubeconfig" => kubeconfig = Some(PathBuf::from(value("--kubeconfig")?)),
            "-o" | "--output" => match value("-o")?.as_str() {
                "json" => json = true,
                "text" => json = false,
                other => return Err(format!("unknown output format {other:?}\n{USAGE}")),
            },
            "-h" | "--help" => return Err(USAGE.to_owned()),
            f if f.starts_with('-') => return Err(format!("unknown flag {f}\n{USAGE}")),
            _ if target.is_none() => target = Some(a.clone()),
            _ => return Err(format!("unexpected argument {a:?}\n{USAGE}")),
        }
    }
    let target = target.ok_or_else(|| USAGE.to_owned())?;
    let parts: Vec<&str> = target.split('/').collect();
    let [kind, namespace, name] = parts.as_slice() else {
        return Err(format!("{target:?}: expected KIND/NAMESPACE/NAME\n{USAGE}"));
    };
    let kind = match kind.to_ascii_lowercase().as_str() {
        "deployment" | "deployments" | "deploy" => Kind::Deployment,
        other => return Err(format!("kind {other:?} is not explained yet\n{USAGE}")),
    };
    if namespace.is_empty() || name.is_empty() {
        return Err(format!("{target:?}: empty namespace or name\n{USAGE}"));
    }
    Ok(Args {
        kind,
        namespace: (*namespace).to_owned(),
        name: (*name).to_owned(),
        kubeconfig,
        json,
    })
}

/// Runs `rkcm explain` with the arguments after `explain`; returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let args = match parse(args) {
        Ok(a) => a,
        Err(message) => {
            eprintln!("{message}");
            return 2;
        }
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("Error: building the async runtime: {err}");
            return 1;
        }
    };
    match runtime.block_on(explain(&args)) {
        Ok(e) => {
            if args.json {
                match serde_json::to_string_pretty(&e) {
                    Ok(s) => println!("{s}"),
                    Err(err) => {
                        eprintln!("Error: encoding the explanation: {err}");
                        return 1;
                    }
                }
            } else {
                print!("{}", e.render());
            }
            0
        }
        Err(err) => {
            eprintln!("Error: {err:#}");
            1
        }
    }
}

async fn explain(args: &Args) -> anyhow::Result<Explanation> {
    let opts = ClientOptions {
        kubeconfig: args.kubeconfig.clone(),
        ..ClientOptions::default()
    };
    let config = build_config(&opts)
        .await
        .context("reading the client configuration")?;
    let client = make_client(&config, &opts, "rkcm-explain").context("building the client")?;
    match args.kind {
        Kind::Deployment => {
            let key = format!("{}/{}", args.namespace, args.name);
            let Some(d) = Api::<Deployment>::namespaced(client.clone(), &args.namespace)
                .get_opt(&args.name)
                .await
                .with_context(|| format!("reading Deployment {key}"))?
            else {
                anyhow::bail!("Deployment {key} not found");
            };
            let rss = Api::<ReplicaSet>::namespaced(client, &args.namespace)
                .list(&ListParams::default())
                .await
                .with_context(|| format!("listing the ReplicaSets of Deployment {key}"))?;
            let owned = owned_replica_sets(&d, rss.items)
                .with_context(|| format!("the selector of Deployment {key}"))?;
            Ok(rkcm_deployment::explain::explain(
                &d,
                &owned,
                jiff::Timestamp::now(),
            ))
        }
    }
}

/// The ReplicaSets the Deployment controller would work with after its claim: those it owns
/// and those it would adopt, by the runtime's claim rules ([`classify`]).
fn owned_replica_sets(
    d: &Deployment,
    rss: Vec<ReplicaSet>,
) -> anyhow::Result<Vec<Arc<ReplicaSet>>> {
    let owner = OwnerInfo::of(d).context("the Deployment has no name or UID")?;
    let selector = Selector::from_label_selector(&d.spec.selector)?;
    Ok(rss
        .into_iter()
        .filter(|rs| {
            matches!(
                classify(
                    &owner,
                    &rs.metadata,
                    selector.matches(rs.metadata.labels.as_ref())
                ),
                Claim::Owned | Claim::Adopt
            )
        })
        .map(Arc::new)
        .collect())
}

#[cfg(test)]
mod tests;
