//! rkcm's opt-in rollback on progress deadline (`rkcm_deployment::plan::deadline`), judged on
//! every write of a Deployment's template, knowing whether the Deployment controller or a
//! person made it (the simulator knows each write's author):
//! - [`NOT_ASKED`]: the controller changed the template of a Deployment that, as it was just
//!   before the write, was not opted in, was paused, or had not passed its progress deadline.
//! - [`LOOP`]: the controller changed the template twice with no person's rollout between:
//!   a rollback of a rollback (at most one rollback per bad revision).
//!
//! The deprecated `deprecated.deployment.rollback.to` request, which the controller honours by
//! changing the template too, is a person's request and is not judged.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;

/// The invariant names, as the simulator reports them.
pub const NOT_ASKED: &str = "DeploymentRollbackNotAsked";
pub const LOOP: &str = "DeploymentRollbackLoop";

const OPT_IN: &str = "rkcm.io/deployment-rollback-on-progress-deadline";
const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";

/// Who wrote a Deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    DeploymentController,
    Other,
}

/// The state of the check: per Deployment UID, whether the controller rolled it back since
/// the last template change by anyone else.
#[derive(Debug, Default)]
pub struct Rollbacks {
    rolled_back: BTreeMap<String, bool>,
    /// `--rkcm-deployment-rollback-on-progress-deadline` of the manager under test.
    pub manager_default: bool,
}

fn annotation<'a>(d: &'a Deployment, key: &str) -> Option<&'a str> {
    d.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn timed_out(d: &Deployment) -> bool {
    d.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_.as_deref() == Some("Progressing")
                && c.status.as_deref() == Some("False")
                && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
        })
}

impl Rollbacks {
    /// One write of a Deployment: `prev` as stored before it, `new` after. Returns the broken
    /// invariant and what shows it.
    pub fn observe(
        &mut self,
        writer: Writer,
        prev: &Deployment,
        new: &Deployment,
    ) -> Option<(&'static str, String)> {
        if prev.spec.template == new.spec.template {
            return None;
        }
        let uid = new.metadata.uid.clone().unwrap_or_default();
        if writer == Writer::Other || annotation(prev, ROLLBACK_TO).is_some() {
            self.rolled_back.insert(uid, false);
            return None;
        }
        let opted_in = match annotation(prev, OPT_IN) {
            Some("true") => true,
            Some("false") => false,
            _ => self.manager_default,
        };
        let paused = prev.spec.paused == Some(true);
        let revision =
            annotation(prev, "deployment.kubernetes.io/revision").unwrap_or("unrecorded");
        if !opted_in || paused || !timed_out(prev) {
            return Some((
                NOT_ASKED,
                format!(
                    "the controller changed the template at revision {revision}: opted in {opted_in}, \
                     paused {paused}, past its progress deadline {}",
                    timed_out(prev)
                ),
            ));
        }
        if self.rolled_back.insert(uid, true) == Some(true) {
            return Some((
                LOOP,
                format!(
                    "the controller rolled back again at revision {revision} with no rollout by a \
                     person since its last rollback"
                ),
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    use super::*;

    fn d(image: &str, annotations: &[(&str, &str)], paused: bool, timed_out: bool) -> Deployment {
        let mut d = Deployment::default();
        d.metadata.uid = Some("u".into());
        d.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        );
        d.spec.paused = Some(paused);
        d.spec.template.spec = Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some(image.into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        });
        if timed_out {
            d.status = Some(DeploymentStatus {
                conditions: Some(vec![DeploymentCondition {
                    type_: Some("Progressing".into()),
                    status: Some("False".into()),
                    reason: Some("ProgressDeadlineExceeded".into()),
                    ..DeploymentCondition::default()
                }]),
                ..DeploymentStatus::default()
            });
        }
        d
    }

    const IN: (&str, &str) = (OPT_IN, "true");
    const OUT: (&str, &str) = (OPT_IN, "false");
    use Writer::{DeploymentController as C, Other as P};

    #[test]
    #[allow(clippy::too_many_lines)] // one table: each rule of the check, side by side
    fn judges_each_template_write() {
        type Step = (Writer, Deployment, Deployment, Option<&'static str>);
        let table: Vec<(&str, bool, Vec<Step>)> = vec![
            (
                "one rollback per person's rollout",
                false,
                vec![
                    (
                        P,
                        d("v1", &[IN], false, false),
                        d("bad", &[IN], false, false),
                        None,
                    ),
                    (
                        C,
                        d("bad", &[IN], false, true),
                        d("v1", &[IN], false, true),
                        None,
                    ),
                    (
                        P,
                        d("v1", &[IN], false, false),
                        d("bad2", &[IN], false, false),
                        None,
                    ),
                    (
                        C,
                        d("bad2", &[IN], false, true),
                        d("v1", &[IN], false, true),
                        None,
                    ),
                ],
            ),
            (
                "a rollback of the rollback is a loop",
                false,
                vec![
                    (
                        C,
                        d("bad", &[IN], false, true),
                        d("v1", &[IN], false, true),
                        None,
                    ),
                    (
                        C,
                        d("v1", &[IN], false, true),
                        d("bad", &[IN], false, true),
                        Some(LOOP),
                    ),
                ],
            ),
            (
                "scale or status writes change nothing",
                false,
                vec![
                    (
                        C,
                        d("bad", &[IN], false, true),
                        d("v1", &[IN], false, true),
                        None,
                    ),
                    (
                        P,
                        d("v1", &[IN], false, true),
                        d("v1", &[IN], true, true),
                        None,
                    ),
                    (
                        C,
                        d("v1", &[IN], false, true),
                        d("bad", &[IN], false, true),
                        Some(LOOP),
                    ),
                ],
            ),
            (
                "not opted in",
                false,
                vec![(
                    C,
                    d("bad", &[], false, true),
                    d("v1", &[], false, true),
                    Some(NOT_ASKED),
                )],
            ),
            (
                "the manager's flag opts in",
                true,
                vec![(
                    C,
                    d("bad", &[], false, true),
                    d("v1", &[], false, true),
                    None,
                )],
            ),
            (
                "opted out despite the flag",
                true,
                vec![(
                    C,
                    d("bad", &[OUT], false, true),
                    d("v1", &[OUT], false, true),
                    Some(NOT_ASKED),
                )],
            ),
            (
                "paused",
                false,
                vec![(
                    C,
                    d("bad", &[IN], true, true),
                    d("v1", &[IN], true, true),
                    Some(NOT_ASKED),
                )],
            ),
            (
                "not past the deadline",
                false,
                vec![(
                    C,
                    d("bad", &[IN], false, false),
                    d("v1", &[IN], false, false),
                    Some(NOT_ASKED),
                )],
            ),
            (
                "the deprecated rollback request is a person's",
                false,
                vec![
                    (
                        C,
                        d("bad", &[(ROLLBACK_TO, "0")], false, false),
                        d("v1", &[], false, false),
                        None,
                    ),
                    (
                        C,
                        d("bad", &[IN], false, true),
                        d("v1", &[IN], false, true),
                        None,
                    ),
                ],
            ),
        ];
        for (name, manager_default, steps) in table {
            let mut check = Rollbacks {
                manager_default,
                ..Rollbacks::default()
            };
            for (i, (writer, prev, new, want)) in steps.into_iter().enumerate() {
                let got = check.observe(writer, &prev, &new).map(|(n, _)| n);
                assert_eq!(got, want, "{name}, step {i}");
            }
        }
    }
}
