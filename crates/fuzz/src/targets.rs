//! The fuzz targets: each a corpus made by jetproof's own writers and a check that runs the
//! reader as the commands do. A check returns `Err` only when a property that must hold did not
//! (a job that passed the checks and does not read back); everything else an input can cause is
//! a refusal, which is fine.

use std::borrow::Cow;

use jetproof_engine::change::PageChange;
use jetproof_engine::{checksum, node, page};
use jetproof_instance::{format as record, group, undo};
use jetproof_log::Lsn;
use jetproof_log::format::{
    DATA_START, Decoded, FORMAT_VERSION, FlushInfo, FrameKind, FrameLayout, GenerationHeader,
    decode_frame, encode_frame, frame_bytes, position_matches,
};

use crate::Target;

fn text(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// The job parser and checker: `Job::parse` (TOML, then every check of `validate`), then what the
/// commands ask of a checked job, and a checked job must read back from its own TOML.
pub fn job() -> Target {
    let mut corpus: Vec<Vec<u8>> = [
        include_str!("../../../jobs/four-copy-low-load.toml"),
        include_str!("../../../jobs/hitachi-ams2500-one-host.toml"),
        include_str!("../../../jobs/infortrend-ds1016r.toml"),
        include_str!("../../../jobs/typical-mailbox-data.toml"),
    ]
    .iter()
    .map(|t| t.as_bytes().to_vec())
    .collect();
    corpus.push(jetproof_job::Job::default().to_toml().into_bytes());
    corpus.push(
        b"[simulation]\nmailboxes = 4\niops_per_mailbox = 0.5\nmailbox_size = \"1MiB\"\n\
          [storage]\ndb_size = \"16MiB\"\n\
          [[storage.instance]]\nname = \"a\"\ndatabase_path = \"/tmp/f/a.jpdb\"\nlog_path = \"/tmp/f/a\"\n\
          [[storage.instance]]\nname = \"b\"\ndatabase_path = \"/tmp/f/b.jpdb\"\nlog_path = \"/tmp/f/b\"\n\
          [run]\nduration = \"2h\"\nsample_interval = \"15s\"\n"
            .to_vec(),
    );
    Target {
        name: "job",
        corpus,
        text: true,
        check: check_job,
    }
}

fn check_job(bytes: &[u8]) -> Result<(), String> {
    let Ok(job) = jetproof_job::Job::parse(&text(bytes), "fuzz.toml") else {
        return Ok(());
    };
    let _ = job.instances();
    let _ = job.instance_count();
    let _ = job.db_size();
    let _ = job.checkpoint_depth();
    let again = job.to_toml();
    match jetproof_job::Job::parse(&again, "again.toml") {
        Ok(read) if read == job => Ok(()),
        Ok(_) => Err(format!("a checked job reads back different:\n{again}")),
        Err(e) => Err(format!("a checked job does not read back: {e}\n{again}")),
    }
}

const RESULT_FIXTURES: [&str; 11] = [
    include_str!("../../results/tests/fixtures/init.json"),
    include_str!("../../results/tests/fixtures/performance.json"),
    include_str!("../../results/tests/fixtures/stress.json"),
    include_str!("../../results/tests/fixtures/checksum.json"),
    include_str!("../../results/tests/fixtures/backup.json"),
    include_str!("../../results/tests/fixtures/soft-recovery.json"),
    include_str!("../../results/tests/fixtures/aggregate-performance.json"),
    include_str!("../../results/tests/fixtures/aggregate-stress.json"),
    include_str!("../../results/tests/fixtures/aggregate-checksum.json"),
    include_str!("../../results/tests/fixtures/aggregate-backup.json"),
    include_str!("../../results/tests/fixtures/aggregate-soft-recovery.json"),
];

/// `result.json` as `report` reads it: parsed (a result or an aggregate) and rendered into
/// `report.html`; and as `compare` and `aggregate` read it (`TestResult` alone).
pub fn result_json() -> Target {
    Target {
        name: "result_json",
        corpus: RESULT_FIXTURES
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .collect(),
        text: true,
        check: check_result_json,
    }
}

fn check_result_json(bytes: &[u8]) -> Result<(), String> {
    let json = text(bytes);
    let _ = serde_json::from_str::<jetproof_results::TestResult>(&json);
    let _ = jetproof_results::html::report_from_json(&json, None);
    Ok(())
}

/// `samples.csv` as `report` reads it, beside the performance fixture's `result.json`: parsed
/// and drawn into the report's charts and its list of broken rules.
pub fn samples_csv() -> Target {
    let mut csv = String::from(
        "elapsed_s,wall_clock,instance,class,count,ops_per_sec,bytes_per_sec,avg_latency_ms,\
         p99_latency_ms,max_latency_ms,cpu_percent,available_memory_mb\n",
    );
    for t in 1..=20u32 {
        for db in ["db1", "db2"] {
            for (class, latency) in [("db_read", 8.5), ("db_write", 3.0), ("log_write", 1.25)] {
                csv.push_str(&format!(
                    "{}.0,2026-11-26T00:00:{:02}.000Z,{db},{class},{},{}.5,4096000.0,{latency},{},{},10,1000\n",
                    t * 15,
                    t % 60,
                    500 + t,
                    33 + t,
                    latency * 2.0,
                    latency * 3.0
                ));
            }
        }
    }
    let short = "elapsed_s,instance,class,count,ops_per_sec,avg_latency_ms,p99_latency_ms\n\
                 0.5,db1,db_read,10,20.0,2.5,4.0\n1.0,db1,db_read,30,60.0,1.5,3.0\n";
    Target {
        name: "samples_csv",
        corpus: vec![csv.into_bytes(), short.as_bytes().to_vec()],
        text: true,
        check: check_samples_csv,
    }
}

fn check_samples_csv(bytes: &[u8]) -> Result<(), String> {
    // The fixture is a valid result: a failure to render it is the reader's fault.
    let json = RESULT_FIXTURES[1];
    jetproof_results::html::report_from_json(json, Some(&text(bytes)))
        .map(|_| ())
        .map_err(|e| format!("the fixture no longer reads: {e}"))
}

/// One generation as a reader finds it: the header block, then records (page changes, commits,
/// undo and group records), flush frames and the end frame, each encoded by the writers.
fn generation(records: &[(u8, Vec<u8>)], generation: u64) -> Vec<u8> {
    let mut file = vec![0u8; DATA_START as usize];
    GenerationHeader {
        database_id: 0x1234_5678_9abc_def0,
        generation,
        file_size_bytes: 1 << 20,
        previous_end: Lsn::new(generation.saturating_sub(1), 8192),
        created_unix_ms: 1_795_736_400_000,
        format_version: FORMAT_VERSION,
        begun: true,
    }
    .encode(&mut file);
    let mut offset = DATA_START;
    let mut frame = |kind: FrameKind, record_type: u8, payload: &[u8], file: &mut Vec<u8>| {
        let bytes = frame_bytes(payload.len()) as usize;
        let start = file.len();
        file.resize(start + bytes, 0);
        encode_frame(
            &mut file[start..],
            kind,
            Lsn::new(generation, offset),
            record_type,
            7,
            payload,
        );
        offset += bytes as u64;
    };
    for (record_type, payload) in records {
        frame(FrameKind::Record, *record_type, payload, &mut file);
    }
    let flush = FlushInfo {
        durable_before: Lsn::new(generation, DATA_START),
        write_start: DATA_START,
        write_sequence: 3,
    }
    .encode();
    frame(FrameKind::Flush, 0, &flush, &mut file);
    frame(FrameKind::GenerationEnd, 0, &[], &mut file);
    file
}

fn records() -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    let mut changes = Vec::new();
    for (index, change) in [
        PageChange::LeafInsert {
            index: 0,
            key: b"mailbox-0001/item-0001",
            value: &[0xab; 300],
        },
        PageChange::LeafReplace {
            index: 1,
            key: b"mailbox-0001/item-0002",
            value: b"new value",
        },
        PageChange::LeafDelete {
            index: 2,
            key: b"mailbox-0001/item-0003",
        },
        PageChange::LeafMark {
            index: 0,
            key: b"mailbox-0001/item-0001",
            deleted: true,
        },
        PageChange::Image { data: &[0u8; 512] },
    ]
    .iter()
    .enumerate()
    {
        let mut payload = Vec::new();
        record::encode_page_change(10 + index as u32, 100 + index as u64, change, &mut payload);
        changes.push(payload.clone());
        out.push((record::RECORD_PAGE_CHANGE, payload));
    }
    out.push((record::RECORD_COMMIT, record::encode_commit(5).to_vec()));
    for before in [
        undo::Prior::Absent,
        undo::Prior::Value(b"old".to_vec()),
        undo::Prior::Marked,
    ] {
        let mut payload = Vec::new();
        undo::encode_undo(b"mailbox-0002/item-0009", &before, &mut payload);
        out.push((undo::RECORD_UNDO, payload));
    }
    for part in group::encode_parts(&changes, 600) {
        out.push((group::RECORD_GROUP, part));
    }
    out
}

