//! rkcm: the process. Parses flags, connects, elects, runs the enabled controllers and shuts
//! down (upstream `cmd/kube-controller-manager/app/controllermanager.go`).
//!
//! Startup, in upstream's order:
//! 1. parse + normalise + validate flags — any error exits 1 before network access;
//! 2. logging, feature gates (`kubernetes_feature_enabled`);
//! 3. client config (`--kubeconfig`/`--master`), HTTPS health/metrics server (served even
//!    while standby);
//! 4. with `--leader-elect`: campaign; a standby opens no watches and starts nothing else;
//! 5. wait for the apiserver's `/healthz` (1 s polls, 10 s budget); read its `/version`
//!    (logged, `rkcm_apiserver_version_info`) and take the feature gates of kube-controller-
//!    manager of that minor ([`cli::FeatureGates::parse_at`]): `--feature-gates` is checked
//!    again as that minor's manager checks it, and every gate behind a behaviour takes that
//!    minor's default. A server older than v1.34 is refused; one newer than v1.37 gets v1.37's
//!    gates with a warning. Gates read before (the CA file rotation, `/flagz` and `/statusz`)
//!    keep the newest minor's defaults. While running, `/version` is read every
//!    `--rkcm-apiserver-version-recheck-period` (5 min): when the minor whose gates apply changes (an upgrade), rkcm drains
//!    and exits 1 so that its restart takes the new minor's defaults;
//! 6. request the informers of every enabled controller, start the controllers (each with its
//!    own client and token bucket — with `--use-service-account-credentials`, authenticating
//!    as its own ServiceAccount, see [`credentials`] — `--controller-start-interval` apart),
//!    then start all informers at once; `/readyz` turns ready when every one of them has
//!    synced.
//!
//! Shutdown: SIGTERM/SIGINT cancels the shared token (informers stop, controllers stop taking
//! keys); controllers get [`DRAIN_BUDGET`] to finish; then the process exits 0, leaving the
//! lease to expire as upstream does, or — with gate
//! `ControllerManagerReleaseLeaderElectionLockOnExit` (alpha, off) — releasing it first, so a
//! standby takes over at once. A second signal exits 1 at once; an exhausted drain budget
//! exits 1 *without* releasing, so the lease expires normally and no write can follow a
//! release. (Upstream without the gate does not drain: the signal ends the process.)
//! Losing leadership logs `leaderelection lost` and exits 1 immediately (no drain, no
//! re-campaign), like upstream.

mod auth;
mod cli;
mod credentials;
mod explain;
mod leader;
mod logging;
mod registry;
mod serve;

use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use prometheus::{IntGaugeVec, Opts};
use rkcm_runtime::api::client::{ClientOptions, build_config, make_client, make_client_fenced};
use rkcm_runtime::cache::{ContentType, InformerFactory, ListMode, Scope, ShardScope};
use rkcm_runtime::metrics::{get_or_register, register};
use rkcm_runtime::queue::flowcontrol::client_limiter;
use rkcm_runtime::shard::Shards;
use rkcm_runtime::{CancellationToken, ControllerContext};
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;

use crate::cli::{Cli, Invocation};
use crate::registry::SyncProbe;

// The process allocates and frees many short-lived buffers per API object (JSON decoding,
// request bodies); mimalloc spends markedly less CPU on that than glibc malloc. It is built
// without its transparent-huge-page advice (`no_thp`): with it, every 2 MiB region touched
// became resident whole, 13 MiB of an idle process's 18 MiB of heap. On hosts whose THP mode
// is `always` (not `madvise`), `MIMALLOC_ALLOW_THP=0` opts the process out as well.
// Feature `system-alloc` leaves the C library's malloc in place, for heap profilers.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long controllers may take to finish in-flight syncs after a shutdown signal; below the
/// usual 30 s pod termination grace period.
const DRAIN_BUDGET: Duration = Duration::from_secs(20);
/// Upstream `WaitForAPIServer`: poll `/healthz` every second for up to ten.
const APISERVER_POLL: Duration = Duration::from_secs(1);
const APISERVER_BUDGET: Duration = Duration::from_secs(10);
/// How often to report cache sync progress while waiting.
const SYNC_PROGRESS_EVERY: Duration = Duration::from_secs(5);

