//! Re-derives every figure of an `esrp.md` from the hosts' `result.json` files and the plan,
//! apart from the code that wrote the document: the results are read as plain JSON and summed,
//! averaged and judged here again, and the document's tables are parsed back from its text.
//! What `jetproof esrp SOLUTION RESULTS_DIR --verify ESRP_MD` runs (`docs/esrp.md`), so a test
//! (the CLI tests, the namespace playbook test) checks a document with one command.
//!
//! Checked: every server's heading (the plan's target, achieved, the one verdict) and table
//! (target, achieved, database and log rates summed over its databases, latencies averaged,
//! log replication reads when they were measured); the aggregate's target and achieved and its
//! table (servers summed, latencies the average of the servers'); the backup table (each
//! database's MB/s, per server their sum, all servers the sum of the servers'); the soft
//! recovery table (logs replayed, seconds per log); the requirements on the plan's target,
//! every server passing, and the plan; the "does not match the plan" mark; and, when the hosts'
//! windows do not overlap, that the document says so with every host's window.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One result file as read.
#[derive(Clone, Debug)]
pub struct ResultFile {
    pub path: PathBuf,
    pub value: Value,
}

/// What the check found.
#[derive(Clone, Debug, Default)]
pub struct Checked {
    /// Figures compared (a heading's target counts one).
    pub figures: usize,
    /// Every disagreement, naming where.
    pub problems: Vec<String>,
}

impl Checked {
    fn expect(&mut self, ok: bool, what: impl FnOnce() -> String) {
        self.figures += 1;
        if !ok {
            self.problems.push(what());
        }
    }

    /// `printed` (a cell of `decimals` decimals) is `value` printed, allowing the last digit's
    /// rounding either way (the document may sum in another order).
    fn number(&mut self, place: &str, printed: Option<f64>, value: f64, decimals: i32) {
        let tolerance = 0.5 * 10f64.powi(-decimals) * 1.02 + 1e-9 * value.abs();
        self.expect(
            printed.is_some_and(|p| (p - value).abs() <= tolerance),
            || format!("{place}: the document has {printed:?}, the results give {value:.4}"),
        );
    }
}

/// Every host's `result.json` under RESULTS_DIR, as `jetproof esrp` finds them, read as JSON.
pub fn read_results(results_dir: &Path) -> Result<Vec<ResultFile>, String> {
    let paths = crate::esrp::find(results_dir).map_err(|e| e.to_string())?;
    paths
        .into_iter()
        .map(|path| {
            let text = jetproof_io::input::read_bytes(&path, crate::MAX_RESULT_JSON_BYTES)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let value = serde_json::from_slice(&text)
                .map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
            Ok(ResultFile { path, value })
        })
        .collect()
}

