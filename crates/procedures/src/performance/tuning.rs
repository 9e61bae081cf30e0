//! Auto-tune's trials within a run (`crate::autotune` decides from them): with the sessions
//! running, each trial settles, measures, and is judged against the target and the thresholds.

use super::*;

/// Auto-tune (`autotune.rs`): trials of `settle` (one sample interval, not measured) then
/// `measure` (two sample intervals), unpaced, until the search concludes. Each trial is one line
/// of the test log. The pacers are restored afterwards for the measured window.
pub(super) fn tune(
    job: &Job,
    attached: &[Attached],
    per_instance_target: f64,
    limits: &Limits,
    log: &TestLog,
    options: &RunOptions<'_>,
) -> Tuning {
    let interval = job.run.sample_interval.as_duration();
    let (settle, measure) = (interval, interval * 2);
    let target = per_instance_target * attached.len() as f64;
    log.line(format!(
        "Auto-tuning the session count: target {target:.1} transactional IOPS (+{:.0}% margin); each trial runs unpaced, {:.1} s to settle then a {:.1} s sample; 1, 2, 4, ... sessions per instance, then bisection.",
        (autotune::MARGIN - 1.0) * 100.0,
        settle.as_secs_f64(),
        measure.as_secs_f64()
    ));
    for a in attached {
        a.load.pacer.set_rate(None);
    }
    let mut trial_index = 0u64;
    let (conclusion, trials) = autotune::search(target, |sessions| {
        trial_index += 1;
        let seed = options
            .seed
            .wrapping_add(PHASE_TRIAL)
            .wrapping_add(trial_index << 40);
        let step_started = Instant::now();
        if let Some(live) = options.live {
            live.status(&crate::live::PhaseStatus {
                phase: format!("auto-tune step {trial_index}"),
                elapsed_s: 0.0,
                eta_s: Some((settle + measure).as_secs_f64()),
                detail: format!(
                    "trying {} per instance against the target of {target:.0} transactional IOPS",
                    sessions_text(sessions)
                ),
                milestone: true,
            });
        }
        let m = with_sessions(attached, sessions, seed, || {
            trial(attached, settle, measure, limits, options)
        })?;
        if let Some(live) = options.live {
            live.status(&crate::live::PhaseStatus {
                phase: format!("auto-tune step {trial_index}"),
                elapsed_s: step_started.elapsed().as_secs_f64(),
                eta_s: None,
                detail: format!(
                    "{} per instance: {:.0} transactional IOPS (target {target:.0}); database reads avg {:.3} ms (limit {}); log writes avg {} (limit {}); {}",
                    sessions_text(sessions),
                    m.achieved_iops,
                    m.db_read_avg_ms,
                    limits.db_read_avg_ms,
                    m.log_write_avg_ms
                        .map(|l| format!("{l:.3} ms"))
                        .unwrap_or_else(|| "none".into()),
                    limits.log_write_avg_ms,
                    trial_verdict(&m, target)
                ),
                milestone: true,
            });
        }
        log.line(format!(
            "Auto-tune trial: {} per instance: {:.1} transactional IOPS, database reads {:.2} ms average{} ({}).",
            sessions_text(sessions),
            m.achieved_iops,
            m.db_read_avg_ms,
            m.log_write_avg_ms
                .map(|l| format!(", log writes {l:.2} ms average"))
                .unwrap_or_default(),
            trial_verdict(&m, target)
        ));
        Some(m)
    });
    match &conclusion {
        Conclusion::Chosen(n) => log.line(format!(
            "Auto-tune chose {} per instance ({} trials).",
            sessions_text(*n),
            trials.len()
        )),
        Conclusion::Unreachable { best, why } => log.line(format!(
            "Auto-tune: the storage cannot reach the target: {why}. Measuring with the best count, {} per instance; the test fails.",
            sessions_text(*best)
        )),
        Conclusion::Stopped { best } => log.line(format!(
            "Auto-tune was cut short; going on with {} per instance.",
            sessions_text(*best)
        )),
    }
    // The trials measured the I/Os a transaction costs: the measured window starts paced right.
    for a in attached {
        a.pace_at(Some(per_instance_target));
    }
    Tuning {
        conclusion,
        trials,
        settle,
        measure,
    }
}

