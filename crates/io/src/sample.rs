//! Interval sampling: what changed since the last sample, per (instance, class), and what the
//! host and the kernel saw meanwhile.
//!
//! A [`Sampler`] is called once per interval (15 s by default) by whoever runs the workload. It
//! subtracts the previous snapshot of every [`InstanceStats`] from the current one (exact: the
//! histograms are cumulative counts, see [`crate::hist`]), so recording never pauses and no
//! interval state lives in the hot path. Beside our own figures it reads the kernel's:
//! CPU time from `/proc/stat`, available memory from `/proc/meminfo`, and for the block device
//! behind each data path `/proc/diskstats` (completed reads and writes, time spent, weighted time
//! in queue), so a report can set what jetproof measured next to what the device reported.
//! Every counter source is optional: a missing `/proc` file gives `None`, not an error, because
//! sampling must never stop a test.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::meter::{InstanceSnapshot, InstanceStats};

/// One row of `samples.csv`: one (instance, class) over one interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleRow {
    pub instance: String,
    /// The class key (`db_read`, `log_write`, ...).
    pub class: String,
    pub count: u64,
    pub ops_per_sec: f64,
    pub bytes_per_sec: f64,
    pub avg_latency_ms: f64,
    pub p99_latency_ms: f64,
    /// Top of the highest bucket of the interval (within 1%).
    pub max_latency_ms: f64,
}

/// Host-wide counters over one interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSample {
    /// Busy share of all CPUs over the interval, 0..=100.
    pub cpu_percent: Option<f64>,
    /// `MemAvailable` at the end of the interval.
    pub available_memory_bytes: Option<u64>,
}

/// The kernel's own view of one block device over one interval (as `iostat -x` shows it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskSample {
    /// Device name as in `/proc/diskstats` (e.g. `vda`, `loop0`, `nvme0n1p2`).
    pub device: String,
    pub reads_per_sec: f64,
    pub writes_per_sec: f64,
    pub read_bytes_per_sec: f64,
    pub write_bytes_per_sec: f64,
    /// Average time from queueing to completion of the I/Os completed in the interval.
    pub avg_wait_ms: f64,
    pub avg_read_wait_ms: f64,
    pub avg_write_wait_ms: f64,
    /// Average number of I/Os in the device's queue (weighted time in queue / interval).
    pub avg_queue_size: f64,
    /// Share of the interval the device had I/O in flight, 0..=100 (`iostat -x`'s %util;
    /// absent from results written before it was sampled).
    #[serde(default)]
    pub util_percent: f64,
}

/// Everything one call of [`Sampler::sample`] measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Length of the interval in seconds.
    pub interval_s: f64,
    /// The per-instance deltas, whole (histograms included), for callers that want more than
    /// the rows, e.g. the maximum of interval averages.
    pub instances: Vec<InstanceSnapshot>,
    pub rows: Vec<SampleRow>,
    pub host: HostSample,
    pub disks: Vec<DiskSample>,
}

impl Sample {
    /// The CSV header matching [`SampleRow::csv_line`].
    pub const CSV_HEADER: &'static str = "instance,class,count,ops_per_sec,bytes_per_sec,avg_latency_ms,p99_latency_ms,max_latency_ms";
}

impl SampleRow {
    /// One CSV line (no newline), columns as [`Sample::CSV_HEADER`].
    pub fn csv_line(&self) -> String {
        format!(
            "{},{},{},{:.3},{:.1},{:.4},{:.4},{:.4}",
            self.instance,
            self.class,
            self.count,
            self.ops_per_sec,
            self.bytes_per_sec,
            self.avg_latency_ms,
            self.p99_latency_ms,
            self.max_latency_ms
        )
    }
}

/// Raw `/proc/stat` CPU times: (busy, total) in clock ticks.
#[derive(Clone, Copy, Debug, Default)]
struct CpuTimes {
    busy: u64,
    total: u64,
}

fn read_cpu_times() -> Option<CpuTimes> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice, already in user]
    let total: u64 = values.iter().take(8).sum();
    let idle = values.get(3).copied().unwrap_or(0) + values.get(4).copied().unwrap_or(0);
    Some(CpuTimes {
        busy: total.saturating_sub(idle),
        total,
    })
}

/// `MemAvailable` from `/proc/meminfo`, in bytes.
pub fn available_memory_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// CPU time (user + system) this process has used so far.
pub fn process_cpu_time() -> Duration {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// CPU time (user + system) the calling thread has used so far.
pub fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the pointer it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// The `/proc/diskstats` name of the block device holding `path` (or of `path` itself when it
/// is a block device).
pub fn device_for_path(path: &Path) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    // A file that does not exist yet lives where its directory lives.
    let existing = path
        .ancestors()
        .find(|p| !p.as_os_str().is_empty() && p.exists())
        .unwrap_or(Path::new("."));
    let meta = std::fs::metadata(existing).ok()?;
    let dev = if meta.file_type().is_block_device() {
        meta.rdev()
    } else {
        meta.dev()
    };
    // SAFETY: major/minor are pure arithmetic on the device number.
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let link = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    link.file_name()?.to_str().map(str::to_owned)
}

