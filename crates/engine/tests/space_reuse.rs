//! Space freed by purged deletes is reused before the file grows (issue 23): a steady mix of
//! mail-like inserts (each at a mailbox's tail) and deletes (of a random older item) at a
//! constant record count, on a small database. Seeded: the seed is printed, and
//! `JETPROOF_SEED=<seed>` replays a run.
#![allow(clippy::unwrap_used)]

mod common;

use common::{mem, seed, small_options};
use jetproof_engine::Database;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn key(mailbox: u32, item: u32) -> [u8; 8] {
    let mut key = [0u8; 8];
    key[..4].copy_from_slice(&mailbox.to_be_bytes());
    key[4..].copy_from_slice(&item.to_be_bytes());
    key
}

/// Every time the file grows, no page that merges freed among pages in use was left free (the
/// rests of owned extents after their last page in use are their owners' room, as a table's
/// extents are its own in ESE), and at a constant record count the file stops growing once the
/// tree's fill has settled: the second half of the run grows it by at most a few extents.
#[test]
fn space_freed_by_deletes_is_reused_before_the_file_grows() {
    let seed = seed("space_freed_by_deletes_is_reused_before_the_file_grows");
    let mut rng = StdRng::seed_from_u64(seed);
    let page_size = 4096;
    let (backend, path) = mem();
    let options = small_options(page_size, 256);
    let extent_pages = options.extent_bytes / page_size as u64;
    let db = Database::create(backend.as_ref(), path, options).unwrap();
    let mailboxes = 32u32;
    let per_mailbox = 60u32;
    // The items of each mailbox, oldest first; new items get the next number.
    let mut items: Vec<Vec<u32>> = vec![Vec::new(); mailboxes as usize];
    let mut next = vec![0u32; mailboxes as usize];
    let value = |rng: &mut StdRng| vec![rng.random::<u8>(); rng.random_range(150..450)];
    let mut insert = |rng: &mut StdRng, items: &mut Vec<Vec<u32>>, mailbox: usize| {
        let item = next[mailbox];
        next[mailbox] += 1;
        let v = value(rng);
        assert!(
            db.insert(&key(mailbox as u32, item), &v).unwrap(),
            "seed {seed}"
        );
        items[mailbox].push(item);
    };
    for _ in 0..per_mailbox {
        for mailbox in 0..mailboxes as usize {
            insert(&mut rng, &mut items, mailbox);
        }
    }
    let steps = 20_000;
    let mut half_count = 0;
    for step in 0..steps {
        if step == steps / 2 {
            half_count = db.page_count();
        }
        let before = db.page_count();
        let freed_before = db.space_census().unwrap().free_pages_between_used;
        let mailbox = rng.random_range(0..mailboxes as usize);
        insert(&mut rng, &mut items, mailbox);
        // A split takes one page per level it splits: with more freed pages than that, the
        // insert must not have grown the file.
        let grown_by_insert = db.page_count() > before;
        assert!(
            !grown_by_insert || freed_before <= 3,
            "seed {seed}, step {step}: the file grew from {before} to {} pages while {freed_before} \
             pages merges freed were free",
            db.page_count()
        );
        let victim_box = rng.random_range(0..mailboxes as usize);
        if !items[victim_box].is_empty() {
            let at = rng.random_range(0..items[victim_box].len());
            let item = items[victim_box].remove(at);
            assert!(
                db.delete(&key(victim_box as u32, item)).unwrap(),
                "seed {seed}"
            );
        }
    }
    let end = db.page_count();
    let stats = db.check().unwrap();
    let space = db.space_stats();
    let live: usize = items.iter().map(Vec::len).sum();
    assert_eq!(stats.records, live as u64, "seed {seed}");
    eprintln!(
        "seed {seed}: {} records, {} leaves; pages {half_count} at half time, {end} at the end, \
         {} used; {space:?}",
        stats.records,
        stats.leaf_pages,
        db.used_pages()
    );
    assert!(
        space.pages_freed > 0,
        "seed {seed}: no merge freed a page, so nothing was reused: {space:?}"
    );
    assert!(
        end <= half_count + 2 * extent_pages,
        "seed {seed}: at a constant record count the file grew from {half_count} to {end} pages \
         in the second half of the run"
    );
}

