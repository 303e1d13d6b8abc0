use super::*;

fn args(a: &[&str]) -> Result<Args, String> {
    parse(&a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
}

#[test]
fn parses_the_target_and_flags() {
    assert_eq!(
        args(&["deploy/ns/web", "--kubeconfig", "k", "-o", "json"]),
        Ok(Args {
            kind: Kind::Deployment,
            namespace: Some("ns".into()),
            name: "web".into(),
            kubeconfig: Some(PathBuf::from("k")),
            context: None,
            json: true,
            planning_flags: vec![],
            manager: None,
            manager_insecure: false,
        })
    );
    let a = args(&["--kubeconfig=k", "Deployment/ns/web", "--output=text"]);
    assert_eq!(
        a.map(|a| (a.json, a.kubeconfig)),
        Ok((false, Some("k".into())))
    );
}

#[test]
fn refuses_what_it_cannot_explain() {
    for (bad, want) in [
        (
            vec!["deployment/a/b/c"],
            "expected KIND/NAME or KIND/NAMESPACE/NAME",
        ),
        (
            vec!["deployment/ns/web", "x"],
            "expected KIND/NAME, KIND NAME",
        ),
        (vec!["deployment/ns/web", "-n", "other"], "disagree"),
        (vec!["deployment/"], "empty namespace or name"),
        (vec!["job", "pi", "extra"], "unexpected argument"),
        (
            vec!["widget/ns/web"],
            "kind \"widget\" is not explained yet",
        ),
        (
            vec!["deployment/ns/web", "-o", "yaml"],
            "unknown output format",
        ),
        (vec!["deployment/ns/web", "--watch"], "unknown flag --watch"),
        (vec!["deployment/ns/web", "--kubeconfig"], "needs a value"),
        (vec![], "usage:"),
    ] {
        match args(&bad) {
            Err(e) => assert!(e.contains(want), "{bad:?}: {e}"),
            Ok(a) => panic!("{bad:?} parsed: {a:?}"),
        }
    }
}

#[test]
fn parses_the_workload_kinds_and_their_short_names() {
    for (target, kind) in [
        ("statefulset/ns/web", Kind::StatefulSet),
        ("sts/ns/web", Kind::StatefulSet),
        ("StatefulSets/ns/web", Kind::StatefulSet),
        ("job/ns/pi", Kind::Job),
        ("jobs/ns/pi", Kind::Job),
        ("cronjob/ns/hourly", Kind::CronJob),
        ("cj/ns/hourly", Kind::CronJob),
        ("CronJob/ns/hourly", Kind::CronJob),
        ("replicaset/ns/web-5d8", Kind::ReplicaSet),
        ("rs/ns/web-5d8", Kind::ReplicaSet),
        ("ReplicationController/ns/old", Kind::ReplicationController),
        ("rc/ns/old", Kind::ReplicationController),
        ("daemonset/kube-system/agent", Kind::DaemonSet),
        ("ds/kube-system/agent", Kind::DaemonSet),
        ("pod/ns/x", Kind::Pod),
        ("po/ns/x", Kind::Pod),
        ("ttl/ns/pi", Kind::TtlAfterFinished),
        ("ttl-after-finished/ns/pi", Kind::TtlAfterFinished),
        ("Pods/ns/x", Kind::Pod),
    ] {
        assert_eq!(args(&[target]).map(|a| a.kind), Ok(kind), "{target}");
    }
    let a = args(&["sts/db/pg", "-o", "json"]);
    assert_eq!(
        a.map(|a| (a.namespace, a.name, a.json)),
        Ok((Some("db".into()), "pg".into(), true))
    );
    // The usage names every kind.
    match args(&["service/ns/x"]) {
        Err(e) => {
            for kind in [
                "deployment (deploy)",
                "replicaset (rs)",
                "replicationcontroller (rc)",
                "statefulset (sts)",
                "daemonset (ds)",
                "job,",
                "cronjob (cj)",
                "ttl (a Job",
                "pod (po",
            ] {
                assert!(e.contains(kind), "{kind} missing from {e}");
            }
        }
        Ok(a) => panic!("service parsed: {a:?}"),
    }
}

#[test]
fn takes_the_managers_address() {
    let a = args(&[
        "job/ns/pi",
        "--manager=https://127.0.0.1:10257",
        "--manager-insecure-skip-tls-verify",
    ]);
    assert_eq!(
        a.map(|a| (a.manager, a.manager_insecure)),
        Ok((Some("https://127.0.0.1:10257".to_owned()), true))
    );
    let a = args(&["job/ns/pi"]);
    assert_eq!(
        a.map(|a| (a.manager, a.manager_insecure)),
        Ok((None, false))
    );
}

#[test]
fn takes_the_managers_planning_flags() {
    let a = args(&[
        "pod/ns/x",
        "--terminated-pod-gc-threshold",
        "3",
        "--feature-gates=MaxUnavailableStatefulSet=false",
        "--rkcm-daemonset-rollout-skip-not-ready-nodes",
        "--rkcm-deployment-stale-cache-guard=false",
    ]);
    assert_eq!(
        a.map(|a| a.planning_flags),
        Ok(vec![
            "--terminated-pod-gc-threshold=3".to_owned(),
            "--feature-gates=MaxUnavailableStatefulSet=false".to_owned(),
            "--rkcm-daemonset-rollout-skip-not-ready-nodes".to_owned(),
            "--rkcm-deployment-stale-cache-guard=false".to_owned(),
        ])
    );
    // What the manager refuses, explain refuses (exit 2, with the usage).
    for (bad, want) in [
        (
            vec!["pod/ns/x", "--terminated-pod-gc-threshold", "many"],
            "many",
        ),
        (
            vec!["sts/ns/x", "--feature-gates=NoSuchGate=true"],
            "unrecognized feature gate: NoSuchGate",
        ),
        (vec!["sts/ns/x", "--rkcm-nope"], "rkcm-nope"),
    ] {
        match args(&bad) {
            Err(e) => assert!(e.contains(want) && e.contains("usage:"), "{bad:?}: {e}"),
            Ok(a) => panic!("{bad:?} parsed: {a:?}"),
        }
    }
}

#[test]
fn takes_the_target_and_namespace_as_kubectl_does() {
    let got = |a: &[&str]| args(a).map(|a| (a.kind, a.namespace, a.name, a.context));
    // KIND/NAME and KIND NAME: the namespace is -n, else the context's (None here).
    assert_eq!(
        got(&["job/pi"]),
        Ok((Kind::Job, None, "pi".to_owned(), None))
    );
    assert_eq!(
        got(&["job", "pi", "-n", "batch", "--context", "kind-dev"]),
        Ok((
            Kind::Job,
            Some("batch".to_owned()),
            "pi".to_owned(),
            Some("kind-dev".to_owned())
        ))
    );
    assert_eq!(
        got(&["--namespace=batch", "sts/db"]),
        Ok((
            Kind::StatefulSet,
            Some("batch".to_owned()),
            "db".to_owned(),
            None
        ))
    );
    // KIND/NAMESPACE/NAME still works, and agrees with a matching -n.
    assert_eq!(
        got(&["job/batch/pi", "-n", "batch"]),
        Ok((Kind::Job, Some("batch".to_owned()), "pi".to_owned(), None))
    );
}
