//! Completion indexes of Indexed Jobs: the compressed interval strings of
//! `status.completedIndexes` / `status.failedIndexes`, the index annotation and label on pods,
//! the index-specific pod name prefix and the `JOB_COMPLETION_INDEX` env var. Pure.
//!
//! Mirrors upstream `pkg/controller/job/indexed_job_utils.go`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, PodTemplateSpec,
};
use rkcm_runtime::cache::cached::Pod;

use crate::consts::{
    COMPLETION_INDEX_ANNOTATION, COMPLETION_INDEX_ENV, INDEX_FAILURE_COUNT_ANNOTATION,
    INDEX_IGNORED_FAILURE_COUNT_ANNOTATION, MAX_GENERATED_NAME_LENGTH,
};

/// A closed range `first..=last` of indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    pub first: i32,
    pub last: i32,
}

/// Sorted, non-overlapping, non-touching intervals (upstream `orderedIntervals`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Intervals(pub Vec<Interval>);

impl Intervals {
    /// Parses an interval string, keeping indexes below `completions`. Unparsable items are
    /// skipped; parsing stops at the first item starting at or above `completions`; an end at
    /// or above it is clamped; touching intervals are merged.
    pub fn parse(s: &str, completions: i32) -> Self {
        let mut out: Vec<Interval> = Vec::new();
        if s.is_empty() {
            return Self(out);
        }
        for item in s.split(',') {
            let mut limits = item.split('-');
            let Some(first) = limits.next().and_then(parse_int) else {
                tracing::debug!(interval = item, "corrupted indexes interval; ignoring");
                continue;
            };
            if first >= completions {
                break;
            }
            let last = match limits.next() {
                Some(l) => match parse_int(l) {
                    Some(l) => l.min(completions - 1),
                    None => {
                        tracing::debug!(interval = item, "corrupted indexes interval; ignoring");
                        continue;
                    }
                },
                None => first,
            };
            let iv = Interval { first, last };
            match out.last_mut() {
                Some(prev) if prev.last == first - 1 => prev.last = last,
                _ => out.push(iv),
            }
        }
        Self(out)
    }

    /// Number of indexes covered.
    pub fn total(&self) -> usize {
        self.0
            .iter()
            .map(|iv| usize::try_from(i64::from(iv.last) - i64::from(iv.first) + 1).unwrap_or(0))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `ix` is covered.
    pub fn has(&self, ix: i32) -> bool {
        let pos = self.0.partition_point(|iv| iv.last < ix);
        self.0.get(pos).is_some_and(|iv| iv.first <= ix)
    }

    /// These intervals plus `indexes` (ascending).
    pub fn with_indexes(&self, indexes: &[i32]) -> Self {
        let other: Vec<Interval> = indexes
            .iter()
            .map(|&i| Interval { first: i, last: i })
            .collect();
        self.merge(&Intervals(other))
    }

    /// The union of two interval lists.
    pub fn merge(&self, other: &Intervals) -> Self {
        let mut out: Vec<Interval> = Vec::new();
        let mut push = |iv: Interval| match out.last_mut() {
            Some(prev) if iv.first <= prev.last.saturating_add(1) => {
                if prev.last < iv.last {
                    prev.last = iv.last;
                }
            }
            _ => out.push(iv),
        };
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if a[i].first < b[j].first {
                push(a[i]);
                i += 1;
            } else {
                push(b[j]);
                j += 1;
            }
        }
        a[i..].iter().chain(b[j..].iter()).for_each(|iv| push(*iv));
        Self(out)
    }

    /// Every covered index, ascending.
    pub fn indexes(&self) -> impl Iterator<Item = i32> + '_ {
        self.0.iter().flat_map(|iv| iv.first..=iv.last)
    }
}

impl std::fmt::Display for Intervals {
    /// `1,3-5,7`: runs of three or more as `a-b`, runs of two as `a,b`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (n, iv) in self.0.iter().enumerate() {
            if n > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}", iv.first)?;
            if iv.last > iv.first {
                let sep = if iv.last == iv.first + 1 { "," } else { "-" };
                write!(f, "{sep}{}", iv.last)?;
            }
        }
        Ok(())
    }
}

/// Go's `strconv.Atoi` for values that fit an i32 (optional sign, decimal digits).
fn parse_int(s: &str) -> Option<i32> {
    s.parse::<i32>().ok()
}

/// The pod's completion index from its annotation: `None` if missing, unparsable or negative.
pub fn completion_index(pod: &Pod) -> Option<i32> {
    let v = pod
        .metadata
        .annotations
        .as_ref()?
        .get(COMPLETION_INDEX_ANNOTATION)?;
    parse_int(v).filter(|i| *i >= 0)
}

/// The index when it is valid for a Job of `completions`.
pub fn valid_index(pod: &Pod, completions: i32) -> Option<i32> {
    completion_index(pod).filter(|i| *i < completions)
}

fn annotation_count(pod: &Pod, key: &str) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .and_then(|v| v.parse::<i64>().ok())
        .and_then(|v| i32::try_from(v).ok())
        .filter(|v| *v >= 0)
        .unwrap_or(0)
}