fn f(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

fn instances(r: &Value) -> &[Value] {
    r.get("instances")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The sum of a class's rate over the instances and the plain average of its average latency
/// over the instances that have it; None when no instance has the class.
fn class(r: &Value, name: &str) -> Option<(f64, f64)> {
    let classes: Vec<&Value> = instances(r).iter().filter_map(|i| i.get(name)).collect();
    if classes.is_empty() {
        return None;
    }
    let rate = classes.iter().filter_map(|c| f(c, "ops_per_sec")).sum();
    let latency: Vec<f64> = classes
        .iter()
        .filter_map(|c| f(c, "avg_latency_ms"))
        .collect();
    Some((rate, mean(&latency)))
}

/// A server's performance figures, as ESRP's table has them.
#[derive(Clone, Debug, Default)]
struct Server {
    reads: f64,
    writes: f64,
    read_ms: f64,
    write_ms: f64,
    logs: f64,
    log_ms: f64,
    replication: Option<(f64, f64)>,
}

impl Server {
    fn of(r: &Value) -> Server {
        let (reads, read_ms) = class(r, "db_read").unwrap_or_default();
        let (writes, write_ms) = class(r, "db_write").unwrap_or_default();
        let (logs, log_ms) = class(r, "log_write").unwrap_or_default();
        Server {
            reads,
            writes,
            read_ms,
            write_ms,
            logs,
            log_ms,
            replication: class(r, "replication_read"),
        }
    }
}

/// The cell of the row `label` in a two-column table among `lines`, as a number.
fn cell(lines: &[&str], label: &str) -> Option<f64> {
    lines
        .iter()
        .find(|l| l.starts_with(&format!("| {label} |")))
        .and_then(|l| l.trim_matches('|').split('|').nth(1))
        .and_then(|c| c.trim().parse().ok())
}

/// The lines under the heading that starts with `heading`, to the next heading.
fn section<'a>(md: &'a str, heading: &str) -> Option<(&'a str, Vec<&'a str>)> {
    let mut lines = md.lines();
    let head = lines.find(|l| l.starts_with(heading))?;
    Some((head, lines.take_while(|l| !l.starts_with('#')).collect()))
}

/// The number after `word` in `text` ("target 50 IOPS" → 50).
fn after(text: &str, word: &str) -> Option<f64> {
    let rest = &text[text.find(word)? + word.len()..];
    let number: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
        .collect();
    number.parse().ok()
}

/// Checks `markdown` (an `esrp.md`) against the results and the plan.
pub fn check(markdown: &str, results: &[ResultFile], plan: Option<&Value>) -> Checked {
    let mut c = Checked::default();
    // The results used: per host and test the one measured last.
    let used = results_used(results);
    let mismatched = plan.is_some_and(|p| !mismatches(p, &used).is_empty());
    c.expect(
        markdown.contains("**DOES NOT MATCH THE PLAN.**") == mismatched,
        || {
            format!(
                "the document is {}marked \"does not match the plan\", and the results {} the plan",
                if mismatched { "not " } else { "" },
                if mismatched { "do not match" } else { "match" }
            )
        },
    );
    check_rehearsal(&mut c, markdown, &used);
    let plan_target = plan.and_then(|p| f(p, "target_iops_per_server"));
    let verdicts = check_performance(&mut c, markdown, &used, plan, plan_target, mismatched);
    check_requirements(
        &mut c,
        markdown,
        &used,
        plan,
        plan_target,
        &verdicts,
        mismatched,
    );
    check_backup(&mut c, markdown, &used);
    check_recovery(&mut c, markdown, &used);
    c
}

/// The results a document uses: per host and test the one measured last.
fn results_used(results: &[ResultFile]) -> Used<'_> {
    let mut used: BTreeMap<(String, String), &ResultFile> = BTreeMap::new();
    for r in results {
        if r.value.get("aggregate").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let host = r.value["host"]["name"].as_str().unwrap_or("").to_string();
        let test = r.value["test"].as_str().unwrap_or("").to_string();
        let start = r.value["measured_start"].as_str().unwrap_or("");
        match used.get(&(host.clone(), test.clone())) {
            Some(kept) if kept.value["measured_start"].as_str().unwrap_or("") >= start => {}
            _ => {
                used.insert((host, test), r);
            }
        }
    }
    used
}

/// A host and test's result, as the document uses it.
type Used<'a> = BTreeMap<(String, String), &'a ResultFile>;

/// The results of `test` used, with their hosts.
fn of_test<'a>(used: &'a Used<'_>, test: &str) -> Vec<(&'a String, &'a Value)> {
    used.iter()
        .filter(|((_, t), _)| t == test)
        .map(|((h, _), r)| (h, &r.value))
        .collect()
}

/// A rehearsal's results (the job's `run.rehearsal`) mark the whole document, its title and
/// its requirements.
fn check_rehearsal(c: &mut Checked, markdown: &str, used: &Used<'_>) {
    let mut rehearsals: Vec<String> = used
        .iter()
        .filter(|(_, r)| r.value["parameters"]["run"]["rehearsal"].as_bool() == Some(true))
        .map(|((h, t), _)| format!("{h} {t}"))
        .collect();
    rehearsals.sort();
    let marked = markdown.contains(crate::esrp::REHEARSAL_MARK);
    c.expect(marked != rehearsals.is_empty(), || {
        format!(
            "the document is {}marked a rehearsal, and {}",
            if marked { "" } else { "not " },
            if rehearsals.is_empty() {
                "no result is one".to_string()
            } else {
                format!("these results are: {}", rehearsals.join(", "))
            }
        )
    });
    if !rehearsals.is_empty() {
        let title = markdown.lines().next().unwrap_or("");
        c.expect(title.ends_with("(REHEARSAL)"), || {
            format!("a rehearsal's title does not say so: {title}")
        });
        for r in &rehearsals {
            c.expect(markdown.contains(r.as_str()), || {
                format!("the rehearsal mark does not name {r}")
            });
        }
        let requirement = markdown
            .lines()
            .find(|l| l.starts_with(&format!("| {} |", crate::esrp::REHEARSAL_REQUIREMENT)));
        c.expect(
            requirement.is_some_and(|l| l.trim_end().ends_with("| NO |")),
            || {
                format!(
                    "the requirement \"{}\" is not shown unmet: {requirement:?}",
                    crate::esrp::REHEARSAL_REQUIREMENT
                )
            },
        );
    }
}

