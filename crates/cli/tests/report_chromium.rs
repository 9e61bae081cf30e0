//! `report.html` rendered by a real browser (issue 17): Debian's `chromium`, headless, takes a
//! screenshot and dumps the DOM of the page of a performance run, a backup, a checksum, a stress
//! run (with its checksum pass), a soft recovery and a failed run. Checked: the screenshot is not blank, every chart drew (each series' polyline
//! holds as many points as it says, more than none), the page can ask for nothing (its
//! Content-Security-Policy, no URL in any attribute), and the numbers shown equal `result.json`'s.
//! `jetproof report` rebuilds the same page from the directory.
//!
//! `.ci/run` installs chromium (`apt-get install chromium`, never a downloaded browser) and sets
//! `JETPROOF_REQUIRE_CHROMIUM=1`, so there a missing browser fails the test; elsewhere it says it
//! skipped.

mod common;

use std::io::Read as _;
use std::path::Path;
use std::process::Command;

use common::{chromium_or_skip, jetproof, small_job};

/// The browser on `page` with a fresh profile: `--screenshot` or `--dump-dom`.
fn browse(browser: &Path, page: &Path, profile: &Path, what: &[&str]) -> std::process::Output {
    let output = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--window-size=1200,2400",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(what)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(
        output.status.success(),
        "chromium {what:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The pixels of an 8-bit RGB or RGBA, non-interlaced PNG as RGB triples.
fn png_pixels(bytes: &[u8]) -> Vec<[u8; 3]> {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let (mut at, mut width, mut channels) = (8, 0usize, 0usize);
    let mut idat = Vec::new();
    while at + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4")) as usize;
        let kind = &bytes[at + 4..at + 8];
        let data = &bytes[at + 8..at + 8 + len];
        match kind {
            b"IHDR" => {
                width = u32::from_be_bytes(data[0..4].try_into().expect("4")) as usize;
                assert_eq!(data[8], 8, "8-bit depth");
                channels = match data[9] {
                    2 => 3,
                    6 => 4,
                    other => panic!("PNG colour type {other}"),
                };
                assert_eq!(data[12], 0, "not interlaced");
            }
            b"IDAT" => idat.extend_from_slice(data),
            _ => {}
        }
        at += 12 + len;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .expect("inflate");
    let stride = width * channels;
    let mut prev = vec![0u8; stride];
    let mut pixels = Vec::new();
    for line in raw.chunks(stride + 1) {
        let (filter, data) = (line[0], &line[1..]);
        let mut cur = vec![0u8; stride];
        for i in 0..stride {
            let a = if i >= channels { cur[i - channels] } else { 0 };
            let b = prev[i];
            let c = if i >= channels { prev[i - channels] } else { 0 };
            let predicted = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => {
                    let p = i16::from(a) + i16::from(b) - i16::from(c);
                    let (pa, pb, pc) = (
                        (p - i16::from(a)).abs(),
                        (p - i16::from(b)).abs(),
                        (p - i16::from(c)).abs(),
                    );
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                other => panic!("PNG filter {other}"),
            };
            cur[i] = data[i].wrapping_add(predicted);
        }
        for px in cur.chunks(channels) {
            pixels.push([px[0], px[1], px[2]]);
        }
        prev = cur;
    }
    pixels
}

/// The value of attribute `name` in the tag text `tag`.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let from = tag.find(&key)? + key.len();
    tag[from..].split('"').next()
}