/// `job-index-failure-count` (0 when missing or invalid).
pub fn index_failure_count(pod: &Pod) -> i32 {
    annotation_count(pod, INDEX_FAILURE_COUNT_ANNOTATION)
}

/// `job-index-ignored-failure-count` (0 when missing or invalid).
pub fn index_ignored_failure_count(pod: &Pod) -> i32 {
    annotation_count(pod, INDEX_IGNORED_FAILURE_COUNT_ANNOTATION)
}

/// Both failure counts together (upstream `getIndexAbsoluteFailureCount`).
pub fn index_absolute_failure_count(pod: &Pod) -> i32 {
    index_failure_count(pod).saturating_add(index_ignored_failure_count(pod))
}

/// `generateName` of an Indexed pod: `<job>-<index>-`, the job part cut so the whole prefix
/// stays within 58 characters.
pub fn generate_name_with_index(job_name: &str, index: i32) -> String {
    let suffix = format!("-{index}-");
    let prefix = format!("{job_name}{suffix}");
    if prefix.len() <= MAX_GENERATED_NAME_LENGTH {
        return prefix;
    }
    let keep = MAX_GENERATED_NAME_LENGTH.saturating_sub(suffix.len());
    // Job names are ASCII (DNS subdomain), so byte slicing is safe; be defensive anyway.
    let mut cut = keep.min(job_name.len());
    while !job_name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &job_name[..cut])
}

