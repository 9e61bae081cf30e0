//! Auto-tuning of the session count (`workload.threads = "auto"`): the smallest number of
//! sessions per instance that reaches the target transactional IOPS while the latency
//! thresholds hold. `docs/workload.md` describes it for users; this is the search.
//!
//! Each trial runs the workload *unpaced* with a given count on every instance, lets the
//! latency settle, then measures a longer stable sample (Jetstress's two samples). An unpaced
//! trial measures what that count can deliver and, since the device is busier than it will be
//! when paced, latencies no better than the paced run will see: a count that passes a trial is a
//! safe choice. A trial passes when the achieved transactional IOPS reach the target times
//! [`MARGIN`] (the paced run needs a little room to hold the target through noise), the slowest
//! instance reaches its share of that too (each instance is paced at its share: a fast one
//! cannot make up for a slow one), and every instance holds the average latency thresholds.
//!
//! The search: 1, 2, 4, … sessions until a trial passes, then bisection between the last failing
//! and the first passing count. It gives up, saying why, when a trial breaks the latency
//! thresholds before the target is reached (more sessions only queue deeper), when doubling the
//! sessions raises the IOPS by less than [`SATURATION_GAIN`] (the storage, or this host, is
//! saturated), or at [`MAX_SESSIONS`].

/// The target must be beaten by this factor in an unpaced trial.
pub const MARGIN: f64 = 1.05;

/// Doubling the sessions must raise the IOPS at least this much, or the search stops.
pub const SATURATION_GAIN: f64 = 1.10;

/// Most sessions per instance the search tries.
pub const MAX_SESSIONS: u32 = jetproof_job::AUTO_MAX_SESSIONS;

/// What one trial measured: the type `result.json` writes (`parameters.autotune.trials[]`).
pub use jetproof_results::sections::AutotuneTrial as Trial;

/// The search's conclusion.
#[derive(Clone, Debug, PartialEq)]
pub enum Conclusion {
    /// The smallest count that passed.
    Chosen(u32),
    /// No count can reach the target; the best count seen and why the search stopped.
    Unreachable { best: u32, why: String },
    /// A trial could not run to its end (Ctrl-C or a storage error); the count to go on with.
    Stopped { best: u32 },
}

/// What a trial runner returns: the measured figures (before the pass decision), or None when
/// the trial was cut short.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub achieved_iops: f64,
    /// The slowest instance's transactional IOPS times the number of instances (equal to
    /// `achieved_iops` with one instance or perfectly even ones).
    pub slowest_instance_iops_times_instances: f64,
    pub db_read_avg_ms: f64,
    pub log_write_avg_ms: Option<f64>,
    pub within_thresholds: bool,
}

