//! The measured window: sampling, pacing (the controller over [`super::PaceEstimator`]) and the
//! figures of `result.json`.

use super::*;
use jetproof_results::excursion::{IntervalFigure, Mark};
use std::os::unix::fs::OpenOptionsExt as _;

/// What the measured window runs with.
pub(super) struct Run<'a> {
    pub job: &'a Job,
    pub attached: &'a [Attached],
    pub sessions: u32,
    pub duration: Duration,
    pub per_instance_target: Option<f64>,
    pub log: &'a TestLog,
    pub out: &'a OutDir,
    pub options: &'a RunOptions<'a>,
    pub limits: &'a Limits,
}

/// The measured window, with the sessions already running: the lead `--start-at` needs and the
/// wait for it, then sampling and pacing until the window ends, then the figures.
pub(super) fn measure(run: &Run<'_>) -> Result<Measured, RunError> {
    for a in run.attached {
        a.pace_at(run.per_instance_target);
    }
    wait_for_start(run);
    let mut window = Window::open(run)?;
    // Each instance's account of the window's I/Os against its aim (`WindowAccount`).
    let opened = Instant::now();
    let mut accounts: Vec<WindowAccount> = run
        .attached
        .iter()
        .map(|a| WindowAccount::open(opened, transactional_ios(a), a.load.pacer.dropped()))
        .collect();
    loop {
        let now = Instant::now();
        let elapsed = now.duration_since(window.started);
        if run.options.stop.load(Ordering::Relaxed) {
            window.interrupted = true;
            break;
        }
        if run
            .attached
            .iter()
            .all(|a| a.failed.load(Ordering::Relaxed))
        {
            break;
        }
        if now >= window.next_sample || elapsed >= run.duration {
            window.sample(run, elapsed);
            window.next_sample = jetproof_io::clock::later(window.next_sample, window.interval);
        }
        if elapsed >= run.duration {
            break;
        }
        control(run.attached, run.per_instance_target);
        settle_accounts(run, &mut accounts, run.duration.saturating_sub(elapsed));
        let until_next = window.next_sample.saturating_duration_since(Instant::now());
        std::thread::sleep(until_next.min(CONTROL_TICK).max(Duration::from_millis(10)));
    }
    window.close(run)
}

/// The lead `--start-at` needs (issue 32, item 12): how long the preparation took from the
/// launch, with the lead that covers it; with a start time, how much lead was given, and the
/// wait for it (the sessions keep running, paced).
fn wait_for_start(run: &Run<'_>) {
    let (log, options, attached, per_instance_target) =
        (run.log, run.options, run.attached, run.per_instance_target);
    let preparation = crate::start::launched().elapsed();
    let lead = crate::start::suggested_lead(preparation);
    match options.start_at {
        Some(at) => {
            let given = jetproof_results::clock::millis_between(SystemTime::now(), at) / 1e3
                + preparation.as_secs_f64();
            log.line(format!(
                "Preparation took {:.1} s from launch (attach, warm-up{}); the start time was {given:.1} s after launch{}; give --start-at at least {lead} s ahead on this host.",
                preparation.as_secs_f64(),
                if per_instance_target.is_some() { ", pace settled" } else { "" },
                if given < preparation.as_secs_f64() { ", too little lead" } else { "" },
            ));
        }
        None => log.line(format!(
            "Preparation took {:.1} s from launch (attach, warm-up{}): give --start-at at least {lead} s ahead on this host.",
            preparation.as_secs_f64(),
            if per_instance_target.is_some() { ", pace settled" } else { "" },
        )),
    }
    if let Some(at) = options.start_at {
        log.line(format!(
            "Waiting for the start time {} (--start-at); the sessions keep running, paced.",
            jetproof_results::clock::rfc3339_millis(at)
        ));
        // Stopped while waiting: the loop below sees the flag and ends an empty window.
        let _ =
            crate::start::wait_until(at, options.stop, || control(attached, per_instance_target));
    }
}