/// The log decoders: a generation's header (both copies), every frame in order (both layouts),
/// each record's payload by its type (page change, commit, undo, group), flush frames' payload,
/// and a frame looked for at an offset the input chooses. Page changes decoded are also applied
/// to a leaf page, as recovery's redo does.
pub fn log() -> Target {
    let records = records();
    let mut corpus = vec![generation(&records, 5), generation(&records[..3], 1)];
    // Each record's payload alone too, type first (so short inputs reach the record decoders).
    for (record_type, payload) in &records {
        let mut bytes = vec![*record_type];
        bytes.extend_from_slice(payload);
        corpus.push(bytes);
    }
    Target {
        name: "log",
        corpus,
        text: false,
        check: check_log,
    }
}

fn check_record(record_type: u8, payload: &[u8]) {
    match record_type {
        group::RECORD_GROUP => {
            if let Ok(part) = group::decode_group(payload) {
                for change in &part.changes {
                    apply(change);
                }
            }
        }
        undo::RECORD_UNDO => {
            let _ = undo::decode_undo(payload);
        }
        _ => {
            if let Ok(change) = record::decode(record_type, payload) {
                apply(&change);
            }
        }
    }
}

/// Redo of a decoded page change on a copy of a valid leaf (it may refuse; it must not panic).
fn apply(change: &record::EngineRecord) {
    if let record::EngineRecord::PageChange {
        update_stamp,
        change,
        ..
    } = change
    {
        let mut page = leaf_page(8192, 10);
        let _ = jetproof_engine::change::redo(&mut page, *update_stamp, 1, &change.as_change());
    }
}

