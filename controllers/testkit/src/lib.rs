//! rkcm-testkit: what tests of rkcm controllers need to talk to a real control plane.
//!
//! - [`TestCluster`] connects with the kubeconfig named by `RKCM_TEST_KUBECONFIG` (written by
//!   `make cluster-up`, or any cluster of yours), hands each test its own namespace
//!   ([`TestNamespace`], deleted when dropped unless `RKCM_KEEP_NAMESPACES=1`), creates
//!   nodes nothing simulates ([`NodeBuilder`], [`TestNode`]) and sets pod status by hand.
//! - [`wait_for`] polls a condition until it holds or a timeout passes, and says what it
//!   waited for and what it last saw when it gives up. Tests never sleep to let things
//!   settle.
//! - [`builders`] makes the small objects tests create.
//! - [`proxy::ScopedProxy`] confines a controller-manager process (upstream's or rkcm's) to
//!   one namespace of the shared plane.
//! - [`harness`] is the one real-plane harness of the controller suites: per-test
//!   environment, in-process controllers, manager processes, waits, histories.
//! - [`invariants`] checks the controllers' invariants (no pod too many, one pod per
//!   StatefulSet identity, exact Job counts, one Job per CronJob slot, no force delete of a
//!   running pod whose node exists) continuously from watches, for fault tests and
//!   `rkcm-check`.
//! - [`volumes::TestVolumes`] pre-creates volumes so that claims bind.
//! - [`fake_api::FakeApi`] is the one fake API server of unit tests.
//! - [`prometheus::Prometheus`] runs a real Prometheus (the distribution package) that scrapes
//!   rkcm as the chart's ServiceMonitor would and evaluates its rules; [`prometheus::promtool`].
//! - [`recorder::Recorder`] records the requests an in-process controller sends and how they
//!   were answered (an audit log of its own traffic).

// Test support only: a panic here is a failing test, which is what tests want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod builders;
mod cluster;
pub mod fake_api;
pub mod harness;
pub mod invariants;
pub mod prometheus;
pub mod proxy;
pub mod recorder;
pub mod scrape;
pub mod shards;
pub mod sim;
pub mod tls_front;
pub mod volumes;
mod wait;

pub use builders::NodeBuilder;
pub use cluster::{
    ETCD_ENV, KEEP_ENV, KUBECONFIG_ENV, TestCluster, TestNamespace, TestNode, unique_name,
};
pub use proxy::ScopedProxy;
pub use tls_front::{TestCa, TlsFront};
pub use volumes::TestVolumes;
pub use wait::{POLL, holds_for, wait_for, wait_for_every};

/// Whether `pod` is written whole in protobuf, as a pod create sends it: the encoder knows every
/// field, and reading the bytes back gives the same JSON. `Err` says what went wrong.
pub fn written_whole_in_protobuf(pod: &k8s_openapi::api::core::v1::Pod) -> Result<(), String> {
    use rkcm_runtime::api::protobuf::encode;
    let value = serde_json::to_value(pod).map_err(|e| e.to_string())?;
    let bytes = encode::pod(&value).map_err(|e| e.to_string())?;
    let back = encode::pod_json(&bytes).map_err(|e| e.to_string())?;
    let diff = json_diff(&value, &back);
    if diff.is_empty() {
        Ok(())
    } else {
        Err(format!("read back differently: {diff:?}"))
    }
}

/// The JSON paths where `a` and `b` differ, each with both values (empty when equal), for
/// assertion messages that name what differs in two large objects.
pub fn json_diff(a: &serde_json::Value, b: &serde_json::Value) -> Vec<String> {
    use serde_json::Value;
    fn walk(path: String, a: &Value, b: &Value, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    let (va, vb) = (
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                    );
                    walk(format!("{path}.{k}"), va, vb, out);
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                    walk(format!("{path}[{i}]"), va, vb, out);
                }
            }
            _ if a != b => out.push(format!("{path}: {a} vs {b}")),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(String::new(), a, b, &mut out);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pod_with_a_status_is_not_written_whole_in_protobuf() {
        let mut pod: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(super::builders::rich_pod()).expect("rich pod");
        assert_eq!(super::written_whole_in_protobuf(&pod), Ok(()));
        pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        });
        let refused = super::written_whole_in_protobuf(&pod);
        assert!(
            refused.as_ref().is_err_and(|e| e.contains("pod.status")),
            "{refused:?}"
        );
    }

    #[test]
    fn json_diff_names_each_differing_path() {
        let a = serde_json::json!({"x": 1, "l": [1, 2], "o": {"p": "q"}, "only": true});
        let b = serde_json::json!({"x": 1, "l": [1, 3], "o": {"p": "r"}});
        assert_eq!(
            super::json_diff(&a, &b),
            vec![
                ".l[1]: 2 vs 3",
                ".o.p: \"q\" vs \"r\"",
                ".only: true vs null"
            ]
        );
        assert!(super::json_diff(&a, &a).is_empty());
    }

    use super::*;
    use std::time::Duration;

    #[test]
    fn unique_names_differ_and_are_valid() {
        let a = unique_name("t");
        let b = unique_name("t");
        assert_ne!(a, b);
        assert!(a.starts_with("t-") && a.len() == 10);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_returns_value_and_times_out_with_context() {
        let mut n = 0;
        let v = wait_for("n to reach 3", Duration::from_secs(5), || {
            n += 1;
            let n = n;
            async move { Ok((n >= 3).then_some(n)) }
        })
        .await
        .expect("condition holds after three polls");
        assert_eq!(v, 3);

        let err = wait_for::<(), _, _>("never", Duration::from_secs(1), || async {
            Err(anyhow::anyhow!("boom"))
        })
        .await
        .expect_err("must time out");
        let msg = format!("{err}");
        assert!(
            msg.contains("waiting for never") && msg.contains("boom"),
            "{msg}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn holds_for_fails_at_first_false() {
        let mut n = 0;
        let err = holds_for("n below 5", Duration::from_secs(10), || {
            n += 1;
            let n = n;
            async move { Ok(n < 5) }
        })
        .await
        .expect_err("must fail");
        assert!(format!("{err}").contains("n below 5"));
    }
}
