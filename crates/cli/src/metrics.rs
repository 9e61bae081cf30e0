//! `--metrics-listen [ADDR:]PORT` (`docs/metrics.md`): the running test's figures for a
//! Prometheus scraper, in the OpenMetrics text format (`prometheus-client`) over HTTP
//! (`tiny_http`). The address is bound before anything else is done, so a bad address or a port
//! in use is bad input (exit 2) before any I/O; a bare port means loopback.
//!
//! The I/O counters and latency histograms are read from the instances' live counters when the
//! scraper asks (not once per sample interval, so that `rate()` over a few scrapes is exact);
//! they count the measured windows only (each point of a sweep adds its window). The other
//! figures are those of the live view's last sample interval.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs as _};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use jetproof_io::class::IoClass;
use jetproof_io::meter::{ClassSnapshot, InstanceSnapshot, InstanceStats};
use jetproof_procedures::live::{LiveSample, LiveView, LiveWindow, PhaseStatus};
use jetproof_results::verdict::Limits;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::common::CliError;

/// The upper bounds (seconds) of `jetproof_io_latency_seconds`'s buckets: 100 µs to 10 s in
/// 1-2-5 steps, then +Inf. Fixed: dashboards and alerts name them.
pub const LATENCY_BUCKETS_S: [f64; 16] = [
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
    10.0,
];

/// Where `--metrics-listen` listens: a bare port is loopback's; ADDR:PORT is the user's choice.
pub fn parse_listen(text: &str) -> Result<SocketAddr, CliError> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    let bad = || {
        CliError::bad_input(anyhow::anyhow!(
            "--metrics-listen {text}: not a PORT or ADDR:PORT; give a port like 9464 (loopback) or an address and port like 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464"
        ))
    };
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    // A host name ("localhost:9464"): its first address.
    if !text.contains(':') {
        return Err(bad());
    }
    text.to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(bad)
}

/// The figures a scrape reports, kept up to date by the live view.
#[derive(Default)]
struct State {
    phase: String,
    elapsed_s: Option<f64>,
    duration_s: Option<f64>,
    transactional_iops: Option<f64>,
    target_iops: Option<f64>,
    stalls_per_sec: Option<f64>,
    /// Page fault stalls of finished windows, and of the current one so far.
    stalls_done: u64,
    stalls_window: u64,
    passing: Option<bool>,
    limits: Option<Limits>,
    /// What finished windows counted, per (instance, class).
    done: BTreeMap<(String, IoClass), ClassSnapshot>,
    /// The current window's instances and their counters at its start.
    current: Vec<(Arc<InstanceStats>, InstanceSnapshot)>,
}

impl State {
    /// Every (instance, class) counted so far: finished windows plus the current one.
    fn io(&self) -> BTreeMap<(String, IoClass), ClassSnapshot> {
        let mut all = self.done.clone();
        for (stats, base) in &self.current {
            let delta = stats.snapshot().delta_since(base);
            for (class, snap) in delta.classes {
                all.entry((delta.name.clone(), class))
                    .or_default()
                    .merge(&snap);
            }
        }
        all
    }
}

#[derive(Clone, Default)]
struct Metrics(Arc<Mutex<State>>);

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("jetproof metrics")
    }
}

/// Cumulative counts per bucket of [`LATENCY_BUCKETS_S`] (the encoder adds them up), +Inf last.
/// A value is counted in the first bucket whose bound its HdrHistogram bucket's lowest value does
/// not exceed: within the histogram's resolution (2 significant digits, 1%).
fn ladder(snap: &ClassSnapshot) -> Vec<(f64, u64)> {
    let mut counts = vec![0u64; LATENCY_BUCKETS_S.len() + 1];
    for [lowest_ns, count] in &snap.latency.buckets {
        let seconds = *lowest_ns as f64 / 1e9;
        let slot = LATENCY_BUCKETS_S
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BUCKETS_S.len());
        counts[slot] += count;
    }
    LATENCY_BUCKETS_S
        .iter()
        .copied()
        .chain([f64::INFINITY])
        .zip(counts)
        .collect()
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: Option<f64>,
) -> Result<(), std::fmt::Error> {
    if let Some(value) = value {
        let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        ConstGauge::new(value).encode(metric)?;
    }
    Ok(())
}