/// The measured window's state: the samples file, the baselines its figures are differences
/// from, and what the intervals gathered.
struct Window {
    samples: std::fs::File,
    sampler: Sampler,
    devices: crate::device_view::DeviceWatch,
    base: Vec<InstanceSnapshot>,
    base_tx: Vec<u64>,
    base_cache: Vec<CacheStats>,
    base_size: Vec<DatabaseSize>,
    base_space: Vec<SpaceStats>,
    stalls_seen: u64,
    stalls_base: u64,
    stalls_per_sec: Vec<f64>,
    started: Instant,
    start: SystemTime,
    cpu_started: Duration,
    interval: Duration,
    next_sample: Instant,
    interval_max: BTreeMap<(usize, IoClass), f64>,
    /// The live view's running averages: (sum of latency × count, count) per instance and class.
    live_sums: BTreeMap<(usize, IoClass), (f64, u64)>,
    cpu: Vec<f64>,
    memory: Vec<f64>,
    interrupted: bool,
    marks_path: PathBuf,
    marks: Vec<Mark>,
    figures_for_excursions: Vec<IntervalFigure>,
}

impl Window {
    /// Opens the window: the samples and marks files, the baselines, the live view told.
    fn open(run: &Run<'_>) -> Result<Window, RunError> {
        let (job, attached, log, out, options, limits, duration, per_instance_target) = (
            run.job,
            run.attached,
            run.log,
            run.out,
            run.options,
            run.limits,
            run.duration,
            run.per_instance_target,
        );
        log.line(format!(
            "Performance logging started (interval: {} ms).",
            job.run.sample_interval.as_duration().as_millis()
        ));

        let samples_path: PathBuf = out.file("samples.csv");
        let mut samples = std::fs::File::create(&samples_path).map_err(|source| IoError::Path {
            op: "create",
            path: samples_path.clone(),
            source,
        })?;
        let _ = writeln!(
            samples,
            "elapsed_s,wall_clock,{},cpu_percent,available_memory_mb,{},mark",
            jetproof_io::sample::Sample::CSV_HEADER,
            crate::device_view::CSV_COLUMNS
        );
        let mut paths: Vec<PathBuf> = job
            .instances()
            .iter()
            .flat_map(|i| [i.database_path.clone(), i.log_path.clone()])
            .collect();
        paths.dedup();
        let sampler = Sampler::new(attached.iter().map(|a| a.stats.clone()).collect(), &paths);
        // The devices' own view (issue 21), from the window's start.
        let devices = crate::device_view::DeviceWatch::new(job);
        let base: Vec<InstanceSnapshot> = attached.iter().map(|a| a.stats.snapshot()).collect();
        let base_tx: Vec<u64> = attached
            .iter()
            .map(|a| a.load.counters.transactions())
            .collect();
        // The cache's counters count from attach; the results give the window's share.
        let base_cache: Vec<CacheStats> = attached
            .iter()
            .map(|a| a.database.database().cache_stats())
            .collect();
        let stalls_seen: u64 = base_cache.iter().map(|c| c.page_fault_stalls).sum();
        // The sizes and the space counters at the window's start: the growth figures divide the
        // window's growth by the window's I/Os (issue 23). Taken from attach, they counted the
        // warm-up's splits (~10 s of a paced run) over the window's I/Os alone.
        let base_size: Vec<DatabaseSize> = attached
            .iter()
            .map(|a| DatabaseSize::of(&a.database))
            .collect();
        let base_space: Vec<SpaceStats> = attached
            .iter()
            .map(|a| a.database.database().space_stats())
            .collect();
        let stalls_base = stalls_seen;
        if let Some(live) = options.live {
            live.window_started(&crate::live::LiveWindow {
                instances: attached.iter().map(|a| a.stats.clone()).collect(),
                limits: *limits,
                target_iops: per_instance_target.map(|t| t * attached.len() as f64),
                duration_s: duration.as_secs_f64(),
            });
        }
        let window_started = Instant::now();
        let window_start = SystemTime::now();
        // The process's CPU time over the window alone (warm-up and shut-down excluded): every
        // thread's, sessions, flushers, log writers, maintenance and this one.
        let cpu_started = jetproof_io::sample::process_cpu_time();
        let interval = job.run.sample_interval.as_duration();
        let next_sample = jetproof_io::clock::later(window_started, interval);
        // Marks (issue 37): `jetproof mark` appends to this control file; read every interval.
        let marks_path = out.file(jetproof_results::excursion::MARKS_FILE);
        // Made fresh, never through a symbolic link planted at its name (O_NOFOLLOW).
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&marks_path)
            .map_err(|source| IoError::Path {
                op: "create",
                path: marks_path.clone(),
                source,
            })?;
        Ok(Window {
            samples,
            sampler,
            devices,
            base,
            base_tx,
            base_cache,
            base_size,
            base_space,
            stalls_seen,
            stalls_base,
            stalls_per_sec: Vec::new(),
            started: window_started,
            start: window_start,
            cpu_started,
            interval,
            next_sample,
            interval_max: BTreeMap::new(),
            live_sums: BTreeMap::new(),
            cpu: Vec::new(),
            memory: Vec::new(),
            interrupted: false,
            marks_path,
            marks: Vec::new(),
            figures_for_excursions: Vec::new(),
        })
    }

    /// One interval's sample: the host counters, the stall rate, the devices, the marks, the
    /// samples rows, the interval maxima, the test log's line; then the live view's.
    fn sample(&mut self, run: &Run<'_>, elapsed: Duration) {
        let Window {
            samples,
            sampler,
            devices,
            stalls_seen,
            stalls_per_sec,
            start,
            interval_max,
            cpu,
            memory,
            marks_path,
            marks,
            figures_for_excursions,
            ..
        } = self;
        let sample = sampler.sample();
        let cpu_now = sample.host.cpu_percent;
        let memory_now = sample
            .host
            .available_memory_bytes
            .map(|b| b as f64 / 1_048_576.0);
        if let Some(c) = cpu_now {
            cpu.push(c);
        }
        if let Some(m) = memory_now {
            memory.push(m);
        }
        // Database Page Fault Stalls/sec over the interval, all instances together, as
        // Jetstress's host counter (one database cache counter per process).
        let stalls_now: u64 = run
            .attached
            .iter()
            .map(|a| a.database.database().cache_stats().page_fault_stalls)
            .sum();
        stalls_per_sec
            .push(stalls_now.saturating_sub(*stalls_seen) as f64 / sample.interval_s.max(1e-9));
        *stalls_seen = stalls_now;
        devices.record(&sample);
        let arrived = new_marks(marks_path, *start, marks);
        for mark in &arrived {
            run.log.line(format!(
                "Mark at {:.1} s of the window ({}): {}",
                mark.elapsed_s, mark.at, mark.label
            ));
        }
        // The interval's marks go on its first row; commas would split the cell.
        let mut mark_cell = arrived
            .iter()
            .map(|m| m.label.replace([',', '"'], ";"))
            .collect::<Vec<_>>()
            .join(" | ");
        for (delta, _) in sample.instances.iter().zip(run.attached) {
            for (class, threshold_ms) in [
                (IoClass::DbRead, run.limits.db_read_avg_ms),
                (IoClass::LogWrite, run.limits.log_write_avg_ms),
            ] {
                if let Some(snap) = delta.classes.get(&class).filter(|s| s.count > 0) {
                    figures_for_excursions.push(IntervalFigure {
                        end_s: elapsed.as_secs_f64(),
                        interval_s: sample.interval_s,
                        instance: delta.name.clone(),
                        class: class.key().to_owned(),
                        value_ms: snap.summary(sample.interval_s).avg_latency_ms,
                        threshold_ms,
                    });
                }
            }
        }
        for row in &sample.rows {
            let _ = writeln!(
                samples,
                "{:.1},{},{},{},{},{},{}",
                elapsed.as_secs_f64(),
                jetproof_results::clock::rfc3339_millis(*start + elapsed),
                row.csv_line(),
                cpu_now.map(|c| format!("{c:.1}")).unwrap_or_default(),
                memory_now.map(|m| format!("{m:.0}")).unwrap_or_default(),
                devices.csv_cells(&sample, &row.instance, &row.class),
                std::mem::take(&mut mark_cell)
            );
        }
        let _ = samples.flush();
        crate::test_hooks::panic_point("main");
        for (index, delta) in sample.instances.iter().enumerate() {
            for (class, snap) in &delta.classes {
                if snap.count == 0 {
                    continue;
                }
                let avg = snap.summary(sample.interval_s).avg_latency_ms;
                let slot = interval_max.entry((index, *class)).or_insert(0.0);
                *slot = slot.max(avg);
            }
        }
        let line: Vec<String> = sample
            .instances
            .iter()
            .map(|d| {
                let figure = |class: IoClass| {
                    d.classes
                        .get(&class)
                        .map(|s| s.summary(sample.interval_s))
                        .map(|s| (s.ops_per_sec, s.avg_latency_ms))
                        .unwrap_or((0.0, 0.0))
                };
                let (reads, read_ms) = figure(IoClass::DbRead);
                let (writes, _) = figure(IoClass::DbWrite);
                format!(
                    "{}: {:.0} reads/s ({:.2} ms), {:.0} writes/s",
                    d.name, reads, read_ms, writes
                )
            })
            .collect();
        run.log.line(format!(
            "Sample at {:.0} s: {}",
            elapsed.as_secs_f64(),
            line.join("; ")
        ));
        self.live_sample(run, elapsed, &sample);
    }

    /// The live view's figures of one sample: the window's rates, the worst instance's
    /// latencies, and whether the window passes so far.
    fn live_sample(
        &mut self,
        run: &Run<'_>,
        elapsed: Duration,
        sample: &jetproof_io::sample::Sample,
    ) {
        let Window {
            stalls_seen,
            stalls_base,
            stalls_per_sec,
            interval_max,
            live_sums,
            ..
        } = self;
        let Some(live) = run.options.live else {
            return;
        };
        let mut figures = LiveSample {
            phase: "measuring",
            elapsed_s: elapsed.as_secs_f64(),
            duration_s: run.duration.as_secs_f64(),
            transactional_iops: 0.0,
            target_iops: run
                .per_instance_target
                .map(|t| t * run.attached.len() as f64),
            read_avg_ms: 0.0,
            read_p99_ms: 0.0,
            log_avg_ms: 0.0,
            log_p99_ms: 0.0,
            read_limit_ms: run.limits.db_read_avg_ms,
            log_limit_ms: run.limits.log_write_avg_ms,
            stalls_per_sec: stalls_per_sec.last().copied().unwrap_or(0.0),
            page_fault_stalls: stalls_seen.saturating_sub(*stalls_base),
            passing: true,
        };
        for (index, delta) in sample.instances.iter().enumerate() {
            for (class, snap) in &delta.classes {
                if snap.count == 0 {
                    continue;
                }
                let summary = snap.summary(sample.interval_s);
                let sums = live_sums.entry((index, *class)).or_insert((0.0, 0));
                sums.0 += summary.avg_latency_ms * summary.count as f64;
                sums.1 += summary.count;
                match class {
                    IoClass::DbRead => {
                        figures.transactional_iops += summary.ops_per_sec;
                        figures.read_avg_ms = figures.read_avg_ms.max(summary.avg_latency_ms);
                        figures.read_p99_ms = figures.read_p99_ms.max(summary.p99_ms);
                    }
                    IoClass::DbWrite => figures.transactional_iops += summary.ops_per_sec,
                    IoClass::LogWrite => {
                        figures.log_avg_ms = figures.log_avg_ms.max(summary.avg_latency_ms);
                        figures.log_p99_ms = figures.log_p99_ms.max(summary.p99_ms);
                    }
                    _ => {}
                }
            }
        }
        let over = |class: IoClass, avg_limit: f64, max_limit: f64| {
            live_sums.iter().any(|((_, c), (sum, count))| {
                *c == class && *count > 0 && sum / *count as f64 > avg_limit
            }) || interval_max
                .iter()
                .any(|((_, c), max)| *c == class && *max > max_limit)
        };
        let stalls_average =
            stalls_per_sec.iter().sum::<f64>() / stalls_per_sec.len().max(1) as f64;
        figures.passing = !over(
            IoClass::DbRead,
            run.limits.db_read_avg_ms,
            run.limits.db_read_max_ms,
        ) && !over(
            IoClass::LogWrite,
            run.limits.log_write_avg_ms,
            run.limits.log_write_max_ms,
        ) && stalls_average <= run.limits.page_fault_stalls_per_sec;
        live.sample(&figures);
    }

    /// Closes the window: its span and CPU time, the late marks, the excursions, then the
    /// figures.
    fn close(self, run: &Run<'_>) -> Result<Measured, RunError> {
        let Window {
            sampler: _,
            samples: _,
            devices,
            base,
            base_tx,
            base_cache,
            base_size,
            base_space,
            stalls_per_sec,
            started: window_started,
            start: window_start,
            cpu_started,
            interval_max,
            cpu,
            memory,
            interrupted,
            marks_path,
            mut marks,
            figures_for_excursions,
            ..
        } = self;
        let (log, options) = (run.log, run.options);
        let window_span = window_started.elapsed();
        if let Some(live) = options.live {
            live.window_ended();
        }
        let device_view = devices.finish();
        let window = window_span.as_secs_f64();
        let window_end = window_start + window_span;
        let cpu_seconds = jetproof_io::sample::process_cpu_time()
            .saturating_sub(cpu_started)
            .as_secs_f64();
        log.line(format!("Measured window: {window:.1} s."));
        // A mark recorded after the last sample still belongs to the window.
        for mark in new_marks(&marks_path, window_start, &mut marks) {
            log.line(format!(
                "Mark at {:.1} s of the window ({}): {}",
                mark.elapsed_s, mark.at, mark.label
            ));
        }
        let excursions = jetproof_results::excursion::find(&figures_for_excursions, &marks, window);
        for e in &excursions {
            log.line(format!("Excursion: {}.", e.describe()));
        }
        let Figures {
            instances,
            achieved,
            reasons,
            all_tx,
            transactional_ios,
        } = instance_figures(
            run,
            &Baselines {
                base: &base,
                base_tx: &base_tx,
                base_cache: &base_cache,
                base_size: &base_size,
                base_space: &base_space,
                interval_max: &interval_max,
            },
            window,
        );
        let mut totals = WorkloadTotals {
            measured_seconds: window,
            transactions: all_tx,
            process_cpu_seconds: cpu_seconds,
            devices: device_view,
            marks,
            excursions,
            ..WorkloadTotals::default()
        };
        if transactional_ios > 0 {
            let per_io = cpu_seconds * 1e6 / transactional_ios as f64;
            totals.cpu_us_per_transactional_io = Some(per_io);
            log.line(format!(
                "Process CPU over the measured window: {cpu_seconds:.2} s, {per_io:.1} µs per transactional I/O ({transactional_ios} database reads and writes)."
            ));
        }
        // The databases' sizes and what they grow by in an hour at the rate achieved (issue 32,
        // item 12): `db_size` is the initial size, and a long test needs room for the growth.
        let (initial, last) = instances
            .iter()
            .filter_map(|i| i.figures.workload())
            .fold((0u64, 0u64), |(i, l), w| {
                (i + w.db_size_initial_bytes, l + w.db_size_final_bytes)
            });
        let grown = last.saturating_sub(initial);
        let per_hour = grown as f64 / window.max(1e-9) * 3600.0;
        log.line(format!(
            "Database sizes (all {} databases): initial {initial} bytes ({}), final {last} bytes ({}), grown {grown} bytes in the {window:.1} s window; at the achieved {achieved:.1} transactional IOPS they grow about {} per hour ({} per day).",
            instances.len(),
            jetproof_results::report::human_bytes(initial),
            jetproof_results::report::human_bytes(last),
            jetproof_results::report::human_bytes(per_hour as u64),
            jetproof_results::report::human_bytes((per_hour * 24.0) as u64),
        ));
        let stat = |values: &[f64]| {
            (!values.is_empty()).then(|| Stat {
                average: values.iter().sum::<f64>() / values.len() as f64,
                min: values.iter().copied().fold(f64::INFINITY, f64::min),
                max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            })
        };
        let host_counters = match (stat(&cpu), stat(&memory)) {
            (Some(cpu_percent), Some(available_memory_mb)) => Some(HostCounters {
                cpu_percent,
                available_memory_mb,
                database_page_fault_stalls_per_sec: stat(&stalls_per_sec),
            }),
            _ => None,
        };
        Ok(Measured {
            instances,
            achieved_iops: achieved,
            host_counters,
            totals,
            reasons,
            interrupted,
            window_start,
            window_end,
        })
    }
}

