//! `jetproof esrp SOLUTION RESULTS_DIR [--out DIR]`: the solution document (`docs/esrp.md`).
//! SOLUTION is a TOML file describing the solution and its plan; RESULTS_DIR holds one folder
//! per host, each with its tests' results directories. Writes `esrp.md` and `esrp.html`.
//!
//! Everything is read and checked before anything is written: a bad solution file, a plan the
//! flags cannot make, results that cannot be read, an output directory that holds files
//! jetproof did not write: exit 2. The document written: exit 0 when the runs are a complete
//! ESRP test set, 1 when they are not (the document then says so on its first line).

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::Parser;
use jetproof_results::esrp::{self, Solution};

use crate::common::{CliError, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The solution file (TOML): vendor, product, hardware, software, disks, LUN layout,
    /// servers, replication, best practices, and the plan (`plan = [flags]` or `plan_json`).
    #[arg(value_name = "SOLUTION")]
    pub solution: PathBuf,
    /// One folder per host, each holding that host's results directories (performance, stress,
    /// backup, soft recovery), as the many-servers playbook fetches them.
    #[arg(value_name = "RESULTS_DIR")]
    pub results_dir: PathBuf,
    /// Where esrp.md and esrp.html go [default: ./esrp].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Writes nothing: re-derives every figure of ESRP_MD (an esrp.md) from RESULTS_DIR's
    /// result.json files and the plan, and names each disagreement (exit 1). For tests.
    #[arg(long, value_name = "ESRP_MD", hide = true)]
    pub verify: Option<PathBuf>,
}

/// The flags of `jetproof plan`, as the solution file lists them.
#[derive(Parser, Debug)]
#[command(name = "plan")]
struct PlanFlags {
    #[command(flatten)]
    args: crate::commands::plan::Args,
}

/// The names jetproof writes into the output directory; nothing else may be there.
const OUTPUTS: [&str; 2] = ["esrp.md", "esrp.html"];

/// The most bytes of a solution file, a `plan_json` or an earlier `esrp.md`/`esrp.html` that
/// `jetproof esrp` reads (each is a few KB; read through [`jetproof_io::input`]).
const MAX_SOLUTION_BYTES: u64 = 64 << 20;

fn bad(message: String) -> CliError {
    CliError::bad_input(anyhow!(message))
}

fn read_solution(path: &Path) -> Result<Solution, CliError> {
    let text = jetproof_io::input::read_text(path, MAX_SOLUTION_BYTES)
        .map_err(|e| bad(format!("{}: the solution file {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| {
        bad(format!(
            "{}: {}; the keys are listed in docs/esrp.md",
            path.display(),
            e.to_string().trim_end()
        ))
    })
}

/// The plan as `jetproof plan --json` prints it: from `plan_json`, or made from `plan`'s flags.
fn plan_value(solution: &Solution, base: &Path) -> Result<Option<serde_json::Value>, CliError> {
    match (&solution.plan_json, solution.plan.is_empty()) {
        (Some(_), false) => Err(bad(
            "the solution file gives both `plan` and `plan_json`; give one of them".into(),
        )),
        (Some(file), true) => {
            let path = base.join(file);
            let text = jetproof_io::input::read_text(&path, MAX_SOLUTION_BYTES)
                .map_err(|e| bad(format!("`plan_json` {}: {e}", path.display())))?;
            let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                bad(format!(
                    "`plan_json` {}: not `jetproof plan --json` output: {e}",
                    path.display()
                ))
            })?;
            if value.get("inputs").is_none() || value.get("mailboxes_per_server").is_none() {
                return Err(bad(format!(
                    "`plan_json` {}: not `jetproof plan --json` output (no `inputs`)",
                    path.display()
                )));
            }
            Ok(Some(value))
        }
        (None, false) => {
            let flags = PlanFlags::try_parse_from(
                std::iter::once("plan".to_string()).chain(solution.plan.iter().cloned()),
            )
            .map_err(|e| {
                bad(format!(
                    "`plan` in the solution file: {}",
                    e.to_string().trim()
                ))
            })?;
            if flags.args.write_job.is_some() || flags.args.json {
                return Err(bad(
                    "`plan` in the solution file: give the sizing flags only, not --write-job or --json".into(),
                ));
            }
            let inputs = flags.args.inputs()?;
            let plan = jetproof_plan::plan(&inputs)
                .map_err(|e| bad(format!("`plan` in the solution file: {e}")))?;
            serde_json::to_value(&plan)
                .map(Some)
                .map_err(|e| CliError::runtime(anyhow!("serialise the plan: {e}")))
        }
        (None, true) => Ok(None),
    }
}

