//! `jetproof aggregate DIR... [--out DIR]`: one solution's results from many hosts
//! (`jetproof_results::aggregate`, `docs/many-servers.md`).
//!
//! Exit codes: 0 every host passes; 1 some host fails (named); 2 the results cannot be combined
//! (different tests, schema versions or histogram layouts, a host given twice, windows that do
//! not overlap: the message names the file) or a bad `--out`; 3 the aggregate cannot be written.

use std::path::{Path, PathBuf};

use anyhow::Context;
use jetproof_results::aggregate::{self, AggregateResult};
use jetproof_results::outdir::write_atomically;
use jetproof_results::{OutDir, Verdict};

use crate::common::{CliError, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Each host's results directory (holding its result.json), or a directory whose
    /// subdirectories are, or one laid out RESULTS/HOST/TEST/ (each test aggregated apart).
    #[arg(value_name = "DIR", required = true, num_args = 1..)]
    pub dirs: Vec<PathBuf>,
    /// Where the aggregate's result.json and report.md go (default
    /// ./jetproof-results/aggregate-TEST-TIME/); results of several tests: DIR/TEST/ each.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    let files = aggregate::find_results(&args.dirs).map_err(CliError::bad_input)?;
    // RESULTS/HOST/TEST/ holds every test of the set: each is aggregated apart. Hosts'
    // directories given one by one must hold one test (else the refusal names the files).
    let groups = if args.dirs.iter().all(|d| aggregate::two_levels_down(d)) {
        aggregate::group_by_test(&files)
            .map_err(CliError::bad_input)?
            .into_iter()
            .map(|(_, paths)| paths)
            .collect()
    } else {
        vec![files.clone()]
    };
    // Every test is combined and every place checked before anything is written.
    let several = groups.len() > 1;
    let mut planned = Vec::with_capacity(groups.len());
    for paths in &groups {
        let result = aggregate::aggregate_files(paths).map_err(CliError::bad_input)?;
        let out_path = match (&args.out, several) {
            (Some(out), false) => out.clone(),
            (Some(out), true) => out.join(result.test.name()),
            (None, _) => {
                let default = OutDir::default_path(result.test);
                let name = default
                    .file_name()
                    .map(|n| format!("aggregate-{}", n.to_string_lossy()))
                    .unwrap_or_else(|| "aggregate".into());
                default.with_file_name(name)
            }
        };
        refuse_input_as_out(&out_path, &files)?;
        planned.push((out_path, result));
    }
    let mut outcome = Outcome::Pass;
    for (out_path, result) in &planned {
        let out = OutDir::prepare(Some(out_path), result.test).map_err(CliError::bad_input)?;
        let written = write(&out, result).map_err(CliError::runtime)?;
        print_summary(result);
        outln!("Result: {}", written.display());
        if result.verdict == Verdict::Fail {
            outcome = Outcome::Fail;
        }
    }
    Ok(outcome)
}

/// `--out` naming a host's own results directory would overwrite its result.json.
fn refuse_input_as_out(out: &Path, files: &[PathBuf]) -> Result<(), CliError> {
    let Ok(out) = out.canonicalize() else {
        return Ok(());
    };
    for file in files {
        if file
            .parent()
            .and_then(|p| p.canonicalize().ok())
            .is_some_and(|dir| dir == out)
        {
            return Err(CliError::bad_input(anyhow::anyhow!(
                "--out {}: holds {}, a host's result being aggregated; choose a new directory",
                out.display(),
                file.display()
            )));
        }
    }
    Ok(())
}

/// result.json (atomically: a temporary file renamed into place), report.md and report.html.
fn write(out: &OutDir, result: &AggregateResult) -> anyhow::Result<PathBuf> {
    let path = out.file("result.json");
    let text = serde_json::to_string_pretty(result).context("serialise the aggregate")?;
    write_atomically(&path, (text + "\n").as_bytes())
        .with_context(|| format!("write {}", path.display()))?;
    let report = out.file("report.md");
    std::fs::write(&report, aggregate::markdown(result))
        .with_context(|| format!("write {}", report.display()))?;
    let html = out.file("report.html");
    std::fs::write(&html, jetproof_results::html::aggregate_report(result))
        .with_context(|| format!("write {}", html.display()))?;
    Ok(path)
}

fn print_summary(a: &AggregateResult) {
    outln!(
        "Aggregate {} test: {} servers, shared window {} to {} ({:.1} s)",
        a.test.name(),
        a.hosts.len(),
        a.window.start,
        a.window.end,
        a.window.seconds
    );
    if let Some(achieved) = a.achieved_iops {
        outln!(
            "Achieved Transactional I/O per Second: {achieved:.1}{}",
            a.target_iops
                .map(|t| format!(" (target {t:.1})"))
                .unwrap_or_default()
        );
    }
    for (key, c) in &a.totals {
        outln!(
            "  {key:<16} {:>12} I/Os {:>10.1}/s  avg {:.3} ms  p99 {:.3} ms  max {:.3} ms",
            c.count,
            c.ops_per_sec,
            c.avg_latency_ms,
            c.p99_ms,
            c.max_ms
        );
    }
    for reason in &a.reasons {
        outln!("  FAIL: {reason}");
    }
    for flag in &a.below_median {
        outln!("  BELOW THE OTHERS: {flag}");
    }
    outln!(
        "Overall Test Result: {}",
        match a.verdict {
            Verdict::Pass => "Pass",
            Verdict::Fail => "Fail",
        }
    );
}
