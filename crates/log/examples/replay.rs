//! Replay-read benchmark: writes N generations of records through the log on a real directory,
//! then reads them all back with [`LogReader`] (large sequential direct reads, every frame's
//! checksums verified, no records applied) and reports the time per 1 MiB generation and the CPU
//! time per record. Prints one line of `key=value` pairs, parsed by `bench/log-replay.sh`.
//!
//! Usage: `replay --dir DIR [--generations 32] [--seed 1] [--buffered] [--phase write|read|both]`
//! (`write` leaves the log in `DIR/replay` for a later `read`, so a reference tool can run in
//! between while the device settles).

use std::path::PathBuf;
use std::time::Instant;

use jetproof_io::IoClass;
use jetproof_io::meter::InstanceStats;
use jetproof_io::std_backend::StdBackend;
use jetproof_log::format::DATA_START;
use jetproof_log::{Durability, Log, LogOptions, LogReader, Lsn, ReadOptions, Record};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn thread_cpu_us() -> u64 {
    jetproof_io::sample::thread_cpu_time().as_micros() as u64
}

fn main() {
    let mut dir = None;
    let mut generations = 32u64;
    let mut seed = 1u64;
    let mut direct = true;
    let mut phase = String::from("both");
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--dir", Some(value)) => dir = Some(PathBuf::from(value)),
            ("--generations", Some(value)) => generations = value.parse().unwrap_or(generations),
            ("--seed", Some(value)) => seed = value.parse().unwrap_or(seed),
            ("--phase", Some(value)) => phase = value,
            ("--buffered", next) => {
                direct = false;
                if let Some(next) = next {
                    eprintln!("replay: unexpected argument {next}");
                    std::process::exit(2);
                }
            }
            (other, _) => {
                eprintln!("replay: unknown or incomplete argument {other}");
                std::process::exit(2);
            }
        }
    }
    let Some(base) = dir else {
        eprintln!("replay: --dir DIR is required (a directory on the disk under test)");
        std::process::exit(2);
    };
    let dir = base.join("replay");
    let (write, read) = match phase.as_str() {
        "write" => (true, false),
        "read" => (false, true),
        "both" => (true, true),
        other => {
            eprintln!("replay: --phase {other}: expected write, read or both");
            std::process::exit(2);
        }
    };
    if write {
        write_log(&dir, direct, generations, seed);
    }
    if read {
        read_log(&dir, direct);
    }
}

fn write_log(dir: &std::path::Path, direct: bool, generations: u64, seed: u64) {
    if dir.exists()
        && let Err(error) = std::fs::remove_dir_all(dir)
    {
        eprintln!("replay: remove {}: {error}", dir.display());
        std::process::exit(1);
    }
    let log = match Log::create(
        StdBackend::new(),
        LogOptions {
            direct_io: direct,
            ..LogOptions::new(dir, 0x7265706C6179)
        },
    ) {
        Ok(log) => log,
        Err(error) => {
            eprintln!("replay: create log in {}: {error}", dir.display());
            std::process::exit(1);
        }
    };
    // Records sized like per-page operations: mostly a few hundred bytes, some several KiB.
    let mut rng = StdRng::seed_from_u64(seed);
    let mut written = 0u64;
    let mut payload_bytes = 0u64;
    while log.end_lsn().generation <= generations {
        let size = if rng.random_bool(0.8) {
            rng.random_range(40..600)
        } else {
            rng.random_range(600..6000)
        };
        let payload: Vec<u8> = (0..size).map(|_| rng.random()).collect();
        let record = Record {
            record_type: rng.random_range(1..8),
            transaction_id: written / 4,
            payload: &payload,
        };
        if let Err(error) = log.append_and_commit(&record, Durability::Lazy) {
            eprintln!("replay: append: {error}");
            std::process::exit(1);
        }
        written += 1;
        payload_bytes += size as u64;
    }
    if let Err(error) = log.close() {
        eprintln!("replay: close: {error}");
        std::process::exit(1);
    }
    println!(
        "records_written={written} payload_mib={:.1}",
        payload_bytes as f64 / (1 << 20) as f64
    );
}

fn read_log(dir: &std::path::Path, direct: bool) {
    let stats = InstanceStats::new("replay");
    let started = Instant::now();
    let cpu_before = thread_cpu_us();
    let reader = LogReader::open(
        StdBackend::new(),
        dir,
        None,
        Lsn::new(1, DATA_START),
        ReadOptions {
            direct_io: direct,
            stats: Some(stats.clone()),
            ..ReadOptions::default()
        },
    );
    let mut reader = match reader {
        Ok(reader) => reader,
        Err(error) => {
            eprintln!("replay: open reader: {error}");
            std::process::exit(1);
        }
    };
    let mut records = 0u64;
    loop {
        match reader.next_record() {
            Ok(Some(_)) => records += 1,
            Ok(None) => break,
            Err(error) => {
                eprintln!("replay: read: {error}");
                std::process::exit(1);
            }
        }
    }
    let cpu_us = thread_cpu_us() - cpu_before;
    let elapsed_s = started.elapsed().as_secs_f64();
    let files = reader.summary().generations.len() as f64;
    let reads = stats.class(IoClass::LogRead);
    println!(
        "generations_read={files} records={records} \
         seconds={elapsed_s:.3} seconds_per_log_file={:.4} \
         read_mib_per_s={:.0} records_per_s={:.0} cpu_us_per_record={:.2} \
         cpu_share={:.2} log_reads={} mean_read_kib={:.0}",
        elapsed_s / files.max(1.0),
        reads.bytes() as f64 / (1 << 20) as f64 / elapsed_s,
        records as f64 / elapsed_s,
        cpu_us as f64 / records.max(1) as f64,
        cpu_us as f64 / 1e6 / elapsed_s,
        reads.count(),
        reads.bytes() as f64 / reads.count().max(1) as f64 / 1024.0,
    );
    let _ = std::fs::remove_dir_all(dir);
}
