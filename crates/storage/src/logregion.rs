//! A log on a block device: the log region (`docs/devices.md`, "A log on a device").
//!
//! The log crate reaches storage only through [`IoBackend`]: it opens, writes, syncs, renames
//! and removes a few named files in its directory and makes names durable with `sync_dir`. On a
//! device there is no directory, so [`LogRegion`] maps exactly those operations onto a region of
//! the device: fixed-size **slots**, one file per slot, and a **name table** (which name is in
//! which slot, and how long it is) kept in two copies written alternately, each with a sequence
//! number and a CRC-32C, so a torn table write loses nothing that was durable.
//!
//! The semantics kept are the ones `docs/log.md` assumes of a file system: a file's data and
//! size are durable after its `sync_data` (the table records each file's *synced* size, never a
//! size whose data may still be in flight), a name after `sync_dir`, and a slot freed by a
//! remove or a rename over it is reused only once a table without it is durable.
//!
//! Paths: the device path is the log's directory; `<device>/<name>` is the file `name` in the
//! region. Every other path goes to the wrapped backend unchanged.
//!
//! The commands reach it through [`wrap`], for a log device beside a database in a file or on
//! another device, or shared with its database (the database then in the layout's database
//! region, which `crate::raw` opens at its offset).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;

use jetproof_io::bytes::{array_at, u32_at, u64_at};
use jetproof_io::{AlignedBuf, IoBackend, IoClass, IoError, IoFile, OpenOptions};

pub use crate::marks::{LAYOUT_MAGIC, looks_like_layout};

/// Magic of a name-table copy.
pub const TABLE_MAGIC: &[u8; 8] = b"JPLOGDIR";
/// The layout version this build writes and reads.
pub const LAYOUT_VERSION: u32 = 1;
/// Bytes of the layout header block and of one name-table copy.
pub const BLOCK: u64 = 4096;
/// Every region and slot starts on this boundary.
pub const ALIGN: u64 = 1 << 20;
/// Where the log region (the two table copies) starts.
pub const REGION_OFFSET: u64 = ALIGN;
/// Where slot 0 starts.
pub const SLOTS_OFFSET: u64 = 2 * ALIGN;
/// Bytes of a name in the table.
const NAME_BYTES: usize = 32;
/// Bytes of one table entry: name, slot, reserved, size.
const ENTRY_BYTES: usize = 48;
/// Where the entries start in a table copy.
const ENTRIES_AT: usize = 24;
/// Where a table copy's CRC is.
const TABLE_CRC_AT: usize = BLOCK as usize - 4;
/// The most entries (and so slots) one table copy holds.
pub const MAX_SLOTS: u32 = ((TABLE_CRC_AT - ENTRIES_AT) / ENTRY_BYTES) as u32;
/// Slots of a shared device (database and log on one device).
pub const SHARED_SLOTS: u32 = 64;
/// Where the layout header's CRC is.
const HEADER_CRC_AT: usize = 80;

/// The layout a device was given by `init` (its header, block 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The device's size when it was laid out.
    pub device_bytes: u64,
    /// Bytes of one slot: the largest file the region holds.
    pub slot_bytes: u64,
    /// How many slots: the most files (generations, spare, checkpoint) at once.
    pub slot_count: u32,
    /// The database region's offset, 0 when the device holds no database.
    pub database_offset: u64,
    /// The database region's length (to the device's end).
    pub database_bytes: u64,
    /// When the layout was written, Unix ms.
    pub created_unix_ms: u64,
}

/// Why a layout cannot be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error(
        "the device holds {device_bytes} bytes, too few for a log region of at least 3 slots of {slot_bytes} bytes (the log's file size rounded up to 1 MiB) after its 2 MiB of header and name table; use a larger device or smaller log files"
    )]
    TooSmall { device_bytes: u64, slot_bytes: u64 },
    #[error(
        "the device holds {device_bytes} bytes: a log region of {slots} slots of {slot_bytes} bytes and a database of up to {database_bytes} bytes (storage.db_size and the growth step its fill may end past it) do not fit; use a larger device or a smaller database"
    )]
    SharedTooSmall {
        device_bytes: u64,
        slots: u32,
        slot_bytes: u64,
        database_bytes: u64,
    },
    #[error("no jetproof layout header (magic JPDEVLAY at byte 0)")]
    NotALayout,
    #[error(
        "a damaged jetproof layout header: {0} (an init cut short, or damage); `jetproof init --recreate` lays the device out anew"
    )]
    Damaged(&'static str),
}

impl Layout {
    /// The layout of a device holding only a log: as many slots as fit, at most [`MAX_SLOTS`].
    pub fn for_log_device(device_bytes: u64, log_file_bytes: u64) -> Result<Layout, LayoutError> {
        let slot_bytes = slot_bytes_for(log_file_bytes);
        let room = device_bytes.saturating_sub(SLOTS_OFFSET) / slot_bytes;
        let slot_count = room.min(u64::from(MAX_SLOTS)) as u32;
        if slot_count < 3 {
            return Err(LayoutError::TooSmall {
                device_bytes,
                slot_bytes,
            });
        }
        Ok(Layout {
            device_bytes,
            slot_bytes,
            slot_count,
            database_offset: 0,
            database_bytes: 0,
            created_unix_ms: now_ms(),
        })
    }

    /// The layout of a device holding a database of up to `database_bytes` and its log:
    /// [`SHARED_SLOTS`] slots, then the database region to the device's end.
    pub fn for_shared_device(
        device_bytes: u64,
        log_file_bytes: u64,
        database_bytes: u64,
    ) -> Result<Layout, LayoutError> {
        let slot_bytes = slot_bytes_for(log_file_bytes);
        let slots_end = SLOTS_OFFSET + u64::from(SHARED_SLOTS) * slot_bytes;
        let database_offset = slots_end.div_ceil(ALIGN) * ALIGN;
        let room = device_bytes.saturating_sub(database_offset);
        if room < database_bytes || room == 0 {
            return Err(LayoutError::SharedTooSmall {
                device_bytes,
                slots: SHARED_SLOTS,
                slot_bytes,
                database_bytes,
            });
        }
        Ok(Layout {
            device_bytes,
            slot_bytes,
            slot_count: SHARED_SLOTS,
            database_offset,
            database_bytes: room,
            created_unix_ms: now_ms(),
        })
    }

    /// The byte offset of slot `slot` on the device.
    pub fn slot_offset(&self, slot: u32) -> u64 {
        SLOTS_OFFSET + u64::from(slot) * self.slot_bytes
    }

    /// Bytes from the region's start to the end of its last slot.
    pub fn region_bytes(&self) -> u64 {
        self.slot_offset(self.slot_count) - REGION_OFFSET
    }