fn main() {
    serve::mark_process_start();
    // `rkcm explain ...` (and `kubectl rkcm explain ...` through a `kubectl-rkcm` link) is a
    // read-only command of its own; every other command line is upstream's flags.
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if args.first().map(String::as_str) == Some("explain") {
        std::process::exit(explain::main(&args[1..]));
    }
    let invocation = match cli::parse::parse(std::env::args_os()) {
        Ok(i) => i,
        Err(err) => {
            err.print();
            std::process::exit(err.exit_code());
        }
    };
    let cli = match invocation {
        Invocation::PrintVersion(text) => {
            println!("{text}");
            std::process::exit(0);
        }
        Invocation::Run(cli) => *cli,
    };
    serve::effective::publish(&cli);
    if let Err(err) = logging::init(
        logging::Format::from_flag(&cli.logging.logging_format),
        cli.logging.v,
    ) {
        eprintln!("Error: initialising logging: {err}");
        std::process::exit(1);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            tracing::error!(error = %err, "building the async runtime");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(async {
        match run(cli).await {
            Ok(code) => code,
            Err(err) => {
                tracing::error!(error = format!("{err:#}"), "startup failed");
                1
            }
        }
    });
    // Exit without waiting for lingering tasks (watches, the server): everything that needed
    // an orderly end has had it.
    std::process::exit(code);
}

/// Runs the process; returns the exit code. `Err` means a startup failure (exit 1).
async fn run(mut cli: Cli) -> anyhow::Result<i32> {
    // rustls needs a process-wide crypto provider when more than one could be linked; ring
    // is the only one we build with. An error means one is already installed.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let shutdown = CancellationToken::new();
    install_signal_handlers(shutdown.clone())?;

    log_startup(&cli);

    let client_opts = cli.client_options();
    // client-go's gate is process-wide; set it before any client config is built.
    rkcm_runtime::api::client::set_ca_rotation(cli.feature_gates.enabled("ClientsAllowCARotation"));
    rkcm_runtime::api::inflight::set_concurrency(cli.rkcm.rkcm_kube_api_concurrency);
    let config = build_config(&client_opts)
        .await
        .context("building the API client config")?;
    tracing::info!(server = %config.cluster_url, "API server");

    let health = serve::Health::new();
    let _server = start_server(&cli, &health).await?;

    // Upstream `leaderElectAndRun`: `ReleaseOnCancel` follows the gate.
    let mut release_on_exit = releases_lock_on_exit(&cli);
    let Some(leading) = elect(&cli, &config, &client_opts, &health, &shutdown).await? else {
        // Shut down while standby: nothing was started, nothing to release.
        return Ok(0);
    };
    // Cancelled when leadership is lost; never, without election.
    let lost = leading
        .as_ref()
        .map(leader::Leading::lost_token)
        .unwrap_or_default();

    let informer_client = make_client(&config, &client_opts, "shared-informers")
        .context("building the shared-informers client")?;
    let apiserver_ok = tokio::select! {
        ok = wait_for_apiserver(&informer_client, &shutdown) => ok,
        _ = async {
            match &leading {
                Some(l) => l.lost().await,
                None => std::future::pending().await,
            }
        } => return Ok(leadership_lost()),
    };
    match apiserver_ok {
        Ok(()) => {}
        Err(err) if shutdown.is_cancelled() => {
            tracing::info!(reason = %err, "shut down before the controllers started");
            return Ok(release(leading, release_on_exit, 0).await);
        }
        Err(err) => {
            tracing::error!(error = %err, "failed to wait for apiserver being healthy");
            // Nothing has written yet, so releasing (with the gate) is safe.
            return Ok(release(leading, release_on_exit, 1).await);
        }
    }
    let server_minor = match adopt_server_version(&mut cli, &informer_client).await {
        Ok(minor) => minor,
        Err(err) => {
            tracing::error!(error = format!("{err:#}"), "the API server's version");
            return Ok(release(leading, release_on_exit, 1).await);
        }
    };
    release_on_exit = releases_lock_on_exit(&cli);

    let shards = start_shards(&cli, &config, &client_opts, &shutdown).await?;
    let factory = informer_factory(&cli, informer_client.clone(), shards.as_ref());
    watch_other_managers(&config, &client_opts)?;
    let started = start_controllers(
        &cli,
        &config,
        &client_opts,
        Shared {
            factory: &factory,
            shards: shards.as_ref().map(|h| h.shards.clone()),
        },
        &health,
        &shutdown,
        &lost,
    )
    .await?;
    let Some((mut tasks, probes)) = started else {
        return Ok(leadership_lost());
    };
    factory.start(shutdown.clone());
    tokio::spawn(report_sync(probes, health.clone(), shutdown.clone()));

    // Until a signal, a failing controller, leadership loss, or another minor (exit 1).
    let upgraded = watch_server_minor(informer_client, server_minor, &cli, shutdown.clone());
    let mut code = 0;
    loop {
        tokio::select! {
            _ = lost.cancelled() => return Ok(leadership_lost()),
            _ = shutdown.cancelled() => break,
            Some((name, result)) = tasks.next() => {
                serve::set_controller_running(name, false);
                if !controller_ended_ok(name, result) {
                    // A dead controller would silently stop reconciling; restart the process
                    // instead, after an orderly drain of the others.
                    code = 1;
                    shutdown.cancel();
                }
            }
        }
    }

    if upgraded.load(std::sync::atomic::Ordering::SeqCst) {
        code = 1;
    }
    match drain(&mut tasks, &lost, &mut code).await {
        Drained::Lost => Ok(leadership_lost()),
        // Syncs may still be writing: leave the shard leases to expire too.
        Drained::Late => Ok(1),
        Drained::Done => Ok(release_all(shards, leading, release_on_exit, code).await),
    }
}

/// After an orderly drain: hands the shard ranges over, then [`release`]s the leader lease.
async fn release_all(
    shards: Option<ShardHolder>,
    leading: Option<leader::Leading>,
    release_on_exit: bool,
    code: i32,
) -> i32 {
    if let Some(holder) = shards {
        holder.release().await;
    }
    release(leading, release_on_exit, code).await
}

/// Sharded mode's holder task and the view the controllers and caches share.
struct ShardHolder {
    shards: std::sync::Arc<Shards>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl ShardHolder {
    /// Hands every held range over and releases the leases (the controllers have stopped),
    /// waiting at most the renew deadline.
    async fn release(self) {
        self.stop.cancel();
        let budget = self.shards.config().renew_deadline + Duration::from_secs(1);
        match tokio::time::timeout(budget, self.task).await {
            Ok(_) => tracing::info!("released the shard leases"),
            Err(_) => tracing::warn!("releasing the shard leases took too long; they expire"),
        }
    }
}

/// In sharded mode (`--rkcm-shards`), starts the shard holder and waits for its first two
/// rounds (at most two retry periods and the renew deadline), so that the caches start with
/// the ranges it took.
async fn start_shards(
    cli: &Cli,
    config: &kube::Config,
    opts: &ClientOptions,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<ShardHolder>> {
    let Some(cfg) = cli.shard_config(&leader::default_identity())? else {
        return Ok(None);
    };
    let client =
        make_client(config, opts, "shard-holder").context("building the shard holder's client")?;
    tracing::info!(
        identity = %cfg.identity,
        ranges = cfg.ring.len(),
        server_selector = cfg.server_selector,
        namespace = %cfg.namespace,
        prefix = rkcm_runtime::shard::LEASE_PREFIX,
        "starting the shard holder"
    );
    let shards = Shards::new(cfg, rkcm_runtime::clock::system());
    let stop = CancellationToken::new();
    let task = tokio::spawn(shards.clone().run(client, stop.clone()));
    // The first round announces the replica, the second takes its share.
    let first = 2 * shards.config().retry_period + shards.config().renew_deadline;
    tokio::select! {
        biased;
        () = shutdown.cancelled() => {}
        () = shards.rounds(2) => {}
        () = tokio::time::sleep(first) => {
            tracing::warn!("the shard holder's first round has not finished; starting with no range");
        }
    }
    tracing::info!(ranges = ?shards.held(), "shard ranges held at start");
    Ok(Some(ShardHolder { shards, stop, task }))
}

/// How the controllers' drain at shutdown ended.
enum Drained {
    /// Every controller finished within the budget.
    Done,
    /// Some did not: exit without releasing the lease.
    Late,
    /// Leadership was lost meanwhile.
    Lost,
}

/// Waits up to [`DRAIN_BUDGET`] for the controllers to finish; a controller that ended
/// badly sets `code` to 1.
async fn drain(
    tasks: &mut FuturesUnordered<ControllerTask>,
    lost: &CancellationToken,
    code: &mut i32,
) -> Drained {
    tracing::info!(
        budget_s = DRAIN_BUDGET.as_secs(),
        "shutting down: waiting for controllers to finish"
    );
    let drained = tokio::select! {
        _ = lost.cancelled() => return Drained::Lost,
        drained = tokio::time::timeout(DRAIN_BUDGET, async {
            while let Some((name, result)) = tasks.next().await {
                serve::set_controller_running(name, false);
                if !controller_ended_ok(name, result) {
                    *code = 1;
                }
            }
        }) => drained.is_ok(),
    };
    if drained {
        return Drained::Done;
    }
    let pending: Vec<&str> = tasks.iter().map(|t| t.name).collect();
    tracing::error!(
        ?pending,
        "controllers did not finish within the drain budget; exiting without releasing the lease"
    );
    Drained::Late
}

/// The first log lines: version, the effective flags (at `-v 1`), flags accepted but not
/// honoured; and the feature gates' metric.
fn log_startup(cli: &Cli) {
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "starting rkcm");
    if cli.logging.v >= 1 {
        for (name, value) in &cli.effective_flags {
            tracing::info!(flag = %format!("--{name}"), value = value.as_str(), "FLAG");
        }
    }
    for notice in &cli.notices {
        tracing::info!(flag = %notice.flag, reason = notice.reason, "flag accepted but not honoured");
    }
    export_feature_gates(&cli.feature_gates);
}

/// The secure server (`/healthz`, `/metrics`, ...) with delegated authentication and
/// authorization, unless `--secure-port=0`.
async fn start_server(cli: &Cli, health: &serve::Health) -> anyhow::Result<JoinHandle<()>> {
    let delegation = if cli.serving.secure_port == 0 {
        auth::Delegation::default()
    } else {
        auth::Delegation::from_flags(cli)
            .await
            .context("setting up delegated authentication and authorization")?
    };
    serve::start(
        serve::ServeConfig {
            bind_address: cli.serving.bind_address,
            secure_port: cli.serving.secure_port,
            tls_cert_file: cli.serving.tls_cert_file.clone(),
            tls_private_key_file: cli.serving.tls_private_key_file.clone(),
            cert_dir: cli.serving.cert_dir.clone(),
            tls_min_version: cli.serving.tls_min_version.clone(),
            tls_cipher_suites: cli.serving.tls_cipher_suites.clone(),
            configz: cli.configz().to_string(),
            zpages: serve::Zpages::new(
                cli.feature_gates.enabled("ComponentFlagz"),
                cli.feature_gates.enabled("ComponentStatusz"),
                &cli.effective_flags,
            ),
        },
        health.clone(),
        delegation,
    )
    .context("starting the secure server")
}

/// `Some(None)` without leader election (`--leader-elect=false`, or sharded mode, where the
/// shard Leases take its place), `Some(Some(_))` once leading, `None` when shut down while
/// standby.
async fn elect(
    cli: &Cli,
    config: &kube::Config,
    opts: &ClientOptions,
    health: &serve::Health,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<Option<leader::Leading>>> {
    if cli.rkcm.rkcm_shards > 0 {
        tracing::info!(
            ranges = cli.rkcm.rkcm_shards,
            "sharded mode: every replica is active on the shard ranges it holds; the leader \
             lease is not used"
        );
        return Ok(Some(None));
    }
    if !cli.leader.leader_elect {
        return Ok(Some(None));
    }
    Ok(campaign(cli, config, opts, health, shutdown)
        .await?
        .map(Some))
}

/// Campaigns until leading (`Some`) or shut down while standby (`None`).
async fn campaign(
    cli: &Cli,
    config: &kube::Config,
    opts: &ClientOptions,
    health: &serve::Health,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<leader::Leading>> {
    let le = &cli.leader;
    let client = make_client(config, opts, "leader-election")
        .context("building the leader-election client")?;
    let lcfg = leader::LeaderConfig {
        lease_duration: le.leader_elect_lease_duration.to_std(),
        renew_deadline: le.leader_elect_renew_deadline.to_std(),
        retry_period: le.leader_elect_retry_period.to_std(),
        name: le.leader_elect_resource_name.clone(),
        namespace: le.leader_elect_resource_namespace.clone(),
        identity: leader::default_identity(),
    };
    let elector = leader::LeaderElector::new(client, lcfg, health.clone());
    tracing::info!(identity = elector.identity(), "leader election enabled");
    match elector.run_until_leading(shutdown).await {
        Ok(leading) => Ok(Some(leading)),
        Err(leader::LeaderError::Cancelled { .. }) => {
            tracing::info!("shut down while waiting for leadership");
            Ok(None)
        }
        Err(err) => Err(err).context("leader election"),
    }
}

/// Logs the loss and returns exit code 1. Upstream exits at once: the process must not
/// write after another one may have started leading.
fn leadership_lost() -> i32 {
    tracing::error!("leaderelection lost");
    1
}

/// Releases the lease when leading and `release_on_exit` (gate
/// `ControllerManagerReleaseLeaderElectionLockOnExit`; only call once no controller can write
/// any more) and returns `code`. Without the gate the lease expires, as upstream's does.
async fn release(leading: Option<leader::Leading>, release_on_exit: bool, code: i32) -> i32 {
    if let Some(leading) = leading {
        if !release_on_exit {
            tracing::info!("leaving the leader lease to expire");
            return code;
        }
        match leading.release().await {
            Ok(()) => tracing::info!("released the leader lease"),
            Err(err) => tracing::warn!(error = %err, "could not release the leader lease"),
        }
    }
    code
}

/// First SIGTERM/SIGINT cancels `shutdown`; a second one exits 1 immediately.
fn install_signal_handlers(shutdown: CancellationToken) -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "received signal, shutting down gracefully");
        shutdown.cancel();
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::error!(signal = name, "received second signal, exiting immediately");
        std::process::exit(1);
    });
    Ok(())
}

