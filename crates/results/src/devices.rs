//! The report's "Device" section (issue 21): what the kernel counted for each block device behind
//! a database or log path over the measured window (`totals.devices` of `result.json`, written by
//! `jetproof_procedures::device_view`), as `iostat -x` shows it, beside what jetproof measured;
//! and a note where the two latencies differ by more than [`MARGIN_MS`] and [`MARGIN_SHARE`].

use crate::TestResult;

/// Our average and the device's differ when they are apart by more than this many milliseconds
/// ...
pub const MARGIN_MS: f64 = 1.0;
/// ... and by more than this share of the larger of the two.
pub const MARGIN_SHARE: f64 = 0.5;

/// The device is said to be busy with others' I/O when it completed more than this multiple
/// of jetproof's I/Os per second ...
pub const OTHERS_SHARE: f64 = 1.5;
/// ... plus this many.
pub const OTHERS_MIN_PER_SEC: f64 = 10.0;

/// One device's window figures, as `totals.devices` of a workload test holds them (fields in
/// the file's key order).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DeviceWindow {
    pub aqu_sz: f64,
    /// The instances whose database is on the device.
    pub databases: Vec<String>,
    pub device: String,
    /// Sample intervals seen.
    pub intervals: u64,
    /// The instances whose log is on the device.
    pub logs: Vec<String>,
    pub max_interval_aqu_sz: f64,
    pub max_interval_r_await_ms: f64,
    pub max_interval_util_percent: f64,
    pub max_interval_w_await_ms: f64,
    pub r_await_ms: f64,
    pub r_s: f64,
    pub rmb_s: f64,
    pub seconds: f64,
    pub util_percent: f64,
    pub w_await_ms: f64,
    pub w_s: f64,
    pub wmb_s: f64,
}

/// The devices of `result` (none before `totals.devices` existed, nor for other tests).
pub fn devices(result: &TestResult) -> Vec<DeviceWindow> {
    match &result.totals {
        crate::Totals::Workload(w) => w.devices.clone(),
        _ => Vec::new(),
    }
}

/// Our I/O-weighted average latency and rate of `classes` over the instances named.
fn ours(result: &TestResult, instances: &[String], classes: &[&str]) -> Option<(f64, f64)> {
    let (mut weighted, mut count, mut rate) = (0.0, 0u64, 0.0);
    for instance in result
        .instances
        .iter()
        .filter(|i| instances.contains(&i.name))
    {
        for class in classes {
            if let Some(c) = instance.io.get(*class) {
                weighted += c.avg_latency_ms * c.count as f64;
                count += c.count;
                rate += c.ops_per_sec;
            }
        }
    }
    (count > 0).then(|| (weighted / count as f64, rate))
}

/// Whether two latencies differ by more than the stated margin.
pub fn differ(ours_ms: f64, device_ms: f64) -> bool {
    let gap = (ours_ms - device_ms).abs();
    gap > MARGIN_MS && gap > MARGIN_SHARE * ours_ms.max(device_ms)
}

/// The report's Device table and its notes.
pub struct DeviceTable {
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
    pub notes: Vec<String>,
}

