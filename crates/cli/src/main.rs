//! The `jetproof` command: a thin layer that parses flags, loads the job, calls a procedure and
//! maps its outcome to an exit code. No test logic lives here.
//!
//! Exit codes (SPEC §8): 0 pass, 1 the verdict is fail, 2 bad input (nothing was done),
//! 3 a runtime error such as an I/O error, with the reason on stderr.

mod commands;
mod common;
mod progress;

use clap::{Parser, Subcommand};

use common::{CliError, Outcome};

#[derive(Parser, Debug)]
#[command(
    name = "jetproof",
    version,
    about = "Prove that storage can carry a transactional mail-database workload (a Jetstress for Linux)",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Sizing: turn a mailbox profile into IOPS, sizes and disks, and write a job file.
    Plan(commands::plan::Args),
    /// Create the databases of the job and fill them to size.
    Init(commands::init::Args),
    /// Run a test: performance, stress, backup or soft-recovery.
    Run(commands::run::Args),
    /// Verify every page of every database and log file. Never writes to them.
    Checksum(commands::checksum::Args),
    /// Replay the logs after an unclean stop (what `eseutil /r` does).
    Recover(commands::recover::Args),
    /// Raw random or sequential I/O through jetproof's I/O layer, to know the device.
    Probe(commands::probe::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan(args) => commands::plan::run(args),
        Command::Init(args) => commands::init::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::Checksum(args) => commands::checksum::run(args),
        Command::Recover(args) => commands::recover::run(args),
        Command::Probe(args) => commands::probe::run(args),
    };
    let code = match result {
        Ok(Outcome::Pass) => 0,
        Ok(Outcome::Fail) => 1,
        Err(CliError::BadInput(error)) => {
            eprintln!("jetproof: {error:#}");
            2
        }
        Err(CliError::Runtime(error)) => {
            eprintln!("jetproof: {error:#}");
            3
        }
    };
    std::process::exit(code);
}