/// Finds the smallest passing count. `run_trial` runs one trial with that many sessions per
/// instance. Returns the conclusion and every trial, in the order run.
pub fn search(
    target_iops: f64,
    mut run_trial: impl FnMut(u32) -> Option<Measurement>,
) -> (Conclusion, Vec<Trial>) {
    let mut trials: Vec<Trial> = Vec::new();
    let mut trial = |sessions: u32, trials: &mut Vec<Trial>| -> Option<Trial> {
        let m = run_trial(sessions)?;
        let t = Trial {
            sessions,
            achieved_iops: m.achieved_iops,
            slowest_instance_iops_times_instances: m.slowest_instance_iops_times_instances,
            db_read_avg_ms: m.db_read_avg_ms,
            log_write_avg_ms: m.log_write_avg_ms,
            within_thresholds: m.within_thresholds,
            passed: m.within_thresholds
                && m.achieved_iops.min(m.slowest_instance_iops_times_instances)
                    >= target_iops * MARGIN,
        };
        trials.push(t.clone());
        Some(t)
    };
    let best_of = |trials: &[Trial]| {
        // The highest IOPS within the thresholds; on a tie, the fewer sessions.
        trials
            .iter()
            .filter(|t| t.within_thresholds)
            .fold(None::<&Trial>, |best, t| match best {
                Some(b) if b.achieved_iops >= t.achieved_iops => Some(b),
                _ => Some(t),
            })
            .or(trials.first())
            .map(|t| t.sessions)
            .unwrap_or(1)
    };

    // Doubling: find a passing count, or a reason to give up.
    let mut failing = 0u32;
    let mut sessions = 1u32;
    let mut previous: Option<Trial> = None;
    let passing = loop {
        let Some(t) = trial(sessions, &mut trials) else {
            return (
                Conclusion::Stopped {
                    best: best_of(&trials),
                },
                trials,
            );
        };
        if t.passed {
            break sessions;
        }
        let best = best_of(&trials);
        if !t.within_thresholds {
            let why = format!(
                "with {sessions} sessions per instance the latency thresholds were broken (database reads {:.2} ms{}) at {:.1} IOPS, short of the target of {:.1} IOPS (+{:.0}% margin)",
                t.db_read_avg_ms,
                t.log_write_avg_ms
                    .map(|l| format!(", log writes {l:.2} ms"))
                    .unwrap_or_default(),
                t.achieved_iops,
                target_iops,
                (MARGIN - 1.0) * 100.0
            );
            return (Conclusion::Unreachable { best, why }, trials);
        }
        if let Some(p) = &previous
            && t.achieved_iops < p.achieved_iops * SATURATION_GAIN
        {
            let why = format!(
                "going from {} to {sessions} sessions per instance raised the transactional IOPS only from {:.1} to {:.1} (less than {:.0}% more): the storage is saturated short of the target of {:.1} IOPS (+{:.0}% margin)",
                p.sessions,
                p.achieved_iops,
                t.achieved_iops,
                (SATURATION_GAIN - 1.0) * 100.0,
                target_iops,
                (MARGIN - 1.0) * 100.0
            );
            return (Conclusion::Unreachable { best, why }, trials);
        }
        if sessions >= MAX_SESSIONS {
            let why = format!(
                "{MAX_SESSIONS} sessions per instance reached only {:.1} IOPS, short of the target of {:.1} IOPS (+{:.0}% margin)",
                t.achieved_iops,
                target_iops,
                (MARGIN - 1.0) * 100.0
            );
            return (Conclusion::Unreachable { best, why }, trials);
        }
        failing = sessions;
        previous = Some(t);
        sessions = (sessions * 2).min(MAX_SESSIONS);
    };

    // Bisection: the smallest passing count between the last failing and the first passing.
    let mut passing = passing;
    while passing - failing > 1 {
        let middle = failing + (passing - failing) / 2;
        let Some(t) = trial(middle, &mut trials) else {
            return (Conclusion::Stopped { best: passing }, trials);
        };
        if t.passed {
            passing = middle;
        } else {
            failing = middle;
        }
    }
    (Conclusion::Chosen(passing), trials)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model storage: each session adds `per_session` IOPS up to `ceiling`; latency grows
    /// with the sessions.
    fn model(
        per_session: f64,
        ceiling: f64,
        ms_per_session: f64,
        limit_ms: f64,
    ) -> impl FnMut(u32) -> Option<Measurement> {
        move |sessions| {
            let latency = sessions as f64 * ms_per_session;
            let iops = (sessions as f64 * per_session).min(ceiling);
            Some(Measurement {
                achieved_iops: iops,
                slowest_instance_iops_times_instances: iops,
                db_read_avg_ms: latency,
                log_write_avg_ms: None,
                within_thresholds: latency <= limit_ms,
            })
        }
    }

    #[test]
    fn finds_the_smallest_count_by_doubling_then_bisecting() {
        // 100 IOPS per session; target 1000 needs 1050 → 11 sessions.
        let (conclusion, trials) = search(1000.0, model(100.0, 1e9, 0.1, 20.0));
        assert_eq!(conclusion, Conclusion::Chosen(11));
        let order: Vec<u32> = trials.iter().map(|t| t.sessions).collect();
        assert_eq!(order, vec![1, 2, 4, 8, 16, 12, 10, 11]);
        assert!(trials.last().is_some_and(|t| t.passed));
    }

    #[test]
    fn a_slow_instance_is_not_hidden_by_a_fast_one() {
        // Two instances: one does 100 IOPS per session, the other 50. Target 1,000 (500 each):
        // the total reaches 1,050 at 8 sessions (1,200), but the slow one needs 11 (550 ≥ 525).
        let (conclusion, _) = search(1000.0, |sessions| {
            let (fast, slow) = (sessions as f64 * 100.0, sessions as f64 * 50.0);
            Some(Measurement {
                achieved_iops: fast + slow,
                slowest_instance_iops_times_instances: slow * 2.0,
                db_read_avg_ms: 1.0,
                log_write_avg_ms: None,
                within_thresholds: true,
            })
        });
        assert_eq!(conclusion, Conclusion::Chosen(11));
    }

    #[test]
    fn one_session_is_enough_for_a_small_target() {
        let (conclusion, trials) = search(10.0, model(100.0, 1e9, 0.1, 20.0));
        assert_eq!(conclusion, Conclusion::Chosen(1));
        assert_eq!(trials.len(), 1);
    }

    #[test]
    fn a_saturated_storage_is_reported_unreachable() {
        // Ceiling of 300 IOPS: 1, 2, 4 (300), 8 (300): no gain.
        let (conclusion, trials) = search(1000.0, model(100.0, 300.0, 0.1, 20.0));
        match conclusion {
            Conclusion::Unreachable { best, why } => {
                assert_eq!(best, 4);
                assert!(why.contains("saturated"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(trials.len(), 4);
    }

    #[test]
    fn broken_latency_thresholds_stop_the_search() {
        // 5 ms per session, limit 20 ms: 8 sessions break it at 800 IOPS.
        let (conclusion, _) = search(1000.0, model(100.0, 1e9, 5.0, 20.0));
        match conclusion {
            Conclusion::Unreachable { best, why } => {
                assert_eq!(best, 4);
                assert!(why.contains("latency thresholds were broken"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_cut_short_trial_stops_the_search() {
        let mut calls = 0;
        let (conclusion, trials) = search(1000.0, |s| {
            calls += 1;
            (calls < 3).then_some(Measurement {
                achieved_iops: s as f64 * 100.0,
                slowest_instance_iops_times_instances: s as f64 * 100.0,
                db_read_avg_ms: 1.0,
                log_write_avg_ms: None,
                within_thresholds: true,
            })
        });
        assert_eq!(conclusion, Conclusion::Stopped { best: 2 });
        assert_eq!(trials.len(), 2);
    }
}