    /// The header block (block 0).
    pub fn encode(&self) -> AlignedBuf {
        let mut block = AlignedBuf::zeroed(BLOCK as usize);
        let fields: [(usize, &[u8]); 12] = [
            (0, LAYOUT_MAGIC),
            (8, &LAYOUT_VERSION.to_le_bytes()),
            (12, &(BLOCK as u32).to_le_bytes()),
            (16, &self.device_bytes.to_le_bytes()),
            (24, &REGION_OFFSET.to_le_bytes()),
            (32, &self.region_bytes().to_le_bytes()),
            (40, &self.slot_bytes.to_le_bytes()),
            (48, &self.slot_count.to_le_bytes()),
            (52, &(BLOCK as u32).to_le_bytes()),
            (56, &self.database_offset.to_le_bytes()),
            (64, &self.database_bytes.to_le_bytes()),
            (72, &self.created_unix_ms.to_le_bytes()),
        ];
        for (at, bytes) in fields {
            block[at..at + bytes.len()].copy_from_slice(bytes);
        }
        let crc = jetproof_io::crc::crc32c(&block[..HEADER_CRC_AT]);
        block[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        block
    }

    /// Reads a header block: [`LayoutError::NotALayout`] without the magic, `Damaged` with the
    /// magic and anything wrong after it.
    pub fn decode(block: &[u8]) -> Result<Layout, LayoutError> {
        if array_at::<8>(block, 0).as_ref() != Some(LAYOUT_MAGIC) {
            return Err(LayoutError::NotALayout);
        }
        let crc = u32_at(block, HEADER_CRC_AT).ok_or(LayoutError::Damaged("short"))?;
        let covered = block
            .get(..HEADER_CRC_AT)
            .ok_or(LayoutError::Damaged("short"))?;
        if jetproof_io::crc::crc32c(covered) != crc {
            return Err(LayoutError::Damaged("its checksum does not match"));
        }
        let u32_field = |at| u32_at(block, at).ok_or(LayoutError::Damaged("short"));
        let u64_field = |at| u64_at(block, at).ok_or(LayoutError::Damaged("short"));
        if u32_field(8)? != LAYOUT_VERSION {
            return Err(LayoutError::Damaged(
                "a layout version this build does not read",
            ));
        }
        if u32_field(12)? != BLOCK as u32
            || u32_field(52)? != BLOCK as u32
            || u64_field(24)? != REGION_OFFSET
        {
            return Err(LayoutError::Damaged(
                "block sizes or offsets this build does not use",
            ));
        }
        let layout = Layout {
            device_bytes: u64_field(16)?,
            slot_bytes: u64_field(40)?,
            slot_count: u32_field(48)?,
            database_offset: u64_field(56)?,
            database_bytes: u64_field(64)?,
            created_unix_ms: u64_field(72)?,
        };
        if layout.slot_bytes == 0
            || !layout.slot_bytes.is_multiple_of(ALIGN)
            || layout.slot_count == 0
            || layout.slot_count > MAX_SLOTS
            || u64_field(32)? != layout.region_bytes()
            || (layout.database_offset != 0
                && (layout.database_offset < layout.slot_offset(layout.slot_count)
                    || !layout.database_offset.is_multiple_of(ALIGN)))
        {
            return Err(LayoutError::Damaged("a region that does not add up"));
        }
        Ok(layout)
    }
}

fn slot_bytes_for(log_file_bytes: u64) -> u64 {
    log_file_bytes.max(1).div_ceil(ALIGN) * ALIGN
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().min(u128::from(u64::MAX)) as u64)
}

/// One file of the region.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    name: String,
    slot: u32,
    /// Its size now (what reads and writes see).
    size: u64,
    /// Its size as of its last `sync_data`: what a table write records.
    synced: u64,
}

/// A decoded table copy.
#[derive(Clone, Debug, PartialEq, Eq)]
struct TableCopy {
    sequence: u64,
    entries: Vec<(String, u32, u64)>,
}

