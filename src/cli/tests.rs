use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use super::duration::GoDuration;
use super::parse::{command, normalize_args, parse};
use super::*;

fn run(args: &[&str]) -> Result<Cli, CliError> {
    match parse(std::iter::once("rkcm").chain(args.iter().copied()))? {
        Invocation::Run(cli) => Ok(*cli),
        Invocation::PrintVersion(v) => panic!("unexpected version output {v}"),
    }
}

fn errors(args: &[&str]) -> Vec<String> {
    match run(args) {
        Ok(_) => panic!("{args:?} should fail"),
        Err(CliError::Invalid(errs)) => errs,
        Err(CliError::Clap(e)) => vec![e.to_string()],
    }
}

#[test]
fn clap_definition_is_consistent() {
    command().debug_assert();
}

/// Every visible flag with its upstream default (leader-elect-resource-name is rkcm's
/// deliberate `rkcm`). Adding a flag without listing it here fails the test.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one test of a sequence of cases, read top to bottom"
)]
fn defaults_equal_upstream() {
    let expected: &[(&str, &str)] = &[
        ("allow-metric-labels", ""),
        ("allow-metric-labels-manifest", ""),
        ("authentication-kubeconfig", ""),
        ("authentication-skip-lookup", "false"),
        ("authentication-token-webhook-cache-ttl", "10s"),
        ("authentication-tolerate-lookup-failure", "false"),
        (
            "authorization-always-allow-paths",
            "/healthz,/readyz,/livez",
        ),
        ("authorization-kubeconfig", ""),
        ("authorization-webhook-cache-authorized-ttl", "10s"),
        ("authorization-webhook-cache-unauthorized-ttl", "10s"),
        ("bind-address", "0.0.0.0"),
        ("cert-dir", ""),
        ("client-ca-file", ""),
        ("cluster-name", "kubernetes"),
        ("concurrent-cron-job-syncs", "5"),
        ("concurrent-daemonset-syncs", "2"),
        ("concurrent-deployment-syncs", "5"),
        ("concurrent-endpoint-syncs", "5"),
        ("concurrent-ephemeralvolume-syncs", "5"),
        ("concurrent-gc-syncs", "20"),
        ("concurrent-horizontal-pod-autoscaler-syncs", "5"),
        ("concurrent-job-syncs", "5"),
        ("concurrent-namespace-syncs", "10"),
        ("concurrent-rc-syncs", "5"),
        ("concurrent-replicaset-syncs", "5"),
        ("concurrent-resource-quota-syncs", "5"),
        ("concurrent-service-endpoint-syncs", "5"),
        ("concurrent-service-syncs", "1"),
        ("concurrent-serviceaccount-token-syncs", "5"),
        ("concurrent-statefulset-syncs", "5"),
        ("concurrent-ttl-after-finished-syncs", "5"),
        ("concurrent-validating-admission-policy-status-syncs", "5"),
        ("contention-profiling", "false"),
        ("controller-start-interval", "0s"),
        ("controllers", "*"),
        ("disable-http2-serving", "false"),
        ("disabled-metrics", ""),
        ("emulated-version", ""),
        ("enable-garbage-collector", "true"),
        ("enable-leader-migration", "false"),
        ("feature-gates", ""),
        ("http2-max-streams-per-connection", "0"),
        ("kube-api-burst", "30"),
        (
            "kube-api-content-type",
            "application/vnd.kubernetes.protobuf",
        ),
        ("kube-api-qps", "20"),
        ("kubeconfig", ""),
        ("leader-elect", "true"),
        ("leader-elect-lease-duration", "15s"),
        ("leader-elect-renew-deadline", "10s"),
        ("leader-elect-resource-lock", "leases"),
        ("leader-elect-resource-name", "rkcm"),
        ("leader-elect-resource-namespace", "kube-system"),
        ("leader-elect-retry-period", "2s"),
        ("leader-migration-config", ""),
        ("log-flush-frequency", "5s"),
        ("log-json-info-buffer-size", "0"),
        ("log-json-split-stream", "false"),
        ("log-text-info-buffer-size", "0"),
        ("log-text-split-stream", "false"),
        ("logging-format", "text"),
        ("master", ""),
        ("min-resync-period", "12h0m0s"),
        ("mirroring-concurrent-service-endpoint-syncs", "5"),
        ("permit-address-sharing", "false"),
        ("permit-port-sharing", "false"),
        ("profiling", "true"),
        ("requestheader-allowed-names", ""),
        ("requestheader-client-ca-file", ""),
        ("requestheader-extra-headers-prefix", "x-remote-extra-"),
        ("requestheader-group-headers", "x-remote-group"),
        ("requestheader-uid-headers", ""),
        ("requestheader-username-headers", "x-remote-user"),
        // rkcm's own (not upstream's): off is upstream's behaviour.
        ("rkcm-apiserver-version-recheck-period", "5m0s"),
        ("rkcm-cronjob-adopt-forgotten-runs", "true"),
        ("rkcm-cronjob-defer-status-writes", "false"),
        ("rkcm-daemonset-rollout-skip-not-ready-nodes", "false"),
        ("rkcm-deployment-rollback-on-progress-deadline", "false"),
        ("rkcm-deployment-stale-cache-guard", "true"),
        ("rkcm-kube-api-concurrency", "0"),
        ("rkcm-retry-ignores-early-failures", "true"),
        ("rkcm-shard-selector", "true"),
        ("rkcm-shards", "0"),
        ("rkcm-statefulset-recover-stuck-after", "5m0s"),
        ("rkcm-statefulset-recover-stuck-rollout", "false"),
        ("root-ca-file", ""),
        ("secure-port", "10257"),
        ("service-account-private-key-file", ""),
        ("show-hidden-metrics-for-version", ""),
        ("terminated-pod-gc-threshold", "12500"),
        ("tls-cert-file", ""),
        ("tls-cipher-suites", ""),
        ("tls-min-version", ""),
        ("tls-private-key-file", ""),
        ("use-service-account-credentials", "false"),
        ("v", "0"),
        ("vmodule", ""),
    ];
    let cli = run(&[]).expect("defaults parse");
    let got: BTreeMap<&str, &str> = cli
        .effective_flags
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let want: BTreeMap<&str, &str> = expected.iter().copied().collect();
    assert_eq!(got, want);

    // And the typed view of the most important ones.
    assert_eq!(cli.api.kube_api_qps, 20.0);
    assert_eq!(cli.api.kube_api_burst, 30);
    assert!(cli.leader.leader_elect);
    assert_eq!(
        cli.leader.leader_elect_lease_duration,
        GoDuration::from_secs(15)
    );
    assert_eq!(
        cli.leader.leader_elect_renew_deadline,
        GoDuration::from_secs(10)
    );
    assert_eq!(
        cli.leader.leader_elect_retry_period,
        GoDuration::from_secs(2)
    );
    assert_eq!(
        cli.generic.min_resync_period,
        GoDuration::from_secs(12 * 3600)
    );
    assert_eq!(cli.serving.secure_port, 10257);
    assert_eq!(cli.podgc.terminated_pod_gc_threshold, 12500);
    assert_eq!(cli.controllers, vec!["*".to_string()]);
    assert_eq!(cli.logging.v, 0);
    assert_eq!(cli.notices, vec![], "the protobuf default is honoured");
}

