//! `--start-at` through the real binary (`docs/many-servers.md`): three runs launched seconds
//! apart with one start time measure windows that begin within 100 ms of each other; every test
//! type and `checksum` start their measured part at the time and record it; a past time is bad
//! input before any I/O; a warm-up not done by the time still starts the window on time and says
//! so.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

mod common;
use common::{jetproof, small_job, valid_result};

/// The job of host `name`: its own data directory under `root/name`.
fn host_job(root: &Path, name: &str, duration: &str, extra: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("host dir");
    let job = small_job(&dir, duration, extra);
    let text = std::fs::read_to_string(&job).expect("job");
    let data = dir.join("data");
    let text = text.replacen(
        "[storage]\n",
        &format!("[storage]\ndata_dir = \"{}\"\n", data.display()),
        1,
    );
    std::fs::write(&job, text).expect("job");
    job
}

fn rfc3339(time: SystemTime) -> String {
    jetproof_results::clock::rfc3339_millis(time)
}

fn parse(text: &str) -> SystemTime {
    jetproof_results::clock::parse_time(text).expect("an RFC 3339 time")
}

fn init(dir: &Path, job: &Path) {
    jetproof(dir)
        .args(["init", job.to_str().expect("utf-8")])
        .assert()
        .success();
}

/// The absolute gap between two instants, in milliseconds.
fn gap_ms(a: SystemTime, b: SystemTime) -> f64 {
    jetproof_results::clock::millis_between(a, b).abs()
}