/// The window's starting points and interval maxima, from which each instance's figures are made.
struct Baselines<'a> {
    base: &'a [InstanceSnapshot],
    base_tx: &'a [u64],
    base_cache: &'a [CacheStats],
    base_size: &'a [DatabaseSize],
    base_space: &'a [SpaceStats],
    interval_max: &'a BTreeMap<(usize, IoClass), f64>,
}

/// Every instance's figures of the window, with the sums the totals need.
struct Figures {
    instances: Vec<InstanceResult>,
    achieved: f64,
    reasons: Vec<String>,
    all_tx: u64,
    transactional_ios: u64,
}

/// Each instance's figures over the window of `window` seconds: its I/O by class, transactions,
/// cache and stall counts, sizes and space accounting, its error.
fn instance_figures(run: &Run<'_>, baselines: &Baselines<'_>, window: f64) -> Figures {
    let (job, attached, sessions) = (run.job, run.attached, run.sessions);
    let Baselines {
        base,
        base_tx,
        base_cache,
        base_size,
        base_space,
        interval_max,
    } = *baselines;
    let mut instances = Vec::new();
    let mut achieved = 0.0;
    let mut reasons = Vec::new();
    let mut all_tx = 0u64;
    let mut transactional_ios = 0u64;
    for (index, (a, base)) in attached.iter().zip(base).enumerate() {
        let delta = a.stats.snapshot().delta_since(base);
        let mut io = snapshot_results(&delta, window);
        for (key, result) in io.iter_mut() {
            let class = IoClass::ALL.iter().find(|c| c.key() == key);
            if let Some(class) = class {
                result.max_interval_avg_ms = interval_max.get(&(index, *class)).copied();
            }
        }
        let transactional: f64 = ["db_read", "db_write"]
            .iter()
            .filter_map(|k| io.get(*k))
            .map(|c| c.ops_per_sec)
            .sum();
        achieved += transactional;
        transactional_ios += ["db_read", "db_write"]
            .iter()
            .filter_map(|k| io.get(*k))
            .map(|c| c.count)
            .sum::<u64>();
        let tx = a.load.counters.transactions() - base_tx[index];
        all_tx += tx;
        let cache = a.database.database().cache_stats();
        let cache_base = &base_cache[index];
        let stalls = cache
            .page_fault_stalls
            .saturating_sub(cache_base.page_fault_stalls);
        let final_size = DatabaseSize::of(&a.database);
        // How much the file grew per transactional I/O of the window (issue 23): the reference
        // reports give 241-446 bytes under Jetstress's mix (`docs/faithfulness.md`).
        let transactional_ios: u64 = ["db_read", "db_write"]
            .iter()
            .filter_map(|k| io.get(*k))
            .map(|c| c.count)
            .sum();
        let grown = final_size
            .file_bytes
            .saturating_sub(base_size[index].file_bytes);
        let error = a.error.get();
        if let Some(error) = &error {
            reasons.push(format!("{}: stopped by a storage error: {error}", a.name));
        }
        let figures = WorkloadInstance {
            transactions: tx,
            transactions_per_sec: tx as f64 / window,
            achieved_iops: transactional,
            sessions,
            database_page_fault_stalls: stalls,
            database_page_fault_stalls_per_sec: stalls as f64 / window.max(1e-9),
            cache_hits: cache.hits.saturating_sub(cache_base.hits),
            cache_misses: cache.misses.saturating_sub(cache_base.misses),
            db_size_initial_bytes: base_size[index].file_bytes,
            db_size_final_bytes: final_size.file_bytes,
            db_used_initial_bytes: base_size[index].used_bytes,
            db_used_final_bytes: final_size.used_bytes,
            db_growth_bytes_per_transactional_io: (transactional_ios > 0)
                .then(|| grown as f64 / transactional_ios as f64),
            db_space: super::db_space(&a.database, &base_space[index]),
            paced_transactions_per_sec: a.load.pacer.rate(),
            error,
            ..WorkloadInstance::default()
        };
        instances.push(InstanceResult {
            name: a.name.clone(),
            database_path: job
                .instances()
                .get(index)
                .map(|i| i.database_path.clone())
                .unwrap_or_default(),
            log_path: job
                .instances()
                .get(index)
                .map(|i| i.log_path.clone())
                .unwrap_or_default(),
            io,
            figures: InstanceFigures::Workload(Box::new(figures)),
        });
    }
    Figures {
        instances,
        achieved,
        reasons,
        all_tx,
        transactional_ios,
    }
}

