//! Parsing the command line: flag-name normalization, the clap command, validation (with the
//! controller names resolved against the registry), and what the log reports of the flags.

use std::collections::BTreeSet;
use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};

use rkcm_runtime::cache::ContentType;

use super::gates::FeatureGates;
use super::generic::parse_go_bool;
use super::rejected::{FOREIGN_FLAGS, NOT_HONOURED, REJECTED_FLAGS, foreign_arg, rejected_arg};
use super::{COMMAND, Cli, CliError, Invocation, Notice};
use crate::registry;

/// Rewrites `_` to `-` in every flag name (upstream `WordSepNormalizeFunc`). Values, and
/// everything after a bare `--`, are untouched.
pub fn normalize_args<I, T>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut out = Vec::new();
    let mut terminated = false;
    for arg in args {
        let arg: OsString = arg.into();
        if terminated {
            out.push(arg);
            continue;
        }
        let Some(s) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if s == "--" {
            terminated = true;
            out.push(arg);
            continue;
        }
        match s.strip_prefix("--") {
            Some(rest) => {
                let (name, value) = match rest.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (rest, None),
                };
                let mut norm = format!("--{}", name.replace('_', "-"));
                if let Some(v) = value {
                    norm.push('=');
                    norm.push_str(v);
                }
                out.push(norm.into());
            }
            None => out.push(arg),
        }
    }
    out
}

/// The clap command: the derived flags plus the hidden ones of controllers rkcm does not run
/// and the rejected ones.
pub fn command() -> clap::Command {
    Cli::command()
        .args(REJECTED_FLAGS.iter().map(rejected_arg))
        .args(FOREIGN_FLAGS.iter().map(foreign_arg))
}

/// Parses and validates `args` (including the program name). No I/O besides clap's own
/// help/usage rendering.
pub fn parse<I, T>(args: I) -> Result<Invocation, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(normalize_args(args))?;
    let mut cli = Cli::from_arg_matches(&matches)?;

    if !cli.positional.is_empty() {
        return Err(CliError::Invalid(vec![format!(
            "{COMMAND:?} does not take any arguments, got {:?}",
            cli.positional
        )]));
    }

    // Upstream handles --version before validating anything else.
    if let Some(v) = cli.generic.version.as_deref() {
        let text = match v {
            "raw" => Some(version_raw()),
            other => match parse_go_bool(other) {
                Ok(true) => Some(version_short()),
                Ok(false) => None,
                Err(e) => {
                    return Err(CliError::Invalid(vec![format!(
                        "invalid argument {other:?} for \"--version\" flag: {e}"
                    )]));
                }
            },
        };
        if let Some(text) = text {
            return Ok(Invocation::PrintVersion(text));
        }
    }

    let mut errors = Vec::new();

    for r in REJECTED_FLAGS {
        if matches.value_source(r.name) == Some(ValueSource::CommandLine) {
            errors.push(format!(
                "flag --{} is not implemented by rkcm: {}",
                r.name, r.reason
            ));
        }
    }
    errors.extend(cli.validate());

    match FeatureGates::parse(&cli.generic.feature_gates) {
        Ok(g) => cli.feature_gates = g,
        Err(e) => errors.extend(e),
    }

    // `--controllers=` (empty) means "no controllers", as pflag reads an empty slice.
    let entries: Vec<String> = cli
        .generic
        .controllers
        .iter()
        .filter(|e| !e.is_empty())
        .cloned()
        .collect();
    match registry::resolve_aliases(&entries) {
        Ok(resolved) => cli.controllers = resolved,
        Err(unknown) => errors.extend(unknown.iter().map(ToString::to_string)),
    }

    if !errors.is_empty() {
        return Err(CliError::Invalid(errors));
    }

    cli.effective_flags = effective_flags(&cmd, &matches);
    cli.notices = notices(&cli, &cmd, &matches);
    Ok(Invocation::Run(Box::new(cli)))
}

fn version_short() -> String {
    format!("rkcm v{}", env!("CARGO_PKG_VERSION"))
}

fn version_raw() -> String {
    let (major, minor) = {
        let mut parts = env!("CARGO_PKG_VERSION").split('.');
        (parts.next().unwrap_or("0"), parts.next().unwrap_or("0"))
    };
    format!(
        "version.Info{{Major:{major:?}, Minor:{minor:?}, GitVersion:\"v{}\", GitCommit:\"\", \
         GitTreeState:\"\", BuildDate:\"\", GoVersion:\"\", Compiler:\"rustc\", \
         Platform:\"{}/{}\"}}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        rkcm_runtime::api::client::go_arch()
    )
}

fn effective_flags(cmd: &clap::Command, matches: &ArgMatches) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if arg.is_hide_set() && matches.value_source(arg.get_id().as_str()).is_none() {
            continue;
        }
        if matches!(long, "help" | "version") {
            continue;
        }
        let value = matches
            .get_raw(arg.get_id().as_str())
            .map(|vals| {
                vals.map(|v| v.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        out.push((long.to_string(), value));
    }
    out.sort();
    out
}

fn notices(cli: &Cli, cmd: &clap::Command, matches: &ArgMatches) -> Vec<Notice> {
    let mut out = Vec::new();
    // Flags given on the command line, by long name (clap ids are field names).
    let given: BTreeSet<&str> = cmd
        .get_arguments()
        .filter(|a| matches.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine))
        .filter_map(|a| a.get_long())
        .collect();
    for f in FOREIGN_FLAGS {
        if given.contains(f.name) {
            out.push(Notice {
                flag: format!("--{}", f.name),
                reason: f.reason,
            });
        }
    }
    for (flag, reason) in NOT_HONOURED {
        if given.contains(flag) {
            out.push(Notice {
                flag: format!("--{flag}"),
                reason,
            });
        }
    }
    if ContentType::from_media_type(&cli.api.kube_api_content_type).is_none() {
        out.push(Notice {
            flag: format!("--kube-api-content-type={}", cli.api.kube_api_content_type),
            reason: "not supported, using application/json",
        });
    }
    out
}