/// The Device table's header and rows, and the notes; None when the result has no devices.
pub fn table(result: &TestResult) -> Option<DeviceTable> {
    let devices = devices(result);
    if devices.is_empty() {
        return None;
    }
    let header = vec![
        "Device",
        "Holds",
        "r/s",
        "w/s",
        "rMB/s",
        "wMB/s",
        "r_await (ms)",
        "w_await (ms)",
        "aqu-sz",
        "%util",
        "Our Reads/sec",
        "Our Read Avg (ms)",
        "Our Writes/sec",
        "Our Write Avg (ms)",
    ];
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for d in &devices {
        let mut holds: Vec<String> = d
            .databases
            .iter()
            .map(|n| format!("{n} database"))
            .collect();
        holds.extend(d.logs.iter().map(|n| format!("{n} log")));
        let read = ours(result, &d.databases, &["db_read"]);
        let mut write_w = 0.0;
        let mut write_n = 0.0;
        let mut write_rate = 0.0;
        for (names, class) in [(&d.databases, "db_write"), (&d.logs, "log_write")] {
            if let Some((avg, rate)) = ours(result, names, &[class]) {
                // Weighted by rate over the same window: the counts' proportion.
                write_w += avg * rate;
                write_n += rate;
                write_rate += rate;
            }
        }
        let write = (write_n > 0.0).then(|| (write_w / write_n, write_rate));
        let figure = |v: Option<(f64, f64)>, latency: bool| {
            v.map(|(avg, rate)| {
                if latency {
                    format!("{avg:.3}")
                } else {
                    format!("{rate:.1}")
                }
            })
            .unwrap_or_else(|| "-".into())
        };
        rows.push(vec![
            d.device.clone(),
            holds.join(", "),
            format!("{:.1}", d.r_s),
            format!("{:.1}", d.w_s),
            format!("{:.2}", d.rmb_s),
            format!("{:.2}", d.wmb_s),
            format!("{:.3}", d.r_await_ms),
            format!("{:.3}", d.w_await_ms),
            format!("{:.2}", d.aqu_sz),
            format!("{:.1}", d.util_percent),
            figure(read, false),
            figure(read, true),
            figure(write, false),
            figure(write, true),
        ]);
        for (what, ours, device, device_rate) in [
            ("read", read, d.r_await_ms, d.r_s),
            ("write", write, d.w_await_ms, d.w_s),
        ] {
            let Some((ours_ms, _)) = ours else { continue };
            if device_rate <= 0.0 || !differ(ours_ms, device) {
                continue;
            }
            let why = if ours_ms > device {
                "the difference was spent before the device: queued in jetproof's engine or the kernel, waiting for a CPU, or (buffered I/O) in the page cache's writeback"
            } else {
                "the device's figure includes I/O that is not jetproof's (another program, the file system's journal or metadata), or the kernel merged or split jetproof's I/Os"
            };
            notes.push(format!(
                "{}: our {what} latency {ours_ms:.3} ms, the device's {what} await {device:.3} ms (differ by more than {MARGIN_MS} ms and {:.0}%): {why}.",
                d.device,
                MARGIN_SHARE * 100.0
            ));
        }
        // Everything of ours on this device: every class of the databases on it, the log
        // classes of the logs on it.
        let ours_all: f64 = result
            .instances
            .iter()
            .flat_map(|i| {
                i.io.iter().filter(|(class, _)| {
                    if class.starts_with("log_") {
                        d.logs.contains(&i.name)
                    } else {
                        d.databases.contains(&i.name)
                    }
                })
            })
            .map(|(_, c)| c.ops_per_sec)
            .sum();
        let device_all = d.r_s + d.w_s;
        if device_all > OTHERS_SHARE * ours_all + OTHERS_MIN_PER_SEC {
            notes.push(format!(
                "{}: the device completed {device_all:.0} I/Os/s, jetproof issued {ours_all:.0}: the device is busy with I/O that is not jetproof's (another program, the file system's journal or metadata, or the kernel splitting jetproof's I/Os), which its latency includes.",
                d.device
            ));
        }
        if d.max_interval_util_percent >= 90.0 {
            notes.push(format!(
                "{}: at least one sample interval had the device {:.0}% busy (%util): it was near saturation (for devices that serve requests in parallel, %util overstates it).",
                d.device, d.max_interval_util_percent
            ));
        }
    }
    Some(DeviceTable {
        header,
        rows,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sections::WorkloadTotals;
    use crate::{InstanceResult, TestKind, Totals, io_results};
    use jetproof_io::IoClass;
    use jetproof_io::meter::InstanceStats;
    use std::time::Duration;

    /// One instance (a 15 ms read, a 2 ms log write, over one second) on device `vda` (database
    /// and log), whose window figures are `device`.
    fn result_with(device: serde_json::Value) -> TestResult {
        let stats = InstanceStats::new("db1");
        stats.class(IoClass::DbRead).record(32768, 15_000_000);
        stats.class(IoClass::LogWrite).record(6000, 2_000_000);
        let mut result = TestResult::new(
            TestKind::Performance,
            "2026-01-01T00:00:00Z".into(),
            1.0,
            crate::Parameters::default(),
        );
        result.instances.push(InstanceResult {
            name: "db1".into(),
            database_path: "/d".into(),
            log_path: "/l".into(),
            io: io_results(&stats, Duration::from_secs(1)),
            figures: crate::InstanceFigures::None,
        });
        let mut entry = serde_json::to_value(DeviceWindow {
            device: "vda".into(),
            databases: vec!["db1".into()],
            logs: vec!["db1".into()],
            ..DeviceWindow::default()
        })
        .expect("json");
        for (k, v) in device.as_object().into_iter().flatten() {
            entry[k] = v.clone();
        }
        result.totals = Totals::Workload(WorkloadTotals {
            devices: vec![serde_json::from_value(entry).expect("a device window")],
            ..WorkloadTotals::default()
        });
        result
    }

    #[test]
    fn notes_say_where_ours_and_the_devices_part() {
        // Reads: ours 15 ms against the device's 3 ms; writes 2 ms against 2.1 ms (no note);
        // 500 I/Os/s on the device against our 2; an interval 95% busy.
        let busy = result_with(serde_json::json!({
            "r_s": 300.0, "w_s": 200.0, "r_await_ms": 3.0, "w_await_ms": 2.1,
            "util_percent": 40.0, "max_interval_util_percent": 95.0,
        }));
        let t = table(&busy).expect("a device");
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.rows[0][0], "vda");
        assert_eq!(t.rows[0][1], "db1 database, db1 log");
        assert_eq!(t.header.len(), t.rows[0].len());
        let notes = t.notes.join("\n");
        assert!(notes.contains("our read latency 15"), "{notes}");
        assert!(notes.contains("before the device"), "{notes}");
        assert!(!notes.contains("our write latency"), "{notes}");
        assert!(notes.contains("not jetproof's"), "{notes}");
        assert!(notes.contains("95% busy"), "{notes}");
        // A device that saw what we saw: no note.
        let quiet = result_with(serde_json::json!({
            "r_s": 1.0, "w_s": 1.0, "r_await_ms": 14.0, "w_await_ms": 2.0,
            "util_percent": 2.0, "max_interval_util_percent": 3.0,
        }));
        let t = table(&quiet).expect("a device");
        assert!(t.notes.is_empty(), "{:?}", t.notes);
        // A result without devices has no section.
        let mut none = quiet.clone();
        none.totals = Totals::Workload(WorkloadTotals::default());
        assert!(table(&none).is_none());
        let md = crate::report::markdown(&busy);
        assert!(md.contains("## Device\n"), "{md}");
        assert!(md.contains("## Device Notes\n"), "{md}");
        // The terminal summary keeps its 100 columns: the notes are wrapped (issue 34: 165).
        let text = crate::report::text(&busy);
        assert!(text.contains("Device Notes"), "{text}");
        let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains("95% busy"), "{text}");
        assert!(words.contains("not jetproof's"), "{text}");
        for line in text.lines() {
            assert!(
                line.chars().count() <= 100,
                "{} columns: {line}",
                line.chars().count()
            );
        }
    }

    #[test]
    fn the_margin_is_both_absolute_and_relative() {
        assert!(!differ(0.2, 0.9), "under a millisecond apart");
        assert!(!differ(10.0, 12.0), "2 ms apart but only 17%");
        assert!(differ(10.0, 3.0), "7 ms and 70% apart");
        assert!(differ(1.0, 4.0), "3 ms and 75% apart");
    }
}
