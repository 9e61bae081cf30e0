//! `jetproof sweep [JOB] --threads LIST|RANGE [--duration D] [--out DIR]`: one performance test
//! per point on the same databases, each with its own warm-up and results folder, then
//! `sweep.json`, `sweep.md` and `sweep.html` (`docs/sweep.md`; the procedure is
//! `jetproof_procedures::sweep`). `--find-max` searches the largest passing thread count;
//! `--set KEY=V1,V2` sweeps other settings; `--compare A B ...` overlays finished sweeps.
//!
//! Exit codes: 0 the sweep ran to the end (points may fail: that is what a sweep measures);
//! 1 interrupted (finished points are kept; the same command resumes); 2 bad input, nothing
//! done; 3 a storage error stopped an instance (the sweep stops there).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use jetproof_job::{IoEngine, Span};
use jetproof_procedures::performance::{RunError, RunOptions};
use jetproof_procedures::sweep::{
    self, Ending, Point, PointRun, SeriesPlan, SetSpec, SweepDoc, ThreadList,
};
use jetproof_results::outdir::write_atomically;
use jetproof_results::{OutDir, TestKind, TestLog};
use jetproof_storage::lock;

use crate::common::{CliError, JobArgs, Outcome, log_engine, log_owner_lock, select_backend};