/// The marks of `path` not yet in `seen`, appended to it and returned.
/// The most `marks.jsonl` may hold (a mark is ~100 bytes: some 160,000 marks).
const MAX_MARKS_BYTES: u64 = 16 << 20;

fn new_marks(path: &Path, window_start: SystemTime, seen: &mut Vec<Mark>) -> Vec<Mark> {
    // The checked reader: a FIFO or device put in its place never blocks the sampling loop,
    // and a runaway file is not read whole every interval (issue 34).
    let text = jetproof_io::input::read_text(path, MAX_MARKS_BYTES).unwrap_or_default();
    let all = jetproof_results::excursion::parse_marks(&text, window_start);
    let fresh: Vec<Mark> = all.into_iter().skip(seen.len()).collect();
    seen.extend(fresh.iter().cloned());
    fresh
}

/// Re-estimates each instance's transactional I/Os per transaction ([`PaceEstimator`]) and sets
/// its pacer to the transaction rate that meets the instance's share of the target. The history
/// is carried from phase to phase (warm-up, auto-tune trials, measured window); an instance that
/// has not yet done enough transactions for an estimate keeps its rate (a low target must still
/// be corrected, only more slowly).
pub(super) fn control(attached: &[Attached], per_instance_target: Option<f64>) {
    let Some(target) = per_instance_target else {
        return;
    };
    for a in attached {
        let counters = a.database.counters();
        let counts = PaceCounts {
            transactions: a.load.counters.transactions(),
            reads: a.stats.class(IoClass::DbRead).count(),
            writes: a.stats.class(IoClass::DbWrite).count(),
            depth_writes: counters.depth_flush_writes.load(Ordering::Relaxed),
            log_bytes: a.database.log_bytes(),
        };
        let Some(estimate) = a.pace_estimator().observe(Instant::now(), counts) else {
            continue;
        };
        let per_tx = estimate.ios_per_tx;
        a.set_ios_per_transaction(per_tx);
        a.load.pacer.set_rate(Some(target * PACE_HEADROOM / per_tx));
    }
}