impl Collector for Metrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Ok(state) = self.0.lock() else {
            return Ok(());
        };
        let io = state.io();
        let labels = |(name, class): &(String, IoClass)| {
            vec![
                ("test_instance".to_string(), name.clone()),
                ("class".to_string(), class.key().to_string()),
            ]
        };
        {
            let mut family = encoder.encode_descriptor(
                "jetproof_io_operations",
                "I/Os completed in the measured windows, per test instance and I/O class.",
                None,
                MetricType::Counter,
            )?;
            for (key, snap) in &io {
                ConstCounter::new(snap.count).encode(family.encode_family(&labels(key))?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "jetproof_io_bytes",
                "Bytes those I/Os moved.",
                None,
                MetricType::Counter,
            )?;
            for (key, snap) in &io {
                ConstCounter::new(snap.bytes).encode(family.encode_family(&labels(key))?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "jetproof_io_latency_seconds",
                "Submission-to-completion latency of those I/Os (from jetproof's HdrHistogram).",
                None,
                MetricType::Histogram,
            )?;
            for (key, snap) in &io {
                let labels = labels(key);
                let mut metric = family.encode_family(&labels)?;
                metric.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    snap.latency.sum_ns as f64 / 1e9,
                    snap.latency.count,
                    &ladder(snap),
                    None,
                )?;
            }
        }
        {
            let metric = encoder.encode_descriptor(
                "jetproof_database_page_fault_stalls",
                "Database page fault stalls in the measured windows, all instances, as of the last sample interval.",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(state.stalls_done + state.stalls_window).encode(metric)?;
        }
        gauge(
            &mut encoder,
            "jetproof_database_page_fault_stalls_per_second",
            "Database page fault stalls per second over the last sample interval, all instances.",
            state.stalls_per_sec,
        )?;
        gauge(
            &mut encoder,
            "jetproof_transactional_iops",
            "Database reads and writes per second over the last sample interval, all instances.",
            state.transactional_iops,
        )?;
        gauge(
            &mut encoder,
            "jetproof_target_transactional_iops",
            "The transactional IOPS target of all instances (paced tests only).",
            state.target_iops,
        )?;
        gauge(
            &mut encoder,
            "jetproof_window_elapsed_seconds",
            "Seconds of the current measured window done, as of the last sample interval.",
            state.elapsed_s,
        )?;
        gauge(
            &mut encoder,
            "jetproof_window_duration_seconds",
            "The measured window's length.",
            state.duration_s,
        )?;
        gauge(
            &mut encoder,
            "jetproof_verdict_passing",
            "1 while the latency and stall rules pass on what was measured so far, 0 once one fails.",
            state.passing.map(|p| if p { 1.0 } else { 0.0 }),
        )?;
        if !state.phase.is_empty() {
            let mut family = encoder.encode_descriptor(
                "jetproof_phase",
                "1 for the test's current phase (warm-up, auto-tune step N, measuring, finishing).",
                None,
                MetricType::Gauge,
            )?;
            let labels = vec![("phase".to_string(), state.phase.clone())];
            ConstGauge::new(1i64).encode(family.encode_family(&labels)?)?;
        }
        if let Some(limits) = state.limits {
            {
                let mut family = encoder.encode_descriptor(
                    "jetproof_threshold_latency_seconds",
                    "The verdict's latency thresholds: statistic average (the window's) or interval_max (any sample interval's average).",
                    None,
                    MetricType::Gauge,
                )?;
                for (class, statistic, ms) in [
                    ("db_read", "average", limits.db_read_avg_ms),
                    ("db_read", "interval_max", limits.db_read_max_ms),
                    ("log_write", "average", limits.log_write_avg_ms),
                    ("log_write", "interval_max", limits.log_write_max_ms),
                ] {
                    let labels = vec![
                        ("class".to_string(), class.to_string()),
                        ("statistic".to_string(), statistic.to_string()),
                    ];
                    ConstGauge::new(ms / 1e3).encode(family.encode_family(&labels)?)?;
                }
            }
            gauge(
                &mut encoder,
                "jetproof_threshold_page_fault_stalls_per_second",
                "The most database page fault stalls per second the window may average.",
                Some(limits.page_fault_stalls_per_sec),
            )?;
        }
        Ok(())
    }
}