/// Checks the DOM: every chart's series drew the points it says; returns how many charts.
fn charts_drew(dom: &str, what: &str) -> usize {
    let mut charts = 0;
    for chart in dom.split("<svg").skip(1) {
        let chart = chart.split("</svg>").next().unwrap_or("");
        if !chart.contains("class=\"chart\"") {
            continue;
        }
        charts += 1;
        let id = attribute(chart, "data-chart").unwrap_or("?").to_string();
        let mut drawn = 0;
        for tag in chart.split("<polyline").skip(1) {
            let tag = tag.split('>').next().unwrap_or("");
            let said: usize = attribute(tag, "data-points")
                .and_then(|n| n.parse().ok())
                .expect("data-points");
            let points = attribute(tag, "points").expect("points");
            let pairs: Vec<&str> = points.split_whitespace().collect();
            assert_eq!(pairs.len(), said, "{what} {id}: points drawn");
            assert!(
                pairs
                    .iter()
                    .all(|p| p.split(',').count() == 2
                        && p.split(',').all(|v| v.parse::<f64>().is_ok())),
                "{what} {id}: {points}"
            );
            drawn += said;
        }
        drawn += chart.matches("class=\"bar\"").count();
        assert!(drawn > 0, "{what} {id}: a chart with no data point");
    }
    charts
}

/// The cell text of the table row whose first cell is `first`, after `section`'s heading.
fn row(dom: &str, section: &str, first: &str) -> Vec<String> {
    let heading = format!("<h2>{section}</h2>");
    let at = dom
        .find(&heading)
        .unwrap_or_else(|| panic!("{section} in the page"));
    let rest = &dom[at..];
    let table = rest.split("</table>").next().unwrap_or("");
    for tr in table.split("<tr>").skip(1) {
        let cells: Vec<String> = tr
            .split("<td")
            .skip(1)
            .map(|c| {
                let text = c.split_once('>').map(|x| x.1).unwrap_or("");
                text.split("</td>").next().unwrap_or("").to_string()
            })
            .collect();
        if cells.first().map(String::as_str) == Some(first) {
            return cells;
        }
    }
    panic!("no row {first} in {section}");
}

/// `page` rendered by headless Chromium: the screenshot is not blank (more than 1% of its
/// pixels differ from the background, more than 20 colours) and every chart drew (at least
/// one); returns the DOM.
fn render(browser: &Path, page: &Path, scratch: &Path, what: &str) -> String {
    let shot = scratch.join(format!("{what}.png"));
    let profile = scratch.join(format!("profile-{what}"));
    browse(
        browser,
        page,
        &profile,
        &[&format!("--screenshot={}", shot.display())],
    );
    let pixels = png_pixels(&std::fs::read(&shot).expect("screenshot"));
    let background = pixels[0];
    let differing = pixels.iter().filter(|p| **p != background).count();
    assert!(
        differing * 100 > pixels.len(),
        "{what}: the screenshot is blank ({differing} of {} pixels differ from the background)",
        pixels.len()
    );
    let mut colours: Vec<[u8; 3]> = pixels.clone();
    colours.sort_unstable();
    colours.dedup();
    assert!(colours.len() > 20, "{what}: {} colours", colours.len());
    if let Ok(keep) = std::env::var("JETPROOF_KEEP_SCREENSHOTS") {
        std::fs::create_dir_all(&keep).expect("keep dir");
        std::fs::copy(&shot, Path::new(&keep).join(format!("report-{what}.png"))).expect("copy");
    }

    let dom = browse(browser, page, &profile, &["--dump-dom"]).stdout;
    let dom = String::from_utf8(dom).expect("UTF-8 DOM");
    let charts = charts_drew(&dom, what);
    assert!(charts > 0, "{what}: no chart");

    dom
}

