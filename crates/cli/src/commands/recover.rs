//! `jetproof recover`. Not built yet: it reports so and exits 3.

use crate::common::{CliError, JobArgs, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub job: JobArgs,
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    let _job = args.job.load()?;
    Err(CliError::runtime(anyhow::anyhow!(
        "`jetproof recover` is not built yet"
    )))
}
