//! What a log carries: reads a log directory through `jetproof-log`'s reader and tallies its
//! records and bytes by record type, and the page changes (alone or inside split and merge
//! groups) by kind, so `docs/faithfulness.md` can say where each transaction's log bytes go.
//!
//! Usage: `cargo run --release -p jetproof-instance --example log_anatomy -- LOG_DIR`
//!
//! Reads from the lowest generation file present (a run keeps its whole log with
//! `log.keep_files = true`; otherwise only what the checkpoint still needs is there). Bytes are
//! counted as the log stores them: each record's frame (header and payload, 8-byte aligned); a
//! group member as its length field and bytes. The frames written at the end of each log write
//! (flush frames) and the sector padding of partial writes are not records and not counted here.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jetproof_engine::change::OwnedPageChange;
use jetproof_instance::format::{self, EngineRecord};
use jetproof_instance::group::{self, RECORD_GROUP};
use jetproof_instance::undo::{self, RECORD_ROLLBACK, RECORD_UNDO};
use jetproof_io::IoBackend;
use jetproof_io::std_backend::StdBackend;
use jetproof_log::format::{FrameLayout, GenerationHeader, generation_path};
use jetproof_log::{LogReader, Lsn, ReadOptions};

#[derive(Default)]
struct Tally {
    count: u64,
    bytes: u64,
}

impl Tally {
    fn add(&mut self, bytes: usize) {
        self.count += 1;
        self.bytes += bytes as u64;
    }
}

/// The name of a page change's kind; images by the type of page they carry.
fn kind(change: &OwnedPageChange) -> String {
    match change {
        OwnedPageChange::Image(data) => match data.get(36) {
            Some(4) => "image of an interior node".into(),
            Some(5) => "image of a leaf".into(),
            Some(1) => "image of a freed page".into(),
            other => format!("image of page type {other:?}"),
        },
        OwnedPageChange::LeafInsert { .. } => "leaf insert".into(),
        OwnedPageChange::LeafReplace { .. } => "leaf replace".into(),
        OwnedPageChange::LeafDelete { .. } => "leaf delete".into(),
        OwnedPageChange::LeafMark { deleted: true, .. } => "leaf mark deleted".into(),
        OwnedPageChange::LeafMark { deleted: false, .. } => "leaf unmark".into(),
        OwnedPageChange::NodeSplice { level: 0, .. } => "node splice (leaf)".into(),
        OwnedPageChange::NodeSplice { .. } => "node splice (interior)".into(),
        OwnedPageChange::MapBit { .. } => "space map bit".into(),
    }
}

/// The lowest generation whose file is in `dir` (files are `E<hex>.jplog`).
fn first_generation(dir: &Path) -> Option<u64> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let hex = name.strip_prefix('E')?.strip_suffix(".jplog")?;
            u64::from_str_radix(hex, 16).ok()
        })
        .min()
}