/// Performance: every server's heading and table, then the aggregate; the verdicts found
/// (host, pass, achieved IOPS).
fn check_performance(
    c: &mut Checked,
    markdown: &str,
    used: &Used<'_>,
    plan: Option<&Value>,
    plan_target: Option<f64>,
    mismatched: bool,
) -> Vec<(String, bool, f64)> {
    let of_test = |test: &str| of_test(used, test);
    let performance = of_test("performance");
    let mut servers = Vec::new();
    let mut verdicts = Vec::new();
    // The document prints replication rows for every server once any server measured
    // replication reads: a server whose copies read nothing in its window shows 0.
    let any_replication = performance
        .iter()
        .any(|(_, r)| class(r, "replication_read").is_some());
    for (host, r) in &performance {
        let place = format!("Individual Server Metrics: {host}");
        let Some((head, lines)) = section(markdown, &format!("### {place} (")) else {
            c.expect(false, || format!("no table \"{place}\""));
            continue;
        };
        let mut server = Server::of(r);
        if any_replication && server.replication.is_none() {
            server.replication = Some((0.0, 0.0));
        }
        let achieved = f(r, "achieved_iops").unwrap_or(0.0);
        let target = if plan.is_some() {
            plan_target
        } else {
            f(r, "target_iops")
        };
        let pass = r["verdict"].as_str() == Some("pass") && target.is_none_or(|t| achieved >= t);
        verdicts.push((host.to_string(), pass, achieved));
        c.number(
            &format!("{place}: heading's achieved"),
            after(head, "achieved"),
            achieved,
            3,
        );
        if mismatched {
            c.expect(head.contains("not judged"), || {
                format!("{place}: judged although the results do not match the plan: {head}")
            });
        } else {
            if let Some(t) = target {
                c.number(
                    &format!("{place}: heading's target"),
                    after(head, "target"),
                    t,
                    3,
                );
                c.number(
                    &format!("{place}: Target Transactional IOPS"),
                    cell(&lines, "Target Transactional IOPS"),
                    t,
                    3,
                );
            }
            let word = if pass { ", pass)" } else { ", FAIL)" };
            c.expect(head.ends_with(word), || {
                format!("{place}: the heading should end \"{word}\": {head}")
            });
        }
        c.number(
            &format!("{place}: Achieved Transactional IOPS"),
            cell(&lines, "Achieved Transactional IOPS"),
            achieved,
            3,
        );
        server_rows(c, &place, &lines, &server);
        servers.push(server);
    }
    let apart = windows_apart(&performance);
    if !performance.is_empty() {
        let place = "Aggregate Performance Across All Servers";
        match (section(markdown, &format!("### {place}")), apart.as_ref()) {
            (None, _) => c.expect(false, || format!("no \"{place}\"")),
            (Some((_, lines)), Some(windows)) => {
                let text = lines.join(" ");
                c.expect(text.contains("Not combined: windows do not overlap"), || {
                    format!("{place}: the hosts' windows do not overlap ({windows:?}) and it does not say so")
                });
                for (host, start, end) in windows {
                    c.expect(text.contains(&format!("{host} {start}–{end}")), || {
                        format!("{place}: {host}'s window {start}–{end} is not given")
                    });
                }
            }
            (Some((_, lines)), None) => {
                let achieved: f64 = verdicts.iter().map(|v| v.2).sum();
                let total_target = match plan {
                    Some(p) => f(p, "target_iops_total"),
                    None => {
                        let targets: Vec<f64> = performance
                            .iter()
                            .filter_map(|(_, r)| f(r, "target_iops"))
                            .collect();
                        (!targets.is_empty()).then(|| targets.iter().sum())
                    }
                };
                let said = lines
                    .iter()
                    .find(|l| !l.trim().is_empty())
                    .copied()
                    .unwrap_or("");
                c.number(
                    &format!("{place}: achieved"),
                    after(said, "achieved"),
                    achieved,
                    3,
                );
                c.number(
                    &format!("{place}: Achieved Transactional IOPS"),
                    cell(&lines, "Achieved Transactional IOPS"),
                    achieved,
                    3,
                );
                if let (Some(t), false) = (total_target, mismatched) {
                    c.number(&format!("{place}: target"), after(said, "target"), t, 3);
                    c.number(
                        &format!("{place}: Target Transactional IOPS"),
                        cell(&lines, "Target Transactional IOPS"),
                        t,
                        3,
                    );
                    let word = if achieved >= t {
                        "at or above the target"
                    } else {
                        "BELOW THE TARGET"
                    };
                    c.expect(said.contains(word), || {
                        format!("{place}: should say \"{word}\": {said}")
                    });
                }
                let replication: Vec<(f64, f64)> =
                    servers.iter().filter_map(|s| s.replication).collect();
                let all = Server {
                    reads: servers.iter().map(|s| s.reads).sum(),
                    writes: servers.iter().map(|s| s.writes).sum(),
                    read_ms: mean(&servers.iter().map(|s| s.read_ms).collect::<Vec<_>>()),
                    write_ms: mean(&servers.iter().map(|s| s.write_ms).collect::<Vec<_>>()),
                    logs: servers.iter().map(|s| s.logs).sum(),
                    log_ms: mean(&servers.iter().map(|s| s.log_ms).collect::<Vec<_>>()),
                    replication: (!replication.is_empty()).then(|| {
                        (
                            replication.iter().map(|r| r.0).sum(),
                            mean(
                                &servers
                                    .iter()
                                    .map(|s| s.replication.map_or(0.0, |r| r.1))
                                    .collect::<Vec<_>>(),
                            ),
                        )
                    }),
                };
                server_rows(c, place, &lines, &all);
            }
        }
    }

    verdicts
}