/// The output directory may hold only what this command wrote before; it may not lie inside
/// RESULTS_DIR (it would be read as a host next time).
fn check_out(out: &Path, results: &Path) -> Result<(), CliError> {
    let resolved_out = jetproof_job::resolve_existing(out);
    let resolved_results = jetproof_job::resolve_existing(results);
    if resolved_out.starts_with(&resolved_results) {
        return Err(bad(format!(
            "`--out` {} is inside RESULTS_DIR {}: it would be read as a host's results; give a directory outside it",
            out.display(),
            results.display()
        )));
    }
    if out.symlink_metadata().is_err() {
        return Ok(());
    }
    if !out.is_dir() {
        return Err(bad(format!(
            "`--out` {} is not a directory; give a directory (it is created if missing)",
            out.display()
        )));
    }
    let entries = std::fs::read_dir(out)
        .map_err(|e| bad(format!("`--out` {}: cannot read it: {e}", out.display())))?;
    for entry in entries.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let ours = OUTPUTS.contains(&name.as_str())
            && path
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_file())
            && jetproof_io::input::read_text(&path, MAX_SOLUTION_BYTES).is_ok_and(|text| {
                text.contains("Made by jetproof") || text.contains("id=\"esrp-mark\"")
            });
        if !ours {
            return Err(bad(format!(
                "`--out` {} holds {name}, which `jetproof esrp` did not write; give an empty or new directory",
                out.display()
            )));
        }
    }
    Ok(())
}

/// `--verify ESRP_MD`: the document against the results (`jetproof_results::esrp_check`).
fn verify(
    md: &Path,
    results_dir: &Path,
    plan: Option<&serde_json::Value>,
) -> Result<Outcome, CliError> {
    let text = jetproof_io::input::read_text(md, MAX_SOLUTION_BYTES)
        .map_err(|e| bad(format!("--verify {}: {e}", md.display())))?;
    let results = jetproof_results::esrp_check::read_results(results_dir).map_err(bad)?;
    let checked = jetproof_results::esrp_check::check(&text, &results, plan);
    for problem in &checked.problems {
        outln!("  DISAGREES: {problem}");
    }
    outln!(
        "{}: {} figures checked against {} result.json files, {} disagree",
        md.display(),
        checked.figures,
        results.len(),
        checked.problems.len()
    );
    Ok(if checked.problems.is_empty() {
        Outcome::Pass
    } else {
        Outcome::Fail
    })
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    let solution = read_solution(&args.solution)?;
    let base = args
        .solution
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let plan = plan_value(&solution, &base)?;
    if let Some(md) = &args.verify {
        return verify(md, &args.results_dir, plan.as_ref());
    }
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from("esrp"));
    check_out(&out, &args.results_dir)?;
    let paths = esrp::find(&args.results_dir).map_err(CliError::bad_input)?;
    let esrp::Collected {
        sets,
        reductions,
        shapes,
        notes,
        hosts,
    } = esrp::collect(&paths).map_err(CliError::bad_input)?;

    let document = esrp::document(&esrp::Inputs {
        solution: &solution,
        plan: plan.as_ref(),
        hosts: &hosts,
        sets: &sets,
        notes: &notes,
        shapes: &shapes,
        reductions: &reductions,
    });
    let title = format!(
        "{} {}: ESRP solution document",
        solution.vendor, solution.product
    );
    let html = esrp::html(&document, &title);
    std::fs::create_dir_all(&out)
        .map_err(|e| CliError::runtime(anyhow!("create {}: {e}", out.display())))?;
    for (name, text) in [("esrp.md", &document.markdown), ("esrp.html", &html)] {
        let path = out.join(name);
        std::fs::write(&path, text)
            .map_err(|e| CliError::runtime(anyhow!("write {}: {e}", path.display())))?;
    }
    outln!(
        "{} and {}",
        out.join("esrp.md").display(),
        out.join("esrp.html").display()
    );
    for r in &document.requirements {
        outln!(
            "  {} {}: {}",
            if r.met { "met    " } else { "NOT MET" },
            r.name,
            r.found
        );
    }
    if document.complete {
        outln!("A complete ESRP test set.");
        Ok(Outcome::Pass)
    } else {
        outln!("Not a complete ESRP test set: the document says so on its first page.");
        Ok(Outcome::Fail)
    }
}