fn encode_table(sequence: u64, slot_count: u32, entries: &[(String, u32, u64)]) -> AlignedBuf {
    let mut block = AlignedBuf::zeroed(BLOCK as usize);
    block[..8].copy_from_slice(TABLE_MAGIC);
    block[8..16].copy_from_slice(&sequence.to_le_bytes());
    block[16..20].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    block[20..24].copy_from_slice(&slot_count.to_le_bytes());
    for (k, (name, slot, size)) in entries.iter().enumerate() {
        let at = ENTRIES_AT + k * ENTRY_BYTES;
        block[at..at + name.len()].copy_from_slice(name.as_bytes());
        block[at + 32..at + 36].copy_from_slice(&slot.to_le_bytes());
        block[at + 40..at + 48].copy_from_slice(&size.to_le_bytes());
    }
    let crc = jetproof_io::crc::crc32c(&block[..TABLE_CRC_AT]);
    block[TABLE_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    block
}

/// A table copy, or None when it is not a valid one for this layout.
fn decode_table(block: &[u8], layout: &Layout) -> Option<TableCopy> {
    if array_at::<8>(block, 0).as_ref() != Some(TABLE_MAGIC) {
        return None;
    }
    if jetproof_io::crc::crc32c(block.get(..TABLE_CRC_AT)?) != u32_at(block, TABLE_CRC_AT)? {
        return None;
    }
    let sequence = u64_at(block, 8)?;
    let count = u32_at(block, 16)?;
    if count > MAX_SLOTS || u32_at(block, 20)? != layout.slot_count {
        return None;
    }
    let mut entries: Vec<(String, u32, u64)> = Vec::with_capacity(count as usize);
    for k in 0..count as usize {
        let at = ENTRIES_AT + k * ENTRY_BYTES;
        let raw = block.get(at..at + NAME_BYTES)?;
        let len = raw.iter().position(|b| *b == 0).unwrap_or(NAME_BYTES);
        let name = std::str::from_utf8(raw.get(..len)?).ok()?.to_string();
        let slot = u32_at(block, at + 32)?;
        let size = u64_at(block, at + 40)?;
        let valid = !name.is_empty()
            && valid_name(&name)
            && slot < layout.slot_count
            && size <= layout.slot_bytes
            && !entries.iter().any(|(n, s, _)| *n == name || *s == slot);
        if !valid {
            return None;
        }
        entries.push((name, slot, size));
    }
    Some(TableCopy { sequence, entries })
}

/// A name the table can hold: printable ASCII without `/`, at most 32 bytes.
fn valid_name(name: &str) -> bool {
    name.len() <= NAME_BYTES && name.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
}

fn region_error(device: &Path, op: &'static str, message: String) -> IoError {
    IoError::Path {
        op,
        path: device.to_path_buf(),
        source: std::io::Error::other(message),
    }
}

/// The table's state: the names in memory, and the slots the last durable table holds.
#[derive(Debug)]
struct Table {
    entries: Vec<Entry>,
    durable_slots: Vec<u32>,
    sequence: u64,
}

/// What every file of the region shares: the device, its layout and the table.
#[derive(Debug)]
struct Shared {
    device: PathBuf,
    layout: Layout,
    /// The device opened for the table's writes.
    table_file: Arc<dyn IoFile>,
    table: Mutex<Table>,
}

impl Shared {
    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Table>, IoError> {
        self.table.lock().map_err(|_| {
            region_error(
                &self.device,
                "use the log region on",
                "its name table's lock was poisoned by a panic".into(),
            )
        })
    }

    /// Writes the table (every name, each file's synced size) into the copy the last write did
    /// not use, syncs it, and makes it the durable table. Called with the table locked.
    fn write_table(&self, table: &mut Table) -> Result<(), IoError> {
        let sequence = table.sequence + 1;
        let entries: Vec<(String, u32, u64)> = table
            .entries
            .iter()
            .map(|e| (e.name.clone(), e.slot, e.synced))
            .collect();
        let block = encode_table(sequence, self.layout.slot_count, &entries);
        let offset = REGION_OFFSET + (sequence % 2) * BLOCK;
        self.table_file
            .write_at(&block, offset, IoClass::LogWrite)?;
        self.table_file.sync_data(IoClass::LogWrite)?;
        table.sequence = sequence;
        table.durable_slots = table.entries.iter().map(|e| e.slot).collect();
        Ok(())
    }
}

/// How many times this process laid a device out: a region read before the latest [`format`]
/// is read again.
static FORMATS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Reads the layout header at byte 0 of `device` through `backend`.
pub fn read_layout(backend: &dyn IoBackend, device: &Path) -> Result<Layout, IoError> {
    let file = backend.open(
        device,
        &OpenOptions::read_only().buffered().with_allow_device(true),
    )?;
    let mut block = AlignedBuf::zeroed(BLOCK as usize);
    file.read_at(&mut block, 0, IoClass::LogRead)?;
    Layout::decode(&block).map_err(|e| region_error(device, "read the layout of", e.to_string()))
}

/// Lays `device` out: both table copies (copy 1 empty at sequence 1, copy 0 zeroed), synced,
/// then the header, synced. A crash before the header leaves no layout (`docs/devices.md`,
/// rows L1 and L2).
pub fn format(backend: &dyn IoBackend, device: &Path, layout: &Layout) -> Result<(), IoError> {
    // Every region this process read before is stale now (`LogDevices` reads it again).
    FORMATS.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    let file = backend.open(
        device,
        &OpenOptions::read_write().buffered().with_allow_device(true),
    )?;
    file.write_at(&AlignedBuf::zeroed(BLOCK as usize), 0, IoClass::LogWrite)?;
    file.write_at(
        &AlignedBuf::zeroed(BLOCK as usize),
        REGION_OFFSET,
        IoClass::LogWrite,
    )?;
    file.write_at(
        &encode_table(1, layout.slot_count, &[]),
        REGION_OFFSET + BLOCK,
        IoClass::LogWrite,
    )?;
    file.sync_data(IoClass::LogWrite)?;
    file.write_at(&layout.encode(), 0, IoClass::LogWrite)?;
    file.sync_data(IoClass::LogWrite)?;
    Ok(())
}

/// The log region of a device, as a backend: `<device>/<name>` is the file `name` of the
/// region; every other path goes to the wrapped backend.
#[derive(Debug)]
pub struct LogRegion {
    inner: Arc<dyn IoBackend>,
    shared: Arc<Shared>,
}

impl LogRegion {
    /// Opens the region of `device` (laid out by [`format()`]): reads its header and the newer
    /// valid table copy.
    pub fn open(inner: Arc<dyn IoBackend>, device: &Path) -> Result<Arc<LogRegion>, IoError> {
        let layout = read_layout(inner.as_ref(), device)?;
        let table_file = inner.open(
            device,
            &OpenOptions::read_write().buffered().with_allow_device(true),
        )?;
        let mut copies = Vec::new();
        for copy in 0..2 {
            let mut block = AlignedBuf::zeroed(BLOCK as usize);
            table_file.read_at(&mut block, REGION_OFFSET + copy * BLOCK, IoClass::LogRead)?;
            if let Some(table) = decode_table(&block, &layout) {
                copies.push(table);
            }
        }
        let Some(newest) = copies.into_iter().max_by_key(|t| t.sequence) else {
            return Err(region_error(
                device,
                "read the log region's name table on",
                format!(
                    "neither copy (bytes {REGION_OFFSET} and {}) holds a valid name table; the log's files cannot be found",
                    REGION_OFFSET + BLOCK
                ),
            ));
        };
        let entries: Vec<Entry> = newest
            .entries
            .into_iter()
            .map(|(name, slot, size)| Entry {
                name,
                slot,
                size,
                synced: size,
            })
            .collect();
        let durable_slots = entries.iter().map(|e| e.slot).collect();
        Ok(Arc::new(LogRegion {
            inner,
            shared: Arc::new(Shared {
                device: device.to_path_buf(),
                layout,
                table_file,
                table: Mutex::new(Table {
                    entries,
                    durable_slots,
                    sequence: newest.sequence,
                }),
            }),
        }))
    }

    /// The region's layout.
    pub fn layout(&self) -> Layout {
        self.shared.layout
    }

    /// The names in the region now, in slot order (what a directory listing would give).
    pub fn names(&self) -> Vec<String> {
        let Ok(table) = self.shared.lock() else {
            return Vec::new();
        };
        let mut entries: Vec<&Entry> = table.entries.iter().collect();
        entries.sort_by_key(|e| e.slot);
        entries.iter().map(|e| e.name.clone()).collect()
    }

    /// The name of `path` in the region, if it is one of the region's files.
    fn name_of<'a>(&self, path: &'a Path) -> Option<&'a str> {
        (path.parent() == Some(self.shared.device.as_path()))
            .then(|| path.file_name().and_then(|n| n.to_str()))
            .flatten()
    }

    fn is_device(&self, path: &Path) -> bool {
        path == self.shared.device
    }

    fn not_found(&self, path: &Path, op: &'static str) -> IoError {
        IoError::Path {
            op,
            path: path.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        }
    }

    fn open_in_region(
        &self,
        path: &Path,
        name: &str,
        options: &OpenOptions,
    ) -> Result<Arc<dyn IoFile>, IoError> {
        let shared = &self.shared;
        let slot = {
            let mut table = shared.lock()?;
            match table.entries.iter().find(|e| e.name == name) {
                Some(_) if options.create_new => {
                    return Err(IoError::Path {
                        op: "create",
                        path: path.to_path_buf(),
                        source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
                    });
                }
                Some(entry) => entry.slot,
                None if options.create || options.create_new => {
                    if !valid_name(name) {
                        return Err(region_error(
                            path,
                            "create",
                            format!(
                                "a log region's names are at most {NAME_BYTES} printable ASCII bytes"
                            ),
                        ));
                    }
                    let free = (0..shared.layout.slot_count).find(|slot| {
                        !table.entries.iter().any(|e| e.slot == *slot)
                            && !table.durable_slots.contains(slot)
                    });
                    let Some(slot) = free else {
                        let names: Vec<String> =
                            table.entries.iter().map(|e| e.name.clone()).collect();
                        return Err(region_error(
                            path,
                            "create",
                            format!(
                                "the log region on {} is full: its {} slots of {} bytes hold {} (the checkpoint file, the spare and the generations the checkpoint still needs; slots freed since the last durable name table wait for it); jetproof never overwrites a slot a durable name holds. Give the log a larger device or larger log files, or let retention delete old generations",
                                shared.device.display(),
                                shared.layout.slot_count,
                                shared.layout.slot_bytes,
                                names.join(", ")
                            ),
                        ));
                    };
                    table.entries.push(Entry {
                        name: name.to_string(),
                        slot,
                        size: 0,
                        synced: 0,
                    });
                    slot
                }
                None => return Err(self.not_found(path, "open")),
            }
        };
        // The device itself, opened with the file's own I/O options (direct, write-through).
        let mut device_options = options.clone();
        device_options.create = false;
        device_options.create_new = false;
        device_options.no_follow = false;
        let device = self
            .inner
            .open(&shared.device, &device_options.with_allow_device(true))?;
        Ok(Arc::new(RegionFile {
            path: path.to_path_buf(),
            shared: shared.clone(),
            slot,
            base: shared.layout.slot_offset(slot),
            device,
            dsync: options.dsync,
        }))
    }
}

