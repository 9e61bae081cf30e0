//! `jetproof job`: the job file as jetproof reads it. `--default` prints the built-in job (what
//! runs without a job file) as TOML; `jetproof job FILE` checks FILE and prints it with every
//! default filled in, so what a run will use is visible before it runs; `--from-solution
//! SOLUTION` takes the job every server of a solution runs out of the solution file (`plan
//! --write-solution`), at ESRP's scale or, with `--rehearsal`, at the solution's rehearsal scale,
//! and prints it or writes it (`--write FILE`): what the playbook runs on each host
//! (`docs/many-servers.md`). Every key, its type, default and range: `docs/job.md`.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use jetproof_job::{Job, Span};

use crate::common::{CliError, Outcome};

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["default", "file", "from_solution"])))]
pub struct Args {
    /// Print the built-in job (used when a command is given no job file) as TOML.
    #[arg(long)]
    pub default: bool,
    /// A job file to check and print with every default filled in (exit 2 when invalid).
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The job of a solution file (`plan --write-solution`): its `[job]`, checked as `init` and
    /// `run` check a job file.
    #[arg(long, value_name = "SOLUTION")]
    pub from_solution: Option<PathBuf>,
    /// With --from-solution: at the solution's rehearsal scale (its `[rehearsal]` durations and
    /// log count) and marked `run.rehearsal`, so every report says it is a rehearsal.
    #[arg(long)]
    pub rehearsal: bool,
    /// With --from-solution: this host's data directory (`storage.data_dir`).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// With --from-solution: refuse unless NAME is one of the solution's `servers`.
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// With --from-solution: write the job to FILE instead of printing it (refuses a file
    /// jetproof did not write).
    #[arg(long, value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// With --from-solution: print the tests of the solution's set (its `[tests]` table), one
    /// name per line as `run --test` takes them, instead of the job; what the playbook runs.
    #[arg(long, conflicts_with = "write")]
    pub list_tests: bool,
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    if let Some(solution) = &args.from_solution {
        return from_solution(&args, solution);
    }
    // The flags of a solution's job only (clap's `requires` let them pass beside the group).
    for (given, flag) in [
        (args.rehearsal, "--rehearsal"),
        (args.data_dir.is_some(), "--data-dir"),
        (args.host.is_some(), "--host"),
        (args.write.is_some(), "--write"),
        (args.list_tests, "--list-tests"),
    ] {
        if given {
            return Err(bad(format!(
                "`{flag}` is for a solution's job: give --from-solution SOLUTION with it (`jetproof job --from-solution solution.toml {flag} ...`)"
            )));
        }
    }
    let (job, origin) = match &args.file {
        Some(path) => (
            Job::load(path).map_err(CliError::bad_input)?,
            format!("{}, with every default filled in", path.display()),
        ),
        None => (Job::default(), "the built-in job".to_string()),
    };
    let text = printable(&job)?;
    outln!("# {origin} (keys: docs/job.md)");
    out!("{text}");
    Ok(Outcome::Pass)
}

/// The job as TOML, checked to read back as the same job (anything else is a bug, not bad
/// input).
fn printable(job: &Job) -> Result<String, CliError> {
    let text = job.to_toml();
    let back = Job::parse(&text, "the printed job")
        .map_err(|e| CliError::runtime(anyhow!("the printed job does not read back: {e}")))?;
    if back != *job {
        return Err(CliError::runtime(anyhow!(
            "the printed job reads back as another job"
        )));
    }
    Ok(text)
}

/// The most bytes of a solution file read (a few KB each; as `jetproof esrp` reads them).
const MAX_SOLUTION_BYTES: u64 = 64 << 20;

fn bad(message: String) -> CliError {
    CliError::bad_input(anyhow!(message))
}

/// The solution's rehearsal scale: `performance`, `stress` and `soft_recovery_log_files` (as
/// `plan --write-solution` writes them), and an optional `sample_interval`.
struct Rehearsal {
    performance: Span,
    stress: Span,
    log_files: u32,
    sample_interval: Option<Span>,
}

