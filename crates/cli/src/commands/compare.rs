//! `jetproof compare BASE NEW [--out DIR]`: two results of the same test side by side
//! (`jetproof_results::compare`, `docs/report.md`).
//!
//! Exit codes: 0 written; 2 a DIR holds no readable result, the results are of different tests,
//! or `--out` is not a usable directory (nothing written); 3 the comparison cannot be written.

use std::path::{Path, PathBuf};

use anyhow::Context;
use jetproof_results::TestResult;

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

fn load(dir: &Path) -> Result<(TestResult, Option<String>), CliError> {
    let path = dir.join("result.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        CliError::bad_input(anyhow::anyhow!(
            "{}: not a results directory ({e})",
            dir.display()
        ))
    })?;
    let result: TestResult = serde_json::from_str(&text).map_err(|e| {
        CliError::bad_input(anyhow::anyhow!(
            "{}: not a test result (an aggregate cannot be compared yet): {e}",
            path.display()
        ))
    })?;
    Ok((
        result,
        std::fs::read_to_string(dir.join("samples.csv")).ok(),
    ))
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    // Two sweeps' folders: their curves overlaid (`jetproof sweep --compare`, docs/sweep.md).
    if args.base.join("sweep.json").is_file() && args.new.join("sweep.json").is_file() {
        return crate::commands::sweep::compare(&[args.base, args.new], args.out.as_deref());
    }
    let (base, base_samples) = load(&args.base)?;
    let (new, new_samples) = load(&args.new)?;
    let names = (
        args.base.display().to_string(),
        args.new.display().to_string(),
    );
    let markdown = jetproof_results::compare::markdown(
        &base,
        &new,
        base_samples.as_deref(),
        (&names.0, &names.1),
    )
    .map_err(CliError::bad_input)?;
    let out = args.out.unwrap_or_else(|| {
        let default = jetproof_results::OutDir::default_path(base.test);
        let name = default
            .file_name()
            .map(|n| format!("compare-{}", n.to_string_lossy()))
            .unwrap_or_else(|| "compare".into());
        default.with_file_name(name)
    });
    // Only into a new directory, or one holding jetproof's results alone (never through a
    // link): the same rule as every results directory.
    let out = jetproof_results::OutDir::prepare(Some(&out), base.test)
        .map_err(CliError::bad_input)?
        .path()
        .to_path_buf();
    let md = out.join("compare.md");
    std::fs::write(&md, &markdown)
        .with_context(|| format!("write {}", md.display()))
        .map_err(CliError::runtime)?;
    let html = out.join("compare.html");
    // The tables, then BASE and NEW overlaid in one chart each (docs/report.md, "compare").
    let page = jetproof_results::compare_html::page_html(
        &base,
        &new,
        base_samples.as_deref(),
        new_samples.as_deref(),
        &markdown,
    );
    std::fs::write(&html, page)
        .with_context(|| format!("write {}", html.display()))
        .map_err(CliError::runtime)?;
    out!("{markdown}");
    outln!("Comparison: {}", md.display());
    Ok(Outcome::Pass)
}
