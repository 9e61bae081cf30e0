//! Instance attachment: opening each instance's database and log for a run, the test log's
//! line on its log, and the clean shut-down at the end.

use super::*;

/// Opens one instance's database and finds its mailboxes. A database opened and then found
/// unusable is closed again before the error is returned.
pub(super) fn attach(
    job: &Job,
    index: usize,
    instance: &jetproof_job::Instance,
    mix: Mix,
    options: &RunOptions<'_>,
) -> Result<Attached, RunError> {
    let stats = InstanceStats::new(instance.name.clone());
    let database = Arc::new(LoggedInstance::open(
        options.backend.clone(),
        &instance.database_path,
        &instance.log_path,
        instance_options(job, index, stats.clone()),
    )?);
    let store: Arc<dyn Store> = Arc::new(EngineStore(database.clone()));
    let mailboxes = match Mailboxes::discover(store.as_ref(), mailboxes_per_database(job)) {
        Ok(mailboxes) => mailboxes,
        Err(e) => {
            drop(store);
            if let Ok(database) = Arc::try_unwrap(database) {
                let _ = database.close();
            }
            return Err(RunError::Results(format!("{}: {e}", instance.name)));
        }
    };
    Ok(Attached {
        name: instance.name.clone(),
        database,
        stats,
        load: InstanceLoad {
            store,
            mailboxes: Arc::new(mailboxes),
            mix,
            record_size: job.workload.record_size.bytes() as usize,
            compression_ratio: job.workload.compression_ratio,
            pacer: Arc::new(Pacer::new()),
            counters: Arc::new(LoadCounters::default()),
        },
        failed: AtomicBool::new(false),
        error: Default::default(),
        bdm: ScanState::default(),
        replication: SenderState::default(),
        ios_per_transaction: Default::default(),
        pace: Default::default(),
    })
}

/// One line of the test log on what the instance's log did over the whole run (warm-up
/// included): records and their bytes, the log writes (the `log_write` class) and their size, and
/// apart from them the preformatting of new generation files (not a log write, as in the seeds'
/// figures: `docs/log.md`), so the log figures can be read beside the seeds'.
pub(super) fn log_summary(a: &Attached) -> String {
    let log = a.database.log().stats();
    let get = jetproof_log::LogStats::get;
    let counters = a.database.counters();
    let mb = |bytes: u64| bytes as f64 / 1e6;
    format!(
        "Log of {}: {} records ({:.1} MB), {} commit records, {} log writes ({:.1} MB, {:.0} bytes \
         each, {:.1} MB of them sector fill), {} generations ({:.1} MB preformatted; rollovers {:.2} ms each, generation-end write until the next generation is taken, {:.2} ms of it waiting for the spare's lock, {} naming the next generation inline), {} checkpoints, {} checkpoint-depth flushes ({} page writes, {} pages), \
         {} undo records, {} undo entries carried by their change's record, {} replaced values kept as undo in memory ({} of them logged at a page write), \
         {} write conflicts rolled back; log writes by trigger: {}; durable commits' writes issued at once after the write before them (deferred) {}, handed to a waiting commit {} ({:.3} ms each from the completion to the next write).",
        a.name,
        get(&log.records),
        mb(get(&log.record_bytes)),
        get(&counters.commit_records),
        get(&log.writes),
        mb(get(&log.write_bytes)),
        get(&log.write_bytes) as f64 / get(&log.writes).max(1) as f64,
        mb(get(&log.fill_bytes)),
        get(&log.generations_created),
        mb(get(&log.format_bytes)),
        get(&log.rollover_latency_ns_total) as f64 / 1e6 / get(&log.rollovers).max(1) as f64,
        get(&log.rollover_spare_wait_ns_total) as f64 / 1e6 / get(&log.rollovers).max(1) as f64,
        get(&log.rollovers_without_spare),
        get(&log.checkpoints),
        get(&counters.depth_flushes),
        get(&counters.depth_flush_writes),
        get(&counters.depth_flush_pages),
        get(&counters.undo_records),
        get(&counters.undo_in_records),
        get(&counters.undo_deferred),
        a.database.deferred_undo_logged().0,
        get(&counters.write_conflicts),
        jetproof_log::WriteTrigger::ALL
            .iter()
            .map(|&t| format!("{} {}", t.name(), log.writes_by(t)))
            .collect::<Vec<_>>()
            .join(", "),
        get(&log.deferred_writes),
        get(&log.handoffs),
        get(&log.handoff_gap_ns_total) as f64 / 1e6 / get(&log.handoffs).max(1) as f64,
    )
}

/// Closes every instance cleanly (dirty pages and log flushed, checkpoint at the log's end, header
/// marked clean); returns what went wrong, one line per instance.
pub(super) fn shut_down(attached: Vec<Attached>) -> Vec<String> {
    let mut problems = Vec::new();
    for a in attached {
        let Attached {
            name,
            database,
            load,
            ..
        } = a;
        // The sessions' store holds the other reference to the database.
        drop(load);
        match Arc::try_unwrap(database) {
            Ok(database) => {
                if let Err(e) = database.close() {
                    problems.push(format!("{name}: shutting down: {e}"));
                }
            }
            Err(_) => problems.push(format!("{name}: still in use at shut-down")),
        }
    }
    problems
}
