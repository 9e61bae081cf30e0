//! Shared by the log's tests: the backend they run on (`jetproof_io`'s fault backend, set up for
//! the model they were written for) and their seeds.
//!
//! The model: files live in memory; a write is pending until the file is synced, and a write to
//! a write-through file (`OpenOptions::dsync`, the log's generation files) is durable when it
//! returns. Namespace changes (create, rename, remove) are durable at once: the log syncs the
//! directory after each, so this is what a synced directory gives (`fault.rs` runs the log with
//! names durable only after `sync_dir`). A crash is taken with `FaultBackend::crash_copy`, which
//! leaves the running log's backend as it was: `CrashMode::Scattered` keeps, loses or tears each
//! pending write (a torn one keeps a random subset of its 512-byte sectors, harsher than the
//! 4 KiB atomicity `docs/design.md` assumes), `CrashMode::KeepPrefix` cuts every pending write
//! to the same prefix. `FaultConfig::fail_syncs` is the power failing (every sync fails, its
//! write left pending), `FaultConfig::sync_latency` a disk's flush time.

#![allow(dead_code)]

use std::sync::Arc;

use jetproof_io::fault::{FaultBackend, FaultConfig};
use rand::SeedableRng;
use rand::rngs::StdRng;

/// The log tests' backend, its crash outcomes seeded by `seed`; see the module header.
pub fn seeded_backend(seed: u64) -> Arc<FaultBackend> {
    FaultBackend::new(FaultConfig {
        seed,
        sector_size: 512,
        sync_dir_required: false,
        ..FaultConfig::default()
    })
}

/// [`seeded_backend`] for tests whose crashes are deterministic (`CrashMode::KeepPrefix`) or
/// that do not crash.
pub fn backend() -> Arc<FaultBackend> {
    seeded_backend(0)
}

/// A seed from `JETPROOF_SEED` or the clock, printed so a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    jetproof_test_support::announced_seed(test)
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}