/// Raw counters of one device from `/proc/diskstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskCounters {
    pub reads: u64,
    pub sectors_read: u64,
    pub read_ms: u64,
    pub writes: u64,
    pub sectors_written: u64,
    pub write_ms: u64,
    /// Time with I/O in flight (`io_ticks`), for %util.
    pub io_ms: u64,
    pub weighted_ms: u64,
}

/// Parses the line of `device` out of a `/proc/diskstats` text.
pub fn parse_diskstats(text: &str, device: &str) -> Option<DiskCounters> {
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(2) != Some(&device) || fields.len() < 14 {
            continue;
        }
        let n = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        return Some(DiskCounters {
            reads: n(3),
            sectors_read: n(5),
            read_ms: n(6),
            writes: n(7),
            sectors_written: n(9),
            write_ms: n(10),
            io_ms: n(12),
            weighted_ms: n(13),
        });
    }
    None
}

/// The counters of `device` (a `/proc/diskstats` name) now.
pub fn read_disk(device: &str) -> Option<DiskCounters> {
    parse_diskstats(&std::fs::read_to_string("/proc/diskstats").ok()?, device)
}

/// The kernel's figures between two readings `elapsed_s` apart.
pub fn disk_rates(
    device: &str,
    before: &DiskCounters,
    after: &DiskCounters,
    elapsed_s: f64,
) -> DiskSample {
    let d = |a: u64, b: u64| a.saturating_sub(b) as f64;
    let reads = d(after.reads, before.reads);
    let writes = d(after.writes, before.writes);
    let read_ms = d(after.read_ms, before.read_ms);
    let write_ms = d(after.write_ms, before.write_ms);
    let per_s = |x: f64| if elapsed_s > 0.0 { x / elapsed_s } else { 0.0 };
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    DiskSample {
        device: device.to_owned(),
        reads_per_sec: per_s(reads),
        writes_per_sec: per_s(writes),
        read_bytes_per_sec: per_s(d(after.sectors_read, before.sectors_read) * 512.0),
        write_bytes_per_sec: per_s(d(after.sectors_written, before.sectors_written) * 512.0),
        avg_wait_ms: ratio(read_ms + write_ms, reads + writes),
        avg_read_wait_ms: ratio(read_ms, reads),
        avg_write_wait_ms: ratio(write_ms, writes),
        avg_queue_size: ratio(d(after.weighted_ms, before.weighted_ms), elapsed_s * 1000.0),
        util_percent: (100.0 * ratio(d(after.io_ms, before.io_ms), elapsed_s * 1000.0)).min(100.0),
    }
}

/// Takes interval samples; see the module header.
#[derive(Debug)]
pub struct Sampler {
    instances: Vec<Arc<InstanceStats>>,
    previous: Vec<InstanceSnapshot>,
    devices: Vec<(String, Option<DiskCounters>)>,
    cpu: Option<CpuTimes>,
    at: Instant,
}

impl Sampler {
    /// Starts sampling the given instances and the devices behind `paths` (duplicates are
    /// sampled once). The first [`Sampler::sample`] covers the time since this call.
    pub fn new(instances: Vec<Arc<InstanceStats>>, paths: &[PathBuf]) -> Sampler {
        let mut names: Vec<String> = paths.iter().filter_map(|p| device_for_path(p)).collect();
        names.sort();
        names.dedup();
        let devices = names
            .into_iter()
            .map(|name| {
                let counters = read_disk(&name);
                (name, counters)
            })
            .collect();
        let previous = instances.iter().map(|i| i.snapshot()).collect();
        Sampler {
            instances,
            previous,
            devices,
            cpu: read_cpu_times(),
            at: Instant::now(),
        }
    }

    /// The block devices being sampled.
    pub fn devices(&self) -> Vec<String> {
        self.devices.iter().map(|(n, _)| n.clone()).collect()
    }

