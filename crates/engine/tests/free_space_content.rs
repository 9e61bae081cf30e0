//! Issue 33: with a `PageContent` in its options, the engine writes that content where its pages
//! hold nothing (the space a change frees in a node, the body of a freed page, every free page
//! it formats at create and on growth) instead of zeros, and changes nothing else: the same
//! changes give the same records, the same pages byte for byte outside their free space, and
//! the same I/O (counts and bytes of every class). At a long-value share above 0, growth lays
//! that share of its owned extents down as long-value pages, sealed and in use.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::{seed, small_options};
use jetproof_engine::page::{self, HEADER_SIZE, PageType};
use jetproof_engine::{Database, DatabaseOptions, PageContent, checksum, node, space};
use jetproof_io::mem::MemBackend;
use jetproof_io::meter::InstanceStats;
use jetproof_io::{IoBackend, IoClass, OpenOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Content keyed by page and position, never zero (so a zero byte in free space is one the
/// engine left), and long values of their own pattern.
#[derive(Debug)]
struct Marked {
    long_value_share: f64,
}

fn marked_byte(page: u32, position: usize) -> u8 {
    let mut z = (u64::from(page) << 20 ^ position as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z ^= z >> 29;
    (z as u8) | 1
}

impl PageContent for Marked {
    fn fill_free(&self, page: u32, offset: usize, out: &mut [u8]) {
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = marked_byte(page, offset + i);
        }
    }
    fn long_value_share(&self) -> f64 {
        self.long_value_share
    }
    fn fill_long_value(&self, page: u32, body: &mut [u8]) {
        body.fill(0xB0 ^ (page % 8) as u8);
    }
}

/// Where page bytes hold nothing: a node's free space, a free page's body.
fn free_part(bytes: &[u8]) -> std::ops::Range<usize> {
    match page::page_type(bytes) {
        Some(PageType::Leaf | PageType::Interior) => node::free_range(bytes),
        Some(PageType::Free) => HEADER_SIZE..bytes.len(),
        _ => 0..0,
    }
}

struct Outcome {
    image: Vec<u8>,
    records: Vec<(Vec<u8>, Vec<u8>)>,
    io: Vec<(IoClass, u64, u64)>,
}

/// Random inserts, replaces (same size, other sizes), deletes and purges on a small database
/// that grows and splits and merges, then a clean close; the file, the records, the I/O.
fn changes(page_size: usize, seed: u64, content: Option<Arc<dyn PageContent>>) -> Outcome {
    let mut rng = StdRng::seed_from_u64(seed);
    let backend = MemBackend::new();
    let path = Path::new("/f/db.jpdb");
    let stats = InstanceStats::new("db");
    let options = DatabaseOptions {
        stats: Some(stats.clone()),
        content,
        // A small file grown in small steps, so the changes grow it many times.
        ..jetproof_test_support::engine::small_options(page_size, 16, 16, 16, 24)
    };
    let db = Database::create(backend.as_ref(), path, options).unwrap();
    let max = db.max_record_bytes() - 8;
    let mut model = BTreeMap::new();
    for step in 0..5000 {
        // Keys over a range that fills the file past its first extents, then deletes thin it.
        let key = rng.random_range(0..1500u64).to_be_bytes().to_vec();
        let len = if rng.random_bool(0.1) {
            rng.random_range(max / 2..max)
        } else {
            rng.random_range(1..max / 8)
        };
        let value = vec![(step % 251) as u8 + 1; len];
        let deleting = step > 3500;
        match rng.random_range(0..10) {
            0..4 if !deleting => {
                if db.insert(&key, &value).unwrap() {
                    model.insert(key, value);
                }
            }
            0..6 => {
                if db.delete(&key).unwrap() {
                    model.remove(&key);
                }
            }
            6 => {
                if db.mark_deleted(&key).unwrap() {
                    assert!(db.purge(&key).unwrap(), "seed {seed}");
                    model.remove(&key);
                }
            }
            _ => {
                let value = match model.get(&key) {
                    Some(old) if rng.random_bool(0.3) => vec![7; old.len()],
                    _ => value,
                };
                if db.replace(&key, &value).unwrap() {
                    model.insert(key, value);
                }
            }
        }
    }
    db.check().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let records = db.scan(b"", usize::MAX).unwrap();
    assert!(records.iter().cloned().eq(model), "seed {seed}");
    assert!(db.space_stats().extensions > 0, "seed {seed}: no growth");
    assert!(db.space_stats().merges > 0, "seed {seed}: no merge");
    db.close().unwrap();
    let file = backend
        .open(path, &OpenOptions::read_only().buffered())
        .unwrap();
    let mut image = vec![0u8; file.size().unwrap() as usize];
    file.read_at(&mut image, 0, IoClass::DbRead).unwrap();
    let io = stats
        .snapshot()
        .classes
        .into_iter()
        .map(|(class, s)| (class, s.count, s.bytes))
        .collect();
    Outcome { image, records, io }
}

fn same_changes_with_and_without_content(page_size: usize, name: &str) {
    let seed = seed(name);
    let zeros = changes(page_size, seed, None);
    let content: Arc<dyn PageContent> = Arc::new(Marked {
        long_value_share: 0.0,
    });
    let filled = changes(page_size, seed, Some(content));
    assert_eq!(filled.records, zeros.records, "seed {seed}");
    assert_eq!(filled.io, zeros.io, "seed {seed}: the I/O changed");
    assert_eq!(filled.image.len(), zeros.image.len(), "seed {seed}");
    let (mut free_bytes, mut pages_with_free) = (0usize, 0usize);
    // Pages 0 and 1 (the header copies) hold the database's id and creation time.
    for number in 2..zeros.image.len() / page_size {
        let at = number * page_size;
        let (a, b) = (
            &zeros.image[at..at + page_size],
            &filled.image[at..at + page_size],
        );
        let free = free_part(a);
        assert_eq!(free, free_part(b), "seed {seed}: page {number}");
        assert_eq!(
            checksum::verify(b, number as u32),
            checksum::PageCheck::Good,
            "seed {seed}: page {number}"
        );
        let other = |p: &[u8]| {
            let mut p = p.to_vec();
            p[free.clone()].fill(0);
            p[page::CHECKSUM_AREA].fill(0);
            p
        };
        assert!(
            other(a) == other(b),
            "seed {seed}: page {number} differs outside its free space"
        );
        assert!(
            a[free.clone()].iter().all(|&x| x == 0),
            "seed {seed}: page {number}: free space not zeros without content"
        );
        for (i, &x) in b[free.clone()].iter().enumerate() {
            assert_eq!(
                x,
                marked_byte(number as u32, free.start + i),
                "seed {seed}: page {number} byte {} of its free space {free:?}",
                free.start + i
            );
        }
        free_bytes += free.len();
        pages_with_free += usize::from(!free.is_empty());
    }
    assert!(
        pages_with_free > 10 && free_bytes > 10 * page_size,
        "seed {seed}: {pages_with_free} pages, {free_bytes} free bytes"
    );
}

#[test]
fn free_space_holds_the_content_and_nothing_else_changes_4k() {
    same_changes_with_and_without_content(4096, "free_space_content_4k");
}

#[test]
fn free_space_holds_the_content_and_nothing_else_changes_32k() {
    same_changes_with_and_without_content(32768, "free_space_content_32k");
}

/// A long-value share: growth lays that share of its owned extents down as long-value pages
/// (sealed, in use, never handed out, counted in the pages in use after a reopen), and the
/// database works as before on the rest.
#[test]
fn growth_lays_its_long_value_share_down_and_never_hands_it_out() {
    let seed = seed("growth_long_values");
    let page_size = 8192;
    let backend = MemBackend::new();
    let path = Path::new("/f/db.jpdb");
    let content: Arc<dyn PageContent> = Arc::new(Marked {
        long_value_share: 0.75,
    });
    let options = DatabaseOptions {
        // Grown 256 pages (16 owned extents) at a time.
        extent_bytes: 256 * page_size as u64,
        content: Some(content),
        ..small_options(page_size, 32)
    };
    let db = Database::create(backend.as_ref(), path, options.clone()).unwrap();
    let initial = db.page_count();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    for i in 0..6000u64 {
        let key = rng.random::<u64>().to_be_bytes().to_vec();
        let value = vec![(i % 200) as u8 + 1; rng.random_range(200..1500)];
        db.insert(&key, &value).unwrap();
        model.insert(key, value);
    }
    let stats = db.space_stats();
    assert!(stats.extensions >= 3, "seed {seed}: {stats:?}");
    let grown = db.page_count() - initial;
    let share = stats.long_value_pages as f64 / grown as f64;
    assert!(
        (0.70..=0.76).contains(&share),
        "seed {seed}: {share} of {grown} grown pages long values: {stats:?}"
    );
    db.check().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let used = db.used_pages();
    let pages = db.page_count();
    db.close().unwrap();
    // On disk: every long-value page sealed, of tree 2, marked in use; the tree's pages never
    // one of them.
    let db = Database::open(backend.as_ref(), path, options.clone()).unwrap();
    assert_eq!(db.used_pages(), used, "seed {seed}");
    assert!(
        db.scan(b"", usize::MAX)
            .unwrap()
            .into_iter()
            .eq(model.clone()),
        "seed {seed}"
    );
    let file = backend
        .open(path, &OpenOptions::read_only().buffered())
        .unwrap();
    let mut image = vec![0u8; file.size().unwrap() as usize];
    file.read_at(&mut image, 0, IoClass::DbRead).unwrap();
    let mut long_values = 0u64;
    for number in 0..pages {
        let at = number as usize * page_size;
        let bytes = &image[at..at + page_size];
        assert_eq!(
            checksum::verify(bytes, number as u32),
            checksum::PageCheck::Good,
            "seed {seed}: page {number}"
        );
        if page::page_type(bytes) == Some(PageType::LongValue) {
            long_values += 1;
            assert_eq!(
                page::get_u32(bytes, page::OFFSET_TREE),
                Some(jetproof_engine::bulk::LONG_VALUE_TREE_ID)
            );
            assert!(
                bytes[HEADER_SIZE..]
                    .iter()
                    .all(|&b| b == 0xB0 ^ (number % 8) as u8)
            );
            assert!(
                number % space::OWNED_EXTENT_PAGES == 0
                    || page::page_type(&image[at - page_size..at]) == Some(PageType::LongValue),
                "seed {seed}: page {number}: long values come in whole extents"
            );
        }
    }
    assert_eq!(long_values, stats.long_value_pages, "seed {seed}");
    // More changes after the reopen: none lands on a long-value page (check, and the pages
    // are still long values).
    for i in 0..3000u64 {
        let key = rng.random::<u64>().to_be_bytes().to_vec();
        db.insert(&key, &vec![(i % 9) as u8 + 1; 1000]).unwrap();
    }
    db.check().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    db.close().unwrap();
    let file = backend
        .open(path, &OpenOptions::read_only().buffered())
        .unwrap();
    let mut after = vec![0u8; file.size().unwrap() as usize];
    file.read_at(&mut after, 0, IoClass::DbRead).unwrap();
    for number in 0..pages as usize {
        let at = number * page_size;
        if page::page_type(&image[at..at + page_size]) == Some(PageType::LongValue) {
            assert!(
                image[at..at + page_size] == after[at..at + page_size],
                "seed {seed}: long-value page {number} was changed"
            );
        }
    }
}

/// At a share of 0, and without content, growth lays no long-value page down.
#[test]
fn no_long_values_without_a_share() {
    for content in [
        None,
        Some(Arc::new(Marked {
            long_value_share: 0.0,
        }) as Arc<dyn PageContent>),
    ] {
        let backend = MemBackend::new();
        let path = Path::new("/f/db.jpdb");
        let options = DatabaseOptions {
            content,
            ..small_options(8192, 32)
        };
        let db = Database::create(backend.as_ref(), path, options).unwrap();
        for i in 0..3000u64 {
            db.insert(&i.to_be_bytes(), &[1; 900]).unwrap();
        }
        assert!(db.space_stats().extensions > 0);
        assert_eq!(db.space_stats().long_value_pages, 0);
        db.close().unwrap();
    }
}