/// An instance's transactional I/Os so far (database reads and writes).
fn transactional_ios(a: &Attached) -> u64 {
    a.stats.class(IoClass::DbRead).count() + a.stats.class(IoClass::DbWrite).count()
}

/// In the measured window, after [`control`]'s estimate: sets each instance's pacer to the
/// transaction rate its account asks for (the I/O rate that brings the window's average to the
/// aim, over the estimate of I/Os per transaction); in the window's last stretch, once the log
/// still to come is within the checkpoint depth and the storage keeps up, to the rate that meets
/// the aim with the checkpoint's writes still to come counted from the dirty pages
/// ([`super::pace::endgame_rate`]).
fn settle_accounts(run: &Run<'_>, accounts: &mut [WindowAccount], remaining: Duration) {
    let Some(target) = run.per_instance_target else {
        return;
    };
    let aim = target * PACE_HEADROOM;
    let now = Instant::now();
    for (a, account) in run.attached.iter().zip(accounts) {
        let ios = transactional_ios(a);
        let rate = account.rate(now, ios, a.load.pacer.dropped(), aim);
        let Some(per_tx) = a.ios_per_transaction() else {
            continue;
        };
        let mut tx_rate = rate / per_tx;
        let estimate = a.pace_estimator().latest();
        if let Some(estimate) = estimate
            && !account.behind()
        {
            let counters = a.database.counters();
            let (writes, pages) = (
                counters.depth_flush_writes.load(Ordering::Relaxed),
                counters.depth_flush_pages.load(Ordering::Relaxed),
            );
            let writes_per_page = if pages == 0 {
                1.0
            } else {
                writes as f64 / pages as f64
            };
            if let Some(endgame) = pace::endgame_rate(
                &estimate,
                aim,
                account.left(ios, aim, run.duration),
                remaining.as_secs_f64(),
                a.database.checkpoint_depth_bytes(),
                || a.database.depth_due(),
                writes_per_page,
            ) {
                tx_rate = endgame;
            }
        }
        a.load.pacer.set_rate(Some(tx_rate));
    }
}
