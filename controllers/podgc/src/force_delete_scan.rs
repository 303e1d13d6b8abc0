//! SAFE-01/SAFE-05: PodGC is the only rkcm controller that force-deletes (grace period 0).
//!
//! Scans the workspace sources (`src/` and every `controllers/*/src`) for the ways a Rust
//! program spells a grace-period-0 delete and fails if any appear outside `controllers/podgc`.
//! `controllers/testkit` is exempt: it is test tooling (cleanup of test namespaces), never
//! part of the controller-manager binary.

use std::path::{Path, PathBuf};

/// Spellings of a grace-period-0 delete, whitespace removed before matching.
const FORCE_DELETE_PATTERNS: &[&str] = &[
    "grace_period_seconds:Some(0)",
    "grace_period_seconds=Some(0)",
    ".grace_period(0)",
    "\"gracePeriodSeconds\":0",
    "gracePeriodSeconds=0",
    "NewDeleteOptions(0)",
];

const EXEMPT_CRATES: &[&str] = &["podgc", "testkit"];

fn workspace_root() -> PathBuf {
    // controllers/podgc -> workspace root. The directory the test runs for (cargo and
    // e2e/run-tests.py set it) rather than the one it was built in: a target directory shared
    // by two checkouts of one commit keeps the binary built in the other.
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(line number, line)` of every force-delete spelling in `source`, ignoring comment lines
/// and the body line of a simulator mutant (`if ... mutants::on("...") {` on the line before:
/// a deliberate bug only a simulator build can switch on, `rkcm_runtime::mutants`).
fn force_deletes(source: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = source.lines().collect();
    let mutant_body = |i: usize| {
        i > 0 && lines[i - 1].contains("mutants::on(\"") && lines[i - 1].trim_end().ends_with('{')
    };
    lines
        .iter()
        .enumerate()
        .filter(|(i, line)| {
            let trimmed = line.trim_start();
            !(trimmed.starts_with("//")
                || trimmed.starts_with("/*")
                || trimmed.starts_with('*')
                || mutant_body(*i))
        })
        .filter(|(_, line)| {
            let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
            FORCE_DELETE_PATTERNS.iter().any(|p| compact.contains(p))
        })
        .map(|(i, line)| (i + 1, line.trim().to_owned()))
        .collect()
}

/// The source directories of the binary and of every controller crate, with their crate dir
/// name (`None` for the binary's `src/`).
fn source_dirs(root: &Path) -> Vec<(Option<String>, PathBuf)> {
    let mut dirs = vec![(None, root.join("src"))];
    if let Ok(entries) = std::fs::read_dir(root.join("controllers")) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            dirs.push((Some(name), entry.path().join("src")));
        }
    }
    dirs
}

#[test]
fn scanner_recognises_force_delete_spellings() {
    let hits = force_deletes(
        "let a = DeleteParams { grace_period_seconds : Some( 0 ), ..Default::default() };\n\
         let b = DeleteParams::default().grace_period(0);\n\
         let c = json!({\"gracePeriodSeconds\": 0});\n\
         // a comment about .grace_period(0) is fine\n\
         let d = DeleteParams::default().grace_period(30);\n\
         let e = DeleteParams { grace_period_seconds: Some(0) };\n\
         if cut_off && rkcm_runtime::mutants::on(\"x\") {\n\
             params.grace_period_seconds = Some(0);\n\
         }\n\
         if cfg!(feature = \"other\") {\n\
             params.grace_period_seconds = Some(0);\n\
         }",
    );
    assert_eq!(
        hits.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        [1, 2, 3, 6, 11],
        "a simulator mutant's body is no force delete of the binary; any other is"
    );
}

#[test]
fn only_podgc_force_deletes() {
    let root = workspace_root();
    assert!(
        root.join("Cargo.toml").is_file(),
        "workspace root not found at {}",
        root.display()
    );

    let mut offenders = Vec::new();
    let mut podgc_hits = 0;
    for (krate, dir) in source_dirs(&root) {
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        for file in files {
            let Ok(source) = std::fs::read_to_string(&file) else {
                continue;
            };
            let hits = force_deletes(&source);
            match krate.as_deref() {
                // This file spells the patterns itself; it must not count as PodGC's delete.
                Some("podgc") if !file.ends_with("force_delete_scan.rs") => {
                    podgc_hits += hits.len()
                }
                Some("podgc") => {}
                Some(k) if EXEMPT_CRATES.contains(&k) => {}
                _ => offenders.extend(
                    hits.into_iter()
                        .map(|(n, l)| format!("{}:{n}: {l}", file.display())),
                ),
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "force deletes (grace period 0) outside PodGC:\n{}",
        offenders.join("\n")
    );
    // Guard against a vacuous pass: the scan must see PodGC's own force delete.
    assert!(
        podgc_hits > 0,
        "the scan did not find PodGC's own force delete; patterns out of date?"
    );
}