#[test]
fn three_runs_launched_two_seconds_apart_measure_one_window() {
    let root = tempfile::tempdir().expect("tempdir");
    let names = ["alpha", "bravo", "charlie"];
    let jobs: Vec<PathBuf> = names
        .iter()
        .map(|n| host_job(root.path(), n, "2s", ""))
        .collect();
    for job in &jobs {
        init(root.path(), job);
    }
    // Launched 2 s apart; the last one has ~8 s to attach and warm its 1 MiB caches (3 s was too
    // little on a machine at load 24: the window then starts when the warm-up ends, not on time).
    let time = rfc3339(SystemTime::now() + Duration::from_secs(12));
    let start = parse(&time);
    let mut children = Vec::new();
    for (index, (name, job)) in names.iter().zip(&jobs).enumerate() {
        if index > 0 {
            std::thread::sleep(Duration::from_secs(2));
        }
        let out = format!("r-{name}");
        let child = common::spawn_jetproof(
            root.path(),
            &[
                "run",
                job.to_str().expect("utf-8"),
                "--test",
                "performance",
                "--start-at",
                &time,
                "--host-name",
                name,
                "--out",
                &out,
            ],
            true,
        );
        children.push(child);
    }
    for child in children {
        let output = child.wait_with_output().expect("wait");
        assert!(
            output.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let mut starts = Vec::new();
    for name in names {
        let dir = root.path().join(format!("r-{name}"));
        let result = valid_result(&dir.join("result.json"), "performance");
        assert_eq!(result.host.name, name);
        assert_eq!(result.requested_start.as_deref(), Some(time.as_str()));
        let measured = parse(result.measured_start.as_deref().expect("measured_start"));
        let skew = result.start_skew_ms.expect("start_skew_ms");
        assert!(
            (0.0..100.0).contains(&skew),
            "{name}: window started {skew} ms after the requested time"
        );
        assert!((gap_ms(start, measured) - skew).abs() < 1.0, "{name}");
        assert_eq!(result.ready_at_start, Some(true), "{name}");
        let end = parse(result.measured_end.as_deref().expect("measured_end"));
        let window = result
            .totals
            .workload()
            .map(|t| t.measured_seconds)
            .expect("seconds");
        assert!(
            (gap_ms(measured, end) / 1e3 - window).abs() < 0.01,
            "{name}"
        );
        // samples.csv has the wall clock, so the hosts' samples line up.
        let samples =
            std::fs::read_to_string(dir.join("samples.csv")).expect("samples.csv of the run");
        let mut lines = samples.lines();
        assert!(
            lines
                .next()
                .expect("header")
                .starts_with("elapsed_s,wall_clock,"),
            "{samples}"
        );
        let first = lines.next().expect("a sample");
        let mut fields = first.split(',');
        let elapsed: f64 = fields.next().expect("elapsed").parse().expect("seconds");
        let wall = parse(fields.next().expect("wall clock"));
        assert!(
            (gap_ms(measured, wall) - elapsed * 1e3).abs() < 60.0,
            "{name}: {first}"
        );
        let log = std::fs::read_to_string(dir.join("test.log")).expect("test.log");
        assert!(log.contains("Waiting for the start time"), "{log}");
        starts.push(measured);
    }
    for a in &starts {
        for b in &starts {
            assert!(gap_ms(*a, *b) < 100.0, "windows start {:?} apart", starts);
        }
    }
    aggregate_the_three(root.path(), &names);
}

/// `jetproof aggregate` over the three runs: achieved IOPS and every class's count are the sums
/// of the hosts', and each class's p99 is the p99 of one histogram of all the hosts' I/Os, built
/// here by adding the buckets of every instance's histogram.
fn aggregate_the_three(root: &Path, names: &[&str]) {
    let mut args = vec!["aggregate".to_string()];
    args.extend(names.iter().map(|n| format!("r-{n}")));
    args.extend(["--out".to_string(), "agg".to_string()]);
    let output = jetproof(root).args(&args).output().expect("aggregate");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let aggregate = common::result(&root.join("agg/result.json"));
    assert_eq!(aggregate["aggregate"], true);
    assert_eq!(aggregate["test"], "performance");
    assert_eq!(aggregate["verdict"], "pass");
    let hosts: Vec<jetproof_results::TestResult> = names
        .iter()
        .map(|n| valid_result(&root.join(format!("r-{n}/result.json")), "performance"))
        .collect();
    let iops: f64 = hosts.iter().filter_map(|h| h.achieved_iops).sum();
    let got = aggregate["achieved_iops"].as_f64().expect("achieved_iops");
    assert!((got - iops).abs() < 1e-6 * iops, "{got} against {iops}");
    let listed: Vec<&str> = aggregate["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| h["name"].as_str().expect("name"))
        .collect();
    assert_eq!(listed, names);
    let totals = aggregate["totals"].as_object().expect("totals");
    assert!(totals.contains_key("db_read") && totals.contains_key("log_write"));
    for (class, total) in totals {
        let mut buckets: std::collections::BTreeMap<u64, u64> = Default::default();
        let (mut count, mut sum_ns, mut min_ns, mut max_ns) = (0u64, 0u128, u64::MAX, 0u64);
        for host in &hosts {
            for instance in &host.instances {
                let Some(c) = instance.io.get(class) else {
                    continue;
                };
                count += c.count;
                let h = &c.histogram.as_ref().expect("histogram").latency;
                for [key, n] in &h.buckets {
                    *buckets.entry(*key).or_default() += n;
                }
                sum_ns += h.sum_ns;
                min_ns = min_ns.min(h.min_ns);
                max_ns = max_ns.max(h.max_ns);
            }
        }
        let all = jetproof_io::LatencyHistogram {
            count: buckets.values().sum(),
            sum_ns,
            min_ns,
            max_ns,
            buckets: buckets.into_iter().map(|(k, n)| [k, n]).collect(),
        };
        assert_eq!(total["count"].as_u64(), Some(count), "{class}");
        assert_eq!(
            total["p99_ms"].as_f64(),
            Some(all.value_at_quantile_ns(0.99) as f64 / 1e6),
            "{class}"
        );
        assert_eq!(
            total["histogram"]["latency"]["count"].as_u64(),
            Some(all.count),
            "{class}"
        );
    }
    let report = std::fs::read_to_string(root.join("agg/report.md")).expect("report.md");
    for words in [
        "## Individual Server Metrics",
        "## Aggregate Performance Across All Servers",
        "average of server averages",
        "| **Solution** | **Pass** |",
    ] {
        assert!(report.contains(words), "missing {words:?} in\n{report}");
    }
}

#[test]
fn a_start_time_already_past_is_bad_input_before_anything_is_made() {
    let root = tempfile::tempdir().expect("tempdir");
    let job = host_job(root.path(), "late", "2s", "");
    let past = rfc3339(SystemTime::now() - Duration::from_secs(30));
    for args in [
        vec!["run", "--test", "performance"],
        vec!["run", "--test", "backup"],
        vec!["run", "--test", "soft-recovery"],
        vec!["run", "--test", "stress"],
        vec!["checksum"],
    ] {
        let mut full: Vec<&str> = args.clone();
        full.splice(1..1, [job.to_str().expect("utf-8")]);
        full.extend(["--start-at", past.as_str(), "--out", "r"]);
        let output = jetproof(root.path()).args(&full).output().expect("run");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("--start-at") && stderr.contains("in the past"),
            "{args:?}: {stderr}"
        );
        // The refusal says where the lead a host needs is found (issue 32, item 12).
        assert!(
            stderr.contains("every run prints the lead it needed"),
            "{args:?}: {stderr}"
        );
        assert!(!root.path().join("late/data").exists(), "{args:?}");
        assert!(!root.path().join("r").exists(), "{args:?}");
    }
    // Not a time at all: clap's bad input, naming the accepted forms.
    let output = jetproof(root.path())
        .args(["checksum", "--start-at", "noon"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("RFC 3339"));
}

/// Backup's reads, checksum's reads and soft recovery's replay start at the time, after their
/// preparation; each records the time asked and the skew.
#[test]
fn backup_checksum_and_soft_recovery_start_their_timed_part_at_the_time() {
    let root = tempfile::tempdir().expect("tempdir");
    let job = host_job(root.path(), "solo", "2s", "");
    init(root.path(), &job);
    let job = job.to_str().expect("utf-8");
    for (args, test, out) in [
        (vec!["run", job, "--test", "backup"], "backup", "b"),
        (vec!["checksum", job], "checksum", "c"),
        (
            vec!["run", job, "--test", "soft-recovery", "--log-files", "2"],
            "recovery",
            "s",
        ),
    ] {
        let time = rfc3339(SystemTime::now() + Duration::from_secs(3));
        let start = parse(&time);
        let mut full = args.clone();
        full.extend(["--start-at", time.as_str(), "--out", out]);
        let output = jetproof(root.path()).args(&full).output().expect("run");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let result = valid_result(&root.path().join(out).join("result.json"), test);
        assert_eq!(result.requested_start.as_deref(), Some(time.as_str()));
        let measured = parse(result.measured_start.as_deref().expect("measured_start"));
        let skew = result.start_skew_ms.expect("skew");
        assert!((0.0..100.0).contains(&skew), "{test}: skew {skew} ms");
        assert!(measured >= start, "{test}");
        assert_eq!(result.ready_at_start, Some(true), "{test}");
        assert!(result.measured_end.is_some(), "{test}");
        let log = std::fs::read_to_string(root.path().join(out).join("test.log")).expect("log");
        assert!(log.contains("Waiting for the start time"), "{test}: {log}");
    }
}

/// A paced run's warm-up waits for a 10 s estimate with warm caches; a start time 3 s away comes
/// first. The window starts at the time all the same, and the result says it was not ready.
#[test]
fn a_warm_up_not_done_by_the_time_still_starts_the_window_on_time() {
    let root = tempfile::tempdir().expect("tempdir");
    let job = host_job(
        root.path(),
        "slow",
        "1s",
        "[simulation]\nmailboxes = 100\niops_per_mailbox = 1.0\n",
    );
    init(root.path(), &job);
    let start = SystemTime::now() + Duration::from_secs(3);
    let time = rfc3339(start);
    let output = jetproof(root.path())
        .args([
            "run",
            job.to_str().expect("utf-8"),
            "--test",
            "performance",
            "--start-at",
            &time,
            "--out",
            "r",
        ])
        .output()
        .expect("run");
    assert!(
        output.status.code() == Some(0) || output.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = valid_result(&root.path().join("r/result.json"), "performance");
    assert_eq!(result.ready_at_start, Some(false));
    let skew = result.start_skew_ms.expect("skew");
    assert!((0.0..100.0).contains(&skew), "skew {skew} ms");
    let log = std::fs::read_to_string(root.path().join("r/test.log")).expect("log");
    assert!(
        log.contains("The start time arrived before the prerequisites were attained"),
        "{log}"
    );
    // How long the preparation had taken and how much lead to give (issue 32, item 12): the
    // paced warm-up needs the pace's 30 s settling at least, more than the 3 s given.
    let line = log
        .lines()
        .find(|l| l.contains("The start time arrived before the prerequisites"))
        .expect("the line");
    let after_launch: f64 = between(line, "attained, ", " s after launch");
    assert!((2.0..30.0).contains(&after_launch), "{line}");
    let lead: f64 = between(line, "give --start-at at least ", " s ahead");
    assert!(lead >= 30.0 + after_launch, "{line}");
    let given = log
        .lines()
        .find(|l| l.contains("Preparation took "))
        .unwrap_or_else(|| panic!("no preparation line in {log}"));
    assert!(given.contains("too little lead"), "{given}");
}

/// The number between `before` and `after` in `line`.
fn between(line: &str, before: &str, after: &str) -> f64 {
    line.split_once(before)
        .and_then(|(_, rest)| rest.split_once(after))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no number between {before:?} and {after:?} in {line}"))
}

/// A run without `--start-at` prints the lead one would need on this host (issue 32, item 12):
/// its preparation from launch, and a lead above it; and the databases' sizes and growth.
#[test]
fn a_run_prints_the_lead_start_at_needs_and_the_databases_growth() {
    let root = tempfile::tempdir().expect("tempdir");
    let job = host_job(root.path(), "lead", "1s", "");
    init(root.path(), &job);
    jetproof(root.path())
        .args(["run", job.to_str().expect("utf-8"), "--test", "performance"])
        .args(["--out", "r"])
        .assert()
        .success();
    let log = std::fs::read_to_string(root.path().join("r/test.log")).expect("log");
    let line = log
        .lines()
        .find(|l| l.contains("Preparation took "))
        .unwrap_or_else(|| panic!("no preparation line in {log}"));
    let took = between(line, "Preparation took ", " s from launch");
    let lead = between(line, "give --start-at at least ", " s ahead");
    // A quick preparation prints as 0.0 s (one decimal); the lead is 1.5 x it + 5 s, rounded up.
    assert!(took >= 0.0 && lead >= 1.5 * took + 5.0 - 0.5, "{line}");

    // The databases' initial and final sizes and the growth to expect per hour at the achieved
    // rate, in the test log and report.md, from result.json's figures (issue 32, item 12).
    let r = common::result(&root.path().join("r/result.json"));
    let instances = r["instances"].as_array().expect("instances");
    let sum = |key: &str| -> u64 { instances.iter().map(|i| i[key].as_u64().expect(key)).sum() };
    let (initial, last) = (sum("db_size_initial_bytes"), sum("db_size_final_bytes"));
    let window = r["totals"]["measured_seconds"]
        .as_f64()
        .expect("measured_seconds");
    let sizes = format!("Database sizes (all 2 databases): initial {initial} bytes (");
    assert!(log.contains(&sizes), "{sizes} missing from {log}");
    assert!(log.contains(&format!(", final {last} bytes (")), "{log}");
    assert!(log.contains("per hour ("), "{log}");
    let report = std::fs::read_to_string(root.path().join("r/report.md")).expect("report.md");
    let per_hour = (last - initial) as f64 / window * 3600.0;
    let row = format!("| Database Growth per Hour at the Achieved Rate (bytes) | {per_hour:.0} (");
    assert!(report.contains(&row), "{row} missing from {report}");
    assert!(
        report.contains(&format!("| Initial Database Size (bytes) | {initial} |"))
            && report.contains(&format!("| Final Database Size (bytes) | {last} |")),
        "{report}"
    );
}