/// What the first signal prints during a sweep.
const SWEEP_STOPPING: &str = "interrupted: stopping the current point cleanly and keeping every finished one (run the same command again to resume; a second Ctrl-C, SIGTERM or SIGHUP quits at once)";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The TOML job file. Without one, the built-in default job, under ./jetproof-data.
    #[arg(value_name = "JOB")]
    pub job: Option<PathBuf>,
    /// Threads (sessions) per database at each point: a list like 1,2,4,8 or a range like
    /// 2..32:2 (from..to:step).
    #[arg(long, value_name = "LIST|RANGE", value_parser = sweep::parse_threads,
          required_unless_present = "compare")]
    pub threads: Option<ThreadList>,
    /// Length of each point's measured window, like 20s or 2m (overrides run.duration); each
    /// point warms its cache up first.
    #[arg(long, value_name = "D")]
    pub duration: Option<Span>,
    /// The sweep's folder: sweep.json, sweep.md, sweep.html and one results folder per point
    /// (default ./jetproof-results/sweep-TIME/). Given again, the sweep resumes there.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Search the largest thread count of --threads that still passes (grow, then bisect)
    /// instead of running every point.
    #[arg(long)]
    pub find_max: bool,
    /// Sweep a job setting too: KEY=V1,V2,... (like workload.lazy_commit_percent=50,70,90 or
    /// storage.io_engine=std,io_uring); one series per value, repeatable (every combination).
    #[arg(long = "set", value_name = "KEY=V1,V2,...", value_parser = sweep::parse_set)]
    pub sets: Vec<SetSpec>,
    /// Overlay finished sweeps (their folders) in one report, with the difference at each
    /// point from the first; written to --out.
    #[arg(long, value_name = "DIR", num_args = 2.., conflicts_with_all = ["threads", "find_max", "sets", "duration", "metrics_listen"])]
    pub compare: Vec<PathBuf>,
    /// Directory holding the databases (overrides storage.data_dir).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Number of databases (overrides storage.databases).
    #[arg(long, value_name = "N")]
    pub databases: Option<u32>,
    /// The I/O engine (overrides storage.io_engine): std, io_uring or auto.
    #[arg(long, value_name = "ENGINE", value_parser = crate::common::parse_io_engine)]
    pub io_engine: Option<IoEngine>,
    /// Each instance's database cache maximum, like 16MiB (overrides cache.max_size; lowers
    /// cache.min_size to it when above). A cache that can hold the database is refused.
    #[arg(long, value_name = "SIZE", conflicts_with = "compare")]
    pub cache_max: Option<jetproof_job::ByteSize>,
    /// No live view on stderr while a point measures.
    #[arg(long)]
    pub quiet: bool,
    /// Serve the points' live figures to Prometheus at `http://ADDR:PORT/metrics` while the
    /// sweep runs (docs/metrics.md); a bare PORT listens on loopback only.
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub metrics_listen: Option<String>,
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    if !args.compare.is_empty() {
        return compare(&args.compare, args.out.as_deref());
    }
    let Some(threads) = args.threads.clone() else {
        return Err(CliError::bad_input(anyhow::anyhow!(
            "--threads: give the thread counts to sweep, like 1,2,4,8 or 2..32:2"
        )));
    };
    let job_args = JobArgs {
        job: args.job.clone(),
        data_dir: args.data_dir.clone(),
        databases: args.databases,
        db_size: None,
        threads: None,
        duration: args.duration,
        io_engine: args.io_engine,
    };
    let base = job_args.load_with_cache(args.cache_max)?;
    // Every point's job, checked before any I/O: settings, thread counts against the host.
    let series = sweep::plan_series(&base, &args.sets).map_err(CliError::bad_input)?;
    let mut backends = Vec::new();
    for s in &series {
        for &t in &threads.values {
            jetproof_procedures::performance::check_job(&sweep::with_threads(&s.job, t))
                .map_err(|e| point_error(e, s, t))?;
        }
        backends.push(select_backend(&s.job)?);
    }
    // Bound before any I/O: a bad address or a port in use is bad input, nothing done.
    let metrics = args
        .metrics_listen
        .as_deref()
        .map(crate::metrics::MetricsServer::bind)
        .transpose()?;
    // The databases must be there: a sweep measures them, it does not make them.
    jetproof_procedures::performance::preflight(&sweep::with_threads(&base, threads.values[0]))
        .map_err(run_error)?;
    let out = args.out.clone().unwrap_or_else(|| {
        let default = OutDir::default_path(TestKind::Performance);
        let name = default
            .file_name()
            .map(|n| n.to_string_lossy().replacen("performance", "sweep", 1))
            .unwrap_or_else(|| "sweep".into());
        default.with_file_name(name)
    });
    let mut doc = sweep::new_doc(&base, &threads, &args.sets, args.find_max);
    let finished = prepare_out(&out, &mut doc, &series)?;
    jetproof_storage::host::check_before_lock(&base, true).map_err(CliError::bad_input)?;
    let owner = lock::lock_instances(&base, lock::Access::Exclusive, "sweep")
        .map_err(CliError::bad_input)?;
    crate::common::warn_memory(&base);
    let stop = crate::signals::stop_flag(SWEEP_STOPPING);
    errln!(
        "jetproof: sweep of {} point(s) per series{}, {} series, each a performance test of {} after its own warm-up; into {}",
        threads.values.len(),
        if args.find_max {
            " at most (--find-max: grow, then bisect)"
        } else {
            ""
        },
        series.len(),
        base.run.duration,
        out.display()
    );
    if !finished.is_empty() {
        errln!(
            "jetproof: resuming the sweep in {}: {} point(s) finished before are kept, not run again",
            out.display(),
            finished.len()
        );
    }
    let backend_of = |s: &SeriesPlan| {
        series
            .iter()
            .position(|x| x.label == s.label)
            .and_then(|i| backends.get(i))
    };
    let mut run_point = |s: &SeriesPlan, t: u32, dir: &str| -> Result<PointRun, CliError> {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(PointRun::NotStarted);
        }
        let Some(selected) = backend_of(s) else {
            return Err(CliError::runtime(anyhow::anyhow!(
                "no I/O engine for {}",
                s.label
            )));
        };
        let job = sweep::with_threads(&s.job, t);
        let point_out = OutDir::prepare(Some(&out.join(dir)), TestKind::Performance)
            .map_err(CliError::bad_input)?;
        let log = TestLog::create(&point_out.file("test.log"), false)
            .context("create the test log")
            .map_err(CliError::runtime)?;
        log.line(format!(
            "Sweep point: {t} thread(s) per database{}",
            if s.settings.is_empty() {
                String::new()
            } else {
                format!(", {}", s.label)
            }
        ));
        log_engine(&log, selected, &job);
        log_owner_lock(&log, &owner);
        let live = crate::live::Live::new(
            args.quiet,
            &format!("sweep, {t} thread(s)"),
            job.run.sample_interval.as_duration(),
        );
        let watch = crate::metrics::Watch {
            live: &live,
            metrics: metrics.as_ref(),
        };
        let options = RunOptions {
            backend: selected.backend.clone(),
            stop: &stop,
            seed: 0x6a70_7275_6e00_0001,
            start_at: None,
            live: Some(&watch),
        };
        let result =
            jetproof_procedures::performance::performance(&job, false, &point_out, &log, &options);
        live.finish();
        result.map_err(run_error)?;
        let path = point_out.file("result.json");
        let json = read_json(&path).map_err(CliError::runtime)?;
        Ok(PointRun::Ran(sweep::point_from_result(&json, s, t, dir)))
    };
    let mut say = |line: &str| outln!("{line}");
    let mut save = |doc: &SweepDoc| write_sweep(&out, doc);
    let ending = sweep::execute(
        &series,
        &mut doc,
        &finished,
        &mut run_point,
        &mut say,
        &mut save,
    )?;
    outln!("Sweep: {}", out.join("sweep.md").display());
    match ending {
        Ending::Complete => Ok(Outcome::Pass),
        Ending::Interrupted => {
            errln!(
                "jetproof: the sweep was interrupted; {} finished point(s) are kept in {} (run the same command to resume)",
                doc.points.iter().filter(|p| !p.interrupted).count(),
                out.display()
            );
            Ok(Outcome::Fail)
        }
        Ending::StorageError(why) => Err(CliError::runtime(anyhow::anyhow!("{why}"))),
    }
}

