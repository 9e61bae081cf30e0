//! Reports made from a [`TestResult`]: a Markdown document that can stand beside a Jetstress
//! report (same section titles and column names, `docs/results.md`) with the modern figures added
//! beside them (percentiles, maxima), and a plain-text summary for the terminal. Both are views of
//! `result.json` and compute nothing the result does not hold.

use std::fmt::Write as _;

use crate::sections::WorkloadInstance;
use crate::{ClassSummary, InstanceResult, TestKind, TestResult, Verdict};

/// A table: a header row and data rows, rendered as Markdown or aligned text.
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether column `i` holds figures (right-aligned): every cell a number or a dash.
    fn numeric(&self, i: usize) -> bool {
        i > 0
            && self.rows.iter().all(|row| {
                row.get(i).is_none_or(|cell| {
                    let cell = cell.trim().trim_end_matches('%');
                    cell == "-" || cell == "–" || cell.parse::<f64>().is_ok()
                })
            })
    }

    fn markdown(&self, out: &mut String) {
        let _ = writeln!(out, "| {} |", self.header.join(" | "));
        let _ = writeln!(
            out,
            "|{}",
            (0..self.header.len())
                .map(|i| if self.numeric(i) { " ---: |" } else { " --- |" })
                .collect::<String>()
        );
        for row in &self.rows {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        out.push('\n');
    }

    fn text(&self, out: &mut String) {
        let columns = self.header.len();
        let mut widths = vec![0usize; columns];
        // A key/value table has a blank header (Markdown needs one); the terminal omits it.
        let header = (!self.header.iter().all(|h| h.is_empty())).then_some(&self.header);
        for row in header.into_iter().chain(&self.rows) {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let numeric: Vec<bool> = (0..columns).map(|i| self.numeric(i)).collect();
        for row in header.into_iter().chain(&self.rows) {
            let mut line = String::from("  ");
            for (i, cell) in row.iter().enumerate().take(columns) {
                let gap = if i == 0 { "" } else { "  " };
                if numeric[i] {
                    let _ = write!(line, "{gap}{cell:>width$}", width = widths[i]);
                } else {
                    let _ = write!(line, "{gap}{cell:<width$}", width = widths[i]);
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out.push('\n');
    }
}

impl Table {
    /// The terminal's rendering within `max` columns: as [`Table::text`] when it fits; else
    /// transposed (one row per column of the table, one column per row: the instances side by
    /// side under the figure's name), in as many blocks of instances as it takes to fit. The
    /// full table stays in `report.md`.
    fn text_within(&self, out: &mut String, max: usize) {
        let mut plain = String::new();
        self.text(&mut plain);
        let fits = plain.lines().all(|line| line.chars().count() <= max);
        if fits || self.rows.is_empty() || self.header.iter().all(|h| h.is_empty()) {
            out.push_str(&plain);
            return;
        }
        // The leading columns that name a row (instance, I/O class) become the new header;
        // the figures' columns become rows.
        let keys = (0..self.header.len())
            .take_while(|&i| i == 0 || !self.numeric(i))
            .count();
        let width = |cell: &str| cell.chars().count();
        let name = |row: &Vec<String>| {
            row.iter()
                .take(keys)
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(" ")
        };
        let label = self
            .header
            .iter()
            .skip(keys)
            .map(|h| width(h))
            .max()
            .unwrap_or(0);
        let cell = self
            .rows
            .iter()
            .flat_map(|row| {
                row.iter()
                    .skip(keys)
                    .map(|c| width(c))
                    .chain([width(&name(row))])
            })
            .max()
            .unwrap_or(0);
        // "  " + label, then "  " + cell per row of the table.
        let per_block = (max.saturating_sub(2 + label) / (2 + cell)).max(1);
        let corner = self.header[..keys].join(" / ");
        for block in self.rows.chunks(per_block) {
            let names: Vec<String> = block.iter().map(name).collect();
            let mut header: Vec<&str> = vec![corner.as_str()];
            header.extend(names.iter().map(String::as_str));
            let mut transposed = Table::new(&header);
            for (j, figure) in self.header.iter().enumerate().skip(keys) {
                let mut cells = vec![figure.clone()];
                cells.extend(
                    block
                        .iter()
                        .map(|row| row.get(j).cloned().unwrap_or_default()),
                );
                transposed.row(cells);
            }
            transposed.text(out);
        }
    }
}

/// `text` in lines of at most `width` characters, broken at spaces (a word longer than
/// `width` gets a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The terminal's width budget: the final summary fits a 100-column terminal.
const TERMINAL_COLUMNS: usize = 100;

fn ms(value: f64) -> String {
    format!("{value:.3}")
}

fn rate(value: f64) -> String {
    format!("{value:.3}")
}

fn class<'a>(instance: &'a InstanceResult, key: &str) -> Option<&'a ClassSummary> {
    instance.io.get(key)
}

/// Latency distributions of every class that occurred: the figures Jetstress does not have.
fn distribution_table(result: &TestResult) -> Table {
    let mut table = Table::new(&[
        "Instance",
        "I/O class",
        "I/Os",
        "Average (msec)",
        "p50",
        "p95",
        "p99",
        "p99.9",
        "Maximum",
        "Maximum of interval averages",
    ]);
    for instance in &result.instances {
        for (key, c) in &instance.io {
            table.row(vec![
                instance.name.clone(),
                key.clone(),
                c.count.to_string(),
                ms(c.avg_latency_ms),
                ms(c.p50_ms),
                ms(c.p95_ms),
                ms(c.p99_ms),
                ms(c.p999_ms),
                ms(c.max_ms),
                c.max_interval_avg_ms.map(ms).unwrap_or_else(|| "-".into()),
            ]);
        }
    }
    table
}

/// The "Transactional I/O Performance" table in Jetstress's column names and all of its
/// columns: the sessions' database reads and writes, the log's reads (the simulated
/// replication's, as Jetstress counts a copy's log reads; zero without replication) and writes.
fn transactional_table(result: &TestResult) -> Table {
    io_table(
        result,
        &["db_read"],
        &["db_write"],
        Some(&["replication_read"]),
    )
}

/// Jetstress's "Total I/O Performance": every database and log I/O of each instance, not only
/// the transactional ones: database reads with background maintenance's (and a backup's),
/// database writes with the file's growth, log reads (replication) and log writes.
fn total_table(result: &TestResult) -> Table {
    io_table(
        result,
        &["db_read", "bdm_read", "backup_read"],
        &["db_write", "db_extend"],
        Some(&["replication_read"]),
    )
}

/// Jetstress's I/O table of the classes named: database reads, database writes, log reads
/// (with their columns only when `log_reads` is given) and log writes. Several classes count as
/// one: rates add, latencies and sizes are weighted by the I/Os.
fn io_table(
    result: &TestResult,
    reads: &[&str],
    writes: &[&str],
    log_reads: Option<&[&str]>,
) -> Table {
    let mut header = vec![
        "Instance",
        "I/O Database Reads Average Latency (msec)",
        "I/O Database Writes Average Latency (msec)",
        "I/O Database Reads/sec",
        "I/O Database Writes/sec",
        "I/O Database Reads Average Bytes",
        "I/O Database Writes Average Bytes",
    ];
    let log_columns: &[&[&str]] = if log_reads.is_some() {
        &[
            &[
                "I/O Log Reads Average Latency (msec)",
                "I/O Log Writes Average Latency (msec)",
            ],
            &["I/O Log Reads/sec", "I/O Log Writes/sec"],
            &[
                "I/O Log Reads Average Bytes",
                "I/O Log Writes Average Bytes",
            ],
        ]
    } else {
        &[
            &["I/O Log Writes Average Latency (msec)"],
            &["I/O Log Writes/sec"],
            &["I/O Log Writes Average Bytes"],
        ]
    };
    header.extend(log_columns.iter().flat_map(|names| names.iter().copied()));
    let mut table = Table::new(&header);
    // (rate, average latency, average bytes) of the classes together.
    let merged = |instance: &InstanceResult, keys: &[&str]| {
        let classes: Vec<&ClassSummary> = keys.iter().filter_map(|k| class(instance, k)).collect();
        let count: u64 = classes.iter().map(|c| c.count).sum();
        // A fold from 0.0: an empty float sum is -0.0, which would print "-0.000".
        let rate = classes.iter().fold(0.0, |sum, c| sum + c.ops_per_sec);
        if count == 0 {
            return (rate, 0.0, 0.0);
        }
        let latency = classes
            .iter()
            .map(|c| c.avg_latency_ms * c.count as f64)
            .sum::<f64>()
            / count as f64;
        let bytes = classes.iter().map(|c| c.bytes).sum::<u64>() as f64 / count as f64;
        (rate, latency, bytes)
    };
    for instance in &result.instances {
        let (r, w) = (merged(instance, reads), merged(instance, writes));
        let lw = merged(instance, &["log_write"]);
        let lr = log_reads.map(|keys| merged(instance, keys));
        let mut row = vec![
            instance.name.clone(),
            ms(r.1),
            ms(w.1),
            rate(r.0),
            rate(w.0),
            rate(r.2),
            rate(w.2),
        ];
        let log = |pick: fn((f64, f64, f64)) -> f64, format: fn(f64) -> String| {
            lr.into_iter()
                .chain([lw])
                .map(|c| format(pick(c)))
                .collect::<Vec<_>>()
        };
        row.extend(log(|c| c.1, ms));
        row.extend(log(|c| c.0, rate));
        row.extend(log(|c| c.2, rate));
        table.row(row);
    }
    table
}

fn class_table(result: &TestResult, key: &str, header: &[&str]) -> Option<Table> {
    let mut table = Table::new(header);
    for instance in &result.instances {
        if let Some(c) = class(instance, key) {
            table.row(vec![
                instance.name.clone(),
                rate(c.ops_per_sec),
                rate(c.avg_bytes),
                ms(c.avg_latency_ms),
            ]);
        }
    }
    (!table.rows.is_empty()).then_some(table)
}

/// Jetstress's soft-recovery figures per instance (log files replayed, seconds, seconds per log)
/// with what the replay did; a failed replay reads "failed" (its reason is in the reasons).
fn recovery_table(result: &TestResult) -> Table {
    // The soft-recovery test says what it generated beside what it replayed: the replay starts
    // at the checkpoint, so it also plays what was there before (the generation open at attach,
    // any an earlier test left), and only the generated files count toward ESRP's 500.
    // `jetproof recover` generated nothing and has no such column.
    let generated = result.instances.iter().any(|i| {
        i.figures
            .recovery()
            .is_some_and(|r| r.logs_generated.is_some())
    });
    let mut columns = vec!["Instance"];
    if generated {
        columns.push("Log files generated");
    }
    columns.extend([
        "Log files replayed",
        "Seconds",
        "Seconds per log",
        "Records applied",
        "Records skipped",
        "Pages written",
        "Transactions rolled back",
        "CPU µs per record applied",
        "CPU busy %",
    ]);
    let mut table = Table::new(&columns);
    for instance in &result.instances {
        let figures = instance.figures.recovery();
        let mut row = vec![instance.name.clone()];
        if generated {
            row.push(
                figures
                    .and_then(|r| r.logs_generated)
                    .map_or_else(|| "-".into(), |n| n.to_string()),
            );
        }
        let Some(r) = figures.and_then(|r| r.replay.as_ref()) else {
            row.push("failed".into());
            row.extend(std::iter::repeat_n("-".to_string(), 8));
            table.row(row);
            continue;
        };
        row.extend([
            r.logs_replayed.to_string(),
            ms(r.seconds),
            ms(r.seconds_per_log),
            r.records_applied.to_string(),
            r.records_skipped.to_string(),
            r.pages_written.to_string(),
            r.transactions_rolled_back.to_string(),
            r.cpu_us_per_record
                .map(|us| format!("{us:.2}"))
                .unwrap_or_else(|| "-".into()),
            format!("{:.0}", r.cpu_share * 100.0),
        ]);
        table.row(row);
    }
    table
}

/// The replay's I/O per instance and class (`log_read`, `db_read`, `db_write`).
fn recovery_io_table(result: &TestResult) -> Table {
    let mut table = Table::new(&[
        "Instance",
        "I/O class",
        "I/Os/sec",
        "Average Bytes",
        "MB/sec",
        "Average Latency (msec)",
    ]);
    for instance in &result.instances {
        for (key, c) in &instance.io {
            table.row(vec![
                instance.name.clone(),
                key.clone(),
                rate(c.ops_per_sec),
                rate(c.avg_bytes),
                rate(c.ops_per_sec * c.avg_bytes / 1e6),
                ms(c.avg_latency_ms),
            ]);
        }
    }
    table
}

/// Sections of a report, in order: (title, table).
/// One figure of a workload instance.
type WorkloadFigure = fn(&WorkloadInstance) -> u64;

/// Sums a figure of the workload instances over the instances that have it; None when none has.
fn instance_sum(result: &TestResult, figure: WorkloadFigure) -> Option<u64> {
    let values: Vec<u64> = result
        .instances
        .iter()
        .filter_map(|i| i.figures.workload().map(figure))
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// Jetstress's "Database Sizing and Throughput": the transactional rate beside the databases'
/// size at the start and end of the test (their files' lengths, summed over the instances), and
/// beside them the bytes of pages in use, which a file grown by whole extents does not show.
/// The terminal's headline already gives the rates, so there the table starts at the sizes.
/// A byte count for people, not for reading back: the largest binary unit it reaches, two
/// decimals ("1.30 GiB", "512.00 KiB", "37 B").
pub fn human_bytes(bytes: u64) -> String {
    let units = [
        (1u64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (unit, name) in units {
        if bytes >= unit {
            return format!("{:.2} {name}", bytes as f64 / unit as f64);
        }
    }
    format!("{bytes} B")
}

fn sizing_table(result: &TestResult, detail: Detail) -> Option<Table> {
    let initial = instance_sum(result, |w| w.db_size_initial_bytes)?;
    let mut table = Table::new(&["", ""]);
    let rates = detail == Detail::Report;
    if let Some(achieved) = result.achieved_iops.filter(|_| rates) {
        table.row(vec![
            "Achieved Transactional I/O per Second".into(),
            format!("{achieved:.3}"),
        ]);
    }
    if let Some(target) = result.target_iops.filter(|_| rates) {
        table.row(vec![
            "Target Transactional I/O per Second".into(),
            format!("{target:.3}"),
        ]);
    }
    table.row(vec![
        "Initial Database Size (bytes)".into(),
        initial.to_string(),
    ]);
    if let Some(last) = instance_sum(result, |w| w.db_size_final_bytes) {
        table.row(vec!["Final Database Size (bytes)".into(), last.to_string()]);
        // Not Jetstress's: what the two sizes above mean per transactional I/O of the window
        // (the reference reports' 241-446 bytes, `docs/faithfulness.md`).
        let ios: u64 = result
            .instances
            .iter()
            .flat_map(|i| ["db_read", "db_write"].map(|k| i.io.get(k).map_or(0, |c| c.count)))
            .sum();
        if ios > 0 {
            table.row(vec![
                "Database Growth per Transactional I/O (bytes)".into(),
                format!("{:.0}", last.saturating_sub(initial) as f64 / ios as f64),
            ]);
        }
        // Not Jetstress's either: the room a longer test at the same rate needs, since
        // `storage.db_size` is only the initial size (issue 32, item 12).
        if let Some(window) = result
            .totals
            .workload()
            .map(|t| t.measured_seconds)
            .filter(|s| *s > 0.0)
        {
            let per_hour = last.saturating_sub(initial) as f64 / window * 3600.0;
            table.row(vec![
                "Database Growth per Hour at the Achieved Rate (bytes)".into(),
                format!("{per_hour:.0} ({})", human_bytes(per_hour as u64)),
            ]);
        }
    }
    table.row(vec![
        "Database Files (Count)".into(),
        result.instances.len().to_string(),
    ]);
    let in_use: [(&str, WorkloadFigure); 2] = [
        ("Initial Bytes in Use", |w| w.db_used_initial_bytes),
        ("Final Bytes in Use", |w| w.db_used_final_bytes),
    ];
    for (name, figure) in in_use {
        if let Some(bytes) = instance_sum(result, figure) {
            table.row(vec![name.into(), bytes.to_string()]);
        }
    }
    Some(table)
}

/// Jetstress's "System Parameters" of a workload test, from the job as run.
fn parameters_table(result: &TestResult) -> Option<Table> {
    let p = &result.parameters;
    let workload = p.job_table("workload")?;
    let sessions = p.sessions_per_instance?;
    let text = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Null) | None => "–".into(),
        Some(other) => other.to_string(),
    };
    let percent = |key: &str| format!("{}%", text(workload.get(key)));
    let mut table = Table::new(&["", ""]);
    let mut row = |name: &str, value: String| table.row(vec![name.into(), value]);
    row("Thread Count", format!("{sessions} (per database)"));
    let cache = p.job_table("cache");
    row(
        "Minimum Database Cache",
        text(cache.and_then(|c| c.get("min_size"))),
    );
    row(
        "Maximum Database Cache",
        text(cache.and_then(|c| c.get("max_size"))),
    );
    row("Insert Operations", percent("insert_percent"));
    row("Delete Operations", percent("delete_percent"));
    row("Replace Operations", percent("replace_percent"));
    row("Read Operations", percent("read_percent"));
    row("Lazy Commits", percent("lazy_commit_percent"));
    let maintenance = workload
        .get("background_maintenance")
        .and_then(|v| v.as_bool());
    row(
        "Run Background Database Maintenance",
        match maintenance {
            Some(true) => "True".into(),
            Some(false) => "False".into(),
            None => "–".into(),
        },
    );
    row(
        "Number of Copies per Database",
        text(
            p.job_table("simulation")
                .and_then(|s| s.get("copies_per_database")),
        ),
    );
    Some(table)
}

/// Jetstress's "Database Configuration": each instance's log path and database file.
fn configuration_table(result: &TestResult) -> Option<Table> {
    if result.instances.is_empty() || result.test == TestKind::Checksum {
        return None;
    }
    let mut table = Table::new(&["Instance", "Log Path", "Database"]);
    for instance in &result.instances {
        table.row(vec![
            instance.name.clone(),
            instance.log_path.display().to_string(),
            instance.database_path.display().to_string(),
        ]);
    }
    Some(table)
}

/// Which sections to render: the Markdown report has them all; the terminal summary leaves out
/// the tables that only repeat the job (parameters, paths).
#[derive(Copy, Clone, PartialEq)]
enum Detail {
    Report,
    Terminal,
}

fn sections(result: &TestResult, detail: Detail) -> Vec<(&'static str, Table)> {
    let mut sections = Vec::new();
    io_sections(&mut sections, result, detail);
    instance_sections(&mut sections, result);
    host_sections(&mut sections, result);
    mark_sections(&mut sections, result);
    device_sections(&mut sections, result, detail);
    sections
}

/// The sizing, the transactional I/O and every I/O class's table.
fn io_sections(sections: &mut Vec<(&'static str, Table)>, result: &TestResult, detail: Detail) {
    let has = |key: &str| result.instances.iter().any(|i| i.io.contains_key(key));
    if let Some(t) = sizing_table(result, detail) {
        sections.push(("Database Sizing and Throughput", t));
    }
    if detail == Detail::Report {
        if let Some(t) = parameters_table(result) {
            sections.push(("System Parameters", t));
        }
        if let Some(t) = configuration_table(result) {
            sections.push(("Database Configuration", t));
        }
    }
    if result.test == TestKind::Recovery {
        // A replay's page I/O is not transactional: recovery has its own tables.
        sections.push(("Soft Recovery Statistics", recovery_table(result)));
        if !result.instances.iter().all(|i| i.io.is_empty()) {
            sections.push(("Soft Recovery I/O Performance", recovery_io_table(result)));
        }
    } else if has("db_read") || has("db_write") || has("log_write") {
        sections.push(("Transactional I/O Performance", transactional_table(result)));
    }
    if let Some(t) = class_table(
        result,
        "bdm_read",
        &[
            "Instance",
            "Database Maintenance IO Reads/sec",
            "Database Maintenance IO Reads Average Bytes",
            "Average Latency (msec)",
        ],
    ) {
        sections.push(("Background Database Maintenance I/O Performance", t));
    }
    if let Some(t) = class_table(
        result,
        "replication_read",
        &[
            "Instance",
            "I/O Log Reads/sec",
            "I/O Log Reads Average Bytes",
            "Average Latency (msec)",
        ],
    ) {
        sections.push(("Log Replication I/O Performance", t));
    }
    if let Some(t) = class_table(
        result,
        "backup_read",
        &[
            "Instance",
            "Database Reads/sec",
            "Database Reads Average Bytes",
            "Average Latency (msec)",
        ],
    ) {
        sections.push(("Database Backup I/O Performance", t));
    }
    if let Some(t) = backup_rate_table(result) {
        sections.push(("Database Backup (Read-only) Performance", t));
    }
    // The file's growth: formatting writes of new extents, kept out of the transactional
    // table's database writes (docs/faithfulness.md) but shown.
    if let Some(t) = class_table(
        result,
        "db_extend",
        &[
            "Instance",
            "Database Extension Writes/sec",
            "Database Extension Writes Average Bytes",
            "Average Latency (msec)",
        ],
    ) {
        sections.push(("Database Extension I/O (file growth)", t));
    }
    if result.test != TestKind::Recovery && (has("db_read") || has("db_write")) {
        sections.push(("Total I/O Performance", total_table(result)));
    }
}

/// The tables per instance and of the run's settings.
fn instance_sections(sections: &mut Vec<(&'static str, Table)>, result: &TestResult) {
    if !result.instances.iter().all(|i| i.io.is_empty()) {
        sections.push(("Latency Distribution", distribution_table(result)));
    }
    if result
        .instances
        .iter()
        .any(|i| i.figures.checksum().is_some())
    {
        let mut t = Table::new(&[
            "Database",
            "Seen pages",
            "Bad pages",
            "Correctable pages",
            "Wrong page-number pages",
            "File length / seconds taken",
        ]);
        for instance in &result.instances {
            let Some(c) = instance.figures.checksum() else {
                continue;
            };
            let (seconds, bytes) = (c.file.seconds, c.file.size_bytes);
            t.row(vec![
                instance.database_path.display().to_string(),
                c.file.pages_seen.to_string(),
                c.file.pages_bad.to_string(),
                c.file.pages_correctable.to_string(),
                c.file.pages_wrong_number.to_string(),
                format!("{} MiB / {seconds:.1} s", bytes >> 20),
            ]);
        }
        sections.push(("Database Checksum Statistics", t));
    }
}

/// What an array could reduce, and the host's counters.
fn host_sections(sections: &mut Vec<(&'static str, Table)>, result: &TestResult) {
    // What an array that compresses and deduplicates could reduce (issue 33).
    if let Some(reduction) = &result.data_reduction {
        let mut t = Table::new(&crate::reduction::TABLE_HEADER);
        for row in reduction.table_rows() {
            t.row(row.to_vec());
        }
        sections.push(("Data Reduction", t));
        let s = &reduction.setting;
        let mut t = Table::new(&["Setting", "Value"]);
        t.row(vec![
            "Content compression ratio (workload.compression_ratio)".into(),
            format!("{:.2}", s.compression_ratio),
        ]);
        t.row(vec![
            "Dedup ratio (workload.dedup_ratio)".into(),
            format!("{:.2}", s.dedup_ratio),
        ]);
        t.row(vec![
            "Block measured (workload.dedup_unit)".into(),
            crate::reduction::unit_label(s.dedup_unit_bytes),
        ]);
        t.row(vec!["Compressor".into(), s.compressor.clone()]);
        sections.push(("Data Reduction Setting", t));
    }
    if let Some(counters) = &result.host_counters {
        let mut t = Table::new(&["Counter", "Average", "Minimum", "Maximum"]);
        for (name, stat) in [
            ("% Processor Time", Some(&counters.cpu_percent)),
            ("Available MBytes", Some(&counters.available_memory_mb)),
            (
                "Database Page Fault Stalls/sec",
                counters.database_page_fault_stalls_per_sec.as_ref(),
            ),
        ] {
            let Some(stat) = stat else { continue };
            t.row(vec![
                name.into(),
                rate(stat.average),
                rate(stat.min),
                rate(stat.max),
            ]);
        }
        sections.push(("Host System Performance", t));
    }
}

/// Marks and excursions (issue 37; `crate::excursion`).
fn mark_sections(sections: &mut Vec<(&'static str, Table)>, result: &TestResult) {
    // Marks and excursions (issue 37; `crate::excursion`).
    if let crate::Totals::Workload(totals) = &result.totals {
        if !totals.marks.is_empty() {
            let mut t = Table::new(&["Time", "Seconds into the window", "Mark"]);
            for m in &totals.marks {
                t.row(vec![
                    m.at.clone(),
                    format!("{:.1}", m.elapsed_s),
                    m.label.clone(),
                ]);
            }
            sections.push(("Marks", t));
        }
        let judged = result
            .parameters
            .limits
            .and_then(|l| l.max_excursion_s)
            .map(|s| format!("bound {s} s"));
        if !totals.excursions.is_empty() || judged.is_some() {
            let mut t = Table::new(&[
                "Instance",
                "Class",
                "Threshold (ms)",
                "Start (s)",
                "End (s)",
                "Duration (s)",
                "Peak interval average (ms)",
                "Preceding mark",
                "Mark to within bounds (s)",
            ]);
            for e in &totals.excursions {
                t.row(vec![
                    e.instance.clone(),
                    e.class.clone(),
                    ms(e.threshold_ms),
                    format!("{:.1}", e.start_s),
                    if e.recovered {
                        format!("{:.1}", e.end_s)
                    } else {
                        format!("{:.1} (window ended)", e.end_s)
                    },
                    format!("{:.1}", e.duration_s),
                    ms(e.peak_ms),
                    e.mark.clone().unwrap_or_else(|| "-".into()),
                    e.mark_to_recovery_s
                        .map(|s| format!("{s:.1}"))
                        .unwrap_or_else(|| "-".into()),
                ]);
            }
            if totals.excursions.is_empty() {
                t.row(vec![
                    "none".into(),
                    judged.unwrap_or_default(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ]);
            }
            sections.push(("Excursions", t));
        }
    }
}

/// The device's view beside ours (issue 21; `crate::devices`).
fn device_sections(sections: &mut Vec<(&'static str, Table)>, result: &TestResult, detail: Detail) {
    // The device's view beside ours (issue 21; `crate::devices`).
    if let Some(devices) = crate::devices::table(result) {
        let mut t = Table::new(&devices.header);
        devices.rows.into_iter().for_each(|row| t.row(row));
        sections.push(("Device", t));
        if !devices.notes.is_empty() {
            let mut t = Table::new(&["Note"]);
            for note in devices.notes {
                match detail {
                    // A note is a sentence of 150 columns or more: the terminal gets it
                    // wrapped, each line a row, so the summary keeps to its 100 columns.
                    Detail::Terminal => {
                        for line in wrap(&note, TERMINAL_COLUMNS - 4) {
                            t.row(vec![line]);
                        }
                    }
                    Detail::Report => t.row(vec![note]),
                }
            }
            sections.push(("Device Notes", t));
        }
    }
}

/// What a rehearsal's reports say (the job's `run.rehearsal`, set by `jetproof job
/// --from-solution FILE --rehearsal`): the run is a dry run of a solution at reduced scale.
pub const REHEARSAL_LINE: &str =
    "REHEARSAL: a dry run of the solution at its reduced scale (run.rehearsal), not an ESRP test";

/// True when the result's job was a rehearsal (`run.rehearsal = true`).
pub fn is_rehearsal(result: &TestResult) -> bool {
    job_is_rehearsal(&result.parameters.job)
}

/// `run.rehearsal` of a job as a result records it (`parameters`, the job flattened).
pub fn job_is_rehearsal(job: &serde_json::Map<String, serde_json::Value>) -> bool {
    job.get("run")
        .and_then(|run| run.get("rehearsal"))
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

fn headline(result: &TestResult) -> Vec<(String, String)> {
    let mut lines = vec![
        (
            "Overall Test Result".to_string(),
            match result.verdict {
                Verdict::Pass => "Pass".to_string(),
                Verdict::Fail => "Fail".to_string(),
            },
        ),
        ("Test".into(), result.test.name().into()),
    ];
    if is_rehearsal(result) {
        lines.push(("Rehearsal".into(), REHEARSAL_LINE.into()));
    }
    lines.extend([
        ("Machine Name".into(), result.host.name.clone()),
        (
            "Operating System".into(),
            format!("{} (kernel {})", result.host.os, result.host.kernel),
        ),
        ("Test Start Time".into(), result.started.clone()),
        ("Test End Time".into(), result.ended.clone()),
        // Jetstress's Collection Start/End: the measured window (warm-up excluded).
        (
            "Collection Start Time".into(),
            result.measured_start.clone().unwrap_or_else(|| "-".into()),
        ),
        (
            "Collection End Time".into(),
            result.measured_end.clone().unwrap_or_else(|| "-".into()),
        ),
        (
            "Test Duration".into(),
            format!("{:.1} s", result.duration_s),
        ),
        ("jetproof Version".into(), result.tool_version.clone()),
    ]);
    if let Some(engine) = &result.io_engine {
        lines.push(("I/O Engine".into(), engine.clone()));
    }
    if result.interrupted {
        lines.push((
            "Interrupted".into(),
            "yes: the figures cover what ran".into(),
        ));
    }
    if result.parameters.log_integrated == Some(false) {
        lines.push((
            "Log I/O".into(),
            "not measured: this version's engine does not write its log yet, so the log columns read 0".into(),
        ));
    }
    if let Some(achieved) = result.achieved_iops {
        lines.push((
            "Achieved Transactional I/O per Second".into(),
            format!("{achieved:.3}"),
        ));
    }
    if let Some(target) = result.target_iops {
        lines.push((
            "Target Transactional I/O per Second".into(),
            format!("{target:.3}"),
        ));
    }
    lines
}

/// The Markdown report (written as `report.md`).
pub fn markdown(result: &TestResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# jetproof {} test report{}\n",
        result.test.name(),
        if is_rehearsal(result) {
            " (REHEARSAL)"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "## Test Summary\n");
    let mut summary = Table::new(&["", ""]);
    for (k, v) in headline(result) {
        summary.row(vec![k, v]);
    }
    summary.markdown(&mut out);
    if !result.reasons.is_empty() {
        let _ = writeln!(out, "### Why the test failed\n");
        for reason in &result.reasons {
            let _ = writeln!(out, "- {reason}");
        }
        out.push('\n');
    }
    for (title, table) in sections(result, Detail::Report) {
        let _ = writeln!(out, "## {title}\n");
        table.markdown(&mut out);
    }
    // Jetstress ends its report with the test log; so does this one, as it stood when the
    // report was written (the file itself is `test.log`).
    if let Some(log) = result
        .log_file
        .as_ref()
        // The path comes from result.json, which may have been edited: read it only as a
        // regular file of bounded size (a pipe or /dev/zero there must not hang the report).
        .and_then(|path| jetproof_io::input::read_text(path, crate::MAX_RESULT_JSON_BYTES).ok())
        .filter(|log| !log.trim().is_empty())
    {
        let _ = writeln!(out, "## Test Log\n");
        let fence = if log.contains("```") { "~~~~" } else { "```" };
        let _ = writeln!(out, "{fence}\n{}\n{fence}\n", log.trim_end());
    }
    out
}

/// A backup's MB read per second per database, as the reference reports' backup tables give it,
/// and the server's as their sum (per database × databases = per server); beside it the
/// host's own rate, all bytes over the whole backup's seconds.
fn backup_rate_table(result: &TestResult) -> Option<Table> {
    let mut t = Table::new(&[
        "Instance",
        "Database size (MB)",
        "Seconds",
        "MB read/sec per database",
    ]);
    let mut sum = 0.0;
    for instance in &result.instances {
        let Some(b) = instance.figures.backup() else {
            continue;
        };
        let rate = crate::aggregate::round2(b.backup.mb_per_sec);
        sum += rate;
        t.row(vec![
            instance.name.clone(),
            format!("{:.1}", b.backup.bytes as f64 / 1e6),
            format!("{:.1}", b.backup.seconds),
            format!("{rate:.2}"),
        ]);
    }
    if t.rows.is_empty() {
        return None;
    }
    let databases = t.rows.len();
    t.row(vec![
        format!("All {databases} databases (sum)"),
        "-".into(),
        "-".into(),
        format!("{sum:.2}"),
    ]);
    if let Some(total) = result.totals.backup() {
        t.row(vec![
            "All bytes ÷ the whole backup's seconds".into(),
            format!("{:.1}", total.bytes as f64 / 1e6),
            format!("{:.1}", total.seconds),
            format!("{:.2}", total.mb_per_sec),
        ]);
    }
    Some(t)
}

/// The backup test's terminal summary: per database its size, seconds, MB read per second
/// and bad pages, the total, then every reason for a fail.
pub fn backup_text(result: &TestResult) -> String {
    let mut out = String::from("Database backup statistics\n");
    let _ = writeln!(
        out,
        "  {:<12} {:>14} {:>10} {:>12} {:>6}",
        "Instance", "Database size", "Seconds", "MB read/sec", "Bad"
    );
    for instance in &result.instances {
        let Some(b) = instance.figures.backup() else {
            continue;
        };
        let _ = writeln!(
            out,
            "  {:<12} {:>11.1} MB {:>10.1} {:>12.1} {:>6}",
            instance.name,
            b.backup.bytes as f64 / 1e6,
            b.backup.seconds,
            b.backup.mb_per_sec,
            b.backup.bad_pages.len()
        );
    }
    let total = result.totals.backup().cloned().unwrap_or_default();
    let _ = writeln!(
        out,
        "  {:<12} {:>11.1} MB {:>10.1} {:>12.1}",
        "Total",
        total.bytes as f64 / 1e6,
        total.seconds,
        total.mb_per_sec
    );
    for reason in &result.reasons {
        let _ = writeln!(out, "  FAIL: {reason}");
    }
    out
}

/// The summary printed on the terminal at the end of a test.
pub fn text(result: &TestResult) -> String {
    let mut out = String::new();
    for (k, v) in headline(result) {
        let _ = writeln!(out, "{k}: {v}");
    }
    for reason in &result.reasons {
        let _ = writeln!(out, "  FAIL: {reason}");
    }
    out.push('\n');
    for (title, table) in sections(result, Detail::Terminal) {
        let _ = writeln!(out, "{title}");
        table.text_within(&mut out, TERMINAL_COLUMNS);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::sections::{RecoveryInstance, ReplayFigures};
    use crate::{Host, InstanceFigures, TestKind, io_results};
    use jetproof_io::IoClass;
    use jetproof_io::meter::InstanceStats;

    fn sample() -> TestResult {
        let stats = InstanceStats::new("db1");
        stats.class(IoClass::DbRead).record(32768, 15_000_000);
        stats.class(IoClass::LogWrite).record(6000, 2_000_000);
        stats.class(IoClass::BdmRead).record(262144, 9_000_000);
        TestResult {
            schema_version: 1,
            tool_version: "0.1.0".into(),
            test: TestKind::Performance,
            verdict: Verdict::Fail,
            reasons: vec!["db1: too slow".into()],
            interrupted: false,
            host: Host::this(),
            started: "2026-01-01T00:00:00Z".into(),
            ended: "2026-01-01T00:02:00Z".into(),
            duration_s: 120.0,
            measured_start: None,
            measured_end: None,
            requested_start: None,
            start_skew_ms: None,
            ready_at_start: None,
            histogram_layout: None,
            io_engine: Some("io_uring".into()),
            parameters: crate::Parameters::default(),
            target_iops: Some(100.0),
            achieved_iops: Some(90.0),
            instances: vec![InstanceResult {
                name: "db1".into(),
                database_path: "/d".into(),
                log_path: "/l".into(),
                io: io_results(&stats, Duration::from_secs(1)),
                figures: InstanceFigures::None,
            }],
            host_counters: None,
            log_file: None,
            samples_file: None,
            totals: crate::Totals::None,
            data_reduction: None,
        }
    }

    #[test]
    fn markdown_uses_jetstress_words_and_adds_distributions() {
        let md = markdown(&sample());
        for words in [
            "Overall Test Result | Fail",
            "Achieved Transactional I/O per Second | 90.000",
            "I/O Engine | io_uring",
            "## Transactional I/O Performance",
            "I/O Database Reads Average Latency (msec)",
            "## Background Database Maintenance I/O Performance",
            "Database Maintenance IO Reads Average Bytes",
            "## Latency Distribution",
            "- db1: too slow",
        ] {
            assert!(md.contains(words), "missing {words:?} in\n{md}");
        }
        assert!(
            !md.contains("Log Replication"),
            "no replication I/O occurred:\n{md}"
        );
        // The Transactional table has all of Jetstress's columns, Log Reads included (zero
        // without replication), in its order.
        let transactional = md
            .split("## Transactional I/O Performance")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("the Transactional table");
        let header = transactional
            .lines()
            .find(|l| l.starts_with("| Instance"))
            .expect("its header");
        let columns: Vec<&str> = header
            .split(" | ")
            .map(|c| c.trim_matches(['|', ' ']))
            .collect();
        assert_eq!(
            columns.get(7..).expect("log columns"),
            [
                "I/O Log Reads Average Latency (msec)",
                "I/O Log Writes Average Latency (msec)",
                "I/O Log Reads/sec",
                "I/O Log Writes/sec",
                "I/O Log Reads Average Bytes",
                "I/O Log Writes Average Bytes",
            ],
            "{header}"
        );
    }

    /// A workload result with the sizes, parameters and stall counter of schema version 3.
    fn workload_sample() -> TestResult {
        let mut result = sample();
        result.parameters = serde_json::from_value(serde_json::json!({
            "sessions_per_instance": 5,
            "cache": {"min_size": "32MiB", "max_size": "256MiB"},
            "workload": {
                "insert_percent": 40, "delete_percent": 20, "replace_percent": 5,
                "read_percent": 35, "lazy_commit_percent": 70, "background_maintenance": true,
            },
            "simulation": {"copies_per_database": 2},
        }))
        .expect("parameters");
        let mut second = result.instances[0].clone();
        second.name = "db2".into();
        second.database_path = "/d2".into();
        second.log_path = "/l2".into();
        result.instances.push(second);
        for (i, instance) in result.instances.iter_mut().enumerate() {
            let grown = 1_048_576 * (i as u64 + 1);
            instance.figures = InstanceFigures::Workload(Box::new(WorkloadInstance {
                db_size_initial_bytes: 8_388_608,
                db_size_final_bytes: 8_388_608 + grown,
                db_used_initial_bytes: 8_000_000,
                db_used_final_bytes: 8_100_000,
                ..WorkloadInstance::default()
            }));
        }
        result.host_counters = Some(crate::HostCounters {
            cpu_percent: crate::Stat {
                average: 12.0,
                min: 3.0,
                max: 40.0,
            },
            available_memory_mb: crate::Stat {
                average: 900.0,
                min: 880.0,
                max: 910.0,
            },
            database_page_fault_stalls_per_sec: Some(crate::Stat {
                average: 0.5,
                min: 0.0,
                max: 2.0,
            }),
        });
        result
    }

    /// Jetstress's Total I/O Performance (maintenance reads with the transactional ones,
    /// weighted by I/Os), Collection Start/End beside Test Start/End, and the test log at the end.
    #[test]
    fn the_report_has_total_io_collection_times_and_the_test_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("test.log");
        std::fs::write(&log, "2026-01-01T00:00:00Z Attach db1\n").expect("log");
        let mut result = sample();
        result.log_file = Some(log);
        result.measured_start = Some("2026-01-01T00:00:30.000Z".into());
        result.measured_end = Some("2026-01-01T00:02:00.000Z".into());
        let md = markdown(&result);
        for words in [
            "## Total I/O Performance",
            // db_read (15 ms, 32 KiB) and bdm_read (9 ms, 256 KiB), one each in one second.
            "| db1 | 12.000 | 0.000 | 2.000 | 0.000 | 147456.000 | 0.000 |",
            "| Collection Start Time | 2026-01-01T00:00:30.000Z |",
            "| Collection End Time | 2026-01-01T00:02:00.000Z |",
            "## Test Log",
            "2026-01-01T00:00:00Z Attach db1",
        ] {
            assert!(md.contains(words), "missing {words:?} in\n{md}");
        }
    }

    /// The final summary fits 100 columns: tables wider than that are transposed, the
    /// instances side by side, in blocks when there are many; the values are all there.
    #[test]
    fn the_terminal_summary_fits_100_columns_with_every_figure() {
        for instances in [2usize, 12] {
            let mut result = workload_sample();
            let first = result.instances[0].clone();
            result.instances = (0..instances)
                .map(|n| InstanceResult {
                    name: format!("db{}", n + 1),
                    ..first.clone()
                })
                .collect();
            let md = markdown(&result);
            assert!(
                md.lines().any(|l| l.chars().count() > 100),
                "the report's own tables are wider than a terminal"
            );
            let text = text(&result);
            for line in text.lines().filter(|l| !l.contains(": ")) {
                assert!(
                    line.chars().count() <= 100,
                    "{} columns: {line}",
                    line.len()
                );
            }
            for n in 1..=instances {
                assert!(text.contains(&format!("db{n}")), "db{n} missing:\n{text}");
            }
            assert!(
                text.lines()
                    .any(|l| l.trim_start().starts_with("I/O Database Reads/sec")),
                "the figures are rows once transposed:\n{text}"
            );
            // One block per 7 or so instances: every instance's column is there once.
            let blocks = text
                .lines()
                .filter(|l| l.trim_start().starts_with("Instance"))
                .count();
            assert!(
                blocks >= 1 && (instances <= 2 || blocks >= 2),
                "{blocks} blocks:\n{text}"
            );
        }
    }

    #[test]
    fn a_workload_report_has_jetstress_sizing_parameters_and_configuration() {
        let md = markdown(&workload_sample());
        for words in [
            "## Database Sizing and Throughput",
            "| Achieved Transactional I/O per Second | 90.000 |",
            "| Target Transactional I/O per Second | 100.000 |",
            // Sums over the two instances: 2 x 8 MiB at the start, 3 MiB more at the end.
            "| Initial Database Size (bytes) | 16777216 |",
            "| Final Database Size (bytes) | 19922944 |",
            // 3 MiB grown over the two instances' one read each.
            "| Database Growth per Transactional I/O (bytes) | 1572864 |",
            "| Database Files (Count) | 2 |",
            "| Final Bytes in Use | 16200000 |",
            "## System Parameters",
            "| Thread Count | 5 (per database) |",
            "| Maximum Database Cache | 256MiB |",
            "| Replace Operations | 5% |",
            "| Lazy Commits | 70% |",
            "| Run Background Database Maintenance | True |",
            "| Number of Copies per Database | 2 |",
            "## Database Configuration",
            "| db2 | /l2 | /d2 |",
            "| Database Page Fault Stalls/sec | 0.500 | 0.000 | 2.000 |",
        ] {
            assert!(md.contains(words), "missing {words:?} in\n{md}");
        }
        // Paths and names are left-aligned, figures right-aligned.
        assert!(
            md.contains("| Instance | Log Path | Database |\n| --- | --- | --- |"),
            "{md}"
        );
        assert!(
            md.contains("| Counter | Average | Minimum | Maximum |\n| --- | ---: | ---: | ---: |"),
            "{md}"
        );
        // Jetstress's order: sizing and parameters before the I/O tables.
        let at = |words: &str| md.find(words).expect(words);
        assert!(
            at("## Database Sizing") < at("## System Parameters"),
            "{md}"
        );
        assert!(
            at("## Database Configuration") < at("## Transactional I/O"),
            "{md}"
        );
        // The terminal keeps the sizing and leaves out what only repeats the job.
        let text = text(&workload_sample());
        let line = |name: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(name))
                .map(|l| l.split_whitespace().last().unwrap_or("").to_string())
        };
        assert_eq!(
            line("Final Database Size (bytes)").as_deref(),
            Some("19922944"),
            "{text}"
        );
        // Achieved and target stand once, in the headline.
        assert_eq!(
            text.matches("Achieved Transactional I/O per Second")
                .count(),
            1,
            "{text}"
        );
        assert!(!text.contains("System Parameters"), "{text}");
        assert!(!text.contains("Database Configuration"), "{text}");
    }

    #[test]
    fn results_without_sizes_have_no_sizing_table() {
        let md = markdown(&sample());
        assert!(!md.contains("Database Sizing"), "{md}");
        assert!(!md.contains("System Parameters"), "{md}");
    }

    #[test]
    fn a_recovery_result_has_its_own_tables() {
        let mut result = sample();
        result.test = TestKind::Recovery;
        result.set_reasons(Vec::new());
        result.instances[0].figures = InstanceFigures::Recovery(Box::new(RecoveryInstance {
            replay: Some(ReplayFigures {
                logs_replayed: 500,
                seconds: 17.5,
                seconds_per_log: 0.035,
                records_applied: 8000,
                records_skipped: 170000,
                pages_written: 380,
                transactions_rolled_back: 3,
                cpu_us_per_record: Some(812.5),
                cpu_share: 0.37,
                ..ReplayFigures::default()
            }),
            ..RecoveryInstance::default()
        }));
        let failed = InstanceResult {
            name: "db2".into(),
            database_path: "/d2".into(),
            log_path: "/l2".into(),
            io: BTreeMap::new(),
            figures: InstanceFigures::Recovery(Box::new(RecoveryInstance {
                error: Some("recovery failed".into()),
                ..RecoveryInstance::default()
            })),
        };
        result.instances.push(failed);
        let md = markdown(&result);
        for words in [
            "## Soft Recovery Statistics",
            "| db1 | 500 | 17.500 | 0.035 | 8000 | 170000 | 380 | 3 | 812.50 | 37 |",
            "| db2 | failed |",
            "## Soft Recovery I/O Performance",
        ] {
            assert!(md.contains(words), "missing {words:?} in\n{md}");
        }
        assert!(!md.contains("Transactional I/O Performance"), "{md}");
    }

    #[test]
    fn backup_text_lists_each_database_and_the_total() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/backup.json");
        let result: TestResult =
            serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("reads");
        let text = backup_text(&result);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Database backup statistics");
        assert!(lines[1].contains("MB read/sec"), "{text}");
        for instance in &result.instances {
            assert!(
                lines
                    .iter()
                    .any(|l| l.trim_start().starts_with(&instance.name)),
                "{text}"
            );
        }
        let total = result.totals.backup().expect("totals");
        let last = lines.last().expect("a total line");
        assert!(last.trim_start().starts_with("Total"), "{text}");
        assert!(last.contains(&format!("{:.1}", total.mb_per_sec)), "{text}");
        assert_eq!(lines.len(), 3 + result.instances.len(), "{text}");
    }

    #[test]
    fn text_tables_are_aligned() {
        let text = text(&sample());
        let table: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != "Latency Distribution")
            .skip(1)
            .take_while(|l| !l.is_empty())
            .collect();
        // Transposed to fit 100 columns (an I/O class per column, a figure per row).
        assert_eq!(table.len(), 9, "{text}");
        assert!(table[0].contains("db1 db_read"), "{text}");
        // Right-aligned columns: every data row ends at the same column as the header.
        let width = table[0].len();
        assert!(
            table.iter().all(|l| l.len() == width && l.len() <= 100),
            "{text}"
        );
    }
}
