//! The device's view beside ours (issue 21): for every block device behind a database or log
//! path, what the kernel counted in `/proc/diskstats` per sample interval and over the measured
//! window, as `iostat -x` shows it (r/s, w/s, MB/s, r_await, w_await, aqu-sz, %util).
//!
//! Per interval the figures go into `samples.csv` beside each row of ours: a database class's
//! row (`db_read`, `db_write`, ...) gets the device behind that instance's database, a log
//! class's row (`log_write`, `log_read`, ...) the device behind its log directory. Over the
//! window they go into `result.json` as `totals.devices` (`docs/results.md`), from which the
//! report's "Device" section is made (`jetproof_results::devices`).

use std::time::Instant;

use jetproof_io::sample::{
    DiskCounters, DiskSample, Sample, device_for_path, disk_rates, read_disk,
};
use jetproof_job::Job;
use jetproof_results::devices::DeviceWindow;

/// The columns [`DeviceWatch::csv_cells`] appends to each `samples.csv` line.
pub const CSV_COLUMNS: &str = "device,dev_r_s,dev_w_s,dev_rmb_s,dev_wmb_s,dev_r_await_ms,dev_w_await_ms,dev_aqu_sz,dev_util_percent";

#[derive(Debug)]
struct Watched {
    name: String,
    /// Instances whose database is on this device.
    databases: Vec<String>,
    /// Instances whose log directory is on this device.
    logs: Vec<String>,
    start: Option<DiskCounters>,
    /// The worst interval seen.
    max_r_await_ms: f64,
    max_w_await_ms: f64,
    max_aqu_sz: f64,
    max_util_percent: f64,
    intervals: u64,
}

/// The devices of a run, from the window's start.
#[derive(Debug)]
pub struct DeviceWatch {
    devices: Vec<Watched>,
    /// Per instance: the device names behind its database and its log.
    behind: Vec<(String, Option<String>, Option<String>)>,
    started: Instant,
}

impl DeviceWatch {
    /// The devices behind the job's database and log paths, their counters read now.
    pub fn new(job: &Job) -> DeviceWatch {
        let mut devices: Vec<Watched> = Vec::new();
        let mut behind = Vec::new();
        for instance in job.instances() {
            let db = device_for_path(&instance.database_path);
            let log = device_for_path(&instance.log_path);
            for (name, is_db) in [(&db, true), (&log, false)] {
                let Some(name) = name else { continue };
                let entry = match devices.iter().position(|d| &d.name == name) {
                    Some(i) => &mut devices[i],
                    None => {
                        devices.push(Watched {
                            name: name.clone(),
                            databases: Vec::new(),
                            logs: Vec::new(),
                            start: read_disk(name),
                            max_r_await_ms: 0.0,
                            max_w_await_ms: 0.0,
                            max_aqu_sz: 0.0,
                            max_util_percent: 0.0,
                            intervals: 0,
                        });
                        let last = devices.len() - 1;
                        &mut devices[last]
                    }
                };
                if is_db {
                    entry.databases.push(instance.name.clone());
                } else {
                    entry.logs.push(instance.name.clone());
                }
            }
            behind.push((instance.name.clone(), db, log));
        }
        DeviceWatch {
            devices,
            behind,
            started: Instant::now(),
        }
    }

    /// Notes the worst interval of each device in `sample`.
    pub fn record(&mut self, sample: &Sample) {
        for device in &mut self.devices {
            if let Some(d) = sample.disks.iter().find(|d| d.device == device.name) {
                device.max_r_await_ms = device.max_r_await_ms.max(d.avg_read_wait_ms);
                device.max_w_await_ms = device.max_w_await_ms.max(d.avg_write_wait_ms);
                device.max_aqu_sz = device.max_aqu_sz.max(d.avg_queue_size);
                device.max_util_percent = device.max_util_percent.max(d.util_percent);
                device.intervals += 1;
            }
        }
    }

    /// The cells (after a comma) for a `samples.csv` line of `instance` and `class`: the device
    /// behind that instance's log for a log class, behind its database otherwise; empty cells
    /// when it is not known.
    pub fn csv_cells(&self, sample: &Sample, instance: &str, class: &str) -> String {
        let name = self
            .behind
            .iter()
            .find(|(i, _, _)| i == instance)
            .and_then(|(_, db, log)| {
                if class.starts_with("log_") {
                    log.as_ref()
                } else {
                    db.as_ref()
                }
            });
        match name.and_then(|n| sample.disks.iter().find(|d| &d.device == n)) {
            Some(d) => cells(d),
            None => ",,,,,,,,".to_string(),
        }
    }

    /// `totals.devices` of `result.json`: per device, what it holds, the window's figures and
    /// the worst interval's.
    pub fn finish(&self) -> Vec<DeviceWindow> {
        let elapsed = self.started.elapsed().as_secs_f64();
        self.devices
            .iter()
            .filter_map(|device| {
                let (Some(start), Some(end)) = (device.start, read_disk(&device.name)) else {
                    return None;
                };
                let w = disk_rates(&device.name, &start, &end, elapsed);
                Some(DeviceWindow {
                    device: device.name.clone(),
                    databases: device.databases.clone(),
                    logs: device.logs.clone(),
                    seconds: elapsed,
                    r_s: w.reads_per_sec,
                    w_s: w.writes_per_sec,
                    rmb_s: w.read_bytes_per_sec / 1e6,
                    wmb_s: w.write_bytes_per_sec / 1e6,
                    r_await_ms: w.avg_read_wait_ms,
                    w_await_ms: w.avg_write_wait_ms,
                    aqu_sz: w.avg_queue_size,
                    util_percent: w.util_percent,
                    intervals: device.intervals,
                    max_interval_r_await_ms: device.max_r_await_ms,
                    max_interval_w_await_ms: device.max_w_await_ms,
                    max_interval_aqu_sz: device.max_aqu_sz,
                    max_interval_util_percent: device.max_util_percent,
                })
            })
            .collect()
    }
}

fn cells(d: &DiskSample) -> String {
    format!(
        "{},{:.1},{:.1},{:.3},{:.3},{:.3},{:.3},{:.2},{:.1}",
        d.device,
        d.reads_per_sec,
        d.writes_per_sec,
        d.read_bytes_per_sec / 1e6,
        d.write_bytes_per_sec / 1e6,
        d.avg_read_wait_ms,
        d.avg_write_wait_ms,
        d.avg_queue_size,
        d.util_percent
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_csv_line_has_as_many_device_cells_as_columns() {
        let columns = CSV_COLUMNS.split(',').count();
        let sample = Sample {
            disks: vec![DiskSample {
                device: "vda".into(),
                ..DiskSample::default()
            }],
            ..Sample::default()
        };
        let watch = DeviceWatch {
            devices: Vec::new(),
            behind: vec![("db1".into(), Some("vda".into()), Some("vdb".into()))],
            started: Instant::now(),
        };
        let known = watch.csv_cells(&sample, "db1", "db_read");
        assert!(known.starts_with("vda,"), "{known}");
        assert_eq!(known.split(',').count(), columns);
        // The log is on vdb, which this sample has no figures of: empty cells, as many.
        let unknown = watch.csv_cells(&sample, "db1", "log_write");
        assert_eq!(unknown.split(',').count(), columns);
        assert!(unknown.split(',').all(str::is_empty), "{unknown}");
    }
}
