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

/// Every time the file grows, it had no free page left (the pages a step's merges freed
/// aside), and at a constant record count the file stops growing once the tree's fill has
/// settled: the second half of the run grows it by at most a few extents.
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
        let mailbox = rng.random_range(0..mailboxes as usize);
        insert(&mut rng, &mut items, mailbox);
        let victim_box = rng.random_range(0..mailboxes as usize);
        if !items[victim_box].is_empty() {
            let at = rng.random_range(0..items[victim_box].len());
            let item = items[victim_box].remove(at);
            assert!(
                db.delete(&key(victim_box as u32, item)).unwrap(),
                "seed {seed}"
            );
        }
        let after = db.page_count();
        if after > before {
            let free = after - db.used_pages();
            assert!(
                free <= extent_pages + 4,
                "seed {seed}, step {step}: the file grew from {before} to {after} pages with \
                 {} pages free beside the new extent",
                free.saturating_sub(after - before)
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
        end <= half_count + 2 * extent_pages,
        "seed {seed}: at a constant record count the file grew from {half_count} to {end} pages \
         in the second half of the run"
    );
}