/// Upstream `WaitForAPIServer`: `GET /healthz` every second until 200 or 10 s have passed.
async fn wait_for_apiserver(
    client: &kube::Client,
    shutdown: &CancellationToken,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + APISERVER_BUDGET;
    loop {
        let request = http::Request::get("/healthz")
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let last = match client.request_text(request).await {
            Ok(_) => return Ok(()),
            Err(err) => err.to_string(),
        };
        tracing::info!(reason = %last, "server isn't healthy yet, waiting a little while");
        if tokio::time::Instant::now() + APISERVER_POLL > deadline {
            return Err(format!("timed out waiting for the condition: {last}"));
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Err("shutdown requested".to_string()),
            _ = tokio::time::sleep(APISERVER_POLL) => {}
        }
    }
}

/// A started controller's task, with its name attached to the result.
struct ControllerTask {
    name: &'static str,
    handle: JoinHandle<Result<(), registry::ControllerError>>,
}

impl std::future::Future for ControllerTask {
    type Output = (
        &'static str,
        Result<Result<(), registry::ControllerError>, tokio::task::JoinError>,
    );

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let name = self.name;
        std::pin::Pin::new(&mut self.handle)
            .poll(cx)
            .map(|r| (name, r))
    }
}

/// Reports another manager's writes to the objects of the controllers this process starts
/// (`rkcm_runtime::handover`).
fn watch_other_managers(config: &kube::Config, opts: &ClientOptions) -> anyhow::Result<()> {
    if let Some(found) = rkcm_runtime::handover::install() {
        let client = make_client(config, opts, "handover")
            .context("building the client of the other-manager events")?;
        let events = rkcm_runtime::events::EventRecorder::new(client, "rkcm");
        tokio::spawn(rkcm_runtime::handover::report(found, events));
    }
    Ok(())
}

