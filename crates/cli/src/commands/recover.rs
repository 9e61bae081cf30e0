//! `jetproof recover [JOB]`: soft recovery. Every instance of the job whose database was left
//! dirty by an unclean stop has its log replayed from the checkpoint (`jetproof_instance::recover`,
//! redo only; undo is not built), and is marked clean so tests can attach again. Per instance it
//! prints what Jetstress reports for soft recovery (log files replayed, seconds, seconds per log
//! file, records applied) and writes `result.json` (test "recovery") and `test.log` to `--out`.
//!
//! Exit codes: 0 every dirty database was recovered, or every database was clean (nothing to
//! do); 2 bad input (a missing database: run `jetproof init` first; a bad job field; an unusable
//! `--out`); 3 recovery failed (a damaged or missing log file, named with its offset; an I/O
//! error). A failure leaves that database dirty; the instances recovered before it stay clean.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use jetproof_engine::{DbHeader, DbState};
use jetproof_instance::{RecoveryReport, recover};
use jetproof_io::meter::InstanceStats;
use jetproof_io::std_backend::StdBackend;
use jetproof_io::{IoBackend, OpenOptions};
use jetproof_results::{InstanceResult, OutDir, TestKind, TestLog, TestResult};

use crate::common::{CliError, JobArgs, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub job: JobArgs,
    /// Results directory (default ./jetproof-results/recovery-<time>/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    let job = args.job.load()?;
    let backend = StdBackend::new();
    let instances = job.instances();
    // Which databases need recovery, before anything is written.
    let mut dirty = Vec::new();
    for instance in &instances {
        if !backend.exists(&instance.database_path) {
            return Err(CliError::bad_input(anyhow::anyhow!(
                "{}: {} does not exist; run `jetproof init` first",
                instance.name,
                instance.database_path.display()
            )));
        }
        let file = backend
            .open(
                &instance.database_path,
                &OpenOptions::read_only().buffered(),
            )
            .map_err(CliError::runtime)?;
        let header = DbHeader::read(file.as_ref()).map_err(CliError::runtime)?;
        dirty.push(header.state == DbState::Dirty);
    }
    if !dirty.iter().any(|&d| d) {
        println!(
            "Every database of the job ({}) was shut down cleanly: nothing to recover.",
            instances.len()
        );
        return Ok(Outcome::Pass);
    }

    let out =
        OutDir::prepare(args.out.as_deref(), TestKind::Recovery).map_err(CliError::bad_input)?;
    let log = TestLog::create(&out.file("test.log"), false)
        .context("create the test log")
        .map_err(CliError::runtime)?;
    log.line(format!(
        "jetproof {} recover: replaying the logs of the databases not shut down cleanly",
        jetproof_results::tool_version()
    ));
    let started_at = jetproof_results::now_rfc3339();
    let started = Instant::now();
    let mut results = Vec::new();
    let mut reports: Vec<(String, RecoveryReport)> = Vec::new();
    for (instance, &is_dirty) in instances.iter().zip(&dirty) {
        if !is_dirty {
            log.line(format!(
                "Instance {}: database {} is clean; nothing to do",
                instance.name,
                instance.database_path.display()
            ));
            continue;
        }
        log.line(format!(
            "Instance {}: recovering {} from the logs in {}",
            instance.name,
            instance.database_path.display(),
            instance.log_path.display()
        ));
        let stats = InstanceStats::new(instance.name.clone());
        let report = match recover(
            backend.clone(),
            &instance.database_path,
            &instance.log_path,
            &jetproof_procedures::options::recovery_options(&job, stats.clone()),
        ) {
            Ok(report) => report,
            Err(error) => {
                log.line(format!(
                    "Instance {}: recovery failed: {error}",
                    instance.name
                ));
                return Err(CliError::runtime(anyhow::anyhow!(
                    "{}: recovery failed: {error}",
                    instance.name
                )));
            }
        };
        let elapsed = std::time::Duration::from_secs_f64(report.seconds);
        let mut io = jetproof_results::io_results(&stats, elapsed);
        // Only the log reads are recovery's own figures (the database I/O of the final clean
        // open and close is not).
        io.retain(|class, _| class == "log_read");
        let mut extra = std::collections::BTreeMap::new();
        extra.insert("logs_replayed".into(), report.logs_replayed.into());
        extra.insert("seconds".into(), report.seconds.into());
        extra.insert("seconds_per_log".into(), report.seconds_per_log.into());
        extra.insert("records_applied".into(), report.records_applied.into());
        extra.insert("records_skipped".into(), report.records_skipped.into());
        extra.insert(
            "uncommitted_transactions".into(),
            report.uncommitted_transactions.into(),
        );
        extra.insert("torn_tail".into(), report.torn_tail.is_some().into());
        results.push(InstanceResult {
            name: instance.name.clone(),
            database_path: instance.database_path.clone(),
            log_path: instance.log_path.clone(),
            io,
            extra,
        });
        for line in report_lines(&instance.name, &report) {
            log.line(line);
        }
        reports.push((instance.name.clone(), report));
    }
    log.line("Verdict: pass (every database that needed it was recovered and marked clean)");
    let mut result = TestResult::new(
        TestKind::Recovery,
        started_at,
        started.elapsed().as_secs_f64(),
        serde_json::to_value(&job).unwrap_or(serde_json::Value::Null),
    );
    result.instances = results;
    result.log_file = Some(log.path().to_path_buf());
    result.set_reasons(Vec::new());
    let result_path = out.write_result(&result).map_err(CliError::runtime)?;

    for (name, report) in &reports {
        for line in report_lines(name, report) {
            println!("{line}");
        }
    }
    println!("Results: {}", result_path.display());
    Ok(Outcome::Pass)
}

/// The per-instance lines, in Jetstress's words.
fn report_lines(name: &str, report: &RecoveryReport) -> Vec<String> {
    let mut lines = vec![
        format!(
            "Instance {name}: Log files replayed: {}",
            report.logs_replayed
        ),
        format!(
            "Instance {name}: Recovery time: {:.3} seconds ({:.3} seconds per log file)",
            report.seconds, report.seconds_per_log
        ),
        format!(
            "Instance {name}: Records applied: {} (skipped, already on their pages: {})",
            report.records_applied, report.records_skipped
        ),
    ];
    if let Some(torn) = &report.torn_tail {
        lines.push(format!(
            "Instance {name}: torn log tail tolerated: {} bytes at offset {} of {} ({})",
            torn.bytes,
            torn.offset,
            torn.path.display(),
            torn.reason
        ));
    }
    if report.uncommitted_transactions > 0 {
        lines.push(format!(
            "Instance {name}: {} transaction(s) without a commit record keep their changes \
             (undo is not built)",
            report.uncommitted_transactions
        ));
    }
    lines
}
