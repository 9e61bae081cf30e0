//! The in-memory variant of `bench/run-overhead.sh` (a benchmark, not a check): `init` then
//! `run --test performance` of the job in `JETPROOF_BENCH_JOB`, both through
//! `jetproof_io::mem::MemBackend` (databases and logs are byte vectors: no device, no system call
//! per I/O), results into `JETPROOF_BENCH_OUT`. The run's own `totals.cpu_us_per_transactional_io`
//! is the driver's CPU cost per I/O with no device in the way. The CLI's `run` always uses the
//! portable backend, hence this entry point.
//!
//! The backend accounts the time of its copies (`MemBackend::with_copy_accounting`): the last
//! line of the output gives their share of the performance test's CPU, the part of the
//! in-memory run that stands for a device's DMA, which `bench/ceiling.sh` (`ENGINE_FLOOR=1`)
//! takes out of the floor.
//!
//! `JETPROOF_BENCH_JOB=job.toml JETPROOF_BENCH_OUT=out cargo run --release -p jetproof-procedures
//! --example mem_bench`

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use jetproof_job::Job;
use jetproof_procedures::init::{InitOptions, NoProgress, init};
use jetproof_procedures::performance::{RunOptions, performance};
use jetproof_results::{OutDir, TestKind, TestLog};
use jetproof_storage::target::Permissions;

fn main() -> ExitCode {
    let (Ok(job_path), Ok(out_dir)) = (
        std::env::var("JETPROOF_BENCH_JOB"),
        std::env::var("JETPROOF_BENCH_OUT"),
    ) else {
        eprintln!(
            "mem_bench: set JETPROOF_BENCH_JOB (a job file) and JETPROOF_BENCH_OUT (a directory)"
        );
        return ExitCode::from(2);
    };
    match run(Path::new(&job_path), Path::new(&out_dir)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mem_bench: {error}");
            ExitCode::from(3)
        }
    }
}

fn run(job_path: &Path, out_dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let job = Job::load(job_path)?;
    let mem = jetproof_io::mem::MemBackend::with_copy_accounting();
    let stop = AtomicBool::new(false);
    let init_out = OutDir::prepare(Some(&out_dir.join("init")), TestKind::Init)?;
    let init_log = TestLog::create(&init_out.file("test.log"), false)?;
    init(
        &job,
        &init_out,
        &init_log,
        &InitOptions {
            permissions: Permissions::default(),
            backend: mem.clone(),
            progress: &NoProgress,
            stop: &stop,
            seed: jetproof_procedures::init::CONTENT_SEED,
        },
    )?;
    let copies_before = mem.copies().unwrap_or_default();
    let cpu_before = jetproof_io::sample::process_cpu_time();
    let out = OutDir::prepare(Some(&out_dir.join("results")), TestKind::Performance)?;
    let log = TestLog::create(&out.file("test.log"), false)?;
    let options = RunOptions {
        backend: mem.clone(),
        stop: &stop,
        seed: 0x6a70_7275_6e00_0001,
        start_at: None,
        live: None,
    };
    let result = performance(&job, false, &out, &log, &options)?;
    let cpu = jetproof_io::sample::process_cpu_time().saturating_sub(cpu_before);
    let copies = mem.copies().unwrap_or_default();
    let copy_seconds = copies.nanos.saturating_sub(copies_before.nanos) as f64 / 1e9;
    println!(
        "mem backend: {:?} transactional IOPS, totals {:?}",
        result.achieved_iops, result.totals
    );
    // The share over the whole performance test (attach, warm-up and shut-down included), which
    // the caller applies to the measured window's CPU.
    println!(
        "memory copies: {:.4} of the performance test's CPU ({copy_seconds:.3} s of {:.3} s, {} bytes)",
        copy_seconds / cpu.as_secs_f64().max(1e-9),
        cpu.as_secs_f64(),
        copies.bytes.saturating_sub(copies_before.bytes)
    );
    Ok(())
}