    /// What happened since the previous call (or since [`Sampler::new`]).
    pub fn sample(&mut self) -> Sample {
        let now = Instant::now();
        let interval_s = now.duration_since(self.at).as_secs_f64();
        self.at = now;
        let mut rows = Vec::new();
        let mut deltas = Vec::new();
        for (stats, previous) in self.instances.iter().zip(self.previous.iter_mut()) {
            let current = stats.snapshot();
            let delta = current.delta_since(previous);
            for (class, snap) in &delta.classes {
                if snap.count == 0 {
                    continue;
                }
                let summary = snap.summary(interval_s);
                rows.push(SampleRow {
                    instance: delta.name.clone(),
                    class: class.key().to_owned(),
                    count: snap.count,
                    ops_per_sec: summary.ops_per_sec,
                    bytes_per_sec: if interval_s > 0.0 {
                        snap.bytes as f64 / interval_s
                    } else {
                        0.0
                    },
                    avg_latency_ms: summary.avg_latency_ms,
                    p99_latency_ms: summary.p99_ms,
                    max_latency_ms: summary.max_ms,
                });
            }
            deltas.push(delta);
            *previous = current;
        }
        let cpu_now = read_cpu_times();
        let cpu_percent = match (self.cpu, cpu_now) {
            (Some(a), Some(b)) if b.total > a.total => {
                Some(100.0 * (b.busy.saturating_sub(a.busy)) as f64 / (b.total - a.total) as f64)
            }
            _ => None,
        };
        self.cpu = cpu_now;
        let mut disks = Vec::new();
        for (name, previous) in &mut self.devices {
            let current = read_disk(name);
            if let (Some(before), Some(after)) = (previous.as_ref(), current.as_ref()) {
                disks.push(disk_rates(name, before, after, interval_s));
            }
            *previous = current;
        }
        Sample {
            interval_s,
            instances: deltas,
            rows,
            host: HostSample {
                cpu_percent,
                available_memory_bytes: available_memory_bytes(),
            },
            disks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IoClass;

    #[test]
    fn diskstats_parse_and_rates() {
        let text = "   8       0 sda 100 0 800 50 200 0 1600 150 0 300 400 0 0 0 0\n 253 0 vda 1 2 3 4 5 6 7 8 9 10\n";
        let before = parse_diskstats(text, "sda").expect("sda");
        assert_eq!(before.reads, 100);
        assert_eq!(before.write_ms, 150);
        assert_eq!(before.weighted_ms, 400);
        let after = DiskCounters {
            reads: 200,
            sectors_read: 1600,
            read_ms: 150,
            writes: 300,
            sectors_written: 2400,
            write_ms: 250,
            io_ms: 1300,
            weighted_ms: 2400,
        };
        let rates = disk_rates("sda", &before, &after, 2.0);
        assert_eq!(rates.reads_per_sec, 50.0);
        assert_eq!(rates.writes_per_sec, 50.0);
        assert_eq!(rates.read_bytes_per_sec, 800.0 * 512.0 / 2.0);
        assert_eq!(rates.avg_wait_ms, 1.0); // (100 + 100) ms over 200 I/Os
        assert_eq!(rates.avg_queue_size, 1.0); // 2000 ms weighted over 2000 ms
        assert_eq!(before.io_ms, 300);
        assert_eq!(rates.util_percent, 50.0); // 1000 ms busy of 2000 ms
        assert!(
            parse_diskstats(text, "vda").is_none(),
            "short line is not trusted"
        );
    }

    #[test]
    fn sampler_gives_interval_deltas_and_host_counters() {
        let stats = InstanceStats::new("db1");
        let dir = std::env::current_dir().expect("cwd");
        let mut sampler = Sampler::new(vec![stats.clone()], &[dir]);
        for _ in 0..10 {
            stats.class(IoClass::DbRead).record(32768, 1_000_000);
        }
        std::thread::sleep(Duration::from_millis(20));
        let first = sampler.sample();
        assert_eq!(first.rows.len(), 1);
        assert_eq!(first.rows[0].count, 10);
        assert_eq!(first.rows[0].class, "db_read");
        assert!((first.rows[0].avg_latency_ms - 1.0).abs() < 1e-9);
        assert!(first.rows[0].bytes_per_sec > 0.0);
        stats.class(IoClass::DbRead).record(32768, 3_000_000);
        let second = sampler.sample();
        assert_eq!(second.rows[0].count, 1, "only the new I/O");
        assert!((second.rows[0].avg_latency_ms - 3.0).abs() < 1e-9);
        assert!(second.rows[0].p99_latency_ms >= 3.0 && second.rows[0].p99_latency_ms < 3.03);
        assert!(first.host.available_memory_bytes.unwrap_or(0) > 0);
        let line = second.rows[0].csv_line();
        assert_eq!(
            line.split(',').count(),
            Sample::CSV_HEADER.split(',').count()
        );
    }

    #[test]
    fn the_device_behind_a_path_is_in_diskstats() {
        // Some containers put the working directory on a file system with no block device
        // (overlay on tmpfs); then there is nothing to sample, and None is the right answer.
        let Some(device) = device_for_path(Path::new(".")) else {
            return;
        };
        let text = std::fs::read_to_string("/proc/diskstats").expect("diskstats");
        assert!(
            parse_diskstats(&text, &device).is_some(),
            "{device} not in /proc/diskstats"
        );
        // A path that does not exist yet is sampled where it will be created.
        assert_eq!(
            device_for_path(Path::new("./not-yet/created.edb")),
            Some(device)
        );
    }

    #[test]
    fn process_cpu_time_advances() {
        let before = process_cpu_time();
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_mul(31).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(process_cpu_time() > before);
    }
}
