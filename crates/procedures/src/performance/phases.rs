//! The phases of a run after attaching: attaining the prerequisites (warm caches), auto-tune
//! when asked, the measured window; with the sessions, background maintenance and log
//! replication running beside them.

use super::*;

/// The run's clock: attains the prerequisites, tunes the session count when asked, then runs
/// the measured window with sampling and pacing, and measures it.
#[allow(clippy::too_many_arguments)]
pub(super) fn phases(
    job: &Job,
    attached: &[Attached],
    duration: Duration,
    per_instance_target: Option<f64>,
    settings: &Settings,
    log: &TestLog,
    out: &OutDir,
    options: &RunOptions<'_>,
) -> Result<Phases, RunError> {
    let limits = &settings.limits;
    let fixed = settings.sessions.fixed();
    // Auto-tune warms the cache with one session per instance: its trials start from one.
    let warm = with_sessions(
        attached,
        fixed.unwrap_or(1),
        options.seed.wrapping_add(PHASE_WARM_UP),
        || attain_prerequisites(job, attached, per_instance_target, log, options),
    );
    let start_passed = || options.start_at.is_some_and(crate::start::reached);
    let (sessions, tuning) = match (fixed, per_instance_target) {
        (Some(n), _) => (n, None),
        // The start time came during the warm-up: no time is left to tune; one session per
        // instance, as the warm-up ran (the result says it was not ready).
        (None, Some(_)) if start_passed() => {
            log.line(
                "The start time arrived before auto-tune could run: measuring with 1 session per instance.",
            );
            (1, None)
        }
        (None, Some(share)) => {
            let tuning = tune(job, attached, share, limits, log, options);
            let sessions = match tuning.conclusion {
                Conclusion::Chosen(n) => n,
                Conclusion::Unreachable { best, .. } | Conclusion::Stopped { best } => best,
            };
            (sessions, Some(tuning))
        }
        // preflight refuses "auto" without a target; one session is the safe reading.
        (None, None) => (1, None),
    };
    // Ready when warm-up (and auto-tune) ended before the start time: a trial cut short by the
    // start time is not ready either.
    let ready_at_start = warm && !start_passed();
    let measured = with_sessions(
        attached,
        sessions,
        options.seed.wrapping_add(PHASE_MEASURED),
        || {
            measure(&measure::Run {
                job,
                attached,
                sessions,
                duration,
                per_instance_target,
                log,
                out,
                options,
                limits,
            })
        },
    )?;
    Ok(Phases {
        measured,
        sessions,
        tuning,
        ready_at_start,
    })
}

/// Runs `body` while `sessions` sessions per instance run transactions; stops and joins them
/// after. An instance whose session hits a storage error is marked failed (its other sessions
/// stop; the other instances go on).
pub(super) fn with_sessions<T>(
    attached: &[Attached],
    sessions: u32,
    seed: u64,
    body: impl FnOnce() -> T,
) -> T {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for (index, a) in attached.iter().enumerate() {
            for session in 0..sessions {
                let (a, stop) = (a, &stop);
                let seed = seed
                    .wrapping_add((index as u64) << 32)
                    .wrapping_add(u64::from(session));
                scope.spawn(move || {
                    let born = std::time::Instant::now();
                    let stopped = || {
                        if born.elapsed() > std::time::Duration::from_secs(1) {
                            crate::test_hooks::panic_point("session");
                        }
                        stop.load(Ordering::Relaxed) || a.failed.load(Ordering::Relaxed)
                    };
                    if let Err(error) = run_session(&a.load, seed, &stopped) {
                        a.failed.store(true, Ordering::Relaxed);
                        a.error.set_once(error.to_string());
                    }
                });
            }
        }
        let result = body();
        stop.store(true, Ordering::Relaxed);
        result
    })
}

