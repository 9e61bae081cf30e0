//! `run --metrics-listen` (issue 37, part 1; `docs/metrics.md`): bad addresses and ports in use
//! are bad input before any I/O, and Debian's real `prometheus` server scrapes a paced
//! performance test: the series exist, and the rate of operations it computes agrees with
//! `result.json` within 5 %. Without `prometheus` on PATH the scrape test says it skipped, and
//! fails when `JETPROOF_REQUIRE_PROMETHEUS` is set (`.ci/run` sets it).

mod common;

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{result, run_expecting, small_job};

#[test]
fn an_address_that_is_not_one_is_bad_input_before_any_io() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "5s", "");
    let (_, stderr) = run_expecting(
        dir.path(),
        &[
            "run",
            job.to_str().expect("utf-8"),
            "--test",
            "performance",
            "--metrics-listen",
            "nine-four-six-four",
            "--out",
            "out",
        ],
        2,
    );
    assert!(
        stderr.contains("--metrics-listen nine-four-six-four: not a PORT or ADDR:PORT"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("out").exists(),
        "a results folder was made"
    );
    assert!(
        !dir.path().join("jetproof-data").exists(),
        "databases were made"
    );
}

#[test]
fn a_port_in_use_is_bad_input_before_any_io() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "5s", "");
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let (_, stderr) = run_expecting(
        dir.path(),
        &[
            "run",
            job.to_str().expect("utf-8"),
            "--test",
            "performance",
            "--metrics-listen",
            &port,
            "--out",
            "out",
        ],
        2,
    );
    assert!(
        stderr.contains(&format!(
            "--metrics-listen {port}: cannot listen on 127.0.0.1:{port}"
        )),
        "{stderr}"
    );
    assert!(
        !dir.path().join("out").exists(),
        "a results folder was made"
    );
    assert!(
        !dir.path().join("jetproof-data").exists(),
        "databases were made"
    );
}

#[test]
fn metrics_listen_is_refused_by_the_tests_that_do_not_serve_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "5s", "");
    let (_, stderr) = run_expecting(
        dir.path(),
        &[
            "run",
            job.to_str().expect("utf-8"),
            "--test",
            "backup",
            "--metrics-listen",
            "9464",
        ],
        2,
    );
    assert!(stderr.contains("--metrics-listen"), "{stderr}");
    assert!(
        !dir.path().join("jetproof-data").exists(),
        "databases were made"
    );
}

/// `prometheus` on PATH, or None with the skip printed; fails when `JETPROOF_REQUIRE_PROMETHEUS`
/// is set.
fn prometheus_or_skip() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("prometheus"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("JETPROOF_REQUIRE_PROMETHEUS").is_none(),
            "prometheus is required (apt-get install prometheus)"
        );
        eprintln!("skipped: no prometheus on PATH (apt-get install prometheus)");
    }
    found
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Kills the Prometheus server when the test ends, also when it fails.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The body of `GET path` from 127.0.0.1:port (HTTP/1.0, the connection closed by the server),
/// or None when it cannot connect or the status is not 200.
fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200")
        .then(|| body.to_string())
        .or_else(|| head.starts_with("HTTP/1.0 200").then(|| body.to_string()))
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Prometheus's answer to an instant query at `time` (RFC 3339): the result vector.
fn query(port: u16, promql: &str, time: &str) -> Vec<serde_json::Value> {
    let path = format!(
        "/api/v1/query?query={}&time={}",
        encode(promql),
        encode(time)
    );
    let body = get(port, &path).unwrap_or_else(|| panic!("query {promql} failed"));
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON answer");
    assert_eq!(json["status"], "success", "{promql}: {body}");
    json["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn value(result: &[serde_json::Value], promql: &str) -> f64 {
    assert_eq!(result.len(), 1, "{promql}: one series expected: {result:?}");
    result[0]["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{promql}: no value in {result:?}"))
}

fn start_prometheus(binary: &Path, dir: &Path, web: u16, target: u16) -> Server {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: jetproof\n    scrape_interval: 1s\n    scrape_timeout: 1s\n\
             \x20   static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        ),
    )
    .expect("write config");
    let log = std::fs::File::create(dir.join("prometheus.log")).expect("log");
    let child = Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{web}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start prometheus");
    let server = Server(child);
    let started = Instant::now();
    while get(web, "/-/ready").is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "prometheus not ready in 60 s: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    server
}