#[test]
fn underscores_in_flag_names_are_dashes() {
    let cli = run(&["--concurrent_rc_syncs=3"]).expect("underscore");
    assert_eq!(cli.replicationcontroller.concurrent_rc_syncs, 3);
    let cli = run(&["--concurrent-rc-syncs=3"]).expect("dash");
    assert_eq!(cli.replicationcontroller.concurrent_rc_syncs, 3);
    let cli = run(&["--concurrent_rc_syncs", "4", "--leader_elect=false"]).expect("separate");
    assert_eq!(cli.replicationcontroller.concurrent_rc_syncs, 4);
    assert!(!cli.leader.leader_elect);
    // Values keep their underscores.
    let cli = run(&[
        "--leader-elect-resource-name=my_lease",
        "--master",
        "http://a_b:1",
    ])
    .expect("values");
    assert_eq!(cli.leader.leader_elect_resource_name, "my_lease");
    assert_eq!(cli.api.master.as_deref(), Some("http://a_b:1"));
    assert_eq!(
        normalize_args(["rkcm", "--a_b=c_d", "-v", "--", "--x_y"]),
        ["rkcm", "--a-b=c_d", "-v", "--", "--x_y"]
            .map(OsString::from)
            .to_vec()
    );
}

#[test]
fn bools_follow_pflag() {
    assert!(run(&["--leader-elect"]).expect("bare").leader.leader_elect);
    assert!(
        !run(&["--leader-elect=false"])
            .expect("=false")
            .leader
            .leader_elect
    );
    assert!(!run(&["--leader-elect=F"]).expect("=F").leader.leader_elect);
    // pflag never consumes a separate word for a bool: it becomes a positional.
    let errs = errors(&["--leader-elect", "false"]);
    assert_eq!(
        errs,
        vec![r#""rkcm" does not take any arguments, got ["false"]"#]
    );
}

#[test]
fn verbosity_spellings() {
    for args in [
        &["-v", "3"][..],
        &["-v=3"],
        &["-v3"],
        &["--v=3"],
        &["--v", "3"],
    ] {
        assert_eq!(run(args).expect("verbosity").logging.v, 3, "{args:?}");
    }
}

#[test]
fn repeated_single_value_flags_take_the_last_value() {
    let cli = run(&[
        "--secure-port=1",
        "--secure-port=2",
        "--kube-api-qps",
        "5",
        "--kube-api-qps=7",
    ])
    .expect("repeated flags");
    assert_eq!(cli.serving.secure_port, 2);
    assert_eq!(cli.api.kube_api_qps, 7.0);
    let cli = run(&["--leader-elect=false", "--leader-elect"]).expect("repeated bool");
    assert!(cli.leader.leader_elect);
}

#[test]
fn slices_accumulate() {
    let cli = run(&[
        "--controllers=deployment",
        "--controllers",
        "-job,replicaset",
    ])
    .expect("slices");
    assert_eq!(
        cli.controllers,
        vec![
            "deployment-controller",
            "-job-controller",
            "replicaset-controller"
        ]
    );
    let cli = run(&["--controllers="]).expect("empty");
    assert!(cli.controllers.is_empty());
}

#[test]
fn unknown_controller_is_rejected() {
    assert_eq!(
        errors(&["--controllers=*,foo"]),
        vec![r#""foo" is not in the list of known controllers"#]
    );
    assert_eq!(
        errors(&["--controllers=*,-foo"]),
        vec![r#""foo" is not in the list of known controllers"#]
    );
}

#[test]
fn leader_election_validation() {
    assert_eq!(
        errors(&["--leader-elect-resource-lock=endpoints"]),
        vec![r#"resourceLock value must be "leases""#]
    );
    run(&[
        "--leader-elect-resource-lock=endpoints",
        "--leader-elect=false",
    ])
    .expect("lock not checked without election");
    assert_eq!(
        errors(&[
            "--leader-elect-lease-duration=10s",
            "--leader-elect-renew-deadline=10s"
        ]),
        vec!["leaseDuration must be greater than renewDeadline"]
    );
    assert_eq!(
        errors(&["--leader-elect-retry-period=9s"]),
        vec!["renewDeadline must be greater than retryPeriod*JitterFactor"]
    );
    run(&["--leader-elect-retry-period=8s"]).expect("10 > 9.6");
    let errs = errors(&["--leader-elect-retry-period=0s"]);
    assert!(
        errs.contains(&"retryPeriod must be greater than zero".to_string()),
        "{errs:?}"
    );
    let errs = errors(&["--leader-elect-lease-duration=-1s"]);
    assert!(
        errs.contains(&"leaseDuration must be greater than zero".to_string()),
        "{errs:?}"
    );
    assert!(errors(&["--enable-leader-migration"])[0].contains("--enable-leader-migration=true"));
    run(&[
        "--enable-leader-migration=false",
        "--leader-migration-config=/x",
    ])
    .expect("accepted when off");
}

#[test]
fn concurrency_must_be_positive() {
    assert_eq!(
        errors(&["--concurrent-job-syncs=0"]),
        vec!["concurrent-job-syncs must be greater than 0, but got 0"]
    );
    assert_eq!(
        errors(&["--concurrent_rc_syncs", "-2"]),
        vec!["concurrent-rc-syncs must be greater than 0, but got -2"]
    );
    // Controllers rkcm does not implement: accepted as upstream does.
    run(&["--concurrent-namespace-syncs=0"]).expect("not validated");
    assert!(errors(&["--concurrent-job-syncs=x"])[0].contains("concurrent-job-syncs"));
    assert!(errors(&["--concurrent-job-syncs=3000000000"])[0].contains("concurrent-job-syncs"));
}

/// kubeadm v1.37's kube-controller-manager command line (cmd/kubeadm/app/phases/
/// controlplane/manifests.go `getControllerManagerCommand`, arguments sorted as kubeadm
/// writes them, with a pod and a service subnet and the default cluster name).
const KUBEADM_ARGS: &[&str] = &[
    "--allocate-node-cidrs=true",
    "--authentication-kubeconfig=/etc/kubernetes/controller-manager.conf",
    "--authorization-kubeconfig=/etc/kubernetes/controller-manager.conf",
    "--bind-address=127.0.0.1",
    "--client-ca-file=/etc/kubernetes/pki/ca.crt",
    "--cluster-cidr=10.244.0.0/16",
    "--cluster-name=kubernetes",
    "--cluster-signing-cert-file=/etc/kubernetes/pki/ca.crt",
    "--cluster-signing-key-file=/etc/kubernetes/pki/ca.key",
    "--controllers=*,bootstrapsigner,tokencleaner",
    "--kubeconfig=/etc/kubernetes/controller-manager.conf",
    "--leader-elect=true",
    "--requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt",
    "--root-ca-file=/etc/kubernetes/pki/ca.crt",
    "--service-account-private-key-file=/etc/kubernetes/pki/sa.key",
    "--service-cluster-ip-range=10.96.0.0/12",
    "--use-service-account-credentials=true",
];

#[test]
fn kubeadm_command_line_is_accepted() {
    let cli = run(KUBEADM_ARGS).expect("kubeadm's command line");
    assert!(cli.generic.use_service_account_credentials);
    assert_eq!(
        cli.authentication.client_ca_file,
        "/etc/kubernetes/pki/ca.crt"
    );
    assert_eq!(
        cli.authentication.requestheader_client_ca_file,
        "/etc/kubernetes/pki/front-proxy-ca.crt"
    );
    assert_eq!(
        cli.authorization.authorization_kubeconfig,
        Some(PathBuf::from("/etc/kubernetes/controller-manager.conf"))
    );
    assert_eq!(
        cli.authorization.authorization_always_allow_paths,
        ["/healthz", "/readyz", "/livez"]
    );
    assert_eq!(
        cli.controllers,
        [
            "*",
            "bootstrap-signer-controller",
            "token-cleaner-controller"
        ]
    );
    // Every flag of a controller rkcm does not run is named once in the start log.
    let noticed: Vec<&str> = cli.notices.iter().map(|n| n.flag.as_str()).collect();
    for flag in [
        "--allocate-node-cidrs",
        "--cluster-cidr",
        "--service-cluster-ip-range",
        "--cluster-signing-cert-file",
        "--cluster-signing-key-file",
        "--cluster-name",
        "--root-ca-file",
        "--service-account-private-key-file",
    ] {
        assert!(noticed.contains(&flag), "{flag} not in {noticed:?}");
    }
    let n = cli
        .notices
        .iter()
        .find(|n| n.flag == "--cluster-cidr")
        .expect("notice");
    assert!(
        n.reason.ends_with("which this manager does not run"),
        "{n:?}"
    );
}

#[test]
fn flags_of_other_controllers_are_accepted_and_type_checked() {
    let cli = run(&[
        "--cloud-provider=external",
        "--node-monitor-grace-period=50s",
        "--node-cidr-mask-size",
        "24",
        "--node-eviction-rate=0.1",
        "--enable-taint-manager",
    ])
    .expect("accepted");
    assert_eq!(cli.notices.len(), 5, "{:?}", cli.notices);
    // Values are checked as pflag would: a bad one names the flag.
    for bad in [
        &["--node-monitor-grace-period=50"][..],
        &["--node-cidr-mask-size=x"],
        &["--allocate-node-cidrs=maybe"],
        &["--node-eviction-rate=fast"],
    ] {
        match run(bad) {
            Err(CliError::Clap(e)) => {
                let flag = bad[0].split('=').next().unwrap_or_default();
                assert!(e.to_string().contains(flag), "{bad:?}: {e}");
            }
            other => panic!("{bad:?} should fail, got {other:?}"),
        }
    }
    // Still rejected: a promise rkcm cannot keep.
    let errs = errors(&["--tls-sni-cert-key=a.crt,a.key"]);
    assert!(
        errs[0].starts_with("flag --tls-sni-cert-key is not implemented by rkcm"),
        "{errs:?}"
    );
    assert!(errors(&["--tls-min-version=TLS13"])[0].contains("unknown tls version"));
    assert!(errors(&["--tls-cipher-suites=TLS_NOPE"])[0].contains("TLS_NOPE"));
    run(&[
        "--tls-min-version=VersionTLS13",
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "--authorization-always-allow-paths=/healthz,/metrics",
        "--authentication-skip-lookup",
        "--requestheader-allowed-names=front-proxy-client",
    ])
    .expect("serving flags");
    // Underscore spelling is still recognised.
    run(&["--cloud_provider=external"]).expect("underscore");
}

#[test]
fn notices_for_accepted_flags() {
    let cli = run(&[
        "--kube-api-content-type=application/json",
        "--concurrent-namespace-syncs=3",
        "--profiling=false",
        "--deployment-controller-sync-period=30s",
        "--tls-min-version=VersionTLS12",
    ])
    .expect("accepted");
    let flags: Vec<&str> = cli.notices.iter().map(|n| n.flag.as_str()).collect();
    assert_eq!(
        flags,
        vec![
            "--profiling",
            "--deployment-controller-sync-period",
            "--concurrent-namespace-syncs"
        ]
    );
}

#[test]
fn only_json_and_protobuf_content_types_are_honoured() {
    for (value, noticed) in [
        ("application/json", false),
        ("application/vnd.kubernetes.protobuf", false),
        ("application/yaml", true),
    ] {
        let cli = run(&[&format!("--kube-api-content-type={value}")]).expect("accepted");
        let flags: Vec<&str> = cli.notices.iter().map(|n| n.flag.as_str()).collect();
        assert_eq!(
            flags
                .iter()
                .any(|f| f.starts_with("--kube-api-content-type")),
            noticed,
            "{value}: {flags:?}"
        );
    }
}

#[test]
fn unknown_flag_and_positional_fail() {
    assert!(matches!(run(&["--no-such-flag"]), Err(CliError::Clap(_))));
    assert_eq!(
        errors(&["foo"]),
        vec![r#""rkcm" does not take any arguments, got ["foo"]"#]
    );
}

#[test]
fn help_and_version_exit_zero() {
    let err = run(&["--help"]).expect_err("help");
    assert_eq!(err.exit_code(), 0);
    let help = command().render_long_help().to_string();
    for heading in [
        "Generic flags",
        "API client flags",
        "Leader election flags",
        "Secure serving flags",
        "Deployment controller flags",
        "ReplicaSet controller flags",
        "PodGC controller flags",
    ] {
        assert!(help.contains(heading), "missing heading {heading}");
    }
    for flag in [
        "--kubeconfig",
        "--concurrent-rc-syncs",
        "--terminated-pod-gc-threshold",
    ] {
        assert!(help.contains(flag), "missing {flag}");
    }
    assert!(
        !help.contains("--cloud-provider"),
        "rejected flags are hidden"
    );
    for v in [&["--version"][..], &["--version=true"], &["--version=raw"]] {
        let out = parse(std::iter::once("rkcm").chain(v.iter().copied())).expect("version");
        assert!(matches!(out, Invocation::PrintVersion(_)));
    }
    run(&["--version=false"]).expect("--version=false runs");
}

#[test]
fn feature_gates() {
    let cli =
        run(&["--feature-gates=WatchListClient=false,kube:PodDeletionCost=false"]).expect("gates");
    assert!(!cli.feature_gates.enabled("WatchListClient"));
    assert!(!cli.feature_gates.enabled("PodDeletionCost"));
    assert!(cli.feature_gates.enabled("InOrderInformers"), "default");
    // Repeated flags accumulate.
    let cli = run(&[
        "--feature-gates=TaintTolerationComparisonOperators=true",
        "--feature-gates=MaxUnavailableStatefulSet=false",
    ])
    .expect("repeated");
    assert!(
        cli.feature_gates
            .enabled("TaintTolerationComparisonOperators")
    );
    assert!(!cli.feature_gates.enabled("MaxUnavailableStatefulSet"));

    assert_eq!(
        errors(&["--feature-gates=NoSuchGate=true"]),
        ["invalid argument for \"--feature-gates\" flag: unrecognized feature gate: NoSuchGate"]
    );
    assert_eq!(
        errors(&["--feature-gates=StatefulSetRecreateStrategy=true"]),
        [
            "feature gate StatefulSetRecreateStrategy=true is not implemented by rkcm: the \
          Recreate update strategy is not implemented (with the gate off a Recreate \
          StatefulSet gets upstream's error and no update)"
        ]
    );
    assert!(
        errors(&["--feature-gates=CoordinatedLeaderElection=true"])[0]
            .contains("CoordinatedLeaderElection=true is not implemented by rkcm")
    );
    run(&["--feature-gates=CoordinatedLeaderElection=false"]).expect("off is fine");
    assert!(errors(&["--feature-gates=JobManagedBy=false"])[0].contains("locked to true"));
    assert!(errors(&["--feature-gates=WatchList"])[0].contains("missing bool value"));
    assert!(errors(&["--feature-gates=WatchList=maybe"])[0].contains("invalid value"));
}

#[test]
fn configz_has_upstreams_shape() {
    let cli = run(&["--concurrent-replicaset-syncs=7", "--leader-elect=false"]).expect("ok");
    let c = cli.configz();
    let cc = &c["componentconfig"];
    assert_eq!(cc["ReplicaSetController"]["ConcurrentRSSyncs"], 7);
    assert_eq!(cc["Generic"]["LeaderElection"]["LeaderElect"], false);
    assert_eq!(cc["Generic"]["LeaderElection"]["LeaseDuration"], "15s");
    assert_eq!(cc["PodGCController"]["TerminatedPodGCThreshold"], 12500);
    assert_eq!(cc["Generic"]["Controllers"], serde_json::json!(["*"]));
}

#[test]
fn client_options_from_flags() {
    let cli = run(&["--kubeconfig=/k", "--kube-api-qps=5", "--kube-api-burst=7"]).expect("ok");
    let o = cli.client_options();
    assert_eq!(o.kubeconfig, Some(PathBuf::from("/k")));
    assert_eq!(o.master, None);
    assert_eq!((o.qps, o.burst), (5.0, 7));
}

/// `--rkcm-shard-selector` reaches the shard config: on by default, off when set false (the
/// informers then send no shard selector); no config when sharded mode is off.
#[test]
fn shard_selector_flag_reaches_the_shard_config() {
    let on = run(&["--rkcm-shards=64"]).expect("parses");
    let cfg = on.shard_config("me").expect("config").expect("sharded");
    assert!(cfg.server_selector);
    assert_eq!(cfg.ring.len(), 64);
    let off = run(&["--rkcm-shards=64", "--rkcm-shard-selector=false"]).expect("parses");
    let cfg = off.shard_config("me").expect("config").expect("sharded");
    assert!(!cfg.server_selector);
    let none = run(&["--rkcm-shard-selector=false"]).expect("parses");
    assert!(none.shard_config("me").expect("config").is_none());
}