fn check_log(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < DATA_START as usize {
        // A record's payload alone: its type, then its bytes.
        if let Some((record_type, payload)) = bytes.split_first() {
            check_record(*record_type, payload);
            let _ = FlushInfo::decode(payload);
        }
        return Ok(());
    }
    let header = GenerationHeader::decode(&bytes[..DATA_START as usize]);
    let (generation, layouts) = match &header {
        Ok(h) => (
            h.generation,
            vec![FrameLayout::of_version(h.format_version)],
        ),
        Err(_) => (5, vec![FrameLayout::Compact, FrameLayout::Legacy]),
    };
    for layout in layouts {
        let mut offset = DATA_START;
        for _ in 0..4096 {
            match decode_frame(bytes, generation, offset, layout) {
                Decoded::Valid(frame) => {
                    let payload = frame.payload(bytes);
                    match frame.kind {
                        FrameKind::Record => check_record(frame.record_type, payload),
                        FrameKind::Flush => {
                            let _ = FlushInfo::decode(payload);
                        }
                        FrameKind::GenerationEnd => break,
                    }
                    if frame.end() <= offset {
                        return Err(format!("a frame at {offset} ends at {}", frame.end()));
                    }
                    offset = frame.end();
                }
                Decoded::Empty | Decoded::Damaged(_) => break,
            }
        }
        // A frame looked for where the input's last eight bytes say (a reader's resync).
        let tail: [u8; 8] = bytes[bytes.len() - 8..].try_into().unwrap_or([0; 8]);
        let at = u64::from_le_bytes(tail) % (bytes.len() as u64 + 64);
        let _ = decode_frame(bytes, generation, at, layout);
        let _ = position_matches(bytes, generation, at, layout);
    }
    Ok(())
}

/// A sealed leaf of `page_size` bytes at page `number`, holding a few records.
fn leaf_page(page_size: usize, number: u32) -> Vec<u8> {
    let mut bytes = vec![0u8; page_size];
    page::write_common(&mut bytes, number, page::PageType::Leaf, 99);
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..12u32)
        .map(|i| {
            (
                format!("mailbox-0001/item-{i:04}").into_bytes(),
                vec![i as u8; 40 + i as usize * 7],
            )
        })
        .collect();
    node::Entries::from_leaf(pairs).encode(&mut bytes, 0);
    checksum::seal(&mut bytes);
    bytes
}

fn interior_page(page_size: usize, number: u32) -> Vec<u8> {
    let mut bytes = vec![0u8; page_size];
    page::write_common(&mut bytes, number, page::PageType::Interior, 99);
    let pairs: Vec<(Vec<u8>, u32)> = (0..20u32)
        .map(|i| (format!("mailbox-{i:04}").into_bytes(), 100 + i))
        .collect();
    node::Entries::from_interior(pairs).encode(&mut bytes, 1);
    checksum::seal(&mut bytes);
    bytes
}

