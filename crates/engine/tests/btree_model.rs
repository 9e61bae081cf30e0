//! The B+tree against a `BTreeMap` model: random inserts, replaces, deletes, gets and scans, with
//! close/reopen cycles, for every page size and a cache small enough to evict. Seeded: the seed
//! is printed, and `JETPROOF_SEED=<seed>` replays a run.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use common::{mem, seed, small_options};
use jetproof_engine::Database;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn key(rng: &mut StdRng, space: u64) -> Vec<u8> {
    // Variable-length keys sharing prefixes, so separators and ordering are exercised.
    let n = rng.random_range(0..space);
    let mut key = format!("user{:05}", n % 97).into_bytes();
    key.extend_from_slice(&n.to_be_bytes()[rng.random_range(4..8)..]);
    key
}

fn value(rng: &mut StdRng, max: usize) -> Vec<u8> {
    // Mostly small, sometimes near the maximum: forces splits, merges and replace-with-growth.
    let len = if rng.random_bool(0.2) {
        rng.random_range(max / 2..=max)
    } else {
        rng.random_range(0..max / 8)
    };
    let byte: u8 = rng.random();
    vec![byte; len]
}

/// The live records of the model (those not marked deleted).
fn live(model: &BTreeMap<Vec<u8>, (Vec<u8>, bool)>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    model
        .iter()
        .filter(|(_, (_, marked))| !marked)
        .map(|(k, (v, _))| (k.clone(), v.clone()))
        .collect()
}

fn marked(model: &BTreeMap<Vec<u8>, (Vec<u8>, bool)>) -> u64 {
    model.values().filter(|(_, marked)| *marked).count() as u64
}

