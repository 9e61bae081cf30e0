//! The `jetproof` command: a thin layer that parses flags, loads the job, calls a procedure and
//! maps its outcome to an exit code. No test logic lives here.
//!
//! Exit codes (`README.md`): 0 pass, 1 the verdict is fail, 2 bad input (nothing was done),
//! 3 a runtime error such as an I/O error, with the reason on stderr, 4 a panic (a bug) stopped
//! every thread (`panics`).

/// `println!` that never panics: a standard output that cannot be written (a closed pipe, a
/// terminal gone after SIGHUP, a full disk) is said once on stderr ([`common::write_out`]).
macro_rules! outln {
    () => {
        $crate::common::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::common::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that never panics ([`common::write_out`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::common::write_out(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics: a standard error that cannot be written is ignored.
macro_rules! errln {
    () => {
        $crate::common::write_err(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::common::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod commands;
mod common;
mod front;
mod live;
mod metrics;
mod panics;
mod progress;
mod signals;

use clap::{CommandFactory, Parser, Subcommand};

use common::{CliError, Outcome};

/// `jetproof --version`: the crate's version and the commit it was built from (`build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("JETPROOF_COMMIT"),
    ")"
);

#[derive(Parser, Debug)]
#[command(
    name = "jetproof",
    version = VERSION,
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
    /// Print the built-in job (--default) or a job file with its defaults filled in, as TOML.
    Job(commands::job::Args),
    /// Create the databases of the job and fill them to size.
    // The job overrides init does not use are hidden from its help (issue 32, item 12), and
    // still refused by name when given (`JobArgs::refuse_unused`).
    #[command(
        mut_arg("threads", |a| a.hide(true)),
        mut_arg("duration", |a| a.hide(true))
    )]
    Init(commands::init::Args),
    /// Run a test: performance, stress, backup or soft-recovery.
    Run(commands::run::Args),
    /// Verify every page of every database and log file. Never writes to them.
    #[command(
        mut_arg("threads", |a| a.hide(true)),
        mut_arg("duration", |a| a.hide(true)),
        mut_arg("db_size", |a| a.hide(true))
    )]
    Checksum(commands::checksum::Args),
    /// Replay the logs after an unclean stop (what `eseutil /r` does).
    #[command(
        mut_arg("threads", |a| a.hide(true)),
        mut_arg("duration", |a| a.hide(true)),
        mut_arg("db_size", |a| a.hide(true))
    )]
    Recover(commands::recover::Args),
    /// Raw random or sequential I/O through jetproof's I/O layer, to know the device.
    Probe(commands::probe::Args),
    /// Print a shell completion script to standard output (e.g. `jetproof completions bash >
    /// /etc/bash_completion.d/jetproof`).
    Completions {
        /// The shell: bash, elvish, fish, powershell or zsh.
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) to standard output: `jetproof man | man -l -`, or of one
    /// command: `jetproof man run`.
    Man {
        /// The command whose page to print (none: jetproof's own page).
        #[arg(value_name = "COMMAND")]
        command: Option<String>,
    },
    /// One solution's results from many hosts: per-server and across-server tables, exactly
    /// merged histograms.
    Aggregate(commands::aggregate::Args),
    /// The solution document: an ESRP-Storage style report (esrp.md, esrp.html) from a
    /// solution file and every host's results, marked when the runs are not a complete ESRP set.
    Esrp(commands::esrp::Args),
    /// (Re)build report.html from existing results directories (a host's or an aggregate's).
    Report(commands::report::Args),
    /// Two results of the same test side by side: each figure, the change in percent, and
    /// whether it is inside the base run's own noise.
    Compare(commands::compare::Args),
    /// The same databases tested at thread count after thread count (and other settings):
    /// IOPS and latency curves, the largest passing count (--find-max), comparisons of sweeps.
    Sweep(commands::sweep::Args),
    /// Record an event ("controller A pulled") with its time in a running performance or
    /// stress test: it goes into samples.csv, the test log, result.json and report.html, and
    /// excursions name the mark that preceded them.
    Mark(commands::mark::Args),
}

fn main() {
    // The moment the preparation of a run is counted from: the lead `--start-at` needs.
    jetproof_procedures::start::launched();
    panics::install();
    let cli = Cli::parse();
    // Hundreds of sessions need more descriptors than the usual soft limit of 1024 (an io_uring
    // per session reading at once, per file): take what the hard limit allows, as fio does.
    // A refusal leaves the limit as it was; running out later is reported with the limit and
    // the fix (`jetproof_io::limits`).
    let _ = jetproof_io::limits::raise_open_file_limit();
    // Commands whose product is what they print: if it could not be printed, they failed.
    let prints_its_product = matches!(
        cli.command,
        Command::Plan(_) | Command::Job(_) | Command::Completions { .. } | Command::Man { .. }
    );
    let result = match cli.command {
        Command::Plan(args) => commands::plan::run(args),
        Command::Job(args) => commands::job::run(args),
        Command::Init(args) => commands::init::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::Checksum(args) => commands::checksum::run(args),
        Command::Recover(args) => commands::recover::run(args),
        Command::Probe(args) => commands::probe::run(args),
        Command::Completions { shell } => completions(shell),
        Command::Man { command } => man(command.as_deref()),
        Command::Aggregate(args) => commands::aggregate::run(args),
        Command::Esrp(args) => commands::esrp::run(args),
        Command::Report(args) => commands::report::run(args),
        Command::Compare(args) => commands::compare::run(args),
        Command::Sweep(args) => commands::sweep::run(args),
        Command::Mark(args) => commands::mark::run(args),
    };
    let code = match result {
        Ok(Outcome::Pass) => 0,
        Ok(Outcome::Fail) => 1,
        Err(CliError::BadInput(error)) => {
            errln!("jetproof: {}", message(&error));
            2
        }
        Err(CliError::Runtime(error)) => {
            errln!("jetproof: {}", message(&error));
            3
        }
    };
    let code = if code == 0 && prints_its_product && common::stdout_failed() {
        3
    } else {
        code
    };
    std::process::exit(code);
}

/// Writes the completion script of `shell` for every command and flag to standard output.
fn completions(shell: clap_complete::Shell) -> Result<Outcome, CliError> {
    // Into memory first: clap_complete panics when its writer fails.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "jetproof", &mut script);
    common::write_out_bytes(&script);
    Ok(Outcome::Pass)
}

/// Writes the manual page of jetproof, or of one of its commands, to standard output, made by
/// clap_mangen from the same definitions the parser uses (so it cannot drift from the flags).
fn man(command: Option<&str>) -> Result<Outcome, CliError> {
    let root = Cli::command();
    let man = match command {
        None => clap_mangen::Man::new(root),
        Some(name) => {
            let Some(sub) = root.find_subcommand(name) else {
                let names: Vec<&str> = root.get_subcommands().map(|c| c.get_name()).collect();
                return Err(CliError::BadInput(anyhow::anyhow!(
                    "man: no command `{name}`; give one of {}",
                    names.join(", ")
                )));
            };
            // The page is titled as `man` looks it up: jetproof-run(1).
            let title = format!("jetproof-{}", sub.get_name());
            clap_mangen::Man::new(sub.clone()).title(title)
        }
    };
    let mut page = Vec::new();
    man.render(&mut page)
        .map_err(|e| CliError::Runtime(anyhow::anyhow!("write the manual page: {e}")))?;
    common::write_out_bytes(&page);
    Ok(Outcome::Pass)
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
