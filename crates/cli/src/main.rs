//! The `jetproof` command: a thin layer that parses flags, loads the job, calls a procedure and
//! maps its outcome to an exit code. No test logic lives here.
//!
//! Exit codes (SPEC §8): 0 pass, 1 the verdict is fail, 2 bad input (nothing was done),
//! 3 a runtime error such as an I/O error, with the reason on stderr.

mod commands;
mod common;
mod progress;
mod signals;

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
    /// One solution's results from many hosts: per-server and across-server tables, exactly
    /// merged histograms.
    Aggregate(commands::aggregate::Args),
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
        Command::Aggregate(args) => commands::aggregate::run(args),
    };
    let code = match result {
        Ok(Outcome::Pass) => 0,
        Ok(Outcome::Fail) => 1,
        Err(CliError::BadInput(error)) => {
            eprintln!("jetproof: {}", message(&error));
            2
        }
        Err(CliError::Runtime(error)) => {
            eprintln!("jetproof: {}", message(&error));
            3
        }
    };
    std::process::exit(code);
}

/// The error and its causes in one line, each said once: many errors already carry their cause's
/// text in their own (`open PATH: Read-only file system`), and printing the chain as it is
/// would repeat it.
fn message(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if part.is_empty() || text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::message;

    #[derive(Debug, thiserror::Error)]
    #[error("create directory /x: {0}")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn a_cause_already_in_the_message_is_said_once() {
        let io = std::io::Error::from_raw_os_error(30);
        let error = anyhow::Error::new(Outer(io))
            .context("create directory /x: Read-only file system (os error 30)");
        let text = message(&error);
        assert_eq!(text.matches("Read-only file system").count(), 1, "{text}");
        // A cause not yet said is kept.
        let error = anyhow::anyhow!("disk full").context("write the result");
        assert_eq!(message(&error), "write the result: disk full");
    }
}