fn main() {
    let Some(dir) = std::env::args().nth(1).map(PathBuf::from) else {
        eprintln!("usage: log_anatomy LOG_DIR");
        std::process::exit(2);
    };
    let Some(first) = first_generation(&dir) else {
        eprintln!("no generation files (E*.jplog) in {}", dir.display());
        std::process::exit(2);
    };
    let backend: Arc<dyn IoBackend> = StdBackend::new();
    let mut reader = match LogReader::open(
        backend,
        &dir,
        None,
        Lsn::new(first, 0),
        ReadOptions::default(),
    ) {
        Ok(reader) => reader,
        Err(e) => {
            eprintln!("cannot read {}: {e}", dir.display());
            std::process::exit(3);
        }
    };
    let mut by_type: BTreeMap<&'static str, Tally> = BTreeMap::new();
    let mut by_kind: BTreeMap<String, Tally> = BTreeMap::new();
    let mut undo_before = Tally::default();
    let mut undo_absent = Tally::default();
    let mut undo_marked = Tally::default();
    let mut group_members = 0u64;
    let mut total = Tally::default();
    let mut commits = 0u64;
    let mut layouts: BTreeMap<u64, FrameLayout> = BTreeMap::new();
    loop {
        let record = match reader.next_record() {
            Ok(Some(record)) => record,
            Ok(None) => break,
            Err(e) => {
                eprintln!("stopped at a damaged record: {e}");
                break;
            }
        };
        // A record's bytes in its generation's layout (format 3's compact frames, or the
        // 40-byte aligned frames of versions 1 and 2), read from the generation's header.
        let layout = *layouts
            .entry(record.lsn.generation)
            .or_insert_with(|| layout_of(&dir, record.lsn.generation));
        let framed = layout.frame_bytes(record.payload.len());
        total.add(framed as usize);
        let payload = &record.payload;
        let name = match record.record_type {
            format::RECORD_PAGE_CHANGE => {
                if let Ok(EngineRecord::PageChange { change, undo, .. }) =
                    format::decode(record.record_type, payload)
                {
                    let mut name = kind(&change);
                    if undo != format::RecordUndo::None {
                        name.push_str(" (carrying its undo)");
                    }
                    by_kind.entry(name).or_default().add(framed as usize);
                }
                "page change"
            }
            format::RECORD_COMMIT => {
                commits += 1;
                "commit"
            }
            RECORD_GROUP => {
                // Members: a 5-byte header (flags, count), then per member a 4-byte length and
                // the member's page change payload (`docs/log.md`, "Groups").
                let mut at = 5usize;
                while let Some(len) = payload
                    .get(at..at + 4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                {
                    let Some(member) = payload.get(at + 4..at + 4 + len) else {
                        break;
                    };
                    if let Ok(EngineRecord::PageChange { change, .. }) =
                        format::decode(format::RECORD_PAGE_CHANGE, member)
                    {
                        let name = format!("{} (in a group)", kind(&change));
                        by_kind.entry(name).or_default().add(4 + len);
                        group_members += 1;
                    }
                    at += 4 + len;
                }
                debug_assert!(group::decode_group(payload).is_ok());
                "group (split or merge)"
            }
            RECORD_UNDO => {
                if let Ok(entry) = undo::decode_undo(payload) {
                    match entry.before {
                        undo::Prior::Value(_) => undo_before.add(framed as usize),
                        undo::Prior::Absent => undo_absent.add(framed as usize),
                        undo::Prior::Marked => undo_marked.add(framed as usize),
                    }
                }
                "undo"
            }
            RECORD_ROLLBACK => "rollback",
            _ => "other",
        };
        by_type.entry(name).or_default().add(framed as usize);
    }
    let summary = reader.summary();
    let per_commit = |bytes: u64| bytes as f64 / commits.max(1) as f64;
    println!(
        "{}: generations {:?}..{:?}, {} records, {:.1} MB, {} commits, {:.0} bytes of records per commit",
        dir.display(),
        summary.generations.first(),
        summary.generations.last(),
        total.count,
        total.bytes as f64 / 1e6,
        commits,
        per_commit(total.bytes)
    );
    println!();
    println!("| record type | records | MB | bytes each | bytes per commit | share of bytes |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (name, t) in &by_type {
        println!(
            "| {name} | {} | {:.2} | {:.0} | {:.0} | {:.1}% |",
            t.count,
            t.bytes as f64 / 1e6,
            t.bytes as f64 / t.count.max(1) as f64,
            per_commit(t.bytes),
            100.0 * t.bytes as f64 / total.bytes.max(1) as f64
        );
    }
    println!();
    println!(
        "undo records: {} with the key's prior value ({:.0} bytes each), {} for keys that did not exist ({:.0} bytes each), {} for flag deletes ({:.0} bytes each)",
        undo_before.count,
        undo_before.bytes as f64 / undo_before.count.max(1) as f64,
        undo_absent.count,
        undo_absent.bytes as f64 / undo_absent.count.max(1) as f64,
        undo_marked.count,
        undo_marked.bytes as f64 / undo_marked.count.max(1) as f64
    );
    println!(
        "groups: {} members in {} group records",
        group_members,
        by_type.get("group (split or merge)").map_or(0, |t| t.count)
    );
    println!();
    println!("| page change kind | changes | MB | bytes each | bytes per commit |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (name, t) in &by_kind {
        println!(
            "| {name} | {} | {:.2} | {:.0} | {:.0} |",
            t.count,
            t.bytes as f64 / 1e6,
            t.bytes as f64 / t.count.max(1) as f64,
            per_commit(t.bytes)
        );
    }
}

/// The frame layout of `generation`, from its header (the current one if it cannot be read).
fn layout_of(dir: &std::path::Path, generation: u64) -> FrameLayout {
    use std::io::Read;
    let mut block = vec![0u8; 4096];
    std::fs::File::open(generation_path(dir, generation))
        .and_then(|mut file| file.read_exact(&mut block))
        .ok()
        .and_then(|()| GenerationHeader::decode(&block).ok())
        .map_or(FrameLayout::Compact, |header| header.layout())
}
