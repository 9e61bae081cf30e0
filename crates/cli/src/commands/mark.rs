//! `jetproof mark RESULTS_DIR LABEL`: records an event ("controller A pulled") with its
//! wall-clock time in a running performance or stress test, by appending one line to the
//! `marks.jsonl` control file the test created in its results directory and reads at every
//! sample interval (`docs/report.md`, "Marks and excursions").
//!
//! Exit codes: 0 recorded; 2 no test is measuring in RESULTS_DIR (no `marks.jsonl`, or its
//! `result.json` is already written) or the label is empty or not one line; 3 the append failed.

use std::path::PathBuf;

use jetproof_results::excursion::{MarkError, append_mark};

use crate::common::{CliError, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The --out directory of the running test.
    #[arg(value_name = "RESULTS_DIR")]
    pub dir: PathBuf,
    /// What happened, one line ("controller A pulled").
    #[arg(value_name = "LABEL")]
    pub label: String,
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    match append_mark(&args.dir, &args.label) {
        Ok(line) => {
            outln!(
                "Marked {} at {}: {}",
                args.dir.display(),
                line.at,
                line.label
            );
            Ok(Outcome::Pass)
        }
        Err(error @ MarkError::Io { .. }) => Err(CliError::runtime(error)),
        Err(error) => Err(CliError::bad_input(error)),
    }
}
