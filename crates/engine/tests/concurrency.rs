//! Many sessions on one tree at once: each thread checks its own records against its own model
//! while the others split and merge the same pages, then the whole tree is checked.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{mem, seed, small_options};
use jetproof_engine::{Database, SpaceStats, TreeStats};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const THREADS: u64 = 6;

fn run(page_size: usize, cache_pages: u64, flush_thread: bool, seed: u64) {
    run_with(page_size, cache_pages, flush_thread, seed, 400, 1500);
}

/// Runs the threads (each `steps` operations on `keys` keys of its own) and checks the tree;
/// returns its statistics and the space counters.
fn run_with(
    page_size: usize,
    cache_pages: u64,
    flush_thread: bool,
    seed: u64,
    keys: u64,
    steps: usize,
) -> (TreeStats, SpaceStats) {
    let (backend, path) = mem();
    let mut options = small_options(page_size, cache_pages);
    options.flush_thread = flush_thread;
    let db = Arc::new(Database::create(backend.as_ref(), path, options.clone()).unwrap());
    let max = db.max_record_bytes() / 3;
    let handles: Vec<_> = (0..THREADS)
        .map(|thread| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ (thread * 0x9E37_79B9));
                let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
                for step in 0..steps {
                    // Keys interleave across threads, so they share leaves and split them.
                    let n: u64 = rng.random_range(0..keys);
                    let key = (n * THREADS + thread).to_be_bytes().to_vec();
                    let context = format!("seed {seed} thread {thread} step {step}");
                    match rng.random_range(0..10) {
                        0..5 => {
                            let value = vec![thread as u8; rng.random_range(1..max)];
                            let inserted = db.insert(&key, &value).unwrap();
                            assert_eq!(inserted, !model.contains_key(&key), "{context}");
                            model.entry(key).or_insert(value);
                        }
                        5..7 => {
                            let deleted = db.delete(&key).unwrap();
                            assert_eq!(deleted, model.remove(&key).is_some(), "{context}");
                        }
                        7 => {
                            let value = vec![thread as u8 + 100; rng.random_range(1..max)];
                            let replaced = db.replace(&key, &value).unwrap();
                            assert_eq!(replaced, model.contains_key(&key), "{context}");
                            if let Some(slot) = model.get_mut(&key) {
                                *slot = value;
                            }
                        }
                        8 => {
                            assert_eq!(
                                db.get(&key).unwrap(),
                                model.get(&key).cloned(),
                                "{context}"
                            );
                        }
                        _ => {
                            // A scan crosses other threads' records; check only ours and order.
                            let got = db.scan(&key, 20).unwrap();
                            assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "{context}");
                            for (k, v) in &got {
                                let owner =
                                    u64::from_be_bytes(k[..8].try_into().unwrap()) % THREADS;
                                if owner == thread {
                                    assert_eq!(Some(v), model.get(k), "{context}: scan");
                                }
                            }
                        }
                    }
                }
                model
            })
        })
        .collect();
    let mut all = BTreeMap::new();
    for handle in handles {
        all.extend(handle.join().unwrap());
    }
    let stats = db.check().unwrap();
    assert_eq!(stats.records, all.len() as u64, "seed {seed}");
    let space = db.space_stats();
    let content = db.scan(b"", usize::MAX).unwrap();
    assert!(
        content.into_iter().eq(all.clone()),
        "seed {seed}: content differs"
    );
    let db = Arc::into_inner(db).unwrap();
    db.close().unwrap();
    let db = Database::open(backend.as_ref(), path, options).unwrap();
    assert_eq!(db.check().unwrap().records, all.len() as u64, "seed {seed}");
    db.close().unwrap();
    (stats, space)
}

#[test]
fn sessions_share_a_tree_with_background_flushing() {
    run(
        8192,
        64,
        true,
        seed("sessions_share_a_tree_with_background_flushing"),
    );
}

#[test]
fn sessions_share_a_tree_under_cache_pressure() {
    run(
        4096,
        40,
        false,
        seed("sessions_share_a_tree_under_cache_pressure"),
    );
}

#[test]
fn sessions_share_a_tree_32k() {
    run(32768, 128, true, seed("sessions_share_a_tree_32k"));
}

/// Splits and merges below a tree of three levels start their exclusive latches at the leaf's
/// parent when it is safe (the root only share-latched), and at the root otherwise; the
/// sessions' models and the whole tree agree either way.
#[test]
fn structure_changes_start_at_the_leafs_parent_in_a_tall_tree() {
    let seed = seed("structure_changes_start_at_the_leafs_parent_in_a_tall_tree");
    let (stats, space) = run_with(4096, 64, true, seed, 4000, 5000);
    assert!(stats.height >= 3, "seed {seed}: height {}", stats.height);
    assert!(
        space.structure_changes_from_leaf_parent > 0,
        "seed {seed}: {space:?}"
    );
    assert!(
        space.structure_changes_from_root > 0,
        "seed {seed}: {space:?}"
    );
    eprintln!("seed {seed}: height {}, {space:?}", stats.height);
}