fn check_page(browser: &Path, dir: &Path, scratch: &Path, what: &str) {
    let page = dir.join("report.html");
    let result = common::result(&dir.join("result.json"));
    let html = std::fs::read_to_string(&page).expect("report.html");
    assert!(
        html.contains("content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\""),
        "{what}: the Content-Security-Policy"
    );
    // Nothing in the page names a place to fetch from: no script, no link, no URL attribute.
    for needle in [
        "<script", "<link", "<iframe", "<img", "src=", "href=", "url(",
    ] {
        assert!(!html.contains(needle), "{what}: the page holds {needle}");
    }

    // jetproof report rebuilds the same page from the directory.
    let rebuilt = scratch.join(format!("rebuilt-{what}"));
    jetproof(scratch)
        .arg("report")
        .arg(dir)
        .arg("--out")
        .arg(&rebuilt)
        .assert()
        .success();
    let again = std::fs::read_to_string(rebuilt.join("report.html")).expect("rebuilt");
    assert!(
        again == html,
        "{what}: jetproof report builds the page the test wrote ({} and {} bytes)",
        again.len(),
        html.len()
    );

    let dom = render(browser, &page, scratch, what);

    // The numbers shown are result.json's.
    let verdict = match result["verdict"].as_str() {
        Some("pass") => "Overall Test Result: Pass",
        _ => "Overall Test Result: Fail",
    };
    assert!(dom.contains(verdict), "{what}: {verdict}");
    for reason in result["reasons"].as_array().expect("reasons") {
        let reason = reason.as_str().expect("text");
        assert!(dom.contains(reason), "{what}: the reason {reason}");
    }
    for instance in result["instances"].as_array().expect("instances") {
        let name = instance["name"].as_str().expect("name");
        if let Some(read) = instance.get("db_read")
            && matches!(result["test"].as_str(), Some("performance" | "stress"))
        {
            let cells = row(&dom, "Transactional I/O Performance", name);
            assert_eq!(
                cells[1],
                format!("{:.3}", read["avg_latency_ms"].as_f64().expect("avg")),
                "{what} {name}"
            );
            assert_eq!(
                cells[3],
                format!("{:.3}", read["ops_per_sec"].as_f64().expect("rate")),
                "{what} {name}"
            );
        }
        if result["test"] == "recovery" {
            let cells = row(&dom, "Soft Recovery Statistics", name);
            // The soft-recovery test's table has the logs it generated first (issue 32, item 8).
            let shift = match instance.get("logs_generated").filter(|g| !g.is_null()) {
                Some(generated) => {
                    assert_eq!(cells[1], generated.to_string(), "{what} {name}");
                    1
                }
                None => 0,
            };
            assert_eq!(
                cells[1 + shift],
                instance["logs_replayed"].to_string(),
                "{what} {name}"
            );
            assert_eq!(
                cells[4 + shift],
                instance["records_applied"].to_string(),
                "{what} {name}"
            );
        }
        if let Some(seen) = instance.get("pages_seen")
            && result["test"] != "backup"
        {
            let path = instance["database_path"].as_str().expect("path");
            let cells = row(&dom, "Database Checksum Statistics", path);
            assert_eq!(cells[1], seen.to_string(), "{what} {name}");
        }
        if let Some(read) = instance.get("backup_read") {
            let cells = row(&dom, "Database Backup I/O Performance", name);
            assert_eq!(
                cells[1],
                format!("{:.3}", read["ops_per_sec"].as_f64().expect("rate")),
                "{what} {name}"
            );
        }
    }
    if let Some(achieved) = result["achieved_iops"].as_f64() {
        let cells = row(
            &dom,
            "Test Summary",
            "Achieved Transactional I/O per Second",
        );
        assert_eq!(cells[1], format!("{achieved:.3}"), "{what}");
        assert!(
            dom.contains("data-chart=\"iops\""),
            "{what}: the IOPS chart"
        );
    }
    // Backup's bars carry each instance's MB/s exactly.
    if result["test"] == "backup" {
        for instance in result["instances"].as_array().expect("instances") {
            let mbps = instance["backup"]["mb_per_sec"].as_f64().expect("mb/s");
            assert!(
                dom.contains(&format!("data-value=\"{mbps}\"")),
                "{what}: the bar of {mbps} MB/s"
            );
        }
    }
}

