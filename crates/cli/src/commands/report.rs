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
    let json = std::fs::read_to_string(&json_path).map_err(|e| {
        CliError::bad_input(anyhow::anyhow!(
            "{}: not a results directory (no readable result.json: {e})",
            dir.display()
        ))
    })?;
    let samples = std::fs::read_to_string(dir.join("samples.csv")).ok();
    jetproof_results::html::report_from_json(&json, samples.as_deref()).map_err(|e| {
        CliError::bad_input(anyhow::anyhow!(
            "{}: not a jetproof result: {e}",
            json_path.display()
        ))
    })
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    if let Some(out) = &args.out
        && out.exists()
        && !out.is_dir()
    {
        return Err(CliError::bad_input(anyhow::anyhow!(
            "--out {}: exists and is not a directory; choose a directory path",
            out.display()
        )));
    }
    let mut pages = Vec::new();
    for dir in &args.dirs {
        pages.push((dir, render(dir)?));
    }
    let several = args.dirs.len() > 1;
    for (dir, page) in pages {
        let target_dir = match &args.out {
            None => dir.clone(),
            Some(out) if several => {
                let name = dir
                    .canonicalize()
                    .ok()
                    .and_then(|d| d.file_name().map(|n| n.to_owned()))
                    .unwrap_or_else(|| "result".into());
                out.join(name)
            }
            Some(out) => out.clone(),
        };
        std::fs::create_dir_all(&target_dir)
            .with_context(|| format!("create {}", target_dir.display()))
            .map_err(CliError::runtime)?;
        let path = target_dir.join("report.html");
        std::fs::write(&path, page)
            .with_context(|| format!("write {}", path.display()))
            .map_err(CliError::runtime)?;
        println!("Report: {}", path.display());
    }
    Ok(Outcome::Pass)
}
