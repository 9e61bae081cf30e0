//! `jetproof job`: the job file as jetproof reads it. `--default` prints the built-in job (what
//! runs without a job file) as TOML; `jetproof job FILE` checks FILE and prints it with every
//! default filled in, so what a run will use is visible before it runs. Every key, its type,
//! default and range: `docs/job.md`.

use std::path::PathBuf;

use anyhow::anyhow;
use jetproof_job::Job;

use crate::common::{CliError, Outcome};

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["default", "file"])))]
pub struct Args {
    /// Print the built-in job (used when a command is given no job file) as TOML.
    #[arg(long)]
    pub default: bool,
    /// A job file to check and print with every default filled in (exit 2 when invalid).
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    let (job, origin) = match &args.file {
        Some(path) => (
            Job::load(path).map_err(CliError::bad_input)?,
            format!("{}, with every default filled in", path.display()),
        ),
        None => (Job::default(), "the built-in job".to_string()),
    };
    let text = job.to_toml();
    // What is printed must read back as the same job; anything else is a bug, not bad input.
    let back = Job::parse(&text, "the printed job")
        .map_err(|e| CliError::runtime(anyhow!("the printed job does not read back: {e}")))?;
    if back != job {
        return Err(CliError::runtime(anyhow!(
            "the printed job reads back as another job"
        )));
    }
    outln!("# {origin} (keys: docs/job.md)");
    out!("{text}");
    Ok(Outcome::Pass)
}
