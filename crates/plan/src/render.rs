//! The plan as the terminal shows it (`jetproof plan` without `--json`): the inputs, the
//! arithmetic step by step, the results and the notes. Rendering lives beside the plan, not in
//! the CLI, so that every caller (the CLI, a report) prints the same text from the same [`Plan`].

use std::fmt::Write as _;
use std::path::Path;

use crate::{Plan, format_bytes, format_number};

/// The human report: inputs, the arithmetic step by step, the results, notes.
pub fn render(plan: &Plan, job_path: Option<&Path>) -> String {
    let inputs = &plan.inputs;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "jetproof plan: {} mailboxes on {} server(s), Exchange {}\n",
        format_number(inputs.mailboxes as f64),
        inputs.servers,
        plan.exchange_version
    );

    table(&mut out, "Inputs", &input_rows(plan));

    arithmetic(&mut out, plan);

    table(&mut out, "Results", &result_rows(plan));

    lists(&mut out, plan, job_path);
    out
}

/// The inputs table's rows: every input, and where a default came from.
fn input_rows(plan: &Plan) -> Vec<(String, String)> {
    let inputs = &plan.inputs;
    let mut rows: Vec<(String, String)> = vec![
        ("Mailboxes".into(), format_number(inputs.mailboxes as f64)),
        (
            "IOPS per mailbox".into(),
            format!(
                "{}, {}",
                format_number(plan.iops_per_mailbox_base),
                plan.iops_per_mailbox_source
            ),
        ),
        (
            "Messages per day".into(),
            inputs
                .messages_per_day
                .map_or("not given".to_string(), |m| m.to_string()),
        ),
        (
            "Exchange version".into(),
            match inputs.exchange_version {
                Some(v) => v.to_string(),
                None => format!("{} (default)", plan.exchange_version),
            },
        ),
        (
            "Headroom".into(),
            format!("{}%", format_number(inputs.headroom_percent)),
        ),
        (
            "Mailbox quota".into(),
            format_bytes(plan.mailbox_quota_bytes),
        ),
        ("Servers".into(), inputs.servers.to_string()),
        (
            "Databases per server".into(),
            inputs.databases_per_server.to_string(),
        ),
        (
            "Copies per database".into(),
            inputs.copies_per_database.to_string(),
        ),
        (
            "Capacity percentage".into(),
            format!("{}%", inputs.capacity_percent),
        ),
        (
            "Read / write share".into(),
            format!(
                "{}% / {}%",
                format_number(inputs.read_percent),
                format_number(inputs.write_percent.unwrap_or(100.0 - inputs.read_percent))
            ),
        ),
        (
            "RAID level".into(),
            format!(
                "{} (write penalty {})",
                inputs.raid,
                inputs.raid.write_penalty()
            ),
        ),
        (
            "IOPS per disk".into(),
            format!(
                "{}, {}",
                format_number(plan.disk_iops),
                plan.disk_iops_source
            ),
        ),
    ];
    rows.push((
        "Log file size".into(),
        match inputs.log_file_size {
            Some(size) => format_bytes(size.bytes()),
            None => format!(
                "{} (the version's)",
                format_bytes(crate::tables::log_file_bytes(plan.exchange_version))
            ),
        },
    ));
    rows.push((
        "Log retention if truncation stops".into(),
        format!("{} days", inputs.log_truncation_failure_days),
    ));
    rows.push((
        "Mailboxes moved per week".into(),
        format!("{}%", format_number(inputs.mailbox_move_percent)),
    ));
    rows.push((
        "Disk size".into(),
        plan.disk_size_bytes
            .map_or("not given".to_string(), format_bytes),
    ));
    rows.push((
        "RAID group".into(),
        format!(
            "{} disks, {} of data{}",
            plan.raid_group_disks,
            plan.raid_group_data_disks,
            if inputs.raid_group_disks.is_some() {
                ""
            } else {
                " (the level's common width)"
            }
        ),
    ));
    let switches = [
        ("white space", inputs.overheads.white_space),
        (
            "deleted item retention",
            inputs.overheads.deleted_item_retention,
        ),
        ("content index", inputs.overheads.content_index),
        ("free space reserve", inputs.overheads.free_space_reserve),
    ];
    rows.push((
        "Overheads counted".into(),
        switches
            .iter()
            .map(|(name, on)| format!("{name} {}", if *on { "on" } else { "off" }))
            .collect::<Vec<_>>()
            .join(", "),
    ));
    rows
}