impl IoBackend for LogRegion {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Arc<dyn IoFile>, IoError> {
        match self.name_of(path) {
            Some(name) => self.open_in_region(path, name, options),
            None => self.inner.open(path, options),
        }
    }

    fn exists(&self, path: &Path) -> bool {
        match self.name_of(path) {
            Some(name) => self
                .shared
                .lock()
                .is_ok_and(|t| t.entries.iter().any(|e| e.name == name)),
            None => self.is_device(path) || self.inner.exists(path),
        }
    }

    fn remove(&self, path: &Path) -> Result<(), IoError> {
        let Some(name) = self.name_of(path) else {
            return self.inner.remove(path);
        };
        let mut table = self.shared.lock()?;
        let before = table.entries.len();
        table.entries.retain(|e| e.name != name);
        if table.entries.len() == before {
            return Err(self.not_found(path, "remove"));
        }
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        match (self.name_of(from), self.name_of(to)) {
            (Some(from_name), Some(to_name)) => {
                let mut table = self.shared.lock()?;
                if !table.entries.iter().any(|e| e.name == from_name) {
                    return Err(self.not_found(from, "rename"));
                }
                if from_name == to_name {
                    return Ok(());
                }
                if !valid_name(to_name) {
                    return Err(region_error(
                        to,
                        "rename onto",
                        format!(
                            "a log region's names are at most {NAME_BYTES} printable ASCII bytes"
                        ),
                    ));
                }
                // The file replaced (if any) frees its slot; reused only after a durable table.
                table.entries.retain(|e| e.name != to_name);
                for entry in &mut table.entries {
                    if entry.name == from_name {
                        entry.name = to_name.to_string();
                    }
                }
                Ok(())
            }
            (None, None) => self.inner.rename(from, to),
            _ => Err(region_error(
                from,
                "rename",
                format!(
                    "{} and {} are not both in the log region: a file cannot move onto or off a device",
                    from.display(),
                    to.display()
                ),
            )),
        }
    }

    fn rename_new(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        if self.name_of(to).is_some() && self.exists(to) {
            return Err(IoError::Path {
                op: "rename onto",
                path: to.to_path_buf(),
                source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            });
        }
        match (self.name_of(from), self.name_of(to)) {
            (None, None) => self.inner.rename_new(from, to),
            _ => self.rename(from, to),
        }
    }

    fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        if self.is_device(dir) {
            let mut table = self.shared.lock()?;
            return self.shared.write_table(&mut table);
        }
        self.inner.sync_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        if self.is_device(dir) {
            return Ok(());
        }
        self.inner.create_dir_all(dir)
    }
}

/// One file of the region: its slot of the device, its size from the table.
#[derive(Debug)]
struct RegionFile {
    path: PathBuf,
    shared: Arc<Shared>,
    slot: u32,
    base: u64,
    device: Arc<dyn IoFile>,
    dsync: bool,
}

impl RegionFile {
    /// The file's entry, by slot (its name may have changed by a rename).
    fn with_entry<T>(&self, f: impl FnOnce(&mut Entry) -> T) -> Result<T, IoError> {
        let mut table = self.shared.lock()?;
        table
            .entries
            .iter_mut()
            .find(|e| e.slot == self.slot)
            .map(f)
            .ok_or_else(|| {
                region_error(
                    &self.path,
                    "use",
                    "the file was removed from the log region while open".into(),
                )
            })
    }