/// What every controller of the process shares: the informers, and in sharded mode the
/// ranges held.
struct Shared<'a> {
    factory: &'a InformerFactory,
    shards: Option<std::sync::Arc<Shards>>,
}

/// Requests informers and starts every enabled, implemented controller. `None` when
/// leadership was lost meanwhile.
async fn start_controllers(
    cli: &Cli,
    config: &kube::Config,
    opts: &ClientOptions,
    shared: Shared<'_>,
    health: &serve::Health,
    shutdown: &CancellationToken,
    lost: &CancellationToken,
) -> anyhow::Result<Option<(FuturesUnordered<ControllerTask>, Vec<SyncProbe>)>> {
    let Shared { factory, shards } = shared;
    let tasks = FuturesUnordered::new();
    let mut probes = Vec::new();
    let sa_clients = if cli.generic.use_service_account_credentials {
        if cli.generic.service_account_private_key_file.is_empty() {
            // Upstream warns alike: the tokens come from the API server's TokenRequest API,
            // so the flag is not needed, but its absence often means a misconfiguration.
            tracing::warn!(
                "--use-service-account-credentials was specified without providing a \
                 --service-account-private-key-file"
            );
        }
        let root = make_client(config, opts, "controller-client-builder")
            .context("building the controller client builder's client")?;
        Some(credentials::ControllerClientBuilder::new(root, config))
    } else {
        None
    };
    for def in registry::enabled(&cli.controllers) {
        let Some(imp) = &def.implementation else {
            tracing::info!(
                controller = def.name,
                "controller is not implemented by this build, skipping"
            );
            continue;
        };
        if let Some(reason) = registry::skip_reason(def, cli) {
            tracing::info!(
                controller = def.name,
                reason,
                "controller disabled by flag, skipping"
            );
            continue;
        }
        let interval = cli.generic.controller_start_interval.to_std();
        if !interval.is_zero() {
            // wait.Jitter(interval, 1.0): uniform in [interval, 2 × interval).
            let delay = interval.mul_f64(1.0 + rand::random::<f64>());
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.cancelled() => break,
                _ = lost.cancelled() => return Ok(None),
            }
        }
        probes.extend((imp.informers)(factory));
        // The controller's own token bucket: its client spends it, its status pacer reads it.
        let budget = client_limiter(opts.qps, opts.burst);
        // Sharded mode: a controller's namespaced writes go out only while their range is
        // held (a sync may outlive its range's window); PodGC gates each write itself, its
        // terminated-pod threshold across namespaces under the global Lease.
        let fence = shards.clone().filter(|_| def.name != rkcm_podgc::NAME);
        let client = match &sa_clients {
            Some(builder) => builder
                .client(def.name, budget.clone(), fence)
                .await
                .with_context(|| format!("building the client of {}", def.name))?,
            None => make_client_fenced(config, def.name, budget.clone(), fence)
                .with_context(|| format!("building the client of {}", def.name))?,
        };
        let ctx = ControllerContext {
            client,
            budget,
            informers: factory.clone(),
            shutdown: shutdown.clone(),
            clock: rkcm_runtime::clock::system(),
            shards: shards.clone(),
        };
        tracing::info!(controller = def.name, "starting controller");
        let handle = tokio::spawn((imp.start)(ctx, cli));
        rkcm_runtime::handover::controller_started(def.name, jiff::Timestamp::now());
        health.add_check(def.name);
        serve::set_controller_running(def.name, true);
        tasks.push(ControllerTask {
            name: def.name,
            handle,
        });
    }
    if tasks.is_empty() {
        tracing::warn!("no controller enabled by --controllers is implemented by rkcm");
    }
    Ok(Some((tasks, probes)))
}

