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
            namespace: "ns".into(),
            name: "web".into(),
            kubeconfig: Some(PathBuf::from("k")),
            json: true,
            terminated_pod_gc_threshold: 12500,
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
        (vec!["deployment/web"], "expected KIND/NAMESPACE/NAME"),
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
        ("Pods/ns/x", Kind::Pod),
    ] {
        assert_eq!(args(&[target]).map(|a| a.kind), Ok(kind), "{target}");
    }
    let a = args(&["sts/db/pg", "-o", "json"]);
    assert_eq!(
        a.map(|a| (a.namespace, a.name, a.json)),
        Ok(("db".into(), "pg".into(), true))
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
fn takes_podgc_threshold_for_pods() {
    let a = args(&["pod/ns/x", "--terminated-pod-gc-threshold", "3"]);
    assert_eq!(a.map(|a| a.terminated_pod_gc_threshold), Ok(3));
    let a = args(&["pod/ns/x", "--terminated-pod-gc-threshold=0"]);
    assert_eq!(a.map(|a| a.terminated_pod_gc_threshold), Ok(0));
    match args(&["pod/ns/x", "--terminated-pod-gc-threshold", "many"]) {
        Err(e) => assert!(e.contains("\"many\" is not a number"), "{e}"),
        Ok(a) => panic!("parsed: {a:?}"),
    }
}