/// A trial's outcome in the test log's and the live view's words.
fn trial_verdict(m: &Measurement, target: f64) -> &'static str {
    if !m.within_thresholds {
        "latency thresholds broken"
    } else if m.achieved_iops.min(m.slowest_instance_iops_times_instances)
        >= target * autotune::MARGIN
    {
        "target reached"
    } else {
        "short of the target"
    }
}

fn sessions_text(count: u32) -> String {
    if count == 1 {
        "1 session".into()
    } else {
        format!("{count} sessions")
    }
}

/// One auto-tune trial with the sessions already running: None if Ctrl-C or a storage error cut
/// it short.
fn trial(
    attached: &[Attached],
    settle: Duration,
    measure: Duration,
    limits: &Limits,
    options: &RunOptions<'_>,
) -> Option<Measurement> {
    let wait = |span: Duration| {
        let until = jetproof_io::clock::later(Instant::now(), span);
        loop {
            if options.stop.load(Ordering::Relaxed)
                || options.start_at.is_some_and(crate::start::reached)
                || attached.iter().any(|a| a.failed.load(Ordering::Relaxed))
            {
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(50)));
        }
    };
    if !wait(settle) {
        return None;
    }
    let base: Vec<InstanceSnapshot> = attached.iter().map(|a| a.stats.snapshot()).collect();
    let base_tx: Vec<u64> = attached
        .iter()
        .map(|a| a.load.counters.transactions())
        .collect();
    let started = Instant::now();
    if !wait(measure) {
        return None;
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut m = Measurement {
        achieved_iops: 0.0,
        slowest_instance_iops_times_instances: f64::INFINITY,
        db_read_avg_ms: 0.0,
        log_write_avg_ms: None,
        within_thresholds: true,
    };
    for ((a, base), base_tx) in attached.iter().zip(&base).zip(base_tx) {
        let delta = a.stats.snapshot().delta_since(base);
        let count = |class: IoClass| delta.classes.get(&class).map(|c| c.count).unwrap_or(0);
        let transactions = a.load.counters.transactions().saturating_sub(base_tx);
        if transactions >= CONTROL_MIN_TRANSACTIONS {
            a.set_ios_per_transaction(
                (count(IoClass::DbRead) + count(IoClass::DbWrite)) as f64 / transactions as f64,
            );
        }
        let summary = |class: IoClass| {
            delta
                .classes
                .get(&class)
                .filter(|c| c.count > 0)
                .map(|c| c.summary(seconds))
        };
        let reads = summary(IoClass::DbRead);
        let writes = summary(IoClass::DbWrite);
        let iops = reads.as_ref().map(|r| r.ops_per_sec).unwrap_or(0.0)
            + writes.as_ref().map(|w| w.ops_per_sec).unwrap_or(0.0);
        m.achieved_iops += iops;
        m.slowest_instance_iops_times_instances = m
            .slowest_instance_iops_times_instances
            .min(iops * attached.len() as f64);
        if let Some(r) = &reads {
            m.db_read_avg_ms = m.db_read_avg_ms.max(r.avg_latency_ms);
            m.within_thresholds &= r.avg_latency_ms <= limits.db_read_avg_ms;
        }
        if let Some(l) = summary(IoClass::LogWrite) {
            m.log_write_avg_ms = Some(m.log_write_avg_ms.unwrap_or(0.0).max(l.avg_latency_ms));
            m.within_thresholds &= l.avg_latency_ms <= limits.log_write_avg_ms;
        }
    }
    if !m.slowest_instance_iops_times_instances.is_finite() {
        m.slowest_instance_iops_times_instances = m.achieved_iops;
    }
    Some(m)
}
