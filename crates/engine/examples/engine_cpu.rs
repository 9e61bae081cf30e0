//! CPU cost of the engine per page operation, with the in-memory backend (no device in the way).
//!
//! Fills a database several times larger than the cache with ~2.9 KiB records (the seeds' record
//! size), then measures random gets (most of them miss the cache, so each reads a page from the
//! backend, verifies its checksum and evicts another), random inserts and replaces, and gets
//! that hit the cache. Prints one Markdown table. Fixed seed; sizes from the environment:
//! `DB_MIB` (default 256), `CACHE_MIB` (default 32), `OPS` (default 100000), `PAGE_SIZE`.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Instant;

use jetproof_engine::{Database, DatabaseOptions, record_key};
use jetproof_io::mem::MemBackend;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// CPU seconds used by this process so far (all threads: sessions and the flusher), from
/// /proc/self/stat, so that the figure holds even when other processes share the core.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line: 12 and 13 after the name.
    let ticks: f64 = [11usize, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<f64>().ok()))
        .sum();
    ticks / 100.0
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let db_bytes = env("DB_MIB", 256) << 20;
    let cache_bytes = env("CACHE_MIB", 32) << 20;
    let ops = env("OPS", 100_000);
    let page_size = env("PAGE_SIZE", 32768) as usize;
    let value_bytes = 2900usize.min(page_size / 2 - 64);
    let backend = MemBackend::new();
    let options = DatabaseOptions {
        page_size,
        initial_size_bytes: 64 << 20,
        extent_bytes: 16 << 20,
        cache_min_bytes: cache_bytes,
        cache_max_bytes: cache_bytes,
        direct_io: false,
        stats: None,
        flush_thread: true,
        accept_dirty: false,
        ..DatabaseOptions::default()
    };
    let db = Database::create(backend.as_ref(), Path::new("/bench/db.jpdb"), options).unwrap();
    let mut rng = StdRng::seed_from_u64(42);

    let start = Instant::now();
    let cpu_start = cpu_seconds();
    let records = db
        .fill_sequential(
            db_bytes,
            0,
            value_bytes,
            |n, v| v.extend_from_slice(&n.to_le_bytes()),
            |_| {},
        )
        .unwrap();
    let fill = start.elapsed();
    let fill_cpu = cpu_seconds() - cpu_start;
    println!(
        "| phase | operations | µs per op | page reads | µs per page read | page reads/s | CPU µs per op | CPU µs per page read | page reads per CPU-second |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| fill (sequential insert, {} MiB, {} B values) | {records} | {:.2} | - | - | - | {:.2} | - | - |",
        db_bytes >> 20,
        value_bytes,
        fill.as_secs_f64() * 1e6 / records as f64,
        fill_cpu * 1e6 / records as f64
    );

    let measure = |name: &str, rng: &mut StdRng, op: &mut dyn FnMut(&mut StdRng)| {
        let before = db.cache_stats();
        let cpu_start = cpu_seconds();
        let start = Instant::now();
        for _ in 0..ops {
            op(rng);
        }
        let elapsed = start.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu_start;
        let after = db.cache_stats();
        let reads = after.pages_read - before.pages_read;
        let per_read = if reads > 0 {
            format!("{:.2}", elapsed * 1e6 / reads as f64)
        } else {
            "-".into()
        };
        let rate = if reads > 0 {
            format!("{:.0}", reads as f64 / elapsed)
        } else {
            "-".into()
        };
        let (cpu_per_read, cpu_rate) = if reads > 0 {
            (
                format!("{:.2}", cpu * 1e6 / reads as f64),
                format!("{:.0}", reads as f64 / cpu.max(1e-9)),
            )
        } else {
            ("-".into(), "-".into())
        };
        println!(
            "| {name} | {ops} | {:.2} | {reads} | {per_read} | {rate} | {:.2} | {cpu_per_read} | {cpu_rate} |",
            elapsed * 1e6 / ops as f64,
            cpu * 1e6 / ops as f64
        );
    };

    measure("random get (cache ≪ database)", &mut rng, &mut |rng| {
        let n = rng.random_range(0..records);
        assert!(db.get(&record_key(n)).unwrap().is_some());
    });
    let mut value = vec![7u8; value_bytes];
    measure("random replace", &mut rng, &mut |rng| {
        let n = rng.random_range(0..records);
        value[0] = value[0].wrapping_add(1);
        assert!(db.replace(&record_key(n), &value).unwrap());
    });
    measure("random insert (new keys)", &mut rng, &mut |rng| {
        let n = rng.random_range(0..records) | (1 << 62);
        db.insert(&record_key(n), &value).unwrap();
    });
    let hot = (records / 100).max(1);
    measure("random get, hot 1% (cache hits)", &mut rng, &mut |rng| {
        let n = rng.random_range(0..hot);
        assert!(db.get(&record_key(n)).unwrap().is_some());
    });
    measure("random get, hot 1% again", &mut rng, &mut |rng| {
        let n = rng.random_range(0..hot);
        assert!(db.get(&record_key(n)).unwrap().is_some());
    });
    let stats = db.cache_stats();
    println!();
    println!(
        "cache: {} hits, {} misses, {} evictions, {} page fault stalls, {} pages written in {} writes ({:.1} KiB per write), {} corrected",
        stats.hits,
        stats.misses,
        stats.evictions,
        stats.page_fault_stalls,
        stats.pages_written,
        stats.write_ios,
        (stats.pages_written * page_size as u64) as f64 / 1024.0 / stats.write_ios.max(1) as f64,
        stats.pages_corrected
    );
    db.close().unwrap();
}