fn rehearsal(shown: &str, value: Option<&serde_json::Value>) -> Result<Rehearsal, CliError> {
    const KEYS: [&str; 4] = [
        "performance",
        "stress",
        "soft_recovery_log_files",
        "sample_interval",
    ];
    let Some(table) = value.and_then(serde_json::Value::as_object) else {
        return Err(bad(format!(
            "{shown}: `--rehearsal` needs the solution's `[rehearsal]` table (performance, stress, soft_recovery_log_files), which it does not have; write the solution with `jetproof plan ... --write-solution`, or add the table"
        )));
    };
    if let Some(unknown) = table.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(bad(format!(
            "{shown}: unknown key `rehearsal.{unknown}`; the keys are {}",
            KEYS.join(", ")
        )));
    }
    let span = |key: &str, required: bool| -> Result<Option<Span>, CliError> {
        match table.get(key) {
            None if required => Err(bad(format!(
                "{shown}: `rehearsal.{key}` is missing; give a duration, like \"2m\""
            ))),
            None => Ok(None),
            Some(v) => v
                .as_str()
                .ok_or_else(|| "is not a string".to_string())
                .and_then(|t| t.parse::<Span>())
                .map(Some)
                .map_err(|e| {
                    bad(format!(
                        "{shown}: `rehearsal.{key}` {e}; give a duration, like \"2m\""
                    ))
                }),
        }
    };
    let log_files = match table.get("soft_recovery_log_files") {
        None => {
            return Err(bad(format!(
                "{shown}: `rehearsal.soft_recovery_log_files` is missing; give a whole number of log files, like 20"
            )));
        }
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n >= 1)
            .ok_or_else(|| {
                bad(format!(
                    "{shown}: `rehearsal.soft_recovery_log_files` is {v}; give a whole number of log files, 1 or more, like 20"
                ))
            })?,
    };
    Ok(Rehearsal {
        performance: span("performance", true)?.unwrap_or_default(),
        stress: span("stress", true)?.unwrap_or_default(),
        log_files,
        sample_interval: span("sample_interval", false)?,
    })
}

fn from_solution(args: &Args, path: &Path) -> Result<Outcome, CliError> {
    let shown = path.display().to_string();
    let text = jetproof_io::input::read_text(path, MAX_SOLUTION_BYTES)
        .map_err(|e| bad(format!("{shown}: the solution file {e}")))?;
    let solution: jetproof_results::esrp::Solution = toml::from_str(&text).map_err(|e| {
        bad(format!(
            "{shown}: {}; the keys are listed in docs/esrp.md",
            e.to_string().trim_end()
        ))
    })?;
    if let Some(host) = &args.host
        && !solution.servers.is_empty()
        && !solution.servers.contains(host)
    {
        return Err(bad(format!(
            "`--host` {host} is not one of the solution's servers ({}): name the hosts as the solution does (`plan --hosts`, the inventory's names), or add {host} to `servers` in {shown}",
            solution.servers.join(", ")
        )));
    }
    let Some(value) = &solution.job else {
        return Err(bad(format!(
            "{shown}: the solution file has no `[job]`; write it with `jetproof plan ... --write-solution FILE`, which puts the job every server runs in it"
        )));
    };
    let job_text =
        toml::to_string(value).map_err(|e| bad(format!("{shown}: `[job]` is not a job: {e}")))?;
    let origin = format!("{shown} [job]");
    // A value error names the key, not the file: say it is the solution's job.
    let mut job = Job::parse(&job_text, &origin).map_err(|e| match e {
        jetproof_job::JobError::Invalid { .. } => bad(format!("{origin}: {e}")),
        parse => CliError::bad_input(parse),
    })?;
    let scale = if args.rehearsal {
        let r = rehearsal(&shown, solution.rehearsal.as_ref())?;
        job.run.duration = r.performance;
        job.run.stress_duration = r.stress;
        job.run.recovery_log_files = r.log_files;
        if let Some(interval) = r.sample_interval {
            job.run.sample_interval = interval;
        }
        job.run.rehearsal = true;
        "the solution's rehearsal scale (run.rehearsal: every report says it is a rehearsal)"
    } else {
        "the solution's job as written"
    };
    if let Some(dir) = &args.data_dir {
        if !job.storage.instance.is_empty() {
            return Err(bad(format!(
                "`--data-dir` {}: the solution's job lists its instances (`storage.instance`), whose own paths are used, not a data directory; drop --data-dir",
                dir.display()
            )));
        }
        job.storage.data_dir = dir.clone();
    }
    // The result is checked as a job file is: the rehearsal's values and the data directory too.
    job.validate().map_err(|e| {
        bad(format!(
            "{origin}{}: {e}",
            if args.rehearsal {
                " at the rehearsal scale"
            } else {
                ""
            }
        ))
    })?;
    let tests = test_set(&shown, solution.tests.as_ref(), &job, args.rehearsal)?;
    if args.list_tests {
        for test in tests {
            outln!("{test}");
        }
        return Ok(Outcome::Pass);
    }
    let body = printable(&job)?;
    let header = format!(
        "# The job of the solution {shown}, {scale}; made by jetproof {} (keys: docs/job.md).\n",
        env!("CARGO_PKG_VERSION")
    );
    match &args.write {
        Some(target) => {
            crate::commands::plan::check_target(target, "--write")?;
            let text = format!(
                "{}\n# jetproof overwrites this file only while the line above is its first line.\n{header}\n{body}",
                jetproof_plan::JOB_FILE_MARKER
            );
            std::fs::write(target, text).map_err(|e| {
                CliError::runtime(anyhow!("write job file {}: {e}", target.display()))
            })?;
            outln!("{}: {scale}", target.display());
        }
        None => {
            out!("{header}{body}");
        }
    }
    Ok(Outcome::Pass)
}