#[test]
fn report_html_renders_in_headless_chromium() {
    let Some(browser) = chromium_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    jetproof(dir.path())
        .arg("init")
        .arg(&job)
        .assert()
        .success();
    jetproof(dir.path())
        .args(["run", "--test", "performance", "--out", "perf"])
        .arg(&job)
        .assert()
        .success();
    jetproof(dir.path())
        .args(["run", "--test", "backup", "--out", "backup"])
        .arg(&job)
        .assert()
        .success();
    jetproof(dir.path())
        .args(["checksum", "--out", "checksum"])
        .arg(&job)
        .assert()
        .success();
    // A failed run: no device reads in a nanosecond.
    let strict = dir.path().join("strict");
    std::fs::create_dir_all(&strict).expect("dir");
    let strict_job = small_job(
        &strict,
        "2s",
        "[thresholds]\ndb_read_avg_ms = 0.000001\ndb_read_max_ms = 10000\n\
         log_write_avg_ms = 1000\nlog_write_max_ms = 10000\npage_fault_stalls_per_sec = 1000\n",
    );
    jetproof(dir.path())
        .args(["run", "--test", "performance", "--out", "failed"])
        .arg(&strict_job)
        .assert()
        .code(1);
    jetproof(dir.path())
        .args([
            "run",
            "--test",
            "stress",
            "--duration",
            "2s",
            "--out",
            "stress",
        ])
        .arg(&job)
        .assert()
        .success();
    jetproof(dir.path())
        .args([
            "run",
            "--test",
            "soft-recovery",
            "--log-files",
            "2",
            "--out",
            "recovery",
        ])
        .arg(&job)
        .assert()
        .success();
    for what in ["perf", "backup", "checksum", "stress", "recovery", "failed"] {
        check_page(&browser, &dir.path().join(what), dir.path(), what);
    }
    let recovery = std::fs::read_to_string(dir.path().join("recovery/report.html")).expect("page");
    assert!(
        recovery.contains("data-chart=\"instance-replay-rate\""),
        "the replay rate"
    );
    assert!(
        recovery.contains("data-chart=\"replay-log-read\""),
        "the replay rate over time"
    );
    let stress = std::fs::read_to_string(dir.path().join("stress/report.html")).expect("page");
    assert!(
        stress.contains("data-chart=\"instance-pages\""),
        "stress's checksum pass"
    );
    let failed = std::fs::read_to_string(dir.path().join("failed/report.html")).expect("page");
    assert!(
        failed.contains("<h2>Broken Rules</h2>"),
        "the failed run's rules"
    );
}

/// A page that can ask for nothing: the CSP, and no URL anywhere.
fn self_contained(html: &str, what: &str) {
    assert!(
        html.contains("content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\""),
        "{what}: the Content-Security-Policy"
    );
    for needle in [
        "<script", "<link", "<iframe", "<img", "src=", "href=", "url(",
    ] {
        assert!(!html.contains(needle), "{what}: the page holds {needle}");
    }
}

/// The `data-series` names of each chart of `dom`, by `data-chart`.
fn chart_series(dom: &str) -> Vec<(String, Vec<String>)> {
    dom.split("<svg")
        .skip(1)
        .map(|chart| chart.split("</svg>").next().unwrap_or(""))
        .filter(|chart| chart.contains("class=\"chart\""))
        .map(|chart| {
            let id = attribute(chart, "data-chart").unwrap_or("?").to_string();
            let series = chart
                .split("<polyline")
                .skip(1)
                .filter_map(|tag| attribute(tag.split('>').next()?, "data-series"))
                .map(str::to_string)
                .collect();
            (id, series)
        })
        .collect()
}

