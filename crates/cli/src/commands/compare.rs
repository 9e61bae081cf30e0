//! `jetproof compare BASE NEW [--out DIR]`: two results of the same test side by side, or two
//! aggregates (`jetproof_results::compare`, `docs/report.md`).
//!
//! Exit codes: 0 written; 2 a DIR holds no readable result, the results are of different tests,
//! one is an aggregate and the other not, or `--out` is not a usable directory (nothing
//! written); 3 the comparison cannot be written.

use std::path::{Path, PathBuf};

use anyhow::Context;
use jetproof_results::aggregate::AggregateResult;
use jetproof_results::{TestKind, TestResult};

use crate::common::{CliError, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The results directory to compare against.
    #[arg(value_name = "BASE")]
    pub base: PathBuf,
    /// The results directory of the new run.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    /// Where compare.md and compare.html go (default ./jetproof-results/compare-TIME/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// What a results directory holds: one host's result (with its samples, when kept) or an
/// aggregate (`jetproof aggregate`).
enum Loaded {
    Result(Box<TestResult>, Option<String>),
    Aggregate(Box<AggregateResult>),
}

fn load(dir: &Path) -> Result<Loaded, CliError> {
    let path = dir.join("result.json");
    let text = jetproof_results::read_result_json(&path).map_err(|e| {
        CliError::bad_input(anyhow::anyhow!(
            "{}: not a results directory (result.json {e}); give a directory jetproof wrote \
             its results into",
            dir.display()
        ))
    })?;
    #[derive(serde::Deserialize)]
    struct Peek {
        #[serde(default)]
        aggregate: bool,
    }
    let aggregate = serde_json::from_str::<Peek>(&text).is_ok_and(|p| p.aggregate);
    let not = |what: &str, e: serde_json::Error| {
        CliError::bad_input(anyhow::anyhow!("{}: not {what}: {e}", path.display()))
    };
    if aggregate {
        let result: AggregateResult =
            serde_json::from_str(&text).map_err(|e| not("an aggregate result", e))?;
        return Ok(Loaded::Aggregate(Box::new(result)));
    }
    let result: TestResult = serde_json::from_str(&text).map_err(|e| not("a test result", e))?;
    let samples_path = dir.join("samples.csv");
    let samples = crate::common::read_samples(&samples_path)?;
    Ok(Loaded::Result(Box::new(result), samples))
}

/// The default `--out`: `compare-<test>-<time>` beside the results' default.
fn default_out(test: TestKind) -> PathBuf {
    let default = jetproof_results::OutDir::default_path(test);
    let name = default
        .file_name()
        .map(|n| format!("compare-{}", n.to_string_lossy()))
        .unwrap_or_else(|| "compare".into());
    default.with_file_name(name)
}

/// Writes compare.md and compare.html into `out` (prepared as every results directory), prints
/// the Markdown.
fn write(
    out: Option<PathBuf>,
    test: TestKind,
    markdown: &str,
    html: &str,
) -> Result<Outcome, CliError> {
    let out = out.unwrap_or_else(|| default_out(test));
    // Only into a new directory, or one holding jetproof's results alone (never through a
    // link): the same rule as every results directory.
    let out = jetproof_results::OutDir::prepare(Some(&out), test)
        .map_err(CliError::bad_input)?
        .path()
        .to_path_buf();
    let md = out.join("compare.md");
    std::fs::write(&md, markdown)
        .with_context(|| format!("write {}", md.display()))
        .map_err(CliError::runtime)?;
    let page = out.join("compare.html");
    std::fs::write(&page, html)
        .with_context(|| format!("write {}", page.display()))
        .map_err(CliError::runtime)?;
    out!("{markdown}");
    outln!("Comparison: {}", md.display());
    Ok(Outcome::Pass)
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    // Two sweeps' folders: their curves overlaid (`jetproof sweep --compare`, docs/sweep.md).
    if args.base.join("sweep.json").is_file() && args.new.join("sweep.json").is_file() {
        return crate::commands::sweep::compare(&[args.base, args.new], args.out.as_deref());
    }
    let names = (
        args.base.display().to_string(),
        args.new.display().to_string(),
    );
    let names = (names.0.as_str(), names.1.as_str());
    match (load(&args.base)?, load(&args.new)?) {
        (Loaded::Result(base, base_samples), Loaded::Result(new, new_samples)) => {
            let markdown =
                jetproof_results::compare::markdown(&base, &new, base_samples.as_deref(), names)
                    .map_err(CliError::bad_input)?;
            // The tables, then BASE and NEW overlaid in one chart each (docs/report.md,
            // "compare").
            let page = jetproof_results::compare_html::page_html(
                &base,
                &new,
                base_samples.as_deref(),
                new_samples.as_deref(),
                &markdown,
            );
            write(args.out, base.test, &markdown, &page)
        }
        (Loaded::Aggregate(base, ..), Loaded::Aggregate(new, ..)) => {
            let markdown = jetproof_results::compare::aggregate_markdown(&base, &new, names)
                .map_err(CliError::bad_input)?;
            let page = jetproof_results::compare_html::aggregate_page_html(&base, &new, &markdown);
            write(args.out, base.test, &markdown, &page)
        }
        (base, _) => {
            let (aggregate, single) = match base {
                Loaded::Aggregate(..) => (names.0, names.1),
                Loaded::Result(..) => (names.1, names.0),
            };
            Err(CliError::bad_input(anyhow::anyhow!(
                "{aggregate} is an aggregate of many servers, {single} one server's result: compare two aggregates, or two results"
            )))
        }
    }
}