/// Random inserts, deletes, replaces, reads and scans, and flag deletes (mark, unmark, purge),
/// against a model of (value, marked deleted) per key: reads see exactly the live records, and
/// the tree's walk counts the live and the marked ones.
fn run(page_size: usize, seed: u64, steps: usize, cycles: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (backend, path) = mem();
    let options = small_options(page_size, 24);
    let mut db = Database::create(backend.as_ref(), path, options.clone()).unwrap();
    let mut model: BTreeMap<Vec<u8>, (Vec<u8>, bool)> = BTreeMap::new();
    let max = db.max_record_bytes() - 16;
    let key_space = rng.random_range(50..2000);
    for cycle in 0..cycles {
        for step in 0..steps {
            let context = format!("seed {seed}, page size {page_size}, cycle {cycle}, step {step}");
            if step % 50 == 0 || std::env::var_os("JETPROOF_CHECK_EVERY_STEP").is_some() {
                let stats = db.check().unwrap_or_else(|e| panic!("{context}: {e}"));
                assert_eq!(stats.records, live(&model).len() as u64, "{context}");
                assert_eq!(stats.marked_records, marked(&model), "{context}");
            }
            match rng.random_range(0..100) {
                0..40 => {
                    let k = key(&mut rng, key_space);
                    let v = value(&mut rng, max - k.len());
                    let inserted = db.insert(&k, &v).unwrap();
                    let was_live = model.get(&k).is_some_and(|(_, marked)| !marked);
                    assert_eq!(inserted, !was_live, "{context}");
                    if inserted {
                        model.insert(k, (v, false));
                    }
                }
                40..52 => {
                    let k = key(&mut rng, key_space);
                    let deleted = db.delete(&k).unwrap();
                    assert_eq!(deleted, model.remove(&k).is_some(), "{context}");
                }
                52..60 => {
                    let k = key(&mut rng, key_space);
                    let state = model.get(&k).map(|(_, marked)| *marked);
                    match rng.random_range(0..3) {
                        0 => {
                            let done = db.mark_deleted(&k).unwrap();
                            assert_eq!(done, state == Some(false), "{context}: mark");
                            if let Some(entry) = model.get_mut(&k) {
                                entry.1 = true;
                            }
                        }
                        1 => {
                            let done = db.unmark(&k).unwrap();
                            assert_eq!(done, state == Some(true), "{context}: unmark");
                            if let Some(entry) = model.get_mut(&k) {
                                entry.1 = false;
                            }
                        }
                        _ => {
                            let done = db.purge(&k).unwrap();
                            assert_eq!(done, state == Some(true), "{context}: purge");
                            if done {
                                model.remove(&k);
                            }
                        }
                    }
                }
                60..70 => {
                    let k = key(&mut rng, key_space);
                    let mut v = value(&mut rng, max - k.len());
                    // Half of the replaces keep the length: the in-place path.
                    if let Some((old, _)) = model.get(&k)
                        && rng.random_bool(0.5)
                    {
                        v.resize(old.len(), v.first().copied().unwrap_or(1));
                        v.fill(rng.random());
                    }
                    let replaced = db.replace(&k, &v).unwrap();
                    let was_live = model.get(&k).is_some_and(|(_, marked)| !marked);
                    assert_eq!(replaced, was_live, "{context}");
                    if was_live {
                        model.insert(k, (v, false));
                    }
                }
                70..95 => {
                    let k = key(&mut rng, key_space);
                    assert_eq!(
                        db.get(&k).unwrap(),
                        live(&model).get(&k).cloned(),
                        "{context}"
                    );
                }
                _ => {
                    let k = key(&mut rng, key_space);
                    let limit = rng.random_range(1..40);
                    let got = db.scan(&k, limit).unwrap();
                    let want: Vec<_> = live(&model)
                        .range(k..)
                        .take(limit)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    let summary = |r: &[(Vec<u8>, Vec<u8>)]| -> Vec<(Vec<u8>, usize, u8)> {
                        r.iter()
                            .map(|(k, v)| (k.clone(), v.len(), v.first().copied().unwrap_or(0)))
                            .collect()
                    };
                    assert_eq!(summary(&got), summary(&want), "{context}: scan");
                    assert!(got == want, "{context}: scan values differ");
                }
            }
        }
        let stats = db.check().unwrap();
        assert_eq!(
            stats.records,
            live(&model).len() as u64,
            "seed {seed} cycle {cycle}"
        );
        assert_eq!(
            stats.marked_records,
            marked(&model),
            "seed {seed} cycle {cycle}"
        );
        db.close().unwrap();
        db = Database::open(backend.as_ref(), path, options.clone()).unwrap();
        let all = db.scan(b"", usize::MAX).unwrap();
        let want: Vec<_> = live(&model).into_iter().collect();
        assert_eq!(all.len(), want.len(), "seed {seed} after reopen {cycle}");
        assert!(
            all == want,
            "seed {seed}: content differs after reopen {cycle}"
        );
    }
    // Delete everything (marked records too): merges all the way down to a root leaf.
    for k in model.keys() {
        assert!(db.delete(k).unwrap(), "seed {seed}");
    }
    let stats = db.check().unwrap();
    assert_eq!((stats.records, stats.marked_records), (0, 0), "seed {seed}");
    assert!(
        stats.height <= 2,
        "seed {seed}: tree did not shrink: {stats:?}"
    );
    db.close().unwrap();
}

#[test]
fn model_4k() {
    run(4096, seed("model_4k"), 1500, 3);
}

#[test]
fn model_8k() {
    run(8192, seed("model_8k"), 1500, 3);
}

#[test]
fn model_16k() {
    run(16384, seed("model_16k"), 1200, 3);
}

#[test]
fn model_32k() {
    run(32768, seed("model_32k"), 1200, 3);
}

/// Sequential appends take the append split: leaves end up packed nearly full.
#[test]
fn sequential_fill_packs_leaves() {
    let (backend, path) = mem();
    let db = Database::create(backend.as_ref(), path, small_options(32768, 64)).unwrap();
    let target = 4 * 1024 * 1024;
    let records = db
        .fill_sequential(
            target,
            0,
            2900,
            |n, v| v.extend_from_slice(&n.to_le_bytes()),
            |_| {},
        )
        .unwrap();
    let stats = db.check().unwrap();
    assert_eq!(stats.records, records);
    let per_leaf = records as f64 / stats.leaf_pages as f64;
    assert!(per_leaf >= 10.5, "{per_leaf} records per leaf: {stats:?}");
    assert!(db.used_pages() * 32768 >= target);
    assert!(db.file_size_bytes() >= target);
    let first = db.get(&jetproof_engine::record_key(17)).unwrap().unwrap();
    assert_eq!(&first[..8], &17u64.to_le_bytes());
    db.close().unwrap();
}