/// Logs how a controller task ended; false when that is a failure.
fn controller_ended_ok(
    name: &str,
    result: Result<Result<(), registry::ControllerError>, tokio::task::JoinError>,
) -> bool {
    match result {
        Ok(Ok(())) => {
            tracing::info!(controller = name, "controller stopped");
            true
        }
        Ok(Err(err)) => {
            tracing::error!(controller = name, error = %err, "controller failed");
            false
        }
        Err(err) => {
            tracing::error!(controller = name, error = %err, "controller task panicked");
            false
        }
    }
}

/// Marks the process ready once every informer a controller reads has synced, logging
/// progress meanwhile.
async fn report_sync(probes: Vec<SyncProbe>, health: serve::Health, shutdown: CancellationToken) {
    let started = tokio::time::Instant::now();
    let mut last_report = started;
    loop {
        let waiting: Vec<&str> = probes
            .iter()
            .filter(|p| !(p.synced)())
            .map(|p| p.resource.as_str())
            .collect();
        if waiting.is_empty() {
            tracing::info!(
                informers = probes.len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "caches are synced"
            );
            health.set_ready(true);
            return;
        }
        if last_report.elapsed() >= SYNC_PROGRESS_EVERY {
            tracing::info!(
                synced = probes.len() - waiting.len(),
                total = probes.len(),
                ?waiting,
                "waiting for caches to sync"
            );
            last_report = tokio::time::Instant::now();
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

/// Upstream `leaderElectAndRun`: `ReleaseOnCancel` follows the gate.
fn releases_lock_on_exit(cli: &Cli) -> bool {
    cli.feature_gates
        .enabled("ControllerManagerReleaseLeaderElectionLockOnExit")
}

/// The shared informers' factory as the flags and gates say, and the process-wide settings of
/// the queues and writes that go with it.
fn informer_factory(
    cli: &Cli,
    client: kube::Client,
    shards: Option<&ShardHolder>,
) -> InformerFactory {
    let scope = match shards {
        Some(holder) => Scope::Shards(ShardScope(holder.shards.clone())),
        None => Scope::Cluster,
    };
    // WatchListClient (on by default, as upstream): one streaming WATCH per type instead of
    // paginated LISTs for the initial state.
    let list_mode = if cli.feature_gates.enabled("WatchListClient") {
        ListMode::Streaming
    } else {
        ListMode::Paged
    };
    // Protobuf (upstream's default) for the types rkcm reads in it, JSON otherwise; the CLI
    // has noticed any other value.
    let content_type =
        ContentType::from_media_type(&cli.api.kube_api_content_type).unwrap_or(ContentType::Json);
    // rkcm's own rule (on unless `--rkcm-retry-ignores-early-failures=false`), before any
    // controller creates its queue.
    rkcm_runtime::queue::set_ignore_early_failures(cli.rkcm.rkcm_retry_ignores_early_failures);
    // Writes read only the identity of their answer; it comes in the same encoding.
    rkcm_runtime::api::write::accept_protobuf(content_type == ContentType::Protobuf);
    InformerFactory::scoped_with(client, scope, list_mode, content_type)
}

/// Reads `/version` every `--rkcm-apiserver-version-recheck-period`; when the minor whose gates apply differs from
/// `minor`, logs it, sets the returned flag and cancels `shutdown`, so that rkcm drains and
/// exits 1 and its restart takes the new minor's gates.
fn watch_server_minor(
    client: kube::Client,
    minor: u32,
    cli: &Cli,
    shutdown: CancellationToken,
) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let every = cli.rkcm.rkcm_apiserver_version_recheck_period.to_std();
    let upgraded = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if every.is_zero() {
        return upgraded;
    }
    let flag = upgraded.clone();
    tokio::spawn(async move {
        let changed = rkcm_runtime::api::server_version::wait_for_other_minor(
            &client,
            minor,
            (cli::OLDEST_MINOR, cli::NEWEST_MINOR),
            every,
            &shutdown,
        )
        .await;
        if let Some(version) = changed {
            tracing::warn!(
                server = %version.git_version,
                from_minor = minor,
                "the API server's minor changed: restarting to take that minor's feature gates"
            );
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            shutdown.cancel();
        }
    });
    upgraded
}

/// Reads the API server's `/version`, logs and exports it, and replaces the command line's
/// feature gates with those of kube-controller-manager of the server's minor; returns that
/// minor. Fails for a server older than the oldest supported minor and for `--feature-gates`
/// that minor's manager refuses.
async fn adopt_server_version(cli: &mut Cli, client: &kube::Client) -> anyhow::Result<u32> {
    use rkcm_runtime::api::server_version::{self, Fit};
    let version = server_version::read(client)
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    server_version::export(&version);
    let fit = server_version::fit(&version, cli::OLDEST_MINOR, cli::NEWEST_MINOR);
    let minor = match fit {
        Fit::Supported(minor) => minor,
        Fit::Newer { newest } => {
            tracing::warn!(
                server = %version.git_version,
                gates_of = format!("v1.{newest}"),
                "the API server is newer than the newest Kubernetes rkcm knows: rkcm follows \
                 kube-controller-manager v1.{newest}, as a manager one minor behind its server"
            );
            newest
        }
        Fit::Unsupported => anyhow::bail!(
            "the API server is {version}; rkcm supports Kubernetes v1.{} to v1.{}",
            cli::OLDEST_MINOR,
            cli::NEWEST_MINOR
        ),
    };
    tracing::info!(
        server = %version.git_version,
        minor = version.minor,
        gates_of = cli::registry(minor).map_or("", |r| r.version),
        "API server version"
    );
    let gates = cli::FeatureGates::parse_at(minor, &cli.generic.feature_gates).map_err(|errs| {
        anyhow::anyhow!(
            "--feature-gates as kube-controller-manager v1.{minor} reads them (the API \
             server is {}): {}",
            version.git_version,
            errs.join("; ")
        )
    })?;
    if gates != cli.feature_gates {
        export_feature_gates(&gates);
    }
    cli.feature_gates = gates;
    Ok(minor)
}

/// `kubernetes_feature_enabled{name,stage}`: 1 for gates in effect whose behaviour rkcm has,
/// 0 otherwise (a gate on by default upstream that rkcm does not implement reports 0).
fn export_feature_gates(gates: &cli::FeatureGates) {
    static GAUGE: OnceLock<Option<IntGaugeVec>> = OnceLock::new();
    let Some(gauge) = get_or_register(&GAUGE, "kubernetes_feature_enabled", || {
        Ok(register(IntGaugeVec::new(
            Opts::new(
                "kubernetes_feature_enabled",
                "This metric records the data about the stage and enablement of a k8s feature.",
            ),
            &["name", "stage"],
        )?))
    }) else {
        return;
    };
    // Gates of another minor read before go.
    gauge.reset();
    for (spec, enabled) in gates.all() {
        gauge
            .with_label_values(&[spec.name, spec.stage.label()])
            .set(i64::from(enabled));
        let set = gates.enabled(spec.name);
        if set != spec.default {
            tracing::info!(gate = spec.name, enabled = set, "feature gate set");
        }
    }
    // Documented differences (README, "Not implemented"), not faults of this run: info, so
    // that a default start logs no warning.
    for (gate, reason) in gates.notices() {
        tracing::info!(
            gate,
            reason,
            "feature gate on by default upstream is not implemented by rkcm: it runs as with the gate off"
        );
    }
}
