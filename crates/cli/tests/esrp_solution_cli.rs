//! The solution end to end (issue 32, items 2–7) through the real binary: two hosts of two
//! databases each, the job matching the plan (mailboxes, databases, database size, copies = 2,
//! page size), run through the whole test set into `results/HOST/TEST/` with one `--start-at`
//! per test; then
//! - `esrp`: every figure re-derived from the result.json files by `esrp --verify` (the check
//!   other tests reuse), one verdict per server against the plan's target, the aggregate's
//!   target and achieved, the log replication rows, the backup multiplied out;
//! - the same results under a plan they do not match: named, marked "does not match the plan",
//!   not judged;
//! - the hosts' windows apart (one host's performance result moved an hour later): said so per
//!   test with each window, while what does not need the windows together is still judged;
//! - `aggregate results/`: each test of the layout aggregated apart; a host far below the
//!   other flagged;
//! - a host's backup report.md with MB/s per database; a document edited by hand fails
//!   `--verify`, naming the figure.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{LENIENT_THRESHOLDS, jetproof, result, spawn_jetproof};
use serde_json::Value;

const HOSTS: [&str; 2] = ["h1", "h2"];

/// The plan: 200 mailboxes on 2 servers, 2 databases each, 2 copies, 640 KiB mailboxes, so
/// that a test database is 50 × 640 KiB = 32,768,000 bytes: big enough, read with direct I/O,
/// that the two hosts' backups (and replays) overlap by more than their start skew.
const PLAN: &[&str] = &[
    "--mailboxes",
    "200",
    "--iops-per-mailbox",
    "0.5",
    "--headroom",
    "0",
    "--servers",
    "2",
    "--databases-per-server",
    "2",
    "--copies",
    "2",
    "--mailbox-size",
    "640KiB",
];

/// A plan the runs do not match: 20,000 mailboxes, 20 databases per server.
const OTHER_PLAN: &[&str] = &[
    "--mailboxes",
    "40000",
    "--iops-per-mailbox",
    "0.06",
    "--headroom",
    "0",
    "--servers",
    "2",
    "--databases-per-server",
    "20",
    "--copies",
    "2",
    "--mailbox-size",
    "640KiB",
];

fn plan_json(root: &Path, flags: &[&str]) -> Value {
    let out = jetproof(root)
        .arg("plan")
        .args(flags)
        .arg("--json")
        .output()
        .expect("plan");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// The job of one server of `plan`, except that it runs flat out (no pacing) for 2 s.
fn job(root: &Path, plan: &Value) -> PathBuf {
    let path = root.join("job.toml");
    std::fs::write(
        &path,
        format!(
            "[simulation]\nmailboxes = {}\ncopies_per_database = 2\n\
             [storage]\ndatabases = 2\ndb_size = \"{}B\"\npage_size = \"32KiB\"\ndirect_io = true\n\
             [workload]\nrecord_size = \"1KiB\"\nthreads = 1\n\
             [cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n\
             [log]\nfile_size = \"256KiB\"\nbuffer_size = \"64KiB\"\n\
             [run]\nduration = \"2s\"\nstress_duration = \"2s\"\nsample_interval = \"500ms\"\n\
             recovery_log_files = 4\nchecksum_after_performance = true\n{LENIENT_THRESHOLDS}",
            plan["mailboxes_per_server"], plan["test_database_size_bytes"]
        ),
    )
    .expect("write job");
    path
}

/// Runs `test` on both hosts at once, starting together a few seconds from now.
fn run_all(root: &Path, job: &Path, test: &str) {
    let at = SystemTime::now() + Duration::from_millis(5000);
    let at = format!(
        "{:.3}",
        at.duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64()
    );
    let children: Vec<_> = HOSTS
        .iter()
        .map(|host| {
            let data = format!("{host}-data");
            let out = format!("results/{host}/{test}");
            spawn_jetproof(
                root,
                &[
                    "run",
                    job.to_str().expect("utf-8"),
                    "--test",
                    test,
                    "--data-dir",
                    &data,
                    "--host-name",
                    host,
                    "--start-at",
                    &at,
                    "--out",
                    &out,
                    "--quiet",
                ],
                true,
            )
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().expect("wait");
        assert!(
            output.status.success(),
            "{test}: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn solution(root: &Path, name: &str, plan: &[&str]) -> PathBuf {
    let flags: Vec<String> = plan.iter().map(|a| format!("{a:?}")).collect();
    let path = root.join(name);
    std::fs::write(
        &path,
        format!(
            "vendor = \"Example Storage\"\nproduct = \"Array 9000\"\nservers = [\"h1\", \"h2\"]\nplan = [{}]\n",
            flags.join(", ")
        ),
    )
    .expect("write solution");
    path
}

/// `jetproof esrp SOLUTION RESULTS --out OUT`: exit code and esrp.md.
fn esrp(root: &Path, solution: &str, results: &str, out: &str) -> (Option<i32>, String) {
    let output = jetproof(root)
        .args(["esrp", solution, results, "--out", out])
        .output()
        .expect("runs");
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let md = std::fs::read_to_string(root.join(out).join("esrp.md")).expect("esrp.md");
    (output.status.code(), md)
}

/// `jetproof esrp SOLUTION RESULTS --verify MD`: exit code and what it printed.
fn verify(root: &Path, solution: &str, results: &str, md: &str) -> (Option<i32>, String) {
    let output = jetproof(root)
        .args(["esrp", solution, results, "--verify", md])
        .output()
        .expect("runs");
    (
        output.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

/// `--verify` agrees with the document on at least `least` figures.
fn verified(root: &Path, solution: &str, results: &str, md: &str, least: usize) {
    let (code, said) = verify(root, solution, results, md);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains(", 0 disagree"), "{said}");
    let figures: usize = said
        .split(": ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {said}"));
    assert!(figures >= least, "{figures} figures checked: {said}");
}

fn lines_under<'a>(md: &'a str, heading: &str) -> Vec<&'a str> {
    md.lines()
        .skip_while(|l| !(l.starts_with('#') && l.contains(heading)))
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .collect()
}

fn requirement<'a>(md: &'a str, name: &str) -> &'a str {
    md.lines()
        .find(|l| l.starts_with(&format!("| {name} |")))
        .unwrap_or_else(|| panic!("no requirement {name}"))
}