/// `compare.html` of two performance runs (BASE and NEW overlaid in every chart), an
/// aggregate's `report.html` (per-host bars) and the `report.html` of a checksum that found a
/// damaged page, each rendered by headless Chromium: not blank, every chart drew.
#[test]
fn compare_aggregate_and_damaged_checksum_render_in_headless_chromium() {
    let Some(browser) = chromium_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let job = small_job(root, "2s", "");
    jetproof(root)
        .args(["init", "--quiet"])
        .arg(&job)
        .assert()
        .success();
    for (out, host) in [("a", "host-a"), ("b", "host-b")] {
        jetproof(root)
            .args([
                "run",
                "--test",
                "performance",
                "--quiet",
                "--host-name",
                host,
                "--out",
                out,
            ])
            .arg(&job)
            .assert()
            .success();
    }

    // compare: every chart overlays BASE and NEW, each drawn.
    jetproof(root)
        .args(["compare", "a", "b", "--out", "cmp"])
        .assert()
        .success();
    let page = root.join("cmp/compare.html");
    self_contained(
        &std::fs::read_to_string(&page).expect("compare.html"),
        "compare",
    );
    let dom = render(&browser, &page, root, "compare");
    let charts = chart_series(&dom);
    for id in [
        "compare-iops",
        "compare-avg-db_read",
        "compare-p99-db_read",
        "compare-avg-log_write",
        "compare-distribution-db_read",
        "compare-distribution-log_write",
    ] {
        assert!(
            charts.iter().any(|(c, _)| c == id),
            "compare: chart {id} in {charts:?}"
        );
    }
    for (id, series) in &charts {
        assert_eq!(series, &["BASE", "NEW"], "compare: {id} overlays both runs");
    }
    // The tables are there too, and the IOPS row holds both results' figures.
    let (a, b) = (
        common::result(&root.join("a/result.json")),
        common::result(&root.join("b/result.json")),
    );
    let cells = {
        let heading = "<h2>Figures</h2>";
        let at = dom.find(heading).expect("Figures in the page");
        let table = dom[at..].split("</table>").next().unwrap_or("");
        table
            .split("<tr>")
            .find(|tr| tr.contains("Achieved Transactional I/O per Second"))
            .expect("the IOPS row")
            .to_string()
    };
    for r in [&a, &b] {
        let iops = format!("{:.3}", r["achieved_iops"].as_f64().expect("iops"));
        assert!(cells.contains(&iops), "compare: {iops} in {cells}");
    }

    // An aggregate of two hosts' results (windows must overlap: a's result again, as another
    // host's): the per-host bars drew, one per host.
    let mut other = common::result(&root.join("a/result.json"));
    other["host"]["name"] = serde_json::Value::from("host-f");
    std::fs::create_dir_all(root.join("f")).expect("dir");
    std::fs::write(
        root.join("f/result.json"),
        serde_json::to_string_pretty(&other).expect("json"),
    )
    .expect("write");
    jetproof(root)
        .args(["aggregate", "a", "f", "--out", "agg"])
        .assert()
        .success();
    let page = root.join("agg/report.html");
    self_contained(
        &std::fs::read_to_string(&page).expect("aggregate page"),
        "aggregate",
    );
    let dom = render(&browser, &page, root, "aggregate");
    assert!(
        dom.contains("host-a") && dom.contains("host-f"),
        "aggregate: both hosts named"
    );
    let bars = dom.matches("class=\"bar\"").count();
    assert!(bars >= 2, "aggregate: per-host bars ({bars})");

    // A checksum that finds a page with a flipped bit: its Damaged Pages table names it.
    let db = root.join("jetproof-data/db1/db1.jpdb");
    let mut bytes = std::fs::read(&db).expect("read db");
    let page_size = 8192;
    let damaged = bytes.len() / page_size / 2;
    bytes[damaged * page_size + 3001] ^= 0x04;
    std::fs::write(&db, &bytes).expect("damage db");
    jetproof(root)
        .args(["checksum", "--quiet", "--out", "damaged"])
        .arg(&job)
        .assert()
        .code(1);
    let page = root.join("damaged/report.html");
    self_contained(
        &std::fs::read_to_string(&page).expect("checksum page"),
        "damaged",
    );
    let dom = render(&browser, &page, root, "damaged");
    let at = dom
        .find("<h2>Damaged Pages</h2>")
        .expect("damaged: the Damaged Pages section");
    let table = dom[at..].split("</table>").next().unwrap_or("");
    assert!(
        table.contains(&format!("<td class=\"n\">{damaged}</td>")) && table.contains("correctable"),
        "damaged: page {damaged} in {table}"
    );
}
