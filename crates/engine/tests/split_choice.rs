//! Which split an overflowing leaf takes: ESE's hotpoint split for inserts that keep arriving at
//! the same place (a mailbox's tail), its append split at the tree's right edge, and the even
//! split otherwise (`docs/design.md`, "B+tree").
#![allow(clippy::unwrap_used)]

mod common;

use common::{mem, small_options};
use jetproof_engine::Database;

/// A mail key: mailbox then item, big-endian, as the workload makes them.
fn key(mailbox: u32, item: u32) -> Vec<u8> {
    [mailbox.to_be_bytes(), item.to_be_bytes()].concat()
}

const VALUE: usize = 2900;
const PAGE: usize = 32768;

/// Records of `VALUE` bytes that fit in one leaf.
fn per_leaf() -> usize {
    // Slot (2) + record header (4) + key (8) + value; the page header is 80 bytes.
    (PAGE - 80) / (2 + 4 + 8 + VALUE)
}

/// Items appended to mailbox 1 while mailbox 2's items follow it in the tree: every insert lands
/// at mailbox 1's tail, in the middle of the tree. ESE splits such a leaf at the hotpoint (the
/// records after the insert point, then the new record alone, move to the new page), so the
/// pages behind the tail stay full; an even split would leave them half full.
#[test]
fn inserts_at_a_mailbox_tail_leave_full_pages_behind() {
    let (backend, path) = mem();
    let db = Database::create(backend.as_ref(), path, small_options(PAGE, 256)).unwrap();
    let value = vec![0x5Au8; VALUE];
    let next_mailbox = 30u32;
    for item in 0..next_mailbox {
        assert!(db.insert(&key(2, item), &value).unwrap());
    }
    let tail_items = 220u32;
    for item in 0..tail_items {
        assert!(db.insert(&key(1, item), &value).unwrap());
    }
    let stats = db.check().unwrap();
    assert_eq!(stats.records, u64::from(next_mailbox + tail_items));
    let full = (next_mailbox + tail_items) as usize / per_leaf();
    // Full pages behind the tail: about one leaf per `per_leaf()` records (a few partly filled
    // leaves where the two mailboxes meet and at the ends). Even splits would need about twice
    // as many.
    assert!(
        (stats.leaf_pages as usize) <= full + 4,
        "{} leaves for {} records ({} per full leaf): {stats:?}",
        stats.leaf_pages,
        stats.records,
        per_leaf()
    );
    db.close().unwrap();
}

/// Inserts that each land before the previous one are no hotpoint: the leaf splits evenly, and
/// the tree stays correct.
#[test]
fn descending_inserts_split_evenly() {
    let (backend, path) = mem();
    let db = Database::create(backend.as_ref(), path, small_options(PAGE, 256)).unwrap();
    let value = vec![0x33u8; VALUE];
    let items = 220u32;
    for item in (0..items).rev() {
        assert!(db.insert(&key(1, item), &value).unwrap());
    }
    let stats = db.check().unwrap();
    assert_eq!(stats.records, u64::from(items));
    let full = items as usize / per_leaf();
    // Even splits leave leaves between half and fully filled.
    assert!(
        (stats.leaf_pages as usize) > full + 4 && (stats.leaf_pages as usize) <= 2 * full + 2,
        "{} leaves for {} records: {stats:?}",
        stats.leaf_pages,
        stats.records
    );
    db.close().unwrap();
}
