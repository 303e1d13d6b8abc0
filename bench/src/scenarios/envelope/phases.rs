//! The phases the envelope drives once the manager runs (see the scenario's description):
//! each paced at the run's pod throughput, begun and ended on the probe, and waited for until
//! the bench's watches show it converged.

use std::time::Duration;

use kube::ResourceExt;

use super::mix::{self, Kind, Pace, Rng, Workload};
use super::model::{self, Key, Want};
use super::writes::{create, delete, patch};
use super::{Envelope, PROBE_GAP, State, churn, ns_of, objects, plane_rss};
use crate::harness::{Env, Probe};

impl Envelope {
    /// Waits until the phase has converged (checked every second on the bench's watches).
    pub(super) async fn converged(
        &self,
        state: &State,
        probe: &Probe,
        phase: &str,
        no_owned_pods: bool,
    ) -> anyhow::Result<()> {
        loop {
            let snap = state.stores.snapshot();
            let (count, lines) = model::lagging(&state.want, &snap, no_owned_pods, 3);
            if count == 0 {
                return Ok(());
            }
            probe.progress(format!(
                "{phase}: {count} lagging, e.g. {}",
                lines.join("; ")
            ));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    fn workloads(&self, kinds: &[Kind]) -> Vec<Workload> {
        self.plan
            .iter()
            .filter(|w| kinds.contains(&w.kind))
            .cloned()
            .collect()
    }

    pub(super) async fn phase_create(
        &self,
        env: &Env,
        state: &mut State,
        probe: &Probe,
    ) -> anyhow::Result<()> {
        let mut order = self.plan.clone();
        Rng::new(1).shuffle(&mut order);
        let start = probe.begin("create");
        let mut pace = Pace::new(self.args.throughput);
        for (i, w) in order.iter().enumerate() {
            pace.take(w.pods).await;
            let ns = ns_of(&state.run, w.ns);
            create(&env.client, &ns, w, objects::object(&state.run, w)).await?;
            if w.kind != Kind::CronJob {
                state.want.insert((ns, w.name.clone()), Want::of(w));
            }
            probe.progress(format!(
                "create: {} of {} objects created",
                i + 1,
                order.len()
            ));
        }
        self.converged(state, probe, "create", false).await?;
        let jobs = self
            .workloads(&[Kind::Job])
            .into_iter()
            .map(|w| ((ns_of(&state.run, w.ns), w.name), w.pods));
        let off = model::jobs_not_run_exactly(jobs, &state.stores.snapshot().pods);
        state.problems.extend(off);
        probe.end(start, format!("{} objects", order.len()));
        Ok(())
    }

    pub(super) async fn phase_scale(
        &self,
        env: &Env,
        state: &mut State,
        probe: &Probe,
    ) -> anyhow::Result<()> {
        let mut order = self.workloads(&[Kind::Deployment, Kind::StatefulSet]);
        let mut rng = Rng::new(2);
        rng.shuffle(&mut order);
        let start = probe.begin("scale");
        let mut pace = Pace::new(self.args.throughput);
        let mut moved = 0;
        for w in &order {
            let ns = ns_of(&state.run, w.ns);
            let k = (ns.clone(), w.name.clone());
            let old = state.want.get(&k).map_or(w.pods, |x| x.pods);
            let new = mix::scaled(old, &mut rng);
            pace.take(old.abs_diff(new)).await;
            patch(&env.client, &ns, w, objects::scale_patch(new)).await?;
            moved += old.abs_diff(new);
            if let Some(x) = state.want.get_mut(&k) {
                x.pods = new;
            }
        }
        self.converged(state, probe, "scale", false).await?;
        probe.end(
            start,
            format!("{} objects, {moved} pods added or removed", order.len()),
        );
        Ok(())
    }

    pub(super) async fn phase_roll(
        &self,
        env: &Env,
        state: &mut State,
        probe: &Probe,
    ) -> anyhow::Result<()> {
        let mut order = self.workloads(&[Kind::Deployment, Kind::StatefulSet, Kind::DaemonSet]);
        Rng::new(3).shuffle(&mut order);
        let start = probe.begin("roll");
        let mut pace = Pace::new(self.args.throughput);
        for w in &order {
            let ns = ns_of(&state.run, w.ns);
            let pods = state
                .want
                .get(&(ns.clone(), w.name.clone()))
                .map_or(0, |x| x.pods);
            pace.take(pods).await;
            patch(&env.client, &ns, w, objects::roll_patch("v2")).await?;
        }
        self.converged(state, probe, "roll", false).await?;
        // The peak: everything placed, rolled and cached.
        state.plane_rss = plane_rss(&env.cluster_dir);
        probe.end(start, format!("{} objects", order.len()));
        Ok(())
    }

    pub(super) async fn phase_probes(
        &self,
        env: &Env,
        state: &mut State,
        probe: &Probe,
    ) -> anyhow::Result<()> {
        let small = |k: Kind| {
            self.plan
                .iter()
                .filter(|w| w.kind == k && w.pods == mix::SMALL)
                .cloned()
                .collect::<Vec<_>>()
        };
        let (deploys, sets) = (small(Kind::Deployment), small(Kind::StatefulSet));
        anyhow::ensure!(
            !deploys.is_empty() && !sets.is_empty(),
            "the run has no small Deployment or StatefulSet to probe"
        );
        let mut rng = Rng::new(4);
        tokio::time::sleep(PROBE_GAP).await;
        let from = jiff::Timestamp::now();
        let start = probe.begin("idle probes");
        for round in 0..self.args.probes {
            for w in [
                &deploys[rng.below(deploys.len())],
                &sets[rng.below(sets.len())],
            ] {
                let ns = ns_of(&state.run, w.ns);
                let k = (ns.clone(), w.name.clone());
                let n = state.want.get(&k).map_or(w.pods, |x| x.pods) + 1;
                patch(&env.client, &ns, w, objects::scale_patch(n)).await?;
                if let Some(x) = state.want.get_mut(&k) {
                    x.pods = n;
                }
            }
            let pods = state.stores.pod_store();
            churn::delete_one_pod(&env.client, &pods, "ReplicaSet", &mut rng).await?;
            churn::delete_one_pod(&env.client, &pods, "DaemonSet", &mut rng).await?;
            let job = Workload::one_pod_job(format!("job-probe-{round}"));
            let ns = ns_of(&state.run, 0);
            create(&env.client, &ns, &job, objects::object(&state.run, &job)).await?;
            state.want.insert((ns, job.name.clone()), Want::of(&job));
            self.converged(state, probe, &format!("idle probe {round}"), false)
                .await?;
            tokio::time::sleep(PROBE_GAP).await;
        }
        state.idle = Some((from, jiff::Timestamp::now()));
        state.settled_rss = probe.manager_rss_bytes();
        state.cached_pods = state.stores.snapshot().pods.len();
        probe.end(start, format!("{} rounds", self.args.probes));
        Ok(())
    }

    pub(super) async fn phase_delete(
        &self,
        env: &Env,
        state: &mut State,
        probe: &Probe,
    ) -> anyhow::Result<()> {
        let mut order = self.plan.clone();
        Rng::new(5).shuffle(&mut order);
        let start = probe.begin("delete");
        let mut pace = Pace::new(self.args.throughput);
        for w in &order {
            let ns = ns_of(&state.run, w.ns);
            let k = (ns.clone(), w.name.clone());
            let pods = state.want.get(&k).map_or(w.pods, |x| x.pods);
            pace.take(pods).await;
            match w.kind {
                Kind::Deployment | Kind::StatefulSet => {
                    patch(&env.client, &ns, w, objects::scale_patch(0)).await?
                }
                Kind::DaemonSet => patch(&env.client, &ns, w, objects::nowhere_patch()).await?,
                Kind::Job | Kind::CronJob => delete(&env.client, &ns, w).await?,
            }
            match (w.kind, state.want.get_mut(&k)) {
                (Kind::Job, Some(x)) => x.present = false,
                (_, Some(x)) => x.pods = 0,
                _ => {}
            }
        }
        // The probe Jobs go too.
        let probes: Vec<Key> = state
            .want
            .iter()
            .filter(|(k, w)| w.kind == Kind::Job && k.1.starts_with("job-probe-"))
            .map(|(k, _)| k.clone())
            .collect();
        for k in probes {
            delete(&env.client, &k.0, &Workload::one_pod_job(k.1.clone())).await?;
            if let Some(x) = state.want.get_mut(&k) {
                x.present = false;
            }
        }
        self.converged(state, probe, "delete", true).await?;
        let snap = state.stores.snapshot();
        state.cron_jobs_seen = snap
            .jobs
            .iter()
            .filter(|j| j.owner_references().iter().any(|o| o.kind == "CronJob"))
            .count();
        probe.end(start, format!("{} objects", order.len()));
        Ok(())
    }
}