/// The tests of the solution's set, in ESRP's order, as `run --test` names them: the `[tests]`
/// table `plan --write-solution` writes (a solution without one: all four). The table is what
/// the document's reader sees and the job is what runs, so they must agree: a duration, log
/// count or checksum pass of the table that differs from the job's is refused (exit 2), naming
/// both keys. At the rehearsal scale the durations and log count are the `[rehearsal]` table's,
/// so only the table's choices (`backup`, the checksum passes) are compared.
fn test_set(
    shown: &str,
    value: Option<&serde_json::Value>,
    job: &Job,
    rehearsal: bool,
) -> Result<Vec<&'static str>, CliError> {
    const KEYS: [&str; 6] = [
        "performance",
        "checksum_after_performance",
        "stress",
        "checksum_after_stress",
        "backup",
        "soft_recovery_log_files",
    ];
    let all = vec!["performance", "stress", "backup", "soft-recovery"];
    let Some(value) = value else {
        return Ok(all);
    };
    let Some(table) = value.as_object() else {
        return Err(bad(format!(
            "{shown}: `tests` is not a table; write it as `plan --write-solution` does (docs/esrp.md)"
        )));
    };
    if let Some(unknown) = table.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(bad(format!(
            "{shown}: unknown key `tests.{unknown}`; the keys are {}",
            KEYS.join(", ")
        )));
    }
    let disagree = |key: &str, table_value: String, job_key: &str, job_value: String| {
        bad(format!(
            "{shown}: `tests.{key}` is {table_value} but the job's `{job_key}` is {job_value}: the `tests` table is what the document's reader sees and the job is what runs; make them agree (edit one of the two)"
        ))
    };
    let flag = |key: &str| -> Result<Option<bool>, CliError> {
        match table.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| bad(format!("{shown}: `tests.{key}` is {v}; give true or false"))),
        }
    };
    let span = |key: &str| -> Result<Option<Span>, CliError> {
        match table.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .ok_or_else(|| "is not a string".to_string())
                .and_then(|t| t.parse::<Span>())
                .map(Some)
                .map_err(|e| {
                    bad(format!(
                        "{shown}: `tests.{key}` {e}; give a duration, like \"2h\""
                    ))
                }),
        }
    };
    for (key, job_key, job_value) in [
        (
            "checksum_after_performance",
            "run.checksum_after_performance",
            job.run.checksum_after_performance,
        ),
        (
            "checksum_after_stress",
            "run.checksum_after_stress",
            job.run.checksum_after_stress,
        ),
    ] {
        if let Some(v) = flag(key)?
            && v != job_value
        {
            return Err(disagree(key, v.to_string(), job_key, job_value.to_string()));
        }
    }
    if !rehearsal {
        for (key, job_key, job_value) in [
            ("performance", "run.duration", job.run.duration),
            ("stress", "run.stress_duration", job.run.stress_duration),
        ] {
            if let Some(v) = span(key)?
                && v != job_value
            {
                return Err(disagree(key, v.to_string(), job_key, job_value.to_string()));
            }
        }
        if let Some(v) = table.get("soft_recovery_log_files") {
            let n = v.as_u64().filter(|n| *n >= 1).ok_or_else(|| {
                bad(format!(
                    "{shown}: `tests.soft_recovery_log_files` is {v}; give a whole number of log files, 1 or more"
                ))
            })?;
            if n != u64::from(job.run.recovery_log_files) {
                return Err(disagree(
                    "soft_recovery_log_files",
                    n.to_string(),
                    "run.recovery_log_files",
                    job.run.recovery_log_files.to_string(),
                ));
            }
        }
    }
    let backup = flag("backup")?.unwrap_or(true);
    Ok(all
        .into_iter()
        .filter(|t| backup || *t != "backup")
        .collect())
}