fn run_error(e: RunError) -> CliError {
    match e {
        RunError::BadInput(bad) => CliError::bad_input(bad),
        other => CliError::runtime(other),
    }
}

/// A point's job refused: the message says which point.
fn point_error(e: RunError, s: &SeriesPlan, threads: u32) -> CliError {
    match e {
        RunError::BadInput(bad) => CliError::bad_input(anyhow::anyhow!(
            "--threads {threads}{}: {bad}",
            if s.settings.is_empty() {
                String::new()
            } else {
                format!(" ({})", s.label)
            }
        )),
        other => CliError::runtime(other),
    }
}

fn read_json(path: &Path) -> anyhow::Result<serde_json::Value> {
    let text = jetproof_results::read_result_json(path)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))
}

const SWEEP_FILES: [&str; 3] = ["sweep.json", "sweep.md", "sweep.html"];

/// Checks (and creates) the sweep's folder before any I/O on the databases: new, empty, or a
/// sweep's own (its files and point folders). A `sweep.json` there must be this same sweep (job,
/// threads, settings, mode), and its points whose `result.json` is whole (not interrupted) are
/// returned to be kept; the first run's start time is kept too.
fn prepare_out(
    out: &Path,
    doc: &mut SweepDoc,
    series: &[SeriesPlan],
) -> Result<BTreeMap<String, Point>, CliError> {
    let mut finished = BTreeMap::new();
    let refuse =
        |why: String| CliError::bad_input(anyhow::anyhow!("--out {}: {why}", out.display()));
    match std::fs::symlink_metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(out)
                .with_context(|| format!("create {}", out.display()))
                .map_err(CliError::bad_input)?;
            return Ok(finished);
        }
        Err(e) => return Err(refuse(e.to_string())),
        Ok(meta) if !meta.is_dir() => {
            return Err(refuse("is not a directory".into()));
        }
        Ok(_) => {}
    }
    let mut point_dirs = BTreeMap::new();
    for s in series {
        for &t in &doc.threads.values {
            point_dirs.insert(sweep::series_dir(s, t), (s, t));
        }
    }
    let entries = std::fs::read_dir(out).map_err(|e| refuse(e.to_string()))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| refuse(e.to_string()))?;
        let name = entry.file_name().to_string_lossy().to_string();
        let kind = entry.file_type().map_err(|e| refuse(e.to_string()))?;
        let ours = (SWEEP_FILES.contains(&name.as_str()) && kind.is_file())
            || (kind.is_dir() && name.contains("threads-"));
        if !ours {
            return Err(refuse(format!(
                "holds `{name}`, which is not a sweep's; give a new or empty folder (a sweep never writes over what it did not make)"
            )));
        }
        names.push(name);
    }
    if names.is_empty() {
        return Ok(finished);
    }
    let previous: SweepDoc = read_json(&out.join("sweep.json"))
        .and_then(|v| Ok(serde_json::from_value(v)?))
        .map_err(|e| {
            refuse(format!(
                "holds point folders but no readable sweep.json ({e}); give a new folder"
            ))
        })?;
    if !doc.same_sweep(&previous) {
        return Err(refuse(
            "holds a sweep of another job, thread list, --set or mode; give a new folder, or the same command to resume it".into(),
        ));
    }
    doc.started = previous.started;
    for name in names {
        let Some((s, t)) = point_dirs.get(&name) else {
            continue;
        };
        let Ok(json) = read_json(&out.join(&name).join("result.json")) else {
            continue;
        };
        let point = sweep::point_from_result(&json, s, *t, &name);
        if !point.interrupted && !point.storage_error && json["test"] == "performance" {
            finished.insert(name, point);
        }
    }
    Ok(finished)
}