fn copy_tree(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp");
    assert!(status.success());
}

fn edit(path: &Path, change: impl FnOnce(&mut Value)) {
    let mut value = result(path);
    change(&mut value);
    std::fs::write(path, serde_json::to_string_pretty(&value).expect("json")).expect("write");
}

/// An RFC 3339 time of a result moved by `seconds`.
/// `text` moved by `seconds` (earlier when negative).
fn shifted(text: &str, seconds: i64) -> String {
    let t = jetproof_results::clock::parse_time(text).expect("rfc 3339");
    let by = Duration::from_secs(seconds.unsigned_abs());
    jetproof_results::clock::rfc3339_millis(if seconds < 0 { t - by } else { t + by })
}

#[test]
fn solution_end_to_end_every_figure_derived_from_the_results() {
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path();
    let plan = plan_json(root, PLAN);
    let job = job(root, &plan);
    for host in HOSTS {
        jetproof(root)
            .args(["init", job.to_str().expect("utf-8"), "--data-dir"])
            .arg(format!("{host}-data"))
            .args(["--out", &format!("init-{host}")])
            .assert()
            .success();
    }
    for test in ["performance", "stress", "backup", "soft-recovery"] {
        run_all(root, &job, test);
    }
    solution(root, "solution.toml", PLAN);
    solution(root, "other.toml", OTHER_PLAN);

    // The plan matched: every figure re-derived, one verdict per server.
    let (_, md) = esrp(root, "solution.toml", "results", "doc");
    verified(root, "solution.toml", "results", "doc/esrp.md", 50);
    assert!(!md.contains("DOES NOT MATCH THE PLAN"), "{md}");
    assert!(
        requirement(&md, "The results match the plan").ends_with("| yes |"),
        "{md}"
    );
    for host in HOSTS {
        let r = result(&root.join(format!("results/{host}/performance/result.json")));
        let achieved = r["achieved_iops"].as_f64().expect("achieved");
        assert!(achieved >= 50.0, "{host} flat out: {achieved}");
        let heading = format!(
            "### Individual Server Metrics: {host} (target 50 IOPS (the plan's), achieved {achieved:.3}, pass)"
        );
        assert!(md.contains(&heading), "{heading} in {md}");
        // Copies = 2: the replication reads are rows of the server's table (item 5).
        let table = lines_under(&md, &format!("Individual Server Metrics: {host}"));
        assert!(
            table
                .iter()
                .any(|l| l.starts_with("| Log Replication Reads/sec |")),
            "{table:#?}"
        );
        let replicated: f64 = r["instances"]
            .as_array()
            .expect("instances")
            .iter()
            .filter_map(|i| i["replication_read"]["count"].as_f64())
            .sum();
        assert!(replicated > 0.0, "{host}: no replication reads measured");
    }
    assert!(
        requirement(&md, "The plan's target IOPS on every server").ends_with("| yes |"),
        "{md}"
    );
    // The aggregate: the plan's total target against the servers' sum (item 4).
    let all = lines_under(&md, "Aggregate Performance Across All Servers");
    assert!(
        all.iter()
            .any(|l| l.starts_with("target 100 IOPS (the plan's, all servers), achieved ")),
        "{all:#?}"
    );
    assert!(
        all.iter()
            .any(|l| l.starts_with("| Target Transactional IOPS | 100.000 |")),
        "{all:#?}"
    );
    // Soft recovery (item 8): the files the test generated and those it replayed are apart
    // (it ran after the other tests, whose logs past their checkpoint it replays too), and only
    // the generated ones count toward ESRP's 500 (the job asked for 4).
    let mut fewest = u64::MAX;
    for host in HOSTS {
        let r = result(&root.join(format!("results/{host}/soft-recovery/result.json")));
        let (mut generated, mut replayed) = (0, 0);
        for i in r["instances"].as_array().expect("instances") {
            let g = i["logs_generated"].as_u64().expect("logs_generated");
            let p = i["logs_replayed"].as_u64().expect("logs_replayed");
            assert!(g >= 4 && p > g, "{host}: generated {g}, replayed {p}");
            fewest = fewest.min(g);
            generated += g;
            replayed += p;
        }
        assert_eq!(
            r["totals"]["logs_generated"].as_u64(),
            Some(generated),
            "{r}"
        );
        assert_eq!(r["totals"]["logs_replayed"].as_u64(), Some(replayed), "{r}");
        let row = format!("| {host} | {generated} | {replayed} | ");
        assert!(md.contains(&row), "{row} in {md}");
    }
    let soft = requirement(&md, "Soft recovery");
    assert!(
        soft.contains(&format!(
            "| {fewest} log files generated by the test per instance at the fewest"
        )) && soft.ends_with("| NO |"),
        "{soft}"
    );
    // Backup: each database's MB/s printed, the server's their sum (item 7).
    let r = result(&root.join("results/h1/backup/result.json"));
    let per: Vec<f64> = r["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .map(|i| (i["backup"]["mb_per_sec"].as_f64().expect("MB/s") * 100.0).round() / 100.0)
        .collect();
    let each: Vec<String> = per.iter().map(|v| format!("{v:.2}")).collect();
    let row = format!(
        "| h1 | 2 | {} | {:.3} | {:.2} |",
        each.join(" + "),
        per.iter().sum::<f64>() / 2.0,
        per.iter().sum::<f64>()
    );
    assert!(md.contains(&row), "{row} in {md}");
    // A host's backup report.md has MB/s per database and their sum.
    let report = std::fs::read_to_string(root.join("results/h1/backup/report.md")).expect("report");
    assert!(
        report.contains("## Database Backup (Read-only) Performance")
            && report.contains("| MB read/sec per database |")
            && report.contains(&format!(
                "| All 2 databases (sum) | - | - | {:.2} |",
                per.iter().sum::<f64>()
            )),
        "{report}"
    );

    // The check can fail: one figure changed by hand is named.
    let tampered = md.replacen(
        "| Database Disks Reads/sec | ",
        "| Database Disks Reads/sec | 1",
        1,
    );
    std::fs::write(root.join("tampered.md"), tampered).expect("write");
    let (code, said) = verify(root, "solution.toml", "results", "tampered.md");
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("DISAGREES: Individual Server Metrics: h1: Database Disks Reads/sec"),
        "{said}"
    );

    // A plan the runs do not match (item 2): named, marked, not judged; still consistent.
    let (code, md) = esrp(root, "other.toml", "results", "doc-other");
    assert_eq!(code, Some(1));
    verified(root, "other.toml", "results", "doc-other/esrp.md", 30);
    let mark = md
        .lines()
        .find(|l| l.starts_with("**DOES NOT MATCH THE PLAN.**"))
        .unwrap_or_else(|| panic!("no mark: {md}"));
    for needle in [
        "mailboxes per server: the plan has 20000, the results 100",
        "databases per host: the plan has 20, the results 2",
    ] {
        assert!(mark.contains(needle), "{needle}: {mark}");
    }
    assert!(
        requirement(&md, "The plan's target IOPS on every server").contains("not judged"),
        "{md}"
    );
    for host in HOSTS {
        assert!(
            md.contains(&format!(
                "### Individual Server Metrics: {host} (not judged: the results do not match the plan, achieved "
            )),
            "{host}: {md}"
        );
    }
    assert!(!md.contains(", pass)") && !md.contains(", FAIL)"), "{md}");

    // The windows apart (item 3): h2's performance result an hour later, or an hour earlier
    // when the test runs in the afternoon (UTC): the moved window stays on the same day, where
    // the document prints times without dates (windows on two days print their dates).
    copy_tree(&root.join("results"), &root.join("apart"));
    let moved = root.join("apart/h2/performance/result.json");
    let (start, end, by) = {
        let r = result(&moved);
        let start = r["measured_start"].as_str().expect("start");
        let hour: u32 = start[11..13].parse().expect("an hour");
        let by = if hour < 12 { 3600 } else { -3600 };
        (
            shifted(start, by),
            shifted(r["measured_end"].as_str().expect("end"), by),
            by,
        )
    };
    edit(&moved, |v| {
        v["measured_start"] = Value::from(start.clone());
        v["measured_end"] = Value::from(end.clone());
    });
    let (code, md) = esrp(root, "solution.toml", "apart", "doc-apart");
    assert_eq!(code, Some(1));
    verified(root, "solution.toml", "apart", "doc-apart/esrp.md", 35);
    let duration = requirement(&md, "Performance test duration");
    let h1 = result(&root.join("apart/h1/performance/result.json"));
    let window = |s: &str, e: &str| format!("{}–{}", &s[11..19], &e[11..19]);
    let h1_window = window(
        h1["measured_start"].as_str().expect("start"),
        h1["measured_end"].as_str().expect("end"),
    );
    let h2_window = window(&start, &end);
    // In the order the windows came.
    let expected = if by > 0 {
        format!("windows do not overlap: h1 {h1_window}, h2 {h2_window}")
    } else {
        format!("windows do not overlap: h2 {h2_window}, h1 {h1_window}")
    };
    assert!(duration.contains(&expected), "{expected} not in {duration}");
    // What each host ran on its own is judged: its checksum pass, its target.
    assert!(
        requirement(&md, "Checksum after the performance test").ends_with("| yes |"),
        "{md}"
    );
    assert!(
        requirement(&md, "The plan's target IOPS on every server").ends_with("| yes |"),
        "{md}"
    );
    assert!(
        !md.contains("not run") && !md.contains("no results"),
        "{md}"
    );
    // The stress test's windows overlapped: its duration is judged as usual.
    assert!(
        requirement(&md, "Stress test duration").contains("measured together"),
        "{md}"
    );

    // `aggregate results/`: the layout RESULTS/HOST/TEST, each test aggregated apart (item 6).
    let output = jetproof(root)
        .args(["aggregate", "results", "--out", "agg"])
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for (dir, test) in [
        ("performance", "performance"),
        ("stress", "stress"),
        ("backup", "backup"),
        ("recovery", "recovery"),
    ] {
        let a = result(&root.join(format!("agg/{dir}/result.json")));
        assert_eq!(a["test"], test);
        let names: Vec<&str> = a["hosts"]
            .as_array()
            .expect("hosts")
            .iter()
            .map(|h| h["name"].as_str().expect("name"))
            .collect();
        assert_eq!(names, HOSTS, "{test}");
    }
    let a = result(&root.join("agg/performance/result.json"));
    let sum: f64 = HOSTS
        .iter()
        .map(|h| {
            result(&root.join(format!("results/{h}/performance/result.json")))["achieved_iops"]
                .as_f64()
                .expect("achieved")
        })
        .sum();
    assert!((a["achieved_iops"].as_f64().expect("sum") - sum).abs() < 1e-9);
    assert!(a.get("below_median").is_none(), "{a}");

    // A host far below the other is flagged (aggregate's result, report and summary).
    copy_tree(&root.join("results"), &root.join("slow"));
    edit(&root.join("slow/h2/performance/result.json"), |v| {
        let achieved = v["achieved_iops"].as_f64().expect("achieved");
        v["achieved_iops"] = Value::from(achieved * 0.1);
    });
    let output = jetproof(root)
        .args([
            "aggregate",
            "slow/h1/performance",
            "slow/h2/performance",
            "--out",
            "agg-slow",
        ])
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("BELOW THE OTHERS: h2: "), "{stdout}");
    let a = result(&root.join("agg-slow/result.json"));
    let flags = a["below_median"].as_array().expect("flags");
    assert_eq!(flags.len(), 1, "{a}");
    assert!(
        flags[0]
            .as_str()
            .expect("text")
            .contains("% below the median of the other servers"),
        "{flags:?}"
    );
    let report = std::fs::read_to_string(root.join("agg-slow/report.md")).expect("report");
    assert!(report.contains("BELOW THE OTHER SERVERS: h2:"), "{report}");

    // A server whose copies read no closed log in its window (a rehearsal's seconds-long
    // test): the document prints its replication rows as 0, and --verify agrees (it used to
    // object "a replication row, but no result measured replication reads").
    copy_tree(&root.join("results"), &root.join("quiet"));
    edit(&root.join("quiet/h2/performance/result.json"), |v| {
        for i in v["instances"].as_array_mut().expect("instances") {
            if let Some(io) = i.as_object_mut() {
                io.remove("replication_read");
            }
        }
    });
    let (_, md) = esrp(root, "solution.toml", "quiet", "doc-quiet");
    let table = lines_under(&md, "Individual Server Metrics: h2");
    assert!(
        table
            .iter()
            .any(|l| l.starts_with("| Log Replication Reads/sec | 0.000 |")),
        "{table:#?}"
    );
    verified(root, "solution.toml", "quiet", "doc-quiet/esrp.md", 50);
}