/// The arithmetic, step by step: what, the figure, the formula.
fn arithmetic(out: &mut String, plan: &Plan) {
    let _ = writeln!(out, "Arithmetic");
    for (index, step) in plan.steps.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {:>2}. {:<56} {}",
            index + 1,
            step.description,
            step.figure
        );
        let _ = writeln!(out, "      {}", step.formula);
    }
    out.push('\n');
}

/// The results table's rows.
fn result_rows(plan: &Plan) -> Vec<(String, String)> {
    let inputs = &plan.inputs;
    let mut results: Vec<(String, String)> = vec![
        (
            "Mailboxes per server".into(),
            format_number(plan.mailboxes_per_server as f64),
        ),
        (
            "Mailboxes per database".into(),
            format_number(plan.mailboxes_per_database as f64),
        ),
        (
            "IOPS per mailbox".into(),
            crate::iops_with_headroom_text(
                plan.iops_per_mailbox_base,
                inputs.headroom_percent,
                plan.iops_per_mailbox,
            ),
        ),
        (
            "Target transactional IOPS per server".into(),
            format_number(plan.target_iops_per_server),
        ),
        (
            "Target transactional IOPS in total".into(),
            format_number(plan.target_iops_total),
        ),
        (
            "Back-end IOPS per server".into(),
            format_number(plan.backend_iops_per_server),
        ),
        (
            "Back-end IOPS in total".into(),
            format_number(plan.backend_iops_total),
        ),
        (
            "Disks needed for IOPS".into(),
            format_number(plan.disks_needed_for_iops as f64),
        ),
        (
            "Disks needed for capacity".into(),
            plan.disks_needed_for_capacity
                .map_or("not counted (give --disk-size)".to_string(), |d| {
                    format_number(d as f64)
                }),
        ),
        (
            "Disks needed in total (the larger)".into(),
            format_number(plan.disks_needed as f64),
        ),
        (
            "Disks needed per server".into(),
            format_number(plan.disks_needed_per_server as f64),
        ),
    ];
    if let (Some(logs), Some(all)) = (plan.log_disks_needed, plan.disks_needed_with_logs) {
        results.push(("Log disks (capacity)".into(), format_number(logs as f64)));
        results.push(("Database and log disks".into(), format_number(all as f64)));
    }
    if inputs.copies_per_database > 1 {
        results.push((
            "Disks if all copies share the storage".into(),
            format_number(plan.disks_needed_all_copies as f64),
        ));
    }
    results.extend([
        (
            "Database size".into(),
            format_bytes(plan.database_size_bytes),
        ),
        (
            "Database LUN (volume) per database".into(),
            format_bytes(plan.database_volume_bytes),
        ),
        (
            "Log LUN (volume) per database".into(),
            format_bytes(plan.log_volume_bytes),
        ),
        (
            "Storage, all copies".into(),
            format_bytes(plan.storage_total_bytes),
        ),
        (
            "Test database size (init)".into(),
            format_bytes(plan.test_database_size_bytes),
        ),
        (
            "Database cache per instance (test)".into(),
            format!(
                "{} min / {} max",
                format_bytes(plan.database_cache_min_bytes),
                format_bytes(plan.database_cache_max_bytes)
            ),
        ),
    ]);
    if let Some(bytes) = plan.database_cache_production_bytes {
        results.push((
            "Database cache per database (production)".into(),
            format_bytes(bytes),
        ));
    }
    results
}

/// The warnings, the notes and where the job file went.
fn lists(out: &mut String, plan: &Plan, job_path: Option<&Path>) {
    if !plan.warnings.is_empty() {
        let _ = writeln!(out, "Warnings");
        for warning in &plan.warnings {
            let _ = writeln!(out, "  - {warning}");
        }
        out.push('\n');
    }
    if !plan.notes.is_empty() {
        let _ = writeln!(out, "Notes");
        for note in &plan.notes {
            let _ = writeln!(out, "  - {note}");
        }
        out.push('\n');
    }
    if let Some(path) = job_path {
        let _ = writeln!(
            out,
            "Job file for one server written to {}: run `jetproof init {0}` then `jetproof run {0} --test performance`.",
            path.display()
        );
    }
}

fn table(out: &mut String, title: &str, rows: &[(String, String)]) {
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let _ = writeln!(out, "{title}");
    for (name, value) in rows {
        let _ = writeln!(out, "  {name:<width$}  {value}");
    }
    out.push('\n');
}