/// The requirements: the plan's target and every server passing, as the headings judge.
fn check_requirements(
    c: &mut Checked,
    markdown: &str,
    used: &Used<'_>,
    plan: Option<&Value>,
    plan_target: Option<f64>,
    verdicts: &[(String, bool, f64)],
    mismatched: bool,
) {
    let of_test = |test: &str| of_test(used, test);
    let performance = of_test("performance");
    let requirement = |name: &str| -> Option<(String, bool)> {
        markdown
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .map(|l| {
                let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
                (
                    cells.get(2).copied().unwrap_or("").to_string(),
                    cells.last() == Some(&"yes"),
                )
            })
    };
    if let (Some(_), false) = (plan_target, performance.is_empty()) {
        let expected = !mismatched && verdicts.iter().all(|v| v.1);
        let found = requirement("The plan's target IOPS on every server");
        c.expect(found.as_ref().is_some_and(|f| f.1 == expected), || {
            format!("requirement \"The plan's target IOPS on every server\": met should be {expected}: {found:?}")
        });
        // The first page prints each server's figure and verdict as its heading does.
        if !mismatched {
            for (host, pass, achieved) in verdicts {
                let said = format!(
                    "{host} {achieved:.3} ({})",
                    if *pass { "pass" } else { "FAIL" }
                );
                c.expect(found.as_ref().is_some_and(|f| f.0.contains(&said)), || {
                    format!("requirement \"The plan's target IOPS on every server\": should list \"{said}\": {found:?}")
                });
            }
        }
    }
    if plan.is_some() {
        let found = requirement("The results match the plan");
        c.expect(found.as_ref().is_some_and(|f| f.1 != mismatched), || {
            format!(
                "requirement \"The results match the plan\": met should be {}: {found:?}",
                !mismatched
            )
        });
    }
    let every_pass = used.iter().all(|((h, t), r)| {
        if t == "performance" && !mismatched {
            verdicts.iter().any(|v| &v.0 == h && v.1)
        } else {
            r.value["verdict"].as_str() == Some("pass")
        }
    });
    let found = requirement("Every server passes every test");
    c.expect(found.as_ref().is_some_and(|f| f.1 == every_pass), || {
        format!(
            "requirement \"Every server passes every test\": met should be {every_pass}: {found:?}"
        )
    });
    // Windows that do not overlap are said so, per test, with each host's window.
    for (test, label) in [
        ("performance", "Performance test duration"),
        ("stress", "Stress test duration"),
    ] {
        let hosts = of_test(test);
        if let Some(windows) = windows_apart(&hosts) {
            let found = requirement(label).map(|f| f.0).unwrap_or_default();
            c.expect(found.starts_with("windows do not overlap:"), || {
                format!("requirement \"{label}\": should say the windows do not overlap: {found}")
            });
            for (host, start, end) in &windows {
                c.expect(found.contains(&format!("{host} {start}–{end}")), || {
                    format!("requirement \"{label}\": {host}'s window {start}–{end} is not given: {found}")
                });
            }
        }
    }
}

