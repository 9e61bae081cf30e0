//! `jetproof probe`: raw random or sequential I/O through the I/O layer, to know the device.
//! The engine lives in `jetproof_io::probe`; this file parses flags and prints the report.
//! Bad flags and refused targets exit 2 before any I/O; an I/O failure exits 3.

use std::path::PathBuf;

use anyhow::anyhow;
use jetproof_io::BackendChoice;
use jetproof_io::probe::{Pattern, ProbeError, ProbeReport, ProbeSpec};
use jetproof_job::{ByteSize, Span};

use crate::common::{CliError, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// File (created if absent, filled with non-zero data) or block device (with --allow-device).
    #[arg(long, value_name = "FILE")]
    pub path: PathBuf,
    /// Size of each I/O, like 4KiB or 32KiB; a multiple of the device's logical block.
    #[arg(long, value_name = "SIZE", default_value = "32KiB")]
    pub block_size: ByteSize,
    /// Share of reads, 0 to 100; the rest are writes (only into a file probe created).
    #[arg(long, value_name = "PERCENT", default_value_t = 100)]
    pub read_percent: u32,
    /// I/Os kept outstanding.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub queue_depth: usize,
    /// How long to run, like 10s or 2m.
    #[arg(long, value_name = "D", default_value = "10s")]
    pub duration: Span,
    /// Random offsets (the default).
    #[arg(long, conflicts_with = "sequential")]
    pub random: bool,
    /// Sequential offsets.
    #[arg(long)]
    pub sequential: bool,
    /// Size of the file to create when it is absent.
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub file_size: ByteSize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// I/O engine: io_uring, std, or auto (io_uring when it works here, else std). The same flag
    /// as every other command's; `--backend` is its old name, still accepted. The default is
    /// auto, not std as elsewhere: probe is there to show what the device gives.
    #[arg(
        long = "io-engine",
        alias = "backend",
        value_name = "std|io_uring|auto",
        default_value = "auto"
    )]
    pub backend: BackendChoice,
    /// Go through the host's page cache (measures memory, not the storage).
    #[arg(long)]
    pub buffered: bool,
    /// Allow a raw block device as --path. Writes destroy its content.
    #[arg(long)]
    pub allow_device: bool,
    /// Seed of the offset sequence, for repeatable runs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn run(args: Args) -> Result<Outcome, CliError> {
    if args.duration > jetproof_job::MAX_SPAN {
        return Err(CliError::bad_input(anyhow::anyhow!(
            "--duration {}: give at most {} (a year)",
            args.duration,
            jetproof_job::MAX_SPAN
        )));
    }
    let spec = ProbeSpec {
        path: args.path,
        block_size: args.block_size.bytes(),
        read_percent: args.read_percent,
        queue_depth: args.queue_depth,
        duration: args.duration.as_duration(),
        pattern: if args.sequential {
            Pattern::Sequential
        } else {
            Pattern::Random
        },
        file_size: args.file_size.bytes(),
        backend: args.backend,
        direct: !args.buffered,
        allow_device: args.allow_device,
        seed: args.seed,
    };
    // A spinner with the elapsed time on stderr; indicatif hides it when stderr is not a
    // terminal, so scripts and --json users see nothing of it.
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.set_style(
        indicatif::ProgressStyle::with_template("{spinner} probe {msg} {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    spinner.set_message(format!(
        "{} for {} (creating the file first if absent)",
        spec.path.display(),
        args.duration
    ));
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    let result = jetproof_io::probe::run(&spec);
    spinner.finish_and_clear();
    let report = result.map_err(|error| match error {
        ProbeError::BadInput { .. } | ProbeError::Refused(_) => CliError::bad_input(error),
        ProbeError::Io(e) => CliError::runtime(anyhow!("probe {}: {e}", spec.path.display())),
    })?;
    for warning in &report.warnings {
        errln!("jetproof: warning: {warning}");
    }
    if args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| CliError::runtime(anyhow!("write the report as JSON: {e}")))?;
        outln!("{text}");
    } else {
        out!("{}", human(&report));
    }
    Ok(Outcome::Pass)
}

fn human(r: &ProbeReport) -> String {
    let mut out = String::new();
    let pattern = match r.pattern {
        Pattern::Random => "random",
        Pattern::Sequential => "sequential",
    };
    out.push_str(&format!(
        "probe {}: {} {} I/O, {}% reads, queue depth {}, backend {}{}, {:.1} s\n",
        r.path.display(),
        pattern,
        ByteSize(r.block_size_bytes),
        r.read_percent,
        r.queue_depth,
        r.backend,
        if r.direct_io { "" } else { " (buffered)" },
        r.duration_s
    ));
    out.push_str(&format!(
        "  IOPS {:.0}   MB/s {:.1}   latency ms: avg {:.3}  p50 {:.3}  p95 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}\n",
        r.iops,
        r.mb_per_sec,
        r.avg_latency_ms,
        r.p50_latency_ms,
        r.p95_latency_ms,
        r.p99_latency_ms,
        r.p999_latency_ms,
        r.max_latency_ms
    ));
    for (name, c) in [("reads", &r.reads), ("writes", &r.writes)] {
        if c.count > 0 {
            out.push_str(&format!(
                "  {name:<6} {:.0}/s  avg {:.3} ms  p99 {:.3} ms\n",
                c.ops_per_sec, c.avg_latency_ms, c.p99_ms
            ));
        }
    }
    out.push_str(&format!(
        "  CPU {:.1}% of one core, {:.2} µs per I/O\n",
        r.cpu_percent, r.cpu_us_per_io
    ));
    if let Some(d) = &r.device {
        out.push_str(&format!(
            "  device {} (kernel's view): {:.0} reads/s, {:.0} writes/s, avg wait {:.3} ms, queue {:.1}\n",
            d.device, d.reads_per_sec, d.writes_per_sec, d.avg_wait_ms, d.avg_queue_size
        ));
    }
    out
}
