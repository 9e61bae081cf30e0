//! Many sessions on one tree at once: each thread checks its own records against its own model
//! while the others split and merge the same pages, then the whole tree is checked.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{mem, seed, small_options};
use jetproof_engine::Database;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const THREADS: u64 = 6;

fn run(page_size: usize, cache_pages: u64, flush_thread: bool, seed: u64) {
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
                for step in 0..1500 {
                    // Keys interleave across threads, so they share leaves and split them.
                    let n: u64 = rng.random_range(0..400);
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