/// Backup: each database's MB/s, per server the sum, all servers the sum of the servers'.
fn check_backup(c: &mut Checked, markdown: &str, used: &Used<'_>) {
    let of_test = |test: &str| of_test(used, test);
    let lines: Vec<&str> = markdown.lines().collect();
    let backup = of_test("backup");
    let mut total = 0.0;
    let mut databases = 0usize;
    for (host, r) in &backup {
        let per: Vec<f64> = instances(r)
            .iter()
            .filter_map(|i| i.get("backup").and_then(|b| f(b, "mb_per_sec")))
            .map(|v| (v * 100.0).round() / 100.0)
            .collect();
        let server: f64 = per.iter().sum();
        total += server;
        databases += per.len();
        let place = format!("backup row {host}");
        let Some(row) = lines
            .iter()
            .find(|l| l.starts_with(&format!("| {host} | {} | ", per.len())))
        else {
            c.expect(false, || {
                format!("{place}: no row with its {} databases", per.len())
            });
            continue;
        };
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let listed: Vec<f64> = cells
            .get(2)
            .map(|c| {
                c.split(" + ")
                    .filter_map(|v| v.trim().parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        c.expect(listed == per, || {
            format!("{place}: each database's MB/s {listed:?}, the results {per:?}")
        });
        c.number(
            &format!("{place}: average"),
            cells.get(3).and_then(|v| v.parse().ok()),
            server / per.len().max(1) as f64,
            3,
        );
        c.number(
            &format!("{place}: per server"),
            cells.get(4).and_then(|v| v.parse().ok()),
            server,
            2,
        );
    }
    if !backup.is_empty() {
        let row = lines.iter().find(|l| {
            l.starts_with(&format!(
                "| **All servers** | {databases} | (the servers' sums)"
            ))
        });
        let cells: Vec<&str> = row.map_or(Vec::new(), |r| {
            r.trim_matches('|').split('|').map(str::trim).collect()
        });
        c.number(
            "backup row All servers: total",
            cells.get(4).and_then(|v| v.parse().ok()),
            total,
            2,
        );
    }
}

fn check_recovery(c: &mut Checked, markdown: &str, used: &Used<'_>) {
    let of_test = |test: &str| of_test(used, test);
    let lines: Vec<&str> = markdown.lines().collect();
    // Soft recovery: logs generated (by the test: what counts toward ESRP's 500) and replayed
    // per server and in all, seconds per log.
    let recovery = of_test("recovery");
    let (mut logs, mut generated_all, mut all) = (0.0, 0.0, Vec::new());
    for (host, r) in &recovery {
        let replayed = r["totals"]["logs_replayed"].as_f64().unwrap_or(0.0);
        let generated: f64 = instances(r)
            .iter()
            .map(|i| f(i, "logs_generated").unwrap_or(0.0))
            .sum();
        let per: Vec<f64> = instances(r)
            .iter()
            .filter_map(|i| f(i, "seconds_per_log"))
            .collect();
        logs += replayed;
        generated_all += generated;
        let row = lines
            .iter()
            .find(|l| l.starts_with(&format!("| {host} | {generated:.0} | {replayed:.0} | ")));
        let value = row
            .and_then(|l| l.trim_matches('|').split('|').nth(3))
            .and_then(|v| v.trim().parse().ok());
        c.number(
            &format!(
                "soft recovery row {host} ({generated:.0} logs generated, {replayed:.0} replayed)"
            ),
            value,
            mean(&per),
            3,
        );
        all.extend(per);
    }
    if !recovery.is_empty() {
        let row = lines.iter().find(|l| {
            l.starts_with(&format!(
                "| **All servers** | {generated_all:.0} | {logs:.0} | "
            ))
        });
        let value = row
            .and_then(|l| l.trim_matches('|').split('|').nth(3))
            .and_then(|v| v.trim().parse().ok());
        c.number(
            &format!(
                "soft recovery row All servers ({generated_all:.0} logs generated, {logs:.0} replayed)"
            ),
            value,
            mean(&all),
            3,
        );
    }
}

fn server_rows(c: &mut Checked, place: &str, lines: &[&str], s: &Server) {
    let rows = [
        ("Database Disks Transfers/sec", s.reads + s.writes),
        ("Database Disks Reads/sec", s.reads),
        ("Database Disks Writes/sec", s.writes),
        ("Average Database Disk Read Latency (ms)", s.read_ms),
        ("Average Database Disk Write Latency (ms)", s.write_ms),
        ("Log Disks Writes/sec", s.logs),
        ("Average Log Disk Write Latency (ms)", s.log_ms),
    ];
    for (label, value) in rows {
        c.number(&format!("{place}: {label}"), cell(lines, label), value, 3);
    }
    match s.replication {
        Some((rate, latency)) => {
            c.number(
                &format!("{place}: Log Replication Reads/sec"),
                cell(lines, "Log Replication Reads/sec"),
                rate,
                3,
            );
            c.number(
                &format!("{place}: Average Log Replication Read Latency (ms)"),
                cell(lines, "Average Log Replication Read Latency (ms)"),
                latency,
                3,
            );
        }
        None => c.expect(cell(lines, "Log Replication Reads/sec").is_none(), || {
            format!("{place}: a replication row, but no result measured replication reads")
        }),
    }
}

/// Every host's window (HH:MM:SS, as the document prints them on one day) when the windows do
/// not all overlap; None when they do.
fn windows_apart(hosts: &[(&String, &Value)]) -> Option<Vec<(String, String, String)>> {
    let windows: Vec<(String, String, String)> = hosts
        .iter()
        .map(|(h, r)| {
            (
                h.to_string(),
                r["measured_start"].as_str().unwrap_or("").to_string(),
                r["measured_end"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    // RFC 3339 UTC with milliseconds compares as text.
    let latest = windows.iter().map(|w| w.1.clone()).max()?;
    let earliest_end = windows.iter().map(|w| w.2.clone()).min()?;
    if latest < earliest_end {
        return None;
    }
    let one_day = windows
        .iter()
        .all(|w| w.1.get(..10) == windows[0].1.get(..10));
    let time = |t: &str| {
        if one_day {
            t.get(11..19).unwrap_or(t).to_string()
        } else {
            t.get(..19).unwrap_or(t).replace('T', " ")
        }
    };
    Some(
        windows
            .iter()
            .map(|(h, s, e)| (h.clone(), time(s), time(e)))
            .collect(),
    )
}

/// The results' figures the plan fixes, where they differ from it (derived from the JSON).
fn mismatches(plan: &Value, used: &BTreeMap<(String, String), &ResultFile>) -> Vec<String> {
    let inputs = &plan["inputs"];
    let mut out = Vec::new();
    for ((host, test), r) in used {
        let job = &r.value["parameters"];
        let size = |v: &Value| match v {
            Value::String(t) => crate::esrp::parse_size(t),
            v => v.as_u64(),
        };
        let found = [
            (
                "mailboxes",
                job["simulation"]["mailboxes"].as_u64(),
                plan["mailboxes_per_server"].as_u64(),
            ),
            (
                "databases",
                Some(instances(&r.value).len() as u64),
                inputs["databases_per_server"].as_u64(),
            ),
            (
                "database size",
                size(&job["storage"]["db_size"]),
                plan["test_database_size_bytes"].as_u64(),
            ),
            (
                "copies",
                job["simulation"]["copies_per_database"].as_u64(),
                inputs["copies_per_database"].as_u64(),
            ),
            (
                "page size",
                size(&job["storage"]["page_size"]),
                inputs["page_size"]
                    .as_str()
                    .and_then(crate::esrp::parse_size),
            ),
        ];
        for (what, got, planned) in found {
            if planned.is_some() && got != planned {
                out.push(format!(
                    "{host} {test}: {what} {got:?}, planned {planned:?}"
                ));
            }
        }
    }
    out
}