    fn check_room(&self, end: u64) -> Result<(), IoError> {
        if end > self.shared.layout.slot_bytes {
            return Err(region_error(
                &self.path,
                "write",
                format!(
                    "a file of the log region on {} holds at most its slot's {} bytes, and this write ends at byte {end}",
                    self.shared.device.display(),
                    self.shared.layout.slot_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Zero-fills `[from, to)` of the slot (a gap a file would read as zeros).
    fn zero(&self, from: u64, to: u64, class: IoClass) -> Result<(), IoError> {
        let block = self.device.logical_block_size().max(4096) as u64;
        let chunk = AlignedBuf::zeroed(256 << 10);
        let mut at = from;
        while at < to {
            // Whole blocks from a block boundary where it can, so direct I/O stays aligned.
            let end = (at + chunk.len() as u64).min(to);
            let length = (end - at) as usize;
            if at.is_multiple_of(block) && (length as u64).is_multiple_of(block) {
                self.device
                    .write_at(&chunk[..length], self.base + at, class)?;
            } else {
                let start = at - at % block;
                let stop = end.div_ceil(block) * block;
                let mut buf = AlignedBuf::zeroed((stop - start) as usize);
                self.device.read_at(&mut buf, self.base + start, class)?;
                let lo = (at - start) as usize;
                buf[lo..lo + length].fill(0);
                self.device.write_at(&buf, self.base + start, class)?;
            }
            at = end;
        }
        Ok(())
    }

    /// Makes the file's size durable: the data is synced first, then the table records it.
    fn commit_size(&self) -> Result<(), IoError> {
        let mut table = self.shared.lock()?;
        let Some(entry) = table.entries.iter_mut().find(|e| e.slot == self.slot) else {
            return Ok(());
        };
        if entry.synced == entry.size {
            return Ok(());
        }
        entry.synced = entry.size;
        self.shared.write_table(&mut table)
    }

    /// A write ending at `end` (which fits the slot): zero-fills a gap before `offset`, grows
    /// the size. Whether it grew.
    fn before_write(&self, offset: u64, end: u64, class: IoClass) -> Result<bool, IoError> {
        self.check_room(end)?;
        let size = self.with_entry(|e| e.size)?;
        if offset > size {
            self.zero(size, offset, class)?;
        }
        self.with_entry(|e| {
            let grew = end > e.size;
            e.size = e.size.max(end);
            grew
        })
    }
}

impl IoFile for RegionFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64, class: IoClass) -> Result<(), IoError> {
        let size = self.with_entry(|e| e.size)?;
        let end = offset.saturating_add(buf.len() as u64);
        if end > size {
            return Err(IoError::ShortRead {
                path: self.path.clone(),
                offset,
                wanted: buf.len(),
                got: size.saturating_sub(offset) as usize,
            });
        }
        self.device.read_at(buf, self.base + offset, class)
    }

    fn write_at(&self, data: &[u8], offset: u64, class: IoClass) -> Result<(), IoError> {
        let end = offset.saturating_add(data.len() as u64);
        let grew = self.before_write(offset, end, class)?;
        self.device.write_at(data, self.base + offset, class)?;
        // Write-through: the write is durable when it returns, its size with it.
        if grew && self.dsync {
            self.device.sync_data(class)?;
            self.commit_size()?;
        }
        Ok(())
    }

    fn sync_data(&self, class: IoClass) -> Result<(), IoError> {
        self.device.sync_data(class)?;
        self.commit_size()
    }

    fn size(&self) -> Result<u64, IoError> {
        self.with_entry(|e| e.size)
    }

    fn set_size(&self, size: u64) -> Result<(), IoError> {
        self.check_room(size)?;
        let old = self.with_entry(|e| e.size)?;
        if size > old {
            self.zero(old, size, IoClass::LogWrite)?;
        }
        self.with_entry(|e| {
            e.size = size;
            e.synced = e.synced.min(size);
        })
    }

    fn logical_block_size(&self) -> usize {
        self.device.logical_block_size()
    }
}

/// The job's instances whose `log_path` is a block device (a log region), with their log
/// paths.
pub fn device_logs(job: &jetproof_job::Job) -> Vec<PathBuf> {
    job.instances()
        .into_iter()
        .filter(|i| crate::marks::is_block_device(&i.log_path))
        .map(|i| i.log_path)
        .collect()
}

/// Wraps `inner` so that the job's log devices open as log regions (each read when first
/// used); `inner` itself when there is none or devices are not allowed.
pub fn wrap(job: &jetproof_job::Job, inner: Arc<dyn IoBackend>) -> Arc<dyn IoBackend> {
    let devices = device_logs(job);
    if devices.is_empty() || !job.storage.allow_devices {
        return inner;
    }
    Arc::new(LogDevices {
        inner,
        regions: devices
            .into_iter()
            .map(|device| (device, Mutex::new(None)))
            .collect(),
    })
}

/// The names in the log region of `device` (what a listing of a log directory gives).
pub fn list_names(device: &Path) -> Result<Vec<String>, IoError> {
    let backend: Arc<dyn IoBackend> = jetproof_io::std_backend::StdBackend::new();
    Ok(LogRegion::open(backend, device)?.names())
}

/// The layout `init` gives the log device of a job.
pub fn layout_for(job: &jetproof_job::Job, device_bytes: u64) -> Result<Layout, LayoutError> {
    Layout::for_log_device(device_bytes, job.log.file_size.bytes())
}

/// Does the instance's database share its log's device (the shared layout)?
pub fn is_shared(instance: &jetproof_job::Instance) -> bool {
    let log = crate::device::dev_num(&instance.log_path);
    log.is_some() && log == crate::device::dev_num(&instance.database_path)
}

/// The layout `init` gives the log device of `instance`: a log device's, or the shared one.
pub fn layout_of(
    job: &jetproof_job::Job,
    instance: &jetproof_job::Instance,
    device_bytes: u64,
) -> Result<Layout, LayoutError> {
    if is_shared(instance) {
        // The database region must hold the fill's growth step past the target too (as a
        // database on a device of its own: `crate::raw::check_for_init`).
        let target = job.db_size().bytes();
        let page = job.storage.page_size.bytes();
        Layout::for_shared_device(
            device_bytes,
            job.log.file_size.bytes(),
            target.saturating_add(crate::database::extent_bytes(target, page)),
        )
    } else {
        layout_for(job, device_bytes)
    }
}

/// Does a database of jetproof's exist at the instance's database path (a file, or a header on
/// its device)?
fn database_exists(instance: &jetproof_job::Instance) -> bool {
    if crate::marks::is_block_device(&instance.database_path) {
        crate::raw::looks_like_database_at(&instance.database_path)
    } else {
        instance.database_path.symlink_metadata().is_ok()
    }
}

/// `init`'s checks of a log path that is a block device, before anything is written: the safety
/// checks of [`crate::device`], a database in a file beside it, room for the ring, and an
/// earlier layout of jetproof's replaced only with `--recreate`.
pub fn check_for_init(
    job: &jetproof_job::Job,
    permissions: &crate::marks::Permissions,
    instance: &jetproof_job::Instance,
) -> Result<(), crate::BadInput> {
    use crate::bad;
    let path = &instance.log_path;
    let field = format!("log_path of {}", instance.name);
    let found = crate::device::check_device(
        path,
        &field,
        crate::device::DeviceUse::Init,
        crate::device::rules(job, &permissions.wipe_devices),
    )?;
    let shown = path.display();
    let geometry = crate::raw::geometry(path)
        .map_err(|e| bad(&field, format!("{shown} cannot be sized: {e}")))?;
    layout_of(job, instance, geometry.bytes).map_err(|e| bad(&field, format!("{shown}: {e}")))?;
    // The region holds the log of the database at the database path: kept unless --recreate.
    // With no database there it belongs to none (an init cut short, a database removed), and is
    // laid out anew, as a log directory's files are removed then.
    if found.ours && !permissions.recreate && database_exists(instance) {
        return Err(bad(
            "--recreate",
            format!(
                "{shown} already holds a jetproof log region; run the tests with it, or pass --recreate to lay it out anew (its log is then lost)"
            ),
        ));
    }
    Ok(())
}

/// The checks of every later command (`run`, `checksum`, `recover`) of a log path that is a
/// block device, after [`crate::device::check_device`]: a database in a file beside it and a
/// layout that reads.
pub fn check_existing(instance: &jetproof_job::Instance) -> Result<(), crate::BadInput> {
    let field = format!("log_path of {}", instance.name);
    let backend = jetproof_io::std_backend::StdBackend::new();
    read_layout(backend.as_ref(), &instance.log_path)
        .map(|_| ())
        .map_err(|e| {
            crate::bad(
                &field,
                format!("{e}; make the log region with `jetproof init`"),
            )
        })
}

/// Lays out the log device of `instance` for `init` (after [`check_for_init`], under the owner
/// lock): whatever log was there is gone.
pub fn format_for_init(
    job: &jetproof_job::Job,
    instance: &jetproof_job::Instance,
) -> Result<Layout, IoError> {
    let device = instance.log_path.as_path();
    let geometry = crate::raw::geometry(device).map_err(|e| IoError::Path {
        op: "size",
        path: device.to_path_buf(),
        source: e,
    })?;
    let layout = layout_of(job, instance, geometry.bytes)
        .map_err(|e| region_error(device, "lay out", e.to_string()))?;
    let backend = jetproof_io::std_backend::StdBackend::new();
    format(backend.as_ref(), device, &layout)?;
    Ok(layout)
}

/// The job's log devices as log regions over the job's backend.
#[derive(Debug)]
struct LogDevices {
    inner: Arc<dyn IoBackend>,
    /// Each device's region as read, with the [`FORMATS`] count it was read at.
    regions: Vec<(PathBuf, Mutex<Option<ReadRegion>>)>,
}

/// A region as read, and the [`FORMATS`] count then.
type ReadRegion = (u64, Arc<LogRegion>);

impl LogDevices {
    /// The region `path` is in (the device, or a name in it), opened when first used.
    fn region(&self, path: &Path) -> Option<Result<Arc<LogRegion>, IoError>> {
        let (device, slot) = self
            .regions
            .iter()
            .find(|(device, _)| path == device || path.parent() == Some(device.as_path()))?;
        let mut slot = match slot.lock() {
            Ok(slot) => slot,
            Err(_) => {
                return Some(Err(region_error(
                    device,
                    "open the log region on",
                    "a panic poisoned its lock".into(),
                )));
            }
        };
        let formats = FORMATS.load(std::sync::atomic::Ordering::Acquire);
        if let Some((read_at, region)) = slot.as_ref()
            && *read_at == formats
        {
            return Some(Ok(region.clone()));
        }
        Some(
            LogRegion::open(self.inner.clone(), device).inspect(|region| {
                *slot = Some((formats, region.clone()));
            }),
        )
    }

    fn is_device(&self, path: &Path) -> bool {
        self.regions.iter().any(|(device, _)| path == device)
    }
}

impl IoBackend for LogDevices {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Arc<dyn IoFile>, IoError> {
        match self.region(path) {
            Some(region) => region?.open(path, options),
            None => self.inner.open(path, options),
        }
    }

    fn exists(&self, path: &Path) -> bool {
        if self.is_device(path) {
            return true;
        }
        match self.region(path) {
            Some(region) => region.is_ok_and(|r| r.exists(path)),
            None => self.inner.exists(path),
        }
    }

    fn remove(&self, path: &Path) -> Result<(), IoError> {
        match self.region(path) {
            Some(region) => region?.remove(path),
            None => self.inner.remove(path),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        match self.region(from) {
            Some(region) => region?.rename(from, to),
            None => self.inner.rename(from, to),
        }
    }

    fn rename_new(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        match self.region(from) {
            Some(region) => region?.rename_new(from, to),
            None => self.inner.rename_new(from, to),
        }
    }

    fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        match self.region(dir) {
            Some(region) => region?.sync_dir(dir),
            None => self.inner.sync_dir(dir),
        }
    }

    fn create_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        if self.is_device(dir) {
            return Ok(());
        }
        self.inner.create_dir_all(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jetproof_io::mem::MemBackend;
    use jetproof_log::{
        Durability, Log, LogOptions, LogReader, Lsn, ReadOptions, Record, Retention, verify_log_dir,
    };
    use std::time::Duration;

    const DEVICE: &str = "/dev/fakelog";
    const DEVICE_BYTES: u64 = 16 << 20;

    /// A mem backend holding a 16 MiB "device" laid out for a log of 64 KiB files.
    fn device() -> (Arc<dyn IoBackend>, Layout) {
        let mem: Arc<dyn IoBackend> = MemBackend::new();
        mem.create_dir_all(Path::new("/dev")).expect("dir");
        let file = mem
            .open(Path::new(DEVICE), &OpenOptions::create().buffered())
            .expect("device");
        file.set_size(DEVICE_BYTES).expect("size");
        let layout = Layout::for_log_device(DEVICE_BYTES, 64 << 10).expect("layout");
        format(mem.as_ref(), Path::new(DEVICE), &layout).expect("format");
        (mem, layout)
    }

    fn region(mem: &Arc<dyn IoBackend>) -> Arc<LogRegion> {
        LogRegion::open(mem.clone(), Path::new(DEVICE)).expect("open region")
    }

    /// The device's bytes now: what a power loss at this instant leaves (the mem backend has no
    /// cache), on a new backend.
    fn power_loss_copy(mem: &Arc<dyn IoBackend>) -> Arc<dyn IoBackend> {
        let from = mem
            .open(Path::new(DEVICE), &OpenOptions::read_only().buffered())
            .expect("open");
        let mut bytes = vec![0u8; DEVICE_BYTES as usize];
        from.read_at(&mut bytes, 0, IoClass::LogRead).expect("read");
        let copy: Arc<dyn IoBackend> = MemBackend::new();
        copy.create_dir_all(Path::new("/dev")).expect("dir");
        let to = copy
            .open(Path::new(DEVICE), &OpenOptions::create().buffered())
            .expect("device");
        to.write_at(&bytes, 0, IoClass::LogWrite).expect("write");
        copy
    }

    fn log_options(retention: Retention) -> LogOptions {
        LogOptions {
            file_size_bytes: 64 << 10,
            buffer_size_bytes: 16 << 10,
            lazy_flush_interval: Duration::from_millis(2),
            retention,
            ..LogOptions::new(Path::new(DEVICE), 0xD8_0000_0000_0000_0000_0000_0000_0042)
        }
    }

    fn payload(index: u64) -> Vec<u8> {
        (0..1500u64)
            .map(|byte| (index.wrapping_mul(31).wrapping_add(byte * 7) % 251) as u8)
            .collect()
    }

    fn append(log: &Log, range: std::ops::Range<u64>, durability: Durability) -> Vec<Lsn> {
        range
            .map(|index| {
                let body = payload(index);
                log.append_and_commit(
                    &Record {
                        record_type: 1,
                        transaction_id: index,
                        payload: &body,
                    },
                    durability,
                )
                .expect("append")
            })
            .collect()
    }

    #[test]
    fn a_device_laid_out_again_is_read_again_by_the_backend_that_read_it_before() {
        let (mem, layout) = device();
        let devices = LogDevices {
            inner: mem.clone(),
            regions: vec![(PathBuf::from(DEVICE), Mutex::new(None))],
        };
        let name = Path::new(DEVICE).join("E00000001.jplog");
        devices
            .open(&name, &OpenOptions::create_new().buffered())
            .expect("create");
        devices.sync_dir(Path::new(DEVICE)).expect("sync dir");
        assert!(devices.exists(&name));
        // init lays the device out anew (as `run` does when it initialises first): the region
        // read before is stale, and is read again.
        format(mem.as_ref(), Path::new(DEVICE), &layout).expect("format");
        assert!(!devices.exists(&name), "the old table is not used");
        assert!(
            devices.exists(Path::new(DEVICE)),
            "the device is the log's directory"
        );
    }

    #[test]
    fn a_layout_round_trips_and_damage_is_told_from_no_layout() {
        let layout = Layout::for_log_device(256 << 20, 1 << 20).expect("layout");
        assert_eq!(layout.slot_bytes, 1 << 20);
        assert_eq!(layout.slot_count, MAX_SLOTS.min(254));
        assert_eq!(layout.database_offset, 0);
        let block = layout.encode();
        assert_eq!(Layout::decode(&block), Ok(layout));
        let mut damaged = block.clone();
        damaged[40] ^= 1;
        assert!(matches!(
            Layout::decode(&damaged),
            Err(LayoutError::Damaged(_))
        ));
        assert_eq!(Layout::decode(&[0u8; 4096]), Err(LayoutError::NotALayout));
        // A log of 1.5 MiB files takes 2 MiB slots; a device too small for 3 is refused.
        assert_eq!(
            Layout::for_log_device(64 << 20, 3 << 19)
                .expect("layout")
                .slot_bytes,
            2 << 20
        );
        assert!(matches!(
            Layout::for_log_device(4 << 20, 1 << 20),
            Err(LayoutError::TooSmall { .. })
        ));
        // Shared: 64 slots, then the database region, 1 MiB aligned, to the device's end.
        let shared =
            Layout::for_shared_device(256 << 20, 1 << 20, 100 << 20).expect("shared layout");
        assert_eq!(shared.slot_count, SHARED_SLOTS);
        assert_eq!(shared.database_offset, (2 + 64) << 20);
        assert_eq!(shared.database_bytes, (256 - 66) << 20);
        assert_eq!(Layout::decode(&shared.encode()), Ok(shared));
        assert!(matches!(
            Layout::for_shared_device(128 << 20, 1 << 20, 100 << 20),
            Err(LayoutError::SharedTooSmall { .. })
        ));
    }

    #[test]
    fn the_log_runs_on_a_region_and_reopens_from_the_device_alone() {
        let (mem, layout) = device();
        let log = Log::create(region(&mem), log_options(Retention::DeleteBeforeCheckpoint))
            .expect("create");
        // A checkpoint every 50 records, 20 behind: retention frees slots as it goes.
        let mut lsns = Vec::new();
        for chunk in 0..8u64 {
            lsns.extend(append(
                &log,
                chunk * 50..chunk * 50 + 50,
                Durability::Durable,
            ));
            log.write_checkpoint(lsns[lsns.len() - 20])
                .expect("checkpoint");
        }
        let lsns2 = append(&log, 400..600, Durability::Lazy);
        log.flush().expect("flush");
        let generations = log.end_lsn().generation;
        assert!(generations > 8, "several rollovers: {generations}");
        log.close().expect("close");
        // Retention freed the slots of the generations before the checkpoint: the ring held
        // more generations than it has slots.
        assert!(
            generations > u64::from(layout.slot_count),
            "{generations} generations in {} slots",
            layout.slot_count
        );

        // A new region over the same device finds every file by its durable name table.
        let reopened = region(&mem);
        let names = reopened.names();
        assert!(names.contains(&"checkpoint.jpchk".to_string()), "{names:?}");
        let (reader, _) = LogReader::from_checkpoint(
            reopened.clone(),
            Path::new(DEVICE),
            None,
            ReadOptions::default(),
        )
        .expect("from checkpoint");
        let records = reader.collect::<Result<Vec<_>, _>>().expect("read");
        assert_eq!(records.len(), 600 - 380);
        assert_eq!(records[0].lsn, lsns[380]);
        assert_eq!(records.last().map(|r| r.lsn), lsns2.last().copied());
        assert!(
            records
                .iter()
                .enumerate()
                .all(|(k, r)| r.payload == payload(380 + k as u64)),
            "every record as appended"
        );
        let report = verify_log_dir(
            reopened.as_ref(),
            Path::new(DEVICE),
            None,
            &ReadOptions::default(),
        )
        .expect("verify");
        assert!(report.is_clean(), "{report:?}");
        // And the log opens again, continuing after what it found.
        let (log, opened) =
            Log::open(reopened, log_options(Retention::DeleteBeforeCheckpoint)).expect("open");
        assert!(opened.torn_tail.is_none(), "{opened:?}");
        append(&log, 600..650, Durability::Durable);
        log.close().expect("close");
    }

    #[test]
    fn after_a_power_loss_every_durable_commit_is_read_back_from_the_device() {
        let (mem, _) = device();
        let log = Log::create(region(&mem), log_options(Retention::Circular)).expect("create");
        let mut lsns = Vec::new();
        for chunk in 0..6u64 {
            lsns.extend(append(
                &log,
                chunk * 50..chunk * 50 + 50,
                Durability::Durable,
            ));
            log.write_checkpoint(lsns[lsns.len() - 20])
                .expect("checkpoint");
        }
        log.write_checkpoint(lsns[290]).expect("checkpoint");
        let more = append(&log, 300..420, Durability::Durable);
        assert!(
            more.last().map_or(0, |l| l.generation) > 14,
            "circular logging went round the ring"
        );
        // Power lost now: the log never closed, nothing more is written.
        let crashed = power_loss_copy(&mem);
        log.close().expect("close the original");

        let region = region(&crashed);
        let (log, opened) =
            Log::open(region.clone(), log_options(Retention::Circular)).expect("open");
        assert_eq!(opened.checkpoint, lsns[290]);
        log.close().expect("close");
        let (reader, _) = LogReader::from_checkpoint(
            region.clone(),
            Path::new(DEVICE),
            None,
            ReadOptions::default(),
        )
        .expect("from checkpoint");
        let records = reader.collect::<Result<Vec<_>, _>>().expect("read");
        let last = more.last().copied().expect("lsn");
        assert!(
            records.iter().any(|r| r.lsn == last),
            "the last durable commit is read back"
        );
        assert_eq!(records.len(), 420 - 290, "every commit from the checkpoint");
    }

    #[test]
    fn a_full_ring_is_a_storage_error_and_never_an_overwrite() {
        let (mem, layout) = device();
        let log = Log::create(region(&mem), log_options(Retention::KeepAll)).expect("create");
        // Keep every generation: the ring fills, and the log stops with the region's error.
        let mut appended = Vec::new();
        let mut failure = None;
        for index in 0..20_000u64 {
            let body = payload(index);
            match log.append_and_commit(
                &Record {
                    record_type: 1,
                    transaction_id: index,
                    payload: &body,
                },
                Durability::Durable,
            ) {
                Ok(lsn) => appended.push(lsn),
                Err(error) => {
                    failure = Some(error.to_string());
                    break;
                }
            }
        }
        let failure = failure.expect("the ring fills");
        assert!(failure.contains("is full"), "{failure}");
        assert!(failure.contains(DEVICE), "{failure}");
        let _ = log.close();
        // Every generation written before the failure is intact: nothing was overwritten.
        let reopened = region(&mem);
        assert!(reopened.names().len() <= layout.slot_count as usize);
        let records = LogReader::open(
            reopened,
            Path::new(DEVICE),
            None,
            Lsn::new(1, jetproof_log::format::DATA_START),
            ReadOptions::default(),
        )
        .expect("open")
        .collect::<Result<Vec<_>, _>>()
        .expect("read");
        assert!(
            records.len() >= appended.len(),
            "{} < {}",
            records.len(),
            appended.len()
        );
        assert!(
            records
                .iter()
                .take(appended.len())
                .enumerate()
                .all(|(k, r)| r.payload == payload(k as u64))
        );
    }

    fn region_file(region: &LogRegion, name: &str, options: &OpenOptions) -> Arc<dyn IoFile> {
        region
            .open(&Path::new(DEVICE).join(name), options)
            .expect("open in region")
    }

    #[test]
    fn names_and_sizes_are_durable_only_when_synced_and_freed_slots_wait_for_the_table() {
        let (mem, _) = device();
        let region = region(&mem);
        let dir = Path::new(DEVICE);
        let a = region_file(&region, "a", &OpenOptions::create_new().buffered());
        a.write_at(&[7u8; 8192], 0, IoClass::LogWrite)
            .expect("write");
        // Not synced: after a power loss the name is not there.
        assert!(
            !LogRegion::open(power_loss_copy(&mem), dir)
                .expect("open")
                .exists(&dir.join("a"))
        );
        a.sync_data(IoClass::LogWrite).expect("sync");
        let after = LogRegion::open(power_loss_copy(&mem), dir).expect("open");
        let read = region_file(&after, "a", &OpenOptions::read_only().buffered());
        assert_eq!(read.size().expect("size"), 8192);
        // A growth whose data is not synced is not recorded by another file's table write.
        a.write_at(&[8u8; 4096], 8192, IoClass::LogWrite)
            .expect("grow");
        region_file(&region, "b", &OpenOptions::create_new().buffered());
        region.sync_dir(dir).expect("sync dir");
        let after = LogRegion::open(power_loss_copy(&mem), dir).expect("open");
        assert!(after.exists(&dir.join("b")), "b's name is durable");
        assert_eq!(
            region_file(&after, "a", &OpenOptions::read_only().buffered())
                .size()
                .expect("size"),
            8192,
            "a's unsynced growth is not"
        );
        // A removed file's slot is not reused before a table without it is durable.
        let slot_of_a = region.shared.lock().expect("lock").entries[0].slot;
        region.remove(&dir.join("a")).expect("remove");
        region_file(&region, "c", &OpenOptions::create_new().buffered());
        let slot_of_c = region
            .shared
            .lock()
            .expect("lock")
            .entries
            .iter()
            .find(|e| e.name == "c")
            .map(|e| e.slot)
            .expect("c");
        assert_ne!(slot_of_c, slot_of_a, "a's slot waits for the durable table");
        region.sync_dir(dir).expect("sync dir");
        region_file(&region, "d", &OpenOptions::create_new().buffered());
        let slot_of_d = region
            .shared
            .lock()
            .expect("lock")
            .entries
            .iter()
            .find(|e| e.name == "d")
            .map(|e| e.slot)
            .expect("d");
        assert_eq!(slot_of_d, slot_of_a, "reused once the table is durable");
        // A new file in a reused slot reads nothing of the old one.
        let d = region_file(&region, "d", &OpenOptions::read_write().buffered());
        assert_eq!(d.size().expect("size"), 0);
        let mut one = [0u8; 1];
        assert!(matches!(
            d.read_at(&mut one, 0, IoClass::LogRead),
            Err(IoError::ShortRead { .. })
        ));
        d.write_at(&[1u8; 4096], 8192, IoClass::LogWrite)
            .expect("write past the end");
        let mut gap = vec![1u8; 8192];
        d.read_at(&mut gap, 0, IoClass::LogRead)
            .expect("read the gap");
        assert!(
            gap.iter().all(|b| *b == 0),
            "the gap reads as zeros, not a's bytes"
        );
        // rename_new never replaces; a file cannot outgrow its slot.
        assert!(region.rename_new(&dir.join("c"), &dir.join("d")).is_err());
        let error = d
            .write_at(&[1u8; 4096], 1 << 20, IoClass::LogWrite)
            .expect_err("past the slot");
        assert!(
            error.to_string().contains("holds at most its slot"),
            "{error}"
        );
    }

    #[test]
    fn a_torn_table_write_falls_back_to_the_previous_table_and_two_damaged_copies_are_refused() {
        let (mem, _) = device();
        let region = region(&mem);
        let dir = Path::new(DEVICE);
        region_file(&region, "one", &OpenOptions::create_new().buffered());
        region.sync_dir(dir).expect("sync dir");
        region_file(&region, "two", &OpenOptions::create_new().buffered());
        region.sync_dir(dir).expect("sync dir");
        let sequence = region.shared.lock().expect("lock").sequence;
        // Tear the newest copy (the one holding "two"): the other, holding "one" only, is used.
        let device = mem
            .open(dir, &OpenOptions::read_write().buffered())
            .expect("device");
        let newest = REGION_OFFSET + (sequence % 2) * BLOCK;
        device
            .write_at(&[0xAB; 512], newest + 512, IoClass::LogWrite)
            .expect("tear");
        let after = LogRegion::open(mem.clone(), dir).expect("open");
        assert!(after.exists(&dir.join("one")));
        assert!(!after.exists(&dir.join("two")));
        // The next write goes over the torn copy, with the next sequence.
        after.sync_dir(dir).expect("sync dir");
        assert_eq!(after.shared.lock().expect("lock").sequence, sequence);
        // Both copies damaged: refused, naming both offsets; nothing is read as a file.
        for copy in 0..2 {
            device
                .write_at(
                    &[0xAB; 512],
                    REGION_OFFSET + copy * BLOCK + 512,
                    IoClass::LogWrite,
                )
                .expect("damage");
        }
        let error = LogRegion::open(mem, dir).expect_err("no table");
        let text = error.to_string();
        assert!(text.contains("neither copy"), "{text}");
        assert!(text.contains(&REGION_OFFSET.to_string()), "{text}");
    }
}
