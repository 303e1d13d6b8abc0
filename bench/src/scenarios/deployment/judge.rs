//! The verdict of a run: what is wrong in the ReplicaSets and pods the watches saw, against the
//! surge bound and the end state of a complete rollout.

use std::collections::BTreeSet;

use crate::results::Correctness;
use crate::scenarios::podgc::group;

use super::args::Args;
use super::model::{Model, V_CREATE, V_ROLLOUT};

/// One ReplicaSet per template version per Deployment, ever; nothing else: what is wrong.
fn template_findings(names: &[String], seen: &Model) -> Vec<String> {
    // One ReplicaSet per template version per Deployment, ever; nothing else.
    let versions: BTreeSet<&str> = [V_CREATE, V_ROLLOUT].into();
    let mut dup = Vec::new();
    let mut missing = Vec::new();
    let mut stray = Vec::new();
    for (d, by_version) in &seen.rs_ever {
        if !names.contains(d) {
            stray.push(format!("ReplicaSets of unknown Deployment {d:?}"));
            continue;
        }
        for (v, rss) in by_version {
            if !versions.contains(v.as_str()) {
                stray.push(format!("{d}: ReplicaSet of template {v:?}"));
            } else if rss.len() > 1 {
                dup.push(format!(
                    "{d}: {} ReplicaSets of template {v} ({})",
                    rss.len(),
                    rss.values().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    for d in names {
        let by_version = seen.rs_ever.get(d);
        for v in &versions {
            if by_version
                .and_then(|b| b.get(*v))
                .is_none_or(|s| s.is_empty())
            {
                missing.push(format!("{d}: no ReplicaSet of template {v}"));
            }
        }
    }
    let mut wrong = Vec::new();
    for (what, list) in [
        ("duplicate ReplicaSets", dup),
        ("missing ReplicaSets", missing),
        ("unexpected ReplicaSets", stray),
    ] {
        if !list.is_empty() {
            wrong.push(format!(
                "{what}: {}{}",
                list[..list.len().min(3)].join("; "),
                more(list.len())
            ));
        }
    }
    wrong
}

/// Every ReplicaSet and pod of the end state controlled by its Deployment's chain, and no
/// pod of another Deployment: what is wrong.
fn ownership_findings(names: &[String], now: &Model) -> Vec<String> {
    let mut unowned = Vec::new();
    for d in names {
        let Some(dep) = now.deploys.get(d) else {
            continue;
        };
        let rss = now.rs.get(d);
        for r in rss.into_iter().flat_map(|b| b.values()) {
            if r.owner.as_deref() != Some(dep.uid.as_str()) {
                unowned.push(format!("ReplicaSet {} not controlled by {d}", r.name));
            }
        }
        let rs_uids: BTreeSet<&str> = rss
            .into_iter()
            .flat_map(|b| b.keys())
            .map(String::as_str)
            .collect();
        let bad = now
            .pods
            .get(d)
            .into_iter()
            .flat_map(|b| b.values())
            .filter(|p| p.owner.as_deref().is_none_or(|o| !rs_uids.contains(o)))
            .count();
        if bad > 0 {
            unowned.push(format!(
                "{bad} pods of {d} not controlled by its ReplicaSets"
            ));
        }
    }
    let strays = now
        .pods
        .iter()
        .filter(|(d, _)| !names.contains(d))
        .map(|(_, b)| b.len())
        .sum::<usize>();
    if strays > 0 {
        unowned.push(format!("{strays} pods of no Deployment of the scenario"));
    }
    let mut wrong = Vec::new();
    if !unowned.is_empty() {
        wrong.push(format!(
            "{}{}",
            unowned[..unowned.len().min(3)].join("; "),
            more(unowned.len())
        ));
    }
    wrong
}

/// The verdict: `seen` is what the watches saw over the run, `now` fresh lists after the
/// settle time.
pub(super) fn judge(args: &Args, names: &[String], seen: &Model, now: &Model) -> Correctness {
    let limit = args.limit();
    let mut wrong = Vec::new();

    // The surge bound, as upstream's controller keeps it (and its e2e tests check it): on
    // the ReplicaSets' replicas. Live pods may exceed it for a moment (observed below).
    let (sd, ss) = seen.worst_rs_spec();
    if ss > limit as i64 {
        wrong.push(format!(
            "ReplicaSets of {sd} summed to {ss} replicas (limit replicas + maxSurge = {limit})"
        ));
    }
    let over = seen.over_created();
    if !over.is_empty() {
        wrong.push(format!(
            "over-created: {}{}",
            over[..over.len().min(3)].join("; "),
            more(over.len())
        ));
    }

    wrong.extend(template_findings(names, seen));

    // The end state, from fresh lists.
    let incomplete: Vec<String> = names
        .iter()
        .filter_map(|n| {
            Some(format!(
                "{n}: {}",
                now.incomplete(n, V_ROLLOUT, args.replicas)?
            ))
        })
        .collect();
    if !incomplete.is_empty() {
        wrong.push(format!(
            "{} Deployments not complete on the new template after the settle time: {}{}",
            incomplete.len(),
            incomplete[..incomplete.len().min(3)].join("; "),
            more(incomplete.len())
        ));
    }
    wrong.extend(ownership_findings(names, now));

    let observed = live_pods(seen, limit);
    if wrong.is_empty() {
        let (pods, _) = now.pods_total();
        let rs_count: usize = seen
            .rs_ever
            .values()
            .flat_map(|b| b.values())
            .map(|s| s.len())
            .sum();
        Correctness {
            ok: true,
            detail: format!(
                "ReplicaSet replicas of one Deployment summed at most {ss} (limit {limit}), no \
                 ReplicaSet over its replicas; one ReplicaSet per template ({} in all, no \
                 duplicate); {} pods, all of the new template; {observed}",
                group(rs_count),
                group(pods)
            ),
        }
    } else {
        Correctness {
            ok: false,
            detail: format!("{}; {observed}", wrong.join("; ")),
        }
    }
}

/// The most pods one Deployment had at once: reported, not judged (see [`judge`]).
fn live_pods(seen: &Model, limit: usize) -> String {
    let (wd, wa) = seen.worst_active();
    let above = seen.max_active.values().filter(|&&v| v > limit).count();
    let wp = seen.max_present.values().copied().max().unwrap_or(0);
    let briefly = if above > 0 {
        format!("; {above} Deployments briefly above replicas + maxSurge = {limit}")
    } else {
        String::new()
    };
    format!(
        "observed: at most {wa} non-terminating pods of one Deployment at once ({wd}{briefly}), \
         {wp} counting terminating ones"
    )
}

fn more(n: usize) -> String {
    if n > 3 {
        format!(" (and {} more)", n - 3)
    } else {
        String::new()
    }
}