/// One instance's background database maintenance, until `run_stop`: the database file opened
/// again read-only, metered into the instance's figures as `bdm_read`, scanned at the pace of
/// `maintenance::BYTES_PER_SEC`. An I/O error stops the instance like a session's would.
pub(super) fn background_maintenance(
    job: &Job,
    a: &Attached,
    options: &RunOptions<'_>,
    log: &TestLog,
    run_stop: &AtomicBool,
) {
    let path = a.database.database().path().to_path_buf();
    let scan = || -> Result<(), IoError> {
        let file = options.backend.open(
            &path,
            &OpenOptions::read_only().with_direct(job.storage.direct_io),
        )?;
        let file = MeteredFile::wrap(file, a.stats.clone());
        let config = ScanConfig {
            read_size: job.workload.maintenance_read_size.bytes() as usize,
            page_size: a.database.database().page_size(),
            bytes_per_sec: maintenance::BYTES_PER_SEC,
            flush_map: Some(a.database.database().flush_map().clone()),
        };
        maintenance::scan(
            file.as_ref(),
            &config,
            &|| a.database.database().page_count(),
            &a.bdm,
            &|| run_stop.load(Ordering::Relaxed),
            &|damaged| {
                log.line(format!(
                    "Background database maintenance found a damaged page: {}: {damaged}",
                    a.name
                ));
            },
            &|pages, seconds| {
                log.line(format!(
                    "Background database maintenance: {}: pass {} complete, {pages} pages verified in {seconds:.1} s.",
                    a.name,
                    a.bdm.passes.load(Ordering::Relaxed)
                ));
            },
        )
    };
    if let Err(error) = scan() {
        a.failed.store(true, Ordering::Relaxed);
        a.error
            .set_once(format!("background database maintenance: {error}"));
    }
}

/// One instance's log replication sender, until `run_stop`: every generation closed after the
/// instance was attached is read back once per passive copy, metered into the instance's figures as
/// `replication_read`. An I/O error or a damaged frame stops the instance like a session's would.
pub(super) fn replication_sender(
    job: &Job,
    a: &Attached,
    options: &RunOptions<'_>,
    run_stop: &AtomicBool,
) {
    let log = a.database.log();
    let config = SenderConfig {
        dir: a.database.log_dir().to_path_buf(),
        database_id: log.options().database_id,
        direct_io: job.storage.direct_io,
        read_size: replication::READ_SIZE,
        passes: replication::passes_for_copies(job.simulation.copies_per_database),
    };
    let first = log.flushed_lsn().generation;
    if let Err(error) = replication::send(
        options.backend.as_ref(),
        &config,
        &a.stats,
        first,
        &|| log.flushed_lsn(),
        &a.replication,
        &|| run_stop.load(Ordering::Relaxed) || a.failed.load(Ordering::Relaxed),
    ) {
        a.failed.store(true, Ordering::Relaxed);
        a.error.set_once(format!("log replication read: {error}"));
    }
}

