//! `jetproof esrp SOLUTION RESULTS_DIR` through the real binary (issue 18, part 2): three hosts
//! of the Hitachi host shape (five databases each; tiny databases, second-long windows, four
//! log files) run the whole test set with one `--start-at` per test and `--host-name`, each
//! into `results/<host>/<test>` as the playbook fetches them. The document's Simulated Exchange
//! Configuration, per-server, aggregate, backup and replay tables are checked against each
//! host's `result.json` and the plan; the document is marked "not a complete ESRP test set"
//! (short runs, four logs), and a missing test is named; `esrp.html` renders in headless
//! Chromium when it is installed (as `report_chromium.rs`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{LENIENT_THRESHOLDS, chromium_or_skip, jetproof, result, spawn_jetproof};

/// The hosts: three by default; `JETPROOF_ESRP_HOSTS=16` runs the Hitachi solution's sixteen
/// (the plan's `--servers` and `--mailboxes` follow).
fn hosts() -> Vec<String> {
    let count = std::env::var("JETPROOF_ESRP_HOSTS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(3)
        .max(2);
    (1..=count).map(|n| format!("h{n}")).collect()
}

fn plan_flags() -> Vec<String> {
    let servers = hosts().len();
    let mut flags: Vec<String> = [
        "--mailboxes",
        &(100 * servers).to_string(),
        "--iops-per-mailbox",
        "0.5",
        "--headroom",
        "0",
        "--servers",
        &servers.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    flags.extend(PLAN.iter().map(|s| s.to_string()));
    flags
}

const PLAN: &[&str] = &[
    "--databases-per-server",
    "5",
    "--copies",
    "2",
    "--mailbox-size",
    "8MiB",
    "--raid",
    "5",
    "--raid-group-disks",
    "8+1",
    "--disk-size",
    "450GiB",
];

fn job(dir: &Path) -> PathBuf {
    let path = dir.join("job.toml");
    std::fs::write(
        &path,
        format!(
            "[storage]\ndatabases = 5\ndb_size = \"8MiB\"\npage_size = \"8KiB\"\ndirect_io = false\n\
             [workload]\nrecord_size = \"1KiB\"\nthreads = 1\n\
             [cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n\
             [run]\nduration = \"2s\"\nstress_duration = \"2s\"\nsample_interval = \"500ms\"\n\
             recovery_log_files = 4\nchecksum_after_performance = true\n{LENIENT_THRESHOLDS}"
        ),
    )
    .expect("write job");
    path
}

/// Runs `test` on every host at once, starting together a few seconds from now.
fn run_all(root: &Path, job: &Path, test: &str) {
    let hosts = hosts();
    let at = SystemTime::now() + Duration::from_millis(4000 + 500 * hosts.len() as u64);
    let at = at
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    let at = format!("{at:.3}");
    let children: Vec<_> = hosts
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

fn solution(root: &Path) -> PathBuf {
    let plan: Vec<String> = plan_flags().iter().map(|a| format!("{a:?}")).collect();
    let servers: Vec<String> = hosts().iter().map(|h| format!("{h:?}")).collect();
    let path = root.join("solution.toml");
    std::fs::write(
        &path,
        format!(
            "vendor = \"Example Storage\"\nproduct = \"Array 9000\"\nexchange_version = \"2010\"\n\
             servers = [{}]\n\
             features = [\"Thin provisioning\"]\n\
             best_practices = \"Keep logs and databases on separate RAID groups.\"\n\
             storage_hardware = [[\"Storage connectivity\", \"Fibre Channel\"], [\"Storage cache\", \"32GB\"]]\n\
             database_disks = [[\"RAID level\", \"RAID-5 (8D+1P)\"]]\n\
             plan = [{}]\n\
             [lun_layout]\ncolumns = [\"Host\", \"Databases\"]\nrows = [[\"h1\", \"1-5\"]]\n",
            servers.join(", "),
            plan.join(", ")
        ),
    )
    .expect("write solution");
    path
}

/// The lines of `markdown` from the heading that contains `heading` to the next heading.
fn section<'a>(markdown: &'a str, heading: &str) -> Vec<&'a str> {
    markdown
        .lines()
        .skip_while(|l| !(l.starts_with('#') && l.contains(heading)))
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .collect()
}

/// The value cell of the row `label` in a two-column table.
fn row(lines: &[&str], label: &str) -> String {
    let line = lines
        .iter()
        .find(|l| l.starts_with(&format!("| {label} |")))
        .unwrap_or_else(|| panic!("no row {label} in {lines:#?}"));
    line.trim_matches('|')
        .split('|')
        .nth(1)
        .expect("a value")
        .trim()
        .to_string()
}

/// A sum that starts from 0.0, as the document's does: Rust's f64 `sum` of nothing is -0.0,
/// which prints "-0.000" where a server's window did no I/O of a class.
fn total(values: &[f64]) -> f64 {
    values.iter().fold(0.0, |a, b| a + b)
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// The numbers after `prefix` in the row that starts with it (empty if there is no such row).
fn row_numbers(lines: &[&str], prefix: &str) -> Vec<f64> {
    lines
        .iter()
        .find(|l| l.starts_with(prefix))
        .map(|l| {
            l[prefix.len()..]
                .split('|')
                .filter_map(|c| c.trim().parse::<f64>().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `printed` (two decimals) is `value` printed, allowing the last digit's rounding
/// either way.
fn close_to_print(printed: f64, value: f64) -> bool {
    (printed - value).abs() <= 0.0051
}

/// As [`close_to_print`], for three decimals.
fn close_to_print3(printed: f64, value: f64) -> bool {
    (printed - value).abs() <= 0.00051
}

fn instance_figure(r: &serde_json::Value, class: &str, key: &str) -> Vec<f64> {
    r["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .filter_map(|i| i[class][key].as_f64())
        .collect()
}

#[test]
fn esrp_document_from_three_hosts_matches_their_results_and_the_plan() {
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path();
    let job = job(root);
    let hosts = hosts();
    for host in &hosts {
        jetproof(root)
            .args([
                "init",
                job.to_str().expect("utf-8"),
                "--data-dir",
                &format!("{host}-data"),
            ])
            .args(["--out", &format!("init-{host}")])
            .assert()
            .success();
    }
    for test in ["performance", "stress", "backup", "soft-recovery"] {
        run_all(root, &job, test);
    }
    let solution = solution(root);
    let output = jetproof(root)
        .args(["esrp", "solution.toml", "results", "--out", "doc"])
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(1),
        "an incomplete set exits 1: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let md = std::fs::read_to_string(root.join("doc/esrp.md")).expect("esrp.md");
    // Every figure re-derived from the result.json files (`esrp --verify`, issue 32).
    let verified = jetproof(root)
        .args([
            "esrp",
            "solution.toml",
            "results",
            "--verify",
            "doc/esrp.md",
        ])
        .output()
        .expect("runs");
    let said = String::from_utf8_lossy(&verified.stdout);
    assert!(
        verified.status.success() && said.contains(", 0 disagree"),
        "{said}{}",
        String::from_utf8_lossy(&verified.stderr)
    );

    // First page: marked incomplete, naming what is missing, and nothing else.
    let head: Vec<&str> = md.lines().take(4).collect();
    let mark = head
        .iter()
        .find(|l| l.contains("NOT A COMPLETE ESRP TEST SET"))
        .unwrap_or_else(|| panic!("no mark on the first page: {head:#?}"));
    // The fewest log files any instance generated, from the results (4 asked for): what
    // counts toward ESRP's 500, not what it replayed (issue 32, item 8).
    let fewest = hosts
        .iter()
        .flat_map(|host| {
            let r = result(&root.join(format!("results/{host}/soft-recovery/result.json")));
            r["instances"]
                .as_array()
                .expect("instances")
                .iter()
                .map(|i| i["logs_generated"].as_f64().expect("logs"))
                .collect::<Vec<_>>()
        })
        .fold(f64::INFINITY, f64::min);
    // At least one each: under load the start time may cut the generation short (the replay
    // then plays what was generated, `docs/many-servers.md`).
    assert!((1.0..500.0).contains(&fewest), "{fewest}");
    for needle in [
        "Performance test duration".to_string(),
        "Stress test duration".to_string(),
        format!(
            "Soft recovery ({fewest:.0} log files generated by the test per instance at the fewest"
        ),
    ] {
        assert!(mark.contains(&needle), "{needle}: {mark}");
    }
    for met in [
        "Every test of the set",
        "Checksum after",
        "Every server passes",
    ] {
        assert!(!mark.contains(met), "{met} is met: {mark}");
    }

    // Simulated Exchange Configuration: the plan's figures.
    let plan: serde_json::Value = {
        let out = jetproof(root)
            .arg("plan")
            .args(plan_flags())
            .arg("--json")
            .output()
            .expect("plan");
        serde_json::from_slice(&out.stdout).expect("json")
    };
    let sim = section(&md, "Simulated Exchange Configuration");
    assert_eq!(
        row(&sim, "Number of Exchange mailboxes simulated"),
        (100 * hosts.len()).to_string()
    );
    assert_eq!(
        row(&sim, "Number of active mailboxes per server"),
        plan["mailboxes_per_server"].to_string()
    );
    assert_eq!(
        row(&sim, "Number of mailboxes per database"),
        plan["mailboxes_per_database"].to_string()
    );
    assert_eq!(row(&sim, "Target transactional IOPS per server"), "50");
    assert_eq!(
        row(&sim, "Disks needed for capacity"),
        plan["disks_needed_for_capacity"].to_string()
    );
    assert_eq!(row(&sim, "Number of copies per database"), "2");

    // Data Reduction (issue 33): each server's figures from the performance test's checksum
    // pass, setting and measured, as its result.json has them.
    let reduction = section(&md, "Data Reduction");
    for host in &hosts {
        let r = result(&root.join(format!("results/{host}/performance/result.json")));
        let d = &r["data_reduction"];
        let all = &d["across_databases"];
        let line = reduction
            .iter()
            .find(|l| l.starts_with(&format!("| {host} | performance |")))
            .unwrap_or_else(|| panic!("no data reduction row for {host}: {reduction:#?}"));
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells[2], "8 KiB", "{line}");
        assert_eq!(cells[3], "1.00", "{line}");
        let measured = all["compression_ratio"].as_f64().expect("measured");
        assert!(
            cells[4].starts_with(&format!("{measured:.2} (")),
            "{line}: {measured}"
        );
        assert_eq!(cells[5], "1.00", "{line}");
        let share = all["duplicate_share"].as_f64().expect("share") * 100.0;
        assert_eq!(cells[6], format!("{share:.2}%"), "{line}");
        assert_eq!(
            cells[7],
            format!("{:.3}", all["dedup_ratio"].as_f64().expect("dedup")),
            "{line}"
        );
    }

    // Per-server and aggregate tables: each host's result.json, summed and averaged as ESRP does.
    let mut sums = [0.0f64; 3];
    let mut latencies = Vec::new();
    for host in &hosts {
        let r = result(&root.join(format!("results/{host}/performance/result.json")));
        let reads: f64 = total(&instance_figure(&r, "db_read", "ops_per_sec"));
        let writes: f64 = total(&instance_figure(&r, "db_write", "ops_per_sec"));
        let logs: f64 = total(&instance_figure(&r, "log_write", "ops_per_sec"));
        let read_ms = mean(&instance_figure(&r, "db_read", "avg_latency_ms"));
        let table = section(&md, &format!("Individual Server Metrics: {host}"));
        assert_eq!(
            row(&table, "Database Disks Reads/sec"),
            format!("{reads:.3}"),
            "{host}"
        );
        assert_eq!(
            row(&table, "Database Disks Writes/sec"),
            format!("{writes:.3}"),
            "{host}"
        );
        assert_eq!(
            row(&table, "Database Disks Transfers/sec"),
            format!("{:.3}", reads + writes),
            "{host}"
        );
        assert_eq!(
            row(&table, "Log Disks Writes/sec"),
            format!("{logs:.3}"),
            "{host}"
        );
        assert_eq!(
            row(&table, "Average Database Disk Read Latency (ms)"),
            format!("{read_ms:.3}"),
            "{host}"
        );
        assert!(reads > 0.0, "{host} read");
        sums[0] += reads;
        sums[1] += writes;
        sums[2] += logs;
        latencies.push(read_ms);
        // The checksum after the performance test ran on every page.
        assert!(
            r["totals"]["checksum"]["pages_seen"]
                .as_u64()
                .expect("pages")
                > 0
        );
    }
    let all = section(&md, "Aggregate Performance Across All Servers");
    assert_eq!(
        row(&all, "Database Disks Reads/sec"),
        format!("{:.3}", sums[0])
    );
    assert_eq!(
        row(&all, "Database Disks Writes/sec"),
        format!("{:.3}", sums[1])
    );
    assert_eq!(row(&all, "Log Disks Writes/sec"), format!("{:.3}", sums[2]));
    assert_eq!(
        row(&all, "Average Database Disk Read Latency (ms)"),
        format!("{:.3}", mean(&latencies))
    );

    // Backup: MB/s per database (average) and per server; replay: seconds per log.
    let backup_recovery = section(&md, "Database Backup and Recovery Performance");
    let mut total = 0.0;
    for host in &hosts {
        let r = result(&root.join(format!("results/{host}/backup/result.json")));
        let per: Vec<f64> = r["instances"]
            .as_array()
            .expect("instances")
            .iter()
            .map(|i| i["backup"]["mb_per_sec"].as_f64().expect("mb/s"))
            .collect();
        // A server's figure is the sum of its databases' as printed (per database ×
        // databases = per server), each database's listed.
        let server: f64 = per.iter().map(|v| (v * 100.0).round() / 100.0).sum();
        total += server;
        // Compared as numbers to the printed two decimals: the document sums in its own order,
        // and a sum differing in the last bit may round the other way at a half.
        let cells = row_numbers(&backup_recovery, &format!("| {host} | 5 |"));
        assert!(
            cells.len() == 2
                && close_to_print(cells[0], mean(&per))
                && close_to_print(cells[1], server),
            "{host}: {cells:?} against {} and {server} in {backup_recovery:#?}",
            mean(&per)
        );
        let r = result(&root.join(format!("results/{host}/soft-recovery/result.json")));
        let per_log: Vec<f64> = r["instances"]
            .as_array()
            .expect("instances")
            .iter()
            .map(|i| i["seconds_per_log"].as_f64().expect("seconds per log"))
            .collect();
        let logs = r["totals"]["logs_replayed"].as_f64().expect("logs");
        let generated = r["totals"]["logs_generated"].as_f64().expect("generated");
        assert!(
            generated >= 5.0,
            "at least 1 log × 5 instances: {generated}"
        );
        assert!(logs > generated, "replayed {logs}, generated {generated}");
        let cells = row_numbers(
            &backup_recovery,
            &format!("| {host} | {generated:.0} | {logs:.0} |"),
        );
        assert!(
            cells.len() == 1 && close_to_print3(cells[0], mean(&per_log)),
            "{host}: {cells:?} against {} in {backup_recovery:#?}",
            mean(&per_log)
        );
    }
    let cells = row_numbers(
        &backup_recovery,
        &format!("| **All servers** | {} |", 5 * hosts.len()),
    );
    assert!(
        cells.len() == 2 && close_to_print(cells[1], total),
        "{cells:?} against {total} in {backup_recovery:#?}"
    );

    // The appendix holds every host's report of every test.
    for host in &hosts {
        for test in ["performance", "stress", "backup", "recovery"] {
            assert!(
                md.contains(&format!("## Appendix: {host} — {test}")),
                "{host} {test}"
            );
        }
    }

    // The browser renders the page, marked on its first screen.
    render_in_chromium(root, &root.join("doc/esrp.html"), &sums);

    // The playbook's layout, one folder per test with a folder per host beneath, gives the
    // same document: hosts and tests are told apart by what their results record.
    let body = |md: &str| {
        md.split("\n## Appendix")
            .next()
            .unwrap_or_default()
            .to_string()
    };
    for host in &hosts {
        for test in ["performance", "stress", "backup", "soft-recovery"] {
            let to = root.join(format!("bytest/{test}"));
            std::fs::create_dir_all(&to).expect("mkdir");
            std::fs::rename(root.join(format!("results/{host}/{test}")), to.join(host))
                .expect("move");
        }
    }
    let output = jetproof(root)
        .args(["esrp", "solution.toml", "bytest", "--out", "doc-bytest"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let again = std::fs::read_to_string(root.join("doc-bytest/esrp.md")).expect("esrp.md");
    assert_eq!(
        body(&again),
        body(&md),
        "same document from the playbook's layout"
    );

    // A missing test on one host is named; the document is rewritten in place.
    std::fs::remove_dir_all(root.join("bytest/backup/h2")).expect("remove");
    let output = jetproof(root)
        .args([
            "esrp",
            solution.to_str().expect("utf-8"),
            "bytest",
            "--out",
            "doc",
        ])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let md = std::fs::read_to_string(root.join("doc/esrp.md")).expect("esrp.md");
    let first = md.lines().take(4).collect::<Vec<_>>().join("\n");
    assert!(first.contains("backup missing on h2"), "{first}");

    // A foreign file in --out is refused before anything is written.
    std::fs::write(root.join("doc/notes.txt"), "mine").expect("write");
    jetproof(root)
        .args(["esrp", "solution.toml", "bytest", "--out", "doc"])
        .assert()
        .code(2);
}

fn render_in_chromium(root: &Path, page: &Path, sums: &[f64; 3]) {
    let Some(browser) = chromium_or_skip() else {
        return;
    };
    let browse = |what: &[&str]| {
        let output = Command::new(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--window-size=1200,1600",
            ])
            .arg(format!(
                "--user-data-dir={}",
                root.join("profile").display()
            ))
            .args(what)
            .arg(format!("file://{}", page.display()))
            .current_dir(root)
            .output()
            .expect("run chromium");
        assert!(
            output.status.success(),
            "chromium: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    };
    let dom = String::from_utf8(browse(&["--dump-dom"]).stdout).expect("utf-8");
    assert!(
        dom.contains("id=\"esrp-mark\">Not a complete ESRP test set<"),
        "the mark is rendered"
    );
    assert!(
        dom.contains("Content-Security-Policy"),
        "no request possible"
    );
    assert!(!dom.contains("<script"), "no script");
    // The aggregate's figures as the browser shows them.
    assert!(
        dom.contains(&format!(">{:.3}<", sums[0])),
        "aggregate reads shown"
    );
    assert!(dom.contains("Aggregate Performance Across All Servers"));
    let shot = root.join("esrp.png");
    browse(&[&format!("--screenshot={}", shot.display())]);
    let bytes = std::fs::read(&shot).expect("screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG");
    assert!(
        bytes.len() > 10_000,
        "not a blank page: {} bytes",
        bytes.len()
    );
}

/// The example solution file parses as `esrp` reads it, and its plan flags make the Hitachi
/// plan: 459 IOPS per server, 432 + 45 disks.
#[test]
fn example_solution_file_parses_and_plans_hitachi() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/esrp/hitachi-ams2500-solution.toml");
    let text = std::fs::read_to_string(&path).expect("example");
    let solution: jetproof_results::esrp::Solution = toml::from_str(&text).expect("parses");
    assert_eq!(solution.servers.len(), 16);
    let plan: Vec<&str> = solution.plan.iter().map(String::as_str).collect();
    let root = tempfile::tempdir().expect("tempdir");
    let out = jetproof(root.path())
        .arg("plan")
        .args(&plan)
        .arg("--json")
        .output()
        .expect("plan");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(plan["target_iops_per_server"], 459);
    assert_eq!(plan["disks_needed_with_logs"], 477);
}

/// Bad input exits 2 before anything is written: an unknown key in the solution file, both
/// `plan` and `plan_json`, plan flags `plan` refuses, `--out` inside RESULTS_DIR, a RESULTS_DIR
/// without results.
#[test]
fn bad_solutions_and_places_exit_2_writing_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path();
    std::fs::create_dir(root.join("results")).expect("mkdir");
    let cases: [(&str, &[&str], &str); 5] = [
        ("vendr = \"x\"\n", &[], "vendr"),
        (
            "plan = [\"--mailboxes\", \"10\", \"--iops-per-mailbox\", \"1\"]\nplan_json = \"p.json\"\n",
            &[],
            "both",
        ),
        (
            "plan = [\"--mailboxes\", \"0\", \"--iops-per-mailbox\", \"1\"]\n",
            &[],
            "--mailboxes",
        ),
        (
            "vendor = \"x\"\n",
            &["--out", "results/doc"],
            "inside RESULTS_DIR",
        ),
        ("vendor = \"x\"\n", &[], "holds no results"),
    ];
    for (text, extra, needle) in cases {
        std::fs::write(root.join("s.toml"), text).expect("write");
        let output = jetproof(root)
            .args(["esrp", "s.toml", "results"])
            .args(extra)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(needle), "{needle}: {stderr}");
        assert!(!root.join("esrp").exists() && !root.join("results/doc").exists());
    }
}

/// Two results of one test under one host name (two runs on one machine without `--host-name`,
/// or one run given twice) are refused by `esrp` as `aggregate` refuses them: exit 2 naming the
/// host, both results and `--host-name`, before anything is written. Before, `esrp` kept the
/// later one as one server and noted it, while `aggregate` refused the same tree.
#[test]
fn two_results_of_one_host_name_are_refused_as_aggregate_refuses_them() {
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path();
    let job = common::small_job(root, "1s", "");
    let job_arg = job.to_str().expect("utf-8");
    for folder in ["a", "b"] {
        jetproof(root)
            .args(["run", job_arg, "--test", "performance", "--host-name", "h1"])
            .args(["--out", &format!("results/{folder}/performance")])
            .assert()
            .success();
    }
    std::fs::write(root.join("s.toml"), "vendor = \"x\"\n").expect("write");
    let output = jetproof(root)
        .args(["esrp", "s.toml", "results", "--out", "doc"])
        .output()
        .expect("runs");
    let esrp = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{esrp}");
    for words in [
        "host h1 given twice",
        "results/a/performance/result.json",
        "results/b/performance/result.json",
        "--host-name",
    ] {
        assert!(esrp.contains(words), "{words:?} missing from: {esrp}");
    }
    assert!(!root.join("doc").exists(), "esrp wrote despite refusing");
    let output = jetproof(root)
        .args(["aggregate", "results", "--out", "agg"])
        .output()
        .expect("runs");
    let aggregate = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{aggregate}");
    assert!(
        aggregate.contains("host h1 given twice") && aggregate.contains("--host-name"),
        "{aggregate}"
    );
}