/// The page decoders: the checksum check and one-bit repair of a page read from disk, then the
/// node's own check and every reader of its entries (search, entries, records).
pub fn page() -> Target {
    let mut free = vec![0u8; 4096];
    page::format_free(&mut free, 3);
    checksum::seal(&mut free);
    Target {
        name: "page",
        corpus: vec![
            leaf_page(8192, 10),
            leaf_page(4096, 11),
            interior_page(8192, 12),
            interior_page(32768, 13),
            free,
        ],
        text: false,
        check: check_page,
    }
}

fn check_page(bytes: &[u8]) -> Result<(), String> {
    let expected = page::page_number(bytes).unwrap_or(10);
    let _ = checksum::verify(bytes, expected);
    let _ = checksum::verify(bytes, expected.wrapping_add(1));
    if checksum::verify(bytes, expected) != checksum::PageCheck::Bad && bytes.len() <= 32768 {
        let mut copy = bytes.to_vec();
        let _ = checksum::correct(&mut copy, expected);
    }
    let _ = page::page_type(bytes);
    let _ = page::update_stamp(bytes);
    let _ = page::log_position(bytes);
    let _ = node::is_node(bytes);
    if node::validate(bytes).is_none() {
        return Ok(());
    }
    let count = node::count(bytes);
    let _ = node::used_bytes(bytes);
    let _ = node::free_bytes(bytes);
    let leaf = node::level(bytes) == 0;
    for i in 0..count.min(4096) {
        if leaf {
            let _ = node::leaf_entry(bytes, i);
            let _ = node::leaf_is_deleted(bytes, i);
            let _ = node::leaf_value_range(bytes, i);
        } else {
            let _ = node::interior_entry(bytes, i);
        }
    }
    for key in [&b""[..], b"mailbox-0001/item-0005", b"\xff\xff"] {
        let _ = node::leaf_search(bytes, key);
        let _ = node::interior_search(bytes, key);
    }
    if let Some(entries) = node::Entries::decode(bytes) {
        for i in 0..entries.len().min(4096) {
            let _ = entries.key(i);
            let _ = entries.value(i);
            let _ = entries.child(i);
        }
        let _ = entries.bytes();
        let _ = entries.first_key();
        let mut records = Vec::new();
        entries.encode_records(0..entries.len(), &mut records);
        let _ = node::Entries::decode_records(&records, leaf);
    }
    let _ = node::Entries::decode_records(bytes.get(64..).unwrap_or(&[]), leaf);
    Ok(())
}

/// Every target, in the order the tests and `bench/results` list them.
pub fn all() -> Vec<Target> {
    vec![job(), result_json(), samples_csv(), log(), page()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The corpora are valid inputs, so mutations start from the deep paths, not the first
    /// refusal: every job checks, every result renders, the samples give rows, the generation's
    /// frames all decode in order, the pages pass their checksum and the node's check.
    #[test]
    fn every_corpus_entry_is_a_valid_input() {
        for bytes in &job().corpus {
            jetproof_job::Job::parse(&text(bytes), "corpus").expect("a corpus job checks");
            check_job(bytes).expect("reads back");
        }
        for bytes in &result_json().corpus {
            jetproof_results::html::report_from_json(&text(bytes), None).expect("renders");
        }
        for bytes in &samples_csv().corpus {
            assert!(!jetproof_results::html::parse_samples(&text(bytes)).is_empty());
        }
        let records = records();
        let file = generation(&records, 5);
        let header = GenerationHeader::decode(&file[..DATA_START as usize]).expect("header");
        assert_eq!(header.generation, 5);
        let mut offset = DATA_START;
        let mut decoded = 0;
        while let Decoded::Valid(frame) = decode_frame(&file, 5, offset, FrameLayout::Compact) {
            if frame.kind == FrameKind::Record {
                let payload = frame.payload(&file);
                match frame.record_type {
                    group::RECORD_GROUP => {
                        group::decode_group(payload).expect("group");
                    }
                    undo::RECORD_UNDO => {
                        undo::decode_undo(payload).expect("undo");
                    }
                    t => {
                        record::decode(t, payload).expect("record");
                    }
                }
                decoded += 1;
            }
            offset = frame.end();
        }
        assert_eq!(decoded, records.len());
        assert_eq!(offset as usize, file.len());
        for (n, bytes) in page().corpus.iter().enumerate() {
            let number = page::page_number(bytes).expect("number");
            assert_eq!(
                checksum::verify(bytes, number),
                checksum::PageCheck::Good,
                "{n}"
            );
            if n < 4 {
                assert!(node::validate(bytes).is_some(), "{n}");
            }
        }
    }
}