#[test]
fn prometheus_scrapes_a_paced_performance_test_and_its_rate_agrees_with_result_json() {
    let Some(binary) = prometheus_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (web, metrics) = (free_port(), free_port());
    let prometheus_dir = dir.path().join("prometheus");
    std::fs::create_dir(&prometheus_dir).expect("mkdir");
    let _server = start_prometheus(&binary, &prometheus_dir, web, metrics);
    // 100 mailboxes at 2 IOPS: paced at 200 transactional IOPS, a steady rate to compare.
    let job = small_job(
        dir.path(),
        "18s",
        "[simulation]\nmailboxes = 100\niops_per_mailbox = 2.0\n",
    );
    let (_, stderr) = run_expecting(
        dir.path(),
        &[
            "run",
            job.to_str().expect("utf-8"),
            "--test",
            "performance",
            "--metrics-listen",
            &metrics.to_string(),
            "--out",
            "out",
        ],
        0,
    );
    assert!(
        stderr.contains(&format!(
            "metrics for Prometheus at http://127.0.0.1:{metrics}/metrics"
        )),
        "{stderr}"
    );
    let json = result(&dir.path().join("out/result.json"));
    let end = json["measured_end"]
        .as_str()
        .and_then(|end| end.parse::<Rfc3339>().ok())
        .expect("RFC 3339 measured_end")
        .0;
    // 2 s before the window's end: the 10 s range of the rate lies inside the window.
    let at = format!("{:.3}", end - 2.0);

    // The series exist.
    for series in [
        "jetproof_io_operations_total{class=\"db_read\"}",
        "jetproof_io_bytes_total{class=\"log_write\"}",
        "jetproof_io_latency_seconds_bucket{class=\"db_read\",le=\"+Inf\"}",
        "jetproof_io_latency_seconds_bucket{class=\"log_write\",le=\"0.01\"}",
        "jetproof_io_latency_seconds_sum{class=\"db_read\"}",
        "jetproof_io_latency_seconds_count{class=\"db_read\"}",
    ] {
        let found = query(web, series, &at);
        assert_eq!(
            found.len(),
            2,
            "{series}: one series per instance: {found:?}"
        );
    }
    for series in [
        "jetproof_transactional_iops",
        "jetproof_target_transactional_iops",
        "jetproof_database_page_fault_stalls_total",
        "jetproof_database_page_fault_stalls_per_second",
        "jetproof_phase{phase=\"measuring\"}",
        "jetproof_verdict_passing",
        "jetproof_window_elapsed_seconds",
        "jetproof_window_duration_seconds",
        "jetproof_threshold_page_fault_stalls_per_second",
    ] {
        assert_eq!(query(web, series, &at).len(), 1, "{series} missing");
    }
    assert_eq!(
        value(
            &query(web, "jetproof_target_transactional_iops", &at),
            "target"
        ),
        200.0
    );
    assert_eq!(
        value(
            &query(
                web,
                "jetproof_threshold_latency_seconds{class=\"db_read\",statistic=\"average\"}",
                &at
            ),
            "threshold"
        ),
        1.0,
        "the job's db_read_avg_ms = 1000"
    );
    assert_eq!(
        value(&query(web, "jetproof_verdict_passing", &at), "verdict"),
        1.0
    );
    // The histogram's count is the operations counter (one snapshot per scrape), and its +Inf
    // bucket holds every I/O.
    let ops = value(&query(web, "sum(jetproof_io_operations_total)", &at), "ops");
    let count = value(
        &query(web, "sum(jetproof_io_latency_seconds_count)", &at),
        "count",
    );
    let inf = value(
        &query(
            web,
            "sum(jetproof_io_latency_seconds_bucket{le=\"+Inf\"})",
            &at,
        ),
        "+Inf",
    );
    assert!(ops > 0.0, "no operations counted");
    assert_eq!(ops, count);
    assert_eq!(ops, inf);

    // The rate Prometheus computes agrees with result.json's achieved IOPS within 5 %.
    // Over the window but its first 2 s and last 1 s (a range that reaches past the series' first
    // or last scrape is extrapolated by Prometheus).
    let start = json["measured_start"]
        .as_str()
        .and_then(|start| start.parse::<Rfc3339>().ok())
        .expect("RFC 3339 measured_start")
        .0;
    let window = end - start;
    let range = (window - 3.0).floor();
    assert!(range >= 10.0, "window of {window} s too short");
    let promql =
        format!("sum(rate(jetproof_io_operations_total{{class=~\"db_read|db_write\"}}[{range}s]))");
    let rate = value(&query(web, &promql, &format!("{:.3}", end - 1.0)), &promql);
    let achieved = json["achieved_iops"].as_f64().expect("achieved_iops");
    let off = (rate - achieved).abs() / achieved;
    assert!(
        off <= 0.05,
        "Prometheus's rate {rate:.1} IOPS vs result.json's {achieved:.1}: {:.1} % apart",
        off * 100.0
    );
    eprintln!(
        "Prometheus: {rate:.1} transactional IOPS, result.json: {achieved:.1} ({:.2} % apart)",
        off * 100.0
    );
}

/// Seconds since the Unix epoch of an RFC 3339 time like `2026-12-02T14:33:05.123Z` (UTC).
struct Rfc3339(f64);

impl std::str::FromStr for Rfc3339 {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("not RFC 3339 UTC: {text}");
        let text = text.strip_suffix('Z').ok_or_else(bad)?;
        let (date, time) = text.split_once('T').ok_or_else(bad)?;
        let num = |s: &str| s.parse::<i64>().map_err(|_| bad());
        let mut d = date.split('-');
        let (y, m, day) = (
            num(d.next().ok_or_else(bad)?)?,
            num(d.next().ok_or_else(bad)?)?,
            num(d.next().ok_or_else(bad)?)?,
        );
        let mut t = time.split(':');
        let (h, min) = (
            num(t.next().ok_or_else(bad)?)?,
            num(t.next().ok_or_else(bad)?)?,
        );
        let s: f64 = t.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        // Days from the civil date (Howard Hinnant's algorithm).
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + day - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        Ok(Rfc3339((days * 86_400 + h * 3_600 + min * 60) as f64 + s))
    }
}
