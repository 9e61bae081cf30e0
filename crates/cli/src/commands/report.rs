//! `jetproof report DIR... [--out DIR]`: (re)builds `report.html` from existing results
//! directories, a host's or `jetproof aggregate`'s (`docs/report.md`).
//!
//! Exit codes: 0 every report was written; 2 a DIR holds no readable `result.json` (checked for
//! every DIR before anything is written) or `--out` is not a directory; 3 a report cannot be
//! written.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::common::{CliError, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Results directories, each holding a result.json (and, for workload tests, samples.csv).
    #[arg(value_name = "DIR", required = true, num_args = 1..)]
    pub dirs: Vec<PathBuf>,
    /// Where report.html goes (default: beside each result.json). With several DIRs, each
    /// report goes to OUT/NAME/report.html, NAME being the name of its DIR.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Every input read and rendered first, so a bad one stops the command before any write.
fn render(dir: &Path) -> Result<String, CliError> {
    let json_path = dir.join("result.json");
    let json = jetproof_results::read_result_json(&json_path).map_err(|e| {
        CliError::bad_input(anyhow::anyhow!(
            "{}: not a results directory (result.json {e}); give a directory jetproof wrote \
             its results into",
            dir.display()
        ))
    })?;
    let samples_path = dir.join("samples.csv");
    let samples = crate::common::read_samples(&samples_path)?;
    jetproof_results::html::report_from_json(&json, samples.as_deref()).map_err(|e| {
        CliError::bad_input(anyhow::anyhow!(
            "{}: not a jetproof result: {e}",
            json_path.display()
        ))
    })
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    let mut pages = Vec::new();
    for dir in &args.dirs {
        pages.push((dir, render(dir)?));
    }
    let several = args.dirs.len() > 1;
    // Where each page goes, checked before any is written: into a results directory itself
    // (never through a link at report.html), or under --out by the rule of every results
    // directory (new, or holding jetproof's results alone).
    let mut targets = Vec::new();
    for (dir, page) in pages {
        let target_dir = match &args.out {
            None => {
                let path = dir.join("report.html");
                if path
                    .symlink_metadata()
                    .is_ok_and(|m| m.file_type().is_symlink())
                {
                    return Err(CliError::bad_input(anyhow::anyhow!(
                        "{}: a symbolic link, which jetproof never writes through; remove it or \
                         give --out",
                        path.display()
                    )));
                }
                dir.clone()
            }
            Some(out) => {
                let target = if several {
                    let name = dir
                        .canonicalize()
                        .ok()
                        .and_then(|d| d.file_name().map(|n| n.to_owned()))
                        .unwrap_or_else(|| "result".into());
                    out.join(name)
                } else {
                    out.clone()
                };
                // The test kind only names a default directory; --out is given.
                jetproof_results::OutDir::prepare(
                    Some(&target),
                    jetproof_results::TestKind::Performance,
                )
                .map_err(CliError::bad_input)?
                .path()
                .to_path_buf()
            }
        };
        targets.push((target_dir, page));
    }
    for (target_dir, page) in targets {
        let path = target_dir.join("report.html");
        std::fs::write(&path, page)
            .with_context(|| format!("write {}", path.display()))
            .map_err(CliError::runtime)?;
        outln!("Report: {}", path.display());
    }
    Ok(Outcome::Pass)
}