/// Writes sweep.json (atomically: a temporary file renamed into place), sweep.md, sweep.html.
fn write_sweep(out: &Path, doc: &SweepDoc) -> Result<(), CliError> {
    let write = |name: &str, text: &str| -> Result<(), CliError> {
        let path = out.join(name);
        write_atomically(&path, text.as_bytes())
            .with_context(|| format!("write {}", path.display()))
            .map_err(CliError::runtime)
    };
    let json = serde_json::to_string_pretty(doc)
        .context("serialise sweep.json")
        .map_err(CliError::runtime)?;
    write("sweep.json", &format!("{json}\n"))?;
    write("sweep.md", &sweep::markdown(doc))?;
    write("sweep.html", &sweep::html(doc))
}

/// `--compare A B ...`: every sweep's curves in one chart, the differences from the first.
pub fn compare(dirs: &[PathBuf], out: Option<&Path>) -> Result<Outcome, CliError> {
    let mut sweeps = Vec::new();
    for dir in dirs {
        let path = dir.join("sweep.json");
        let doc: SweepDoc = read_json(&path)
            .and_then(|v| Ok(serde_json::from_value(v)?))
            .map_err(|e| {
                CliError::bad_input(anyhow::anyhow!(
                    "{}: not a sweep's folder ({e})",
                    dir.display()
                ))
            })?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| dir.display().to_string());
        sweeps.push((name, doc));
    }
    let out = out.map(Path::to_path_buf).unwrap_or_else(|| {
        let default = OutDir::default_path(TestKind::Performance);
        let name = default
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .replacen("performance", "sweep-compare", 1)
            })
            .unwrap_or_else(|| "sweep-compare".into());
        default.with_file_name(name)
    });
    match std::fs::read_dir(&out) {
        Ok(entries) => {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                // A link at one of its names would be written through: refused as foreign.
                let ours = (name == "sweep-compare.md" || name == "sweep-compare.html")
                    && entry.file_type().is_ok_and(|kind| kind.is_file());
                if !ours {
                    return Err(CliError::bad_input(anyhow::anyhow!(
                        "--out {}: holds `{name}`; give a new or empty folder",
                        out.display()
                    )));
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&out)
                .with_context(|| format!("create {}", out.display()))
                .map_err(CliError::bad_input)?;
        }
        Err(e) => {
            return Err(CliError::bad_input(anyhow::anyhow!(
                "--out {}: {e}",
                out.display()
            )));
        }
    }
    let md = sweep::compare_markdown(&sweeps);
    let md_path = out.join("sweep-compare.md");
    std::fs::write(&md_path, &md)
        .with_context(|| format!("write {}", md_path.display()))
        .map_err(CliError::runtime)?;
    let html_path = out.join("sweep-compare.html");
    std::fs::write(&html_path, sweep::compare_html(&sweeps))
        .with_context(|| format!("write {}", html_path.display()))
        .map_err(CliError::runtime)?;
    out!("{md}");
    outln!("Comparison: {}", md_path.display());
    Ok(Outcome::Pass)
}