/// Attaining prerequisites: the workload (already running, unpaced until the caches are full)
/// warms every cache up to its maximum. With `--start-at`, the start time ends it even when the
/// caches are not full yet; returns whether the prerequisites were attained.
fn attain_prerequisites(
    job: &Job,
    attached: &[Attached],
    per_instance_target: Option<f64>,
    log: &TestLog,
    options: &RunOptions<'_>,
) -> bool {
    log.line("Attaining prerequisites:");
    let warm_started = Instant::now();
    let mut caches_warm = false;
    let mut attained = false;
    loop {
        // An instance stopped by a storage error will not warm up: do not wait for it.
        let stopped = |a: &Attached| a.failed.load(Ordering::Relaxed);
        if !caches_warm
            && attached.iter().all(|a| {
                let c = a.database.database().cache_stats();
                stopped(a) || c.resident_pages + c.max_pages / 100 >= c.max_pages
            })
        {
            caches_warm = true;
            // The warm-up ran unpaced: the pages it dirtied lie close together in the log, and
            // would reach the checkpoint depth together inside the measured window, a burst of
            // writes the target's load does not make (up to ~1,100 writes of one instance
            // within 5 s with 256 MiB caches, a third of a 120 s window's writes). Write them
            // now, before the pace settles: the window's writes are then those of pages dirtied
            // at the paced rate (`docs/workload.md`, "Pacing").
            for a in attached.iter().filter(|a| !stopped(a)) {
                if let Err(error) = a.database.flush_dirty_pages() {
                    a.failed.store(true, Ordering::Relaxed);
                    a.error.set_once(error.to_string());
                }
            }
            // Estimates of I/Os per transaction made while the caches filled count misses a
            // warm cache does not have: the controller starts afresh.
            for a in attached {
                a.ios_per_transaction.store(0, Ordering::Relaxed);
                a.pace_estimator().clear();
            }
        }
        // When paced, an estimate made with warm caches over `CONTROL_SETTLE` is also a
        // prerequisite, so the measured window starts at the target rate rather than at a guess.
        let estimated = per_instance_target.is_none()
            || attached.iter().all(|a| {
                stopped(a)
                    || (a.ios_per_transaction().is_some()
                        && a.pace_estimator().span() >= CONTROL_SETTLE)
            });
        if caches_warm && estimated {
            attained = true;
            break;
        }
        if options.stop.load(Ordering::Relaxed) {
            break;
        }
        if options.start_at.is_some_and(crate::start::reached) {
            // Say how long the preparation had run and how much lead it would need: the time so
            // far, with the caches' remaining fill at the rate so far and, when paced, the
            // pace's settling after it (issue 32, item 12).
            let so_far = crate::start::launched().elapsed();
            let (resident, max) = attached.iter().fold((0u64, 0u64), |(r, m), a| {
                let c = a.database.database().cache_stats();
                (r + c.resident_pages as u64, m + c.max_pages as u64)
            });
            let filled = resident as f64 / max.max(1) as f64;
            let warming = warm_started.elapsed().as_secs_f64();
            let fill_left = if caches_warm || filled <= 0.0 {
                0.0
            } else {
                warming * (1.0 - filled) / filled
            };
            let settle = if per_instance_target.is_some() {
                CONTROL_SETTLE.as_secs_f64()
            } else {
                0.0
            };
            let needed = Duration::from_secs_f64(so_far.as_secs_f64() + fill_left + settle);
            log.line(format!(
                "The start time arrived before the prerequisites were attained, {:.1} s after launch (caches {:.0}% full{}); the measured window starts at the start time as asked (ready_at_start: false). The preparation needs about {:.0} s on this host: give --start-at at least {} s ahead.",
                so_far.as_secs_f64(),
                filled.min(1.0) * 100.0,
                if caches_warm && settle > 0.0 {
                    ", pace settling"
                } else {
                    ""
                },
                needed.as_secs_f64(),
                crate::start::suggested_lead(needed)
            ));
            break;
        }
        if warm_started.elapsed() > PREREQUISITE_LIMIT {
            log.line("The caches did not fill within the limit; measuring anyway.");
            break;
        }
        if let Some(live) = options.live {
            live.status(&warm_up_status(
                attached,
                warm_started,
                caches_warm,
                per_instance_target,
            ));
        }
        if caches_warm {
            control(attached, per_instance_target);
        } else {
            // Nothing is measured while the caches fill: run unpaced, or a low target would
            // take hours to read a large cache full.
            for a in attached {
                a.load.pacer.set_rate(None);
            }
        }
        // Never past the start time: the window must begin on it.
        let until_start = options
            .start_at
            .and_then(|at| at.duration_since(SystemTime::now()).ok())
            .unwrap_or(Duration::MAX);
        std::thread::sleep(Duration::from_millis(100).min(until_start));
    }
    for a in attached {
        let c = a.database.database().cache_stats();
        log.line(format!(
            "\\MSExchange Database(jetproof)\\Database Cache Size ({}): {:.1} MB (maximum {:.1} MB)",
            a.name,
            (c.resident_pages as u64 * job.storage.page_size.bytes()) as f64 / 1_048_576.0,
            (c.max_pages as u64 * job.storage.page_size.bytes()) as f64 / 1_048_576.0
        ));
    }
    attained
}

/// The warm-up as a live view shows it: how full the caches are (resident pages of all
/// instances against their maxima) and the ETA at the fill rate so far; once full, that the
/// pace is being settled at the target.
fn warm_up_status(
    attached: &[Attached],
    started: Instant,
    caches_warm: bool,
    per_instance_target: Option<f64>,
) -> crate::live::PhaseStatus {
    let (resident, max) = attached.iter().fold((0u64, 0u64), |(r, m), a| {
        let c = a.database.database().cache_stats();
        (r + c.resident_pages as u64, m + c.max_pages as u64)
    });
    let elapsed_s = started.elapsed().as_secs_f64();
    let fraction = if max == 0 {
        1.0
    } else {
        (resident as f64 / max as f64).min(1.0)
    };
    let (detail, eta_s) = if caches_warm && per_instance_target.is_some() {
        // Paced: the window waits for an estimate spanning CONTROL_SETTLE on every instance.
        let settled = attached
            .iter()
            .map(|a| a.pace_estimator().span())
            .min()
            .unwrap_or_default()
            .min(CONTROL_SETTLE);
        (
            format!(
                "caches full; settling the pace at the target before the measured window ({:.1} of {:.1} s of estimate)",
                settled.as_secs_f64(),
                CONTROL_SETTLE.as_secs_f64()
            ),
            Some((CONTROL_SETTLE - settled).as_secs_f64()),
        )
    } else {
        (
            format!(
                "caches {:.1}% full ({resident} of {max} pages)",
                fraction * 100.0
            ),
            (!caches_warm && fraction > 0.0 && elapsed_s > 0.0)
                .then(|| elapsed_s * (1.0 - fraction) / fraction),
        )
    };
    crate::live::PhaseStatus {
        phase: "warm-up".into(),
        elapsed_s,
        eta_s,
        detail,
        milestone: false,
    }
}