fn add_env(container: &mut Container) {
    let env = container.env.get_or_insert_with(Vec::new);
    if env.iter().any(|e| e.name == COMPLETION_INDEX_ENV) {
        return;
    }
    env.push(EnvVar {
        name: COMPLETION_INDEX_ENV.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: format!("metadata.labels['{COMPLETION_INDEX_ANNOTATION}']"),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
}

/// Adds `JOB_COMPLETION_INDEX` (from the index label) to every init and regular container
/// that does not define it already.
pub fn add_completion_index_env(template: &mut PodTemplateSpec) {
    if let Some(spec) = template.spec.as_mut() {
        for c in spec.init_containers.iter_mut().flatten() {
            add_env(c);
        }
        for c in spec.containers.iter_mut() {
            add_env(c);
        }
    }
}

/// Per-index pod fields: index annotation and label, hostname, and (with
/// `backoffLimitPerIndex`) the failure-count annotations.
pub fn apply_index(
    template: &mut PodTemplateSpec,
    job_name: &str,
    index: i32,
    failure_counts: Option<(i32, i32)>,
) {
    let meta = template.metadata.get_or_insert_with(Default::default);
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(COMPLETION_INDEX_ANNOTATION.to_owned(), index.to_string());
    if let Some((failed, ignored)) = failure_counts {
        annotations.insert(
            INDEX_FAILURE_COUNT_ANNOTATION.to_owned(),
            failed.to_string(),
        );
        if ignored > 0 {
            annotations.insert(
                INDEX_IGNORED_FAILURE_COUNT_ANNOTATION.to_owned(),
                ignored.to_string(),
            );
        }
    }
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(COMPLETION_INDEX_ANNOTATION.to_owned(), index.to_string());
    if let Some(spec) = template.spec.as_mut() {
        spec.hostname = Some(format!("{job_name}-{index}"));
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    #[test]
    fn an_indexed_pod_is_written_whole_in_protobuf() {
        // The pod the controller creates for index 7: the completion-index env var (from a
        // field reference), the index annotation and label, the hostname, the failure-count
        // annotations and the tracking finalizer. The pod encoder must know every field of
        // it, or the create falls back to JSON.
        let mut t: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "work"},
                "finalizers": ["batch.kubernetes.io/job-tracking"]},
            "spec": {"restartPolicy": "Never",
                "initContainers": [{"name": "setup", "image": "busybox"}],
                "containers": [{"name": "work", "image": "busybox",
                    "env": [{"name": "A", "value": "1"}]}]}}))
        .expect("template");
        add_completion_index_env(&mut t);
        apply_index(&mut t, "work", 7, Some((2, 1)));
        let pod = rkcm_runtime::workload::podcontrol::pod_from_template(
            &t,
            "work",
            None,
            &rkcm_runtime::workload::podcontrol::PodOptions::default(),
        );
        let value = serde_json::to_value(&pod).expect("pod JSON");
        assert!(
            value.to_string().contains("JOB_COMPLETION_INDEX"),
            "{value}"
        );
        assert_eq!(rkcm_testkit::written_whole_in_protobuf(&pod), Ok(()));
    }

    fn iv(pairs: &[(i32, i32)]) -> Intervals {
        Intervals(
            pairs
                .iter()
                .map(|&(first, last)| Interval { first, last })
                .collect(),
        )
    }

    #[test]
    fn parse_table() {
        // (input, completions, expected)
        let cases: &[(&str, i32, &[(i32, i32)])] = &[
            ("", 10, &[]),
            ("1", 10, &[(1, 1)]),
            ("1,3-5,7", 10, &[(1, 1), (3, 5), (7, 7)]),
            ("0,1", 10, &[(0, 1)]),
            ("0-2,3-5", 10, &[(0, 5)]),
            ("1,a,3", 10, &[(1, 1), (3, 3)]),
            ("1,3-x,5", 10, &[(1, 1), (5, 5)]),
            ("2-8", 5, &[(2, 4)]),
            ("1,6,3", 5, &[(1, 1)]),
            ("7", 5, &[]),
            ("-1", 5, &[]),
        ];
        for (input, completions, want) in cases {
            assert_eq!(
                Intervals::parse(input, *completions),
                iv(want),
                "parse({input:?}, {completions})"
            );
        }
    }

    #[test]
    fn format_table() {
        let cases: &[(&[(i32, i32)], &str)] = &[
            (&[], ""),
            (&[(0, 0)], "0"),
            (&[(0, 1)], "0,1"),
            (&[(0, 2)], "0-2"),
            (&[(1, 1), (3, 5), (7, 8)], "1,3-5,7,8"),
        ];
        for (ivs, want) in cases {
            assert_eq!(iv(ivs).to_string(), *want);
        }
    }

    #[test]
    fn with_indexes_merges_and_counts() {
        let base = iv(&[(0, 1), (5, 5)]);
        let got = base.with_indexes(&[2, 4, 7]);
        assert_eq!(got.to_string(), "0-2,4,5,7");
        assert_eq!(got.total(), 6);
        assert!(got.has(4) && got.has(0) && !got.has(3) && !got.has(6) && !got.has(8));
        assert_eq!(got.indexes().collect::<Vec<_>>(), vec![0, 1, 2, 4, 5, 7]);
        assert_eq!(Intervals::default().with_indexes(&[3]).to_string(), "3");
        assert_eq!(
            iv(&[(0, 0), (4, 4)]).merge(&iv(&[(1, 3)])).to_string(),
            "0-4"
        );
    }

    fn pod_with_annotations(a: &[(&str, &str)]) -> Pod {
        let mut p = Pod::default();
        p.metadata.annotations = Some(
            a.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        p
    }

    #[test]
    fn completion_index_table() {
        let cases: &[(Option<&str>, Option<i32>)] = &[
            (None, None),
            (Some("3"), Some(3)),
            (Some("-1"), None),
            (Some("x"), None),
            (Some(""), None),
        ];
        for (v, want) in cases {
            let p = match v {
                Some(v) => pod_with_annotations(&[(COMPLETION_INDEX_ANNOTATION, v)]),
                None => Pod::default(),
            };
            assert_eq!(completion_index(&p), *want, "{v:?}");
        }
        let p = pod_with_annotations(&[(COMPLETION_INDEX_ANNOTATION, "4")]);
        assert_eq!(valid_index(&p, 4), None);
        assert_eq!(valid_index(&p, 5), Some(4));
    }

    #[test]
    fn failure_count_annotations() {
        let p = pod_with_annotations(&[
            (INDEX_FAILURE_COUNT_ANNOTATION, "2"),
            (INDEX_IGNORED_FAILURE_COUNT_ANNOTATION, "1"),
        ]);
        assert_eq!(index_absolute_failure_count(&p), 3);
        let bad = pod_with_annotations(&[(INDEX_FAILURE_COUNT_ANNOTATION, "-2")]);
        assert_eq!(index_failure_count(&bad), 0);
    }

    #[test]
    fn generate_name_is_truncated_keeping_the_index() {
        assert_eq!(generate_name_with_index("pi", 3), "pi-3-");
        let long = "a".repeat(60);
        let got = generate_name_with_index(&long, 12);
        assert_eq!(got.len(), 58);
        assert!(got.ends_with("a-12-"));
    }

    #[test]
    fn env_and_index_fields() {
        let mut t: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"a": "b"}},
            "spec": {
                "initContainers": [{"name": "init"}],
                "containers": [
                    {"name": "main"},
                    {"name": "own", "env": [{"name": "JOB_COMPLETION_INDEX", "value": "x"}]}
                ]
            }
        }))
        .unwrap();
        add_completion_index_env(&mut t);
        apply_index(&mut t, "pi", 2, Some((1, 0)));
        let v = serde_json::to_value(&t).unwrap();
        let want_env = serde_json::json!([{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}]);
        assert_eq!(v["spec"]["initContainers"][0]["env"], want_env);
        assert_eq!(v["spec"]["containers"][0]["env"], want_env);
        assert_eq!(v["spec"]["containers"][1]["env"][0]["value"], "x");
        assert_eq!(v["spec"]["hostname"], "pi-2");
        assert_eq!(
            v["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"],
            "2"
        );
        assert_eq!(
            v["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"],
            "2"
        );
        assert_eq!(
            v["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"],
            "1"
        );
        assert!(
            v["metadata"]["annotations"]
                .get("batch.kubernetes.io/job-index-ignored-failure-count")
                .is_none()
        );
    }
}
