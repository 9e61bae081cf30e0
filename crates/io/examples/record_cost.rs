//! Measures what recording one I/O costs: the histogram update alone, and the whole metering of
//! an I/O (two clock reads plus the update), on one thread and on several threads recording
//! into the same (instance, class) at once. Run in release:
//! `cargo run --release -p jetproof-io --example record_cost`.

use std::time::Instant;

use jetproof_io::IoClass;
use jetproof_io::meter::InstanceStats;

const RECORDS: u64 = 5_000_000;

fn main() {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let stats = InstanceStats::new("bench");
    let class = stats.class(IoClass::DbRead);

    let start = Instant::now();
    for i in 0..RECORDS {
        class.record(32768, 40_000 + (i % 100_000) * 13);
    }
    let record_ns = start.elapsed().as_nanos() as f64 / RECORDS as f64;

    let start = Instant::now();
    for _ in 0..RECORDS {
        let t0 = Instant::now();
        let t1 = Instant::now();
        class.record(32768, t1.duration_since(t0).as_nanos() as u64 + 40_000);
    }
    let metered_ns = start.elapsed().as_nanos() as f64 / RECORDS as f64;

    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads as u64 {
            let class = stats.class(IoClass::DbRead);
            s.spawn(move || {
                for i in 0..RECORDS {
                    class.record(32768, 40_000 + ((i + t) % 100_000) * 13);
                }
            });
        }
    });
    let wall_ns = start.elapsed().as_nanos() as f64;
    let contended_ns = wall_ns * threads as f64 / (RECORDS as f64 * threads as f64);

    let snapshot_start = Instant::now();
    let snap = class.snapshot();
    let snapshot_us = snapshot_start.elapsed().as_secs_f64() * 1e6;

    println!("record (histogram update, 1 thread):      {record_ns:.1} ns per I/O");
    println!("metering (2 clock reads + update):        {metered_ns:.1} ns per I/O");
    println!(
        "record, {threads} threads on one class:         {contended_ns:.1} ns per I/O (thread-time)"
    );
    println!(
        "snapshot of {} records:                  {snapshot_us:.0} µs",
        snap.count
    );
}
