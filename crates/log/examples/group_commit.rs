//! Group-commit benchmark: N threads each append a record and durably commit it, as fast as they
//! can, for a fixed time, on a real directory through the portable backend (direct I/O by
//! default). Prints one line of `key=value` pairs per run, parsed by `bench/log-group-commit.sh`.
//!
//! Usage: `group_commit --dir DIR [--committers 1,4,16] [--seconds 10] [--payload-bytes 300]
//!         [--buffered]`

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jetproof_io::IoClass;
use jetproof_io::meter::InstanceStats;
use jetproof_io::std_backend::StdBackend;
use jetproof_log::{Durability, Log, LogOptions, LogStats, Record};

struct Arguments {
    dir: PathBuf,
    committers: Vec<usize>,
    seconds: f64,
    payload_bytes: usize,
    direct: bool,
}

fn parse() -> Result<Arguments, String> {
    let mut arguments = Arguments {
        dir: PathBuf::new(),
        committers: vec![1, 4, 16],
        seconds: 10.0,
        payload_bytes: 300,
        direct: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => arguments.dir = PathBuf::from(value()?),
            "--committers" => {
                arguments.committers = value()?
                    .split(',')
                    .map(|n| n.parse().map_err(|e| format!("--committers {n}: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--seconds" => {
                arguments.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?
            }
            "--payload-bytes" => {
                arguments.payload_bytes = value()?
                    .parse()
                    .map_err(|e| format!("--payload-bytes: {e}"))?
            }
            "--buffered" => arguments.direct = false,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if arguments.dir.as_os_str().is_empty() {
        return Err("--dir DIR is required (a directory on the disk under test)".into());
    }
    Ok(arguments)
}

fn run(arguments: &Arguments, committers: usize) -> Result<(), String> {
    let dir = arguments.dir.join(format!("group-commit-{committers}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("remove {}: {e}", dir.display()))?;
    }
    let stats = InstanceStats::new(format!("group-commit-{committers}"));
    let log = Arc::new(
        Log::create(
            StdBackend::new(),
            LogOptions {
                direct_io: arguments.direct,
                stats: Some(stats.clone()),
                ..LogOptions::new(&dir, 0x6C6F67)
            },
        )
        .map_err(|e| format!("create log in {}: {e}", dir.display()))?,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let latency_ns_total = Arc::new(AtomicU64::new(0));
    let payload = vec![0xA5u8; arguments.payload_bytes];
    let writes_before = LogStats::get(&log.stats().writes);
    let bytes_before = LogStats::get(&log.stats().write_bytes);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for thread in 0..committers {
            let (log, stop, latency, payload) = (
                log.clone(),
                stop.clone(),
                latency_ns_total.clone(),
                &payload,
            );
            scope.spawn(move || {
                let mut transaction = (thread as u64) << 40;
                while !stop.load(Ordering::Relaxed) {
                    transaction += 1;
                    let record = Record {
                        record_type: 1,
                        transaction_id: transaction,
                        payload,
                    };
                    let begun = Instant::now();
                    if let Err(error) = log.append_and_commit(&record, Durability::Durable) {
                        eprintln!("commit failed: {error}");
                        stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    latency.fetch_add(begun.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_secs_f64(arguments.seconds));
        stop.store(true, Ordering::Relaxed);
    });
    let elapsed_s = started.elapsed().as_secs_f64();
    let commits = LogStats::get(&log.stats().durable_commits);
    let writes = LogStats::get(&log.stats().writes) - writes_before;
    let write_bytes = LogStats::get(&log.stats().write_bytes) - bytes_before;
    let histogram = stats.class(IoClass::LogWrite).histogram();
    let sync_us_mean = LogStats::get(&log.stats().sync_latency_ns_total) as f64
        / LogStats::get(&log.stats().writes).max(1) as f64
        / 1000.0;
    let generations = log.end_lsn().generation;
    let rollovers = LogStats::get(&log.stats().rollovers);
    let rollover_us_mean = LogStats::get(&log.stats().rollover_latency_ns_total) as f64
        / rollovers.max(1) as f64
        / 1000.0;
    match Arc::try_unwrap(log) {
        Ok(log) => log.close().map_err(|e| format!("close: {e}"))?,
        Err(_) => return Err("log still shared after the run".into()),
    }
    println!(
        "committers={committers} seconds={elapsed_s:.2} commits={commits} log_writes={writes} \
         commits_per_s={:.0} log_writes_per_s={:.0} commits_per_write={:.2} \
         mean_commit_latency_us={:.0} mean_write_bytes={:.0} \
         log_io_latency_us_p50={:.0} log_io_latency_us_p99={:.0} mean_fdatasync_us={sync_us_mean:.0} generations={generations} \
         rollovers={rollovers} mean_rollover_us={rollover_us_mean:.0}",
        commits as f64 / elapsed_s,
        writes as f64 / elapsed_s,
        commits as f64 / writes.max(1) as f64,
        latency_ns_total.load(Ordering::Relaxed) as f64 / commits.max(1) as f64 / 1000.0,
        write_bytes as f64 / writes.max(1) as f64,
        histogram.value_at_quantile(0.5) as f64 / 1000.0,
        histogram.value_at_quantile(0.99) as f64 / 1000.0,
    );
    std::fs::remove_dir_all(&dir).map_err(|e| format!("remove {}: {e}", dir.display()))?;
    Ok(())
}

fn main() {
    let arguments = match parse() {
        Ok(arguments) => arguments,
        Err(message) => {
            eprintln!("group_commit: {message}");
            std::process::exit(2);
        }
    };
    for &committers in &arguments.committers {
        if let Err(message) = run(&arguments, committers) {
            eprintln!("group_commit: {committers} committers: {message}");
            std::process::exit(1);
        }
    }
}