/// The listening server: bound by [`MetricsServer::bind`], serving from its own thread until
/// dropped.
pub struct MetricsServer {
    metrics: Metrics,
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `text` ([`parse_listen`]) and starts serving `/metrics`; bad input when the address
    /// is not one or cannot be listened on.
    pub fn bind(text: &str) -> Result<MetricsServer, CliError> {
        let addr = parse_listen(text)?;
        let listener = TcpListener::bind(addr).map_err(|e| {
            CliError::bad_input(anyhow::anyhow!(
                "--metrics-listen {text}: cannot listen on {addr} ({e}); choose a free port, or an address of this host"
            ))
        })?;
        let addr = listener.local_addr().unwrap_or(addr);
        let server = tiny_http::Server::from_listener(listener, None).map_err(|e| {
            CliError::bad_input(anyhow::anyhow!(
                "--metrics-listen {text}: cannot serve on {addr} ({e})"
            ))
        })?;
        let server = Arc::new(server);
        let metrics = Metrics::default();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(metrics.clone()));
        let thread = {
            let server = server.clone();
            std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || serve(&server, &registry))
                .map_err(|e| CliError::runtime(anyhow::anyhow!("start the metrics server: {e}")))?
        };
        errln!("jetproof: metrics for Prometheus at http://{addr}/metrics");
        Ok(MetricsServer {
            metrics,
            server,
            thread: Some(thread),
        })
    }

    fn with(&self, change: impl FnOnce(&mut State)) {
        if let Ok(mut state) = self.metrics.0.lock() {
            change(&mut state);
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(server: &tiny_http::Server, registry: &Registry) {
    for request in server.incoming_requests() {
        let response = if request.url() == "/metrics" || request.url().starts_with("/metrics?") {
            let mut body = String::new();
            match prometheus_client::encoding::text::encode(&mut body, registry) {
                Ok(()) => tiny_http::Response::from_string(body).with_header(tiny_http::Header {
                    field: "Content-Type"
                        .parse()
                        .unwrap_or_else(|_| unreachable!("a valid header name")),
                    value: "application/openmetrics-text; version=1.0.0; charset=utf-8"
                        .parse()
                        .unwrap_or_else(|_| unreachable!("a valid header value")),
                }),
                Err(_) => tiny_http::Response::from_string("encoding failed").with_status_code(500),
            }
        } else {
            tiny_http::Response::from_string("jetproof serves /metrics\n").with_status_code(404)
        };
        let _ = request.respond(response);
    }
}

/// A live view that also keeps a [`MetricsServer`] up to date.
pub struct Watch<'a> {
    pub live: &'a dyn LiveView,
    pub metrics: Option<&'a MetricsServer>,
}

impl LiveView for Watch<'_> {
    fn sample(&self, sample: &LiveSample) {
        self.live.sample(sample);
        if let Some(m) = self.metrics {
            m.with(|s| {
                s.phase = sample.phase.to_string();
                s.elapsed_s = Some(sample.elapsed_s);
                s.duration_s = Some(sample.duration_s);
                s.transactional_iops = Some(sample.transactional_iops);
                s.target_iops = sample.target_iops;
                s.stalls_per_sec = Some(sample.stalls_per_sec);
                s.stalls_window = sample.page_fault_stalls;
                s.passing = Some(sample.passing);
            });
        }
    }

    fn status(&self, status: &PhaseStatus) {
        self.live.status(status);
        if let Some(m) = self.metrics {
            m.with(|s| s.phase.clone_from(&status.phase));
        }
    }

    fn window_started(&self, window: &LiveWindow) {
        self.live.window_started(window);
        if let Some(m) = self.metrics {
            m.with(|s| {
                s.phase = "measuring".into();
                s.limits = Some(window.limits);
                s.target_iops = window.target_iops;
                s.duration_s = Some(window.duration_s);
                s.elapsed_s = Some(0.0);
                s.passing = Some(true);
                s.current = window
                    .instances
                    .iter()
                    .map(|stats| (stats.clone(), stats.snapshot()))
                    .collect();
            });
        }
    }

    fn window_ended(&self) {
        self.live.window_ended();
        if let Some(m) = self.metrics {
            m.with(|s| {
                s.done = s.io();
                s.current.clear();
                s.stalls_done += std::mem::take(&mut s.stalls_window);
                s.phase = "finishing".into();
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jetproof_io::hist::LatencyHistogram;

    #[test]
    fn a_bare_port_is_loopback_and_an_address_is_taken_as_given() {
        let parsed = |text: &str| parse_listen(text).ok().map(|a| a.to_string());
        assert_eq!(parsed("9464").as_deref(), Some("127.0.0.1:9464"));
        assert_eq!(parsed("0.0.0.0:9464").as_deref(), Some("0.0.0.0:9464"));
        assert_eq!(parsed("[::1]:9464").as_deref(), Some("[::1]:9464"));
        for bad in ["", "port", "70000", "1.2.3.4", "1.2.3.4:99999"] {
            assert!(parsed(bad).is_none(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_ladder_puts_each_io_in_its_bucket_and_the_rest_above_ten_seconds() {
        // 50 µs and 100 µs at or below the first bound, 150 µs in the second, 3 ms in 0.005,
        // 20 s past the last bound.
        let latency =
            LatencyHistogram::from_values([50_000, 100_000, 150_000, 3_000_000, 20_000_000_000]);
        let snap = ClassSnapshot {
            count: latency.count,
            latency,
            ..ClassSnapshot::default()
        };
        let buckets = ladder(&snap);
        assert_eq!(buckets.len(), LATENCY_BUCKETS_S.len() + 1);
        let at = |bound: f64| {
            buckets
                .iter()
                .find(|(b, _)| *b == bound)
                .map(|(_, c)| *c)
                .unwrap_or(u64::MAX)
        };
        assert_eq!(at(0.0001), 2);
        assert_eq!(at(0.0002), 1);
        assert_eq!(at(0.005), 1);
        assert_eq!(at(f64::INFINITY), 1);
        assert_eq!(buckets.iter().map(|(_, c)| c).sum::<u64>(), 5);
    }
}