/// The placement the workload uses (`crates/workload`, `Mailboxes::new_item`: an insert takes
/// back the item number of its mailbox's latest committed delete): the new record lands in the
/// leaf the purged delete made room in, so the pages in use do not grow, while the same records
/// inserted at the mailbox's tail take new pages. Deletes go the instance's way: flag delete,
/// then the purge its commit does.
#[test]
fn inserts_taking_back_deleted_keys_reuse_the_purged_room() {
    let seed = seed("inserts_taking_back_deleted_keys_reuse_the_purged_room");
    let mut rng = StdRng::seed_from_u64(seed);
    let page_size = 4096;
    let (backend, path) = mem();
    let db = Database::create(backend.as_ref(), path, small_options(page_size, 256)).unwrap();
    let records = 2_000u32;
    let value = vec![7u8; 300];
    for item in 0..records {
        assert!(db.insert(&key(0, item), &value).unwrap(), "seed {seed}");
    }
    // Deletes of random items, about one in ten (no leaf falls near the merge threshold).
    let mut victims: Vec<u32> = (0..records).filter(|_| rng.random_ratio(1, 10)).collect();
    let delete_all = |victims: &[u32]| {
        for &item in victims {
            assert!(db.mark_deleted(&key(0, item)).unwrap(), "seed {seed}");
            assert!(db.purge(&key(0, item)).unwrap(), "seed {seed}");
        }
    };
    let (used_before, pages_before) = (db.used_pages(), db.page_count());
    delete_all(&victims);
    // Taken back in the order the workload hands them out (latest first).
    victims.reverse();
    for &item in &victims {
        assert!(db.insert(&key(0, item), &value).unwrap(), "seed {seed}");
    }
    let (used_back, pages_back) = (db.used_pages(), db.page_count());
    assert!(
        used_back <= used_before && pages_back <= pages_before,
        "seed {seed}: {} records taken back into the room their deletes freed grew the pages in \
         use from {used_before} to {used_back} (file: {pages_before} to {pages_back})",
        victims.len()
    );
    // The same deletes, then as many new records at the tail: the freed room stays unused and
    // the tail takes new pages (what every insert did before the workload took keys back).
    delete_all(&victims);
    for n in 0..victims.len() as u32 {
        assert!(
            db.insert(&key(0, records + n), &value).unwrap(),
            "seed {seed}"
        );
    }
    let used_tail = db.used_pages();
    let per_leaf = (page_size / (300 + 8 + 8)) as u64;
    assert!(
        used_tail >= used_back + victims.len() as u64 / per_leaf / 2,
        "seed {seed}: {} records at the tail took only {} new pages",
        victims.len(),
        used_tail.saturating_sub(used_back)
    );
    assert_eq!(
        db.check().unwrap().records,
        u64::from(records),
        "seed {seed}"
    );
    eprintln!(
        "seed {seed}: {} deletes; pages in use {used_before} before, {used_back} after taking \
         their keys back, {used_tail} after as many tail inserts",
        victims.len()
    );
}

/// The space accounting's first line, the bytes in records (`SpaceStats::leaf_bytes_added` and
/// `leaf_bytes_removed`), adds up to what the leaves hold: after a seeded mix of inserts,
/// replaces that grow and shrink records (splits and merges among them), flag deletes with
/// their purges, deletes, and inserts over records marked deleted, the counted difference is
/// the bytes of the records left in the tree, each with its key and per-record overhead.
#[test]
fn bytes_in_records_counted_by_changes_match_the_leaves() {
    let seed = seed("bytes_in_records_counted_by_changes_match_the_leaves");
    let mut rng = StdRng::seed_from_u64(seed);
    let page_size = 4096;
    let (backend, path) = mem();
    let db = Database::create(backend.as_ref(), path, small_options(page_size, 256)).unwrap();
    // The model: value length of every key in the tree, and whether it is marked deleted.
    let mut model: std::collections::BTreeMap<[u8; 8], (usize, bool)> = Default::default();
    let value = |rng: &mut StdRng| vec![rng.random::<u8>(); rng.random_range(1..900)];
    let before = db.space_stats();
    for _ in 0..20_000 {
        let k = key(rng.random_range(0..8), rng.random_range(0..1_200));
        match (rng.random_range(0..6), model.get(&k).copied()) {
            (0 | 1, None | Some((_, true))) => {
                let v = value(&mut rng);
                assert!(db.insert(&k, &v).unwrap(), "seed {seed}");
                model.insert(k, (v.len(), false));
            }
            (2, Some((_, false))) => {
                let v = value(&mut rng);
                assert!(db.replace(&k, &v).unwrap(), "seed {seed}");
                model.insert(k, (v.len(), false));
            }
            (3, Some((len, false))) => {
                assert!(db.mark_deleted(&k).unwrap(), "seed {seed}");
                model.insert(k, (len, true));
            }
            (4, Some((_, true))) => {
                assert!(db.purge(&k).unwrap(), "seed {seed}");
                model.remove(&k);
            }
            (5, Some((_, false))) => {
                assert!(db.delete(&k).unwrap(), "seed {seed}");
                model.remove(&k);
            }
            _ => {}
        }
    }
    let after = db.space_stats();
    let splits_and_merges = after.leaf_splits_even + after.leaf_splits_hotpoint + after.merges;
    let counted = (after.leaf_bytes_added - before.leaf_bytes_added) as i64
        - (after.leaf_bytes_removed - before.leaf_bytes_removed) as i64;
    let held: usize = model
        .iter()
        .map(|(k, (len, _))| jetproof_engine::node::leaf_entry_bytes(k.len(), *len))
        .sum();
    assert_eq!(counted, held as i64, "seed {seed}");
    // The mix did move entries between leaves (which must count nothing).
    assert!(splits_and_merges > 10, "seed {seed}: {splits_and_merges}");
    assert!(
        after.merges > 0 && after.interior_splits > 0,
        "seed {seed}: {after:?}"
    );
    let stats = db.check().unwrap();
    let live: usize = model.values().filter(|(_, marked)| !marked).count();
    assert_eq!(stats.records as usize, live, "seed {seed}");
}
