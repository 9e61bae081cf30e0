//! Group records: a structural change (a split or a merge, with the parents it changes) logged as
//! one unit, as ESE logs a split as one record, so recovery applies it whole or not at all.
//!
//! Without groups, a split's page changes were separate records, and a crash whose durable log
//! ended between them left redo a half split: a new page holding keys its parent did not point
//! to, or a parent pointing to a page whose content never made it (the crash harness found both).
//! The engine brackets each structural change with `begin_group`/`end_group`
//! ([`jetproof_engine::change::ChangeLog`]) and keeps its pages latched until they carry the
//! group's log position; the instance holds the group's page changes back and appends them here.
//!
//! Payload: flags (u8; bit 0: more parts follow), member count (u32), then per member its length
//! (u32) and a page change payload ([`crate::format::encode_page_change`]). A group larger than
//! the log's largest record is split into parts, all but the last flagged: recovery holds a
//! transaction's parts until the last one and drops an unfinished group at the log's end (its
//! pages were latched until the whole group was logged, so no later record depends on it).
#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

use crate::format::{self, DecodeError, EngineRecord};

/// `record_type` of a group record (or part).
pub const RECORD_GROUP: u8 = 5;
/// Bytes before the first member.
pub const GROUP_HEADER_BYTES: usize = 5;
const MEMBER_HEADER_BYTES: usize = 4;
const FLAG_MORE: u8 = 1;

/// Encodes `members` (page change payloads) into one or more group payloads of at most
/// `max_payload` bytes each (a member alone larger than that gets a part of its own, which the
/// log then refuses as too large).
pub fn encode_parts(members: &[Vec<u8>], max_payload: usize) -> Vec<Vec<u8>> {
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut current: Vec<&[u8]> = Vec::new();
    let mut size = GROUP_HEADER_BYTES;
    for member in members {
        let cost = MEMBER_HEADER_BYTES + member.len();
        if !current.is_empty() && size + cost > max_payload {
            parts.push(encode_one(&current, true));
            current.clear();
            size = GROUP_HEADER_BYTES;
        }
        current.push(member);
        size += cost;
    }
    parts.push(encode_one(&current, false));
    parts
}

fn encode_one(members: &[&[u8]], more: bool) -> Vec<u8> {
    let size = GROUP_HEADER_BYTES
        + members
            .iter()
            .map(|m| MEMBER_HEADER_BYTES + m.len())
            .sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.push(if more { FLAG_MORE } else { 0 });
    out.extend_from_slice(&(members.len() as u32).to_le_bytes());
    for member in members {
        out.extend_from_slice(&(member.len() as u32).to_le_bytes());
        out.extend_from_slice(member);
    }
    out
}

/// A group being built by one session: its members are encoded straight into one group payload
/// (reused from group to group, so a member costs no allocation once the buffer has grown), and
/// [`GroupBuilder::finish`] hands the log that payload, or its parts, without copying it when it
/// fits in one record. Gives byte for byte what [`encode_parts`] gives (test
/// `the_builder_gives_what_encode_parts_gives`).
#[derive(Debug, Default)]
pub struct GroupBuilder {
    open: bool,
    /// Group header (flags, count) then the members, each with its length.
    payload: Vec<u8>,
    members: u32,
    /// Holds a part while a group larger than one record is split.
    part: Vec<u8>,
}

impl GroupBuilder {
    pub const fn new() -> GroupBuilder {
        GroupBuilder {
            open: false,
            payload: Vec::new(),
            members: 0,
            part: Vec::new(),
        }
    }

    /// Starts a group (a group still open is dropped).
    pub fn begin(&mut self) {
        self.open = true;
        self.payload.clear();
        self.payload.resize(GROUP_HEADER_BYTES, 0);
        self.members = 0;
    }

    /// Drops the open group, if any.
    pub fn discard(&mut self) {
        self.open = false;
    }

    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Adds a page change to the open group; false (nothing done) when no group is open.
    pub fn push(
        &mut self,
        page: u32,
        update_stamp: u64,
        change: &jetproof_engine::change::PageChange<'_>,
    ) -> bool {
        if !self.open {
            return false;
        }
        let at = self.payload.len();
        self.payload.extend_from_slice(&[0; MEMBER_HEADER_BYTES]);
        format::append_page_change(page, update_stamp, change, &mut self.payload);
        let len = (self.payload.len() - at - MEMBER_HEADER_BYTES) as u32;
        if let Some(field) = self.payload.get_mut(at..at + MEMBER_HEADER_BYTES) {
            field.copy_from_slice(&len.to_le_bytes());
        }
        self.members += 1;
        true
    }

    /// Closes the group and appends it through `append(record_type, payload)`: nothing for an
    /// empty group, a plain page change record for a group of one, else one group record, or
    /// parts of at most `max_payload` bytes each (as [`encode_parts`] splits them). Returns the
    /// last `append`'s result (`None`: no group was open, or it was empty).
    pub fn finish<T, E>(
        &mut self,
        max_payload: usize,
        mut append: impl FnMut(u8, &[u8]) -> Result<T, E>,
    ) -> Result<Option<T>, E> {
        if !std::mem::take(&mut self.open) || self.members == 0 {
            return Ok(None);
        }
        if self.members == 1 {
            let only = self
                .payload
                .get(GROUP_HEADER_BYTES + MEMBER_HEADER_BYTES..)
                .unwrap_or(&[]);
            return append(format::RECORD_PAGE_CHANGE, only).map(Some);
        }
        if self.payload.len() <= max_payload {
            write_group_header(&mut self.payload, false, self.members);
            return append(RECORD_GROUP, &self.payload).map(Some);
        }
        // Larger than one record: the same packing as `encode_parts`, one part at a time.
        let mut last = None;
        let mut at = GROUP_HEADER_BYTES;
        self.part.clear();
        self.part.resize(GROUP_HEADER_BYTES, 0);
        let mut in_part = 0u32;
        while let Some(len) = len_at(&self.payload, at) {
            // Built by `push`, so every member is whole.
            let Some(member) = self.payload.get(at..at + MEMBER_HEADER_BYTES + len) else {
                break;
            };
            if in_part > 0 && self.part.len() + member.len() > max_payload {
                write_group_header(&mut self.part, true, in_part);
                last = Some(append(RECORD_GROUP, &self.part)?);
                self.part.truncate(GROUP_HEADER_BYTES);
                in_part = 0;
            }
            self.part.extend_from_slice(member);
            in_part += 1;
            at += MEMBER_HEADER_BYTES + len;
        }
        if in_part > 0 {
            write_group_header(&mut self.part, false, in_part);
            last = Some(append(RECORD_GROUP, &self.part)?);
        }
        Ok(last)
    }
}

fn write_group_header(payload: &mut [u8], more: bool, members: u32) {
    if let Some((flags, count)) = payload
        .get_mut(..GROUP_HEADER_BYTES)
        .and_then(|header| header.split_first_mut())
    {
        *flags = if more { FLAG_MORE } else { 0 };
        count.copy_from_slice(&members.to_le_bytes());
    }
}

/// One decoded group record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupPart {
    /// More parts of the same group follow.
    pub more: bool,
    /// Its page changes ([`EngineRecord::PageChange`] each), in the order they were made.
    pub changes: Vec<EngineRecord>,
}

/// A member or count length field at `at`; `None` if `bytes` is too short.
fn len_at(bytes: &[u8], at: usize) -> Option<usize> {
    jetproof_io::bytes::u32_at(bytes, at).map(|n| n as usize)
}

/// Decodes a group payload; every length is checked against the payload.
pub fn decode_group(payload: &[u8]) -> Result<GroupPart, DecodeError> {
    let short = |expected: usize| DecodeError::BadLength {
        expected,
        found: payload.len(),
    };
    let (Some(&flags), Some(count)) = (payload.first(), len_at(payload, 1)) else {
        return Err(short(GROUP_HEADER_BYTES));
    };
    let mut at = GROUP_HEADER_BYTES;
    // Each member takes at least its length field: a count beyond that is damage.
    if count > payload.len() / MEMBER_HEADER_BYTES {
        return Err(short(GROUP_HEADER_BYTES + count * MEMBER_HEADER_BYTES));
    }
    let mut changes = Vec::with_capacity(count);
    for _ in 0..count {
        let len = len_at(payload, at).ok_or_else(|| short(at + MEMBER_HEADER_BYTES))?;
        at += MEMBER_HEADER_BYTES;
        let end = at.checked_add(len).ok_or_else(|| short(usize::MAX))?;
        let member = payload.get(at..end).ok_or_else(|| short(end))?;
        changes.push(format::decode(format::RECORD_PAGE_CHANGE, member)?);
        at = end;
    }
    if at != payload.len() {
        return Err(short(at));
    }
    Ok(GroupPart {
        more: flags & FLAG_MORE != 0,
        changes,
    })
}

/// The engine records in one log record of any type the instance writes but undo's: a page
/// change or commit is one, a group part its members (for tools and tests that walk the log;
/// recovery also joins the parts of a group).
pub fn engine_records(record_type: u8, payload: &[u8]) -> Result<Vec<EngineRecord>, DecodeError> {
    if record_type == RECORD_GROUP {
        return Ok(decode_group(payload)?.changes);
    }
    Ok(vec![format::decode(record_type, payload)?])
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;
    use jetproof_engine::change::PageChange;

    fn member(page: u32, fill: u8, len: usize) -> Vec<u8> {
        let data = vec![fill; len];
        let mut out = Vec::new();
        format::encode_page_change(
            page,
            u64::from(page) + 100,
            &PageChange::LeafInsert {
                index: 0,
                key: b"k",
                value: &data,
            },
            &mut out,
        );
        out
    }

    /// The builder's records are byte for byte `encode_parts`'s (so the format is unchanged),
    /// for groups of 0 to 9 members of random sizes and every split limit, and they decode back
    /// to the changes pushed. Seeded: `JETPROOF_SEED` replays.
    #[test]
    fn the_builder_gives_what_encode_parts_gives() {
        let (seed, mut next) = crate::test_rng::xorshift(0x6a0u64);
        let mut builder = GroupBuilder::default();
        for round in 0..400 {
            let count = (next() % 10) as usize;
            let sizes: Vec<usize> = (0..count).map(|_| (next() % 700) as usize).collect();
            let members: Vec<Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(n, &len)| member(n as u32, round as u8, len))
                .collect();
            let max = [200usize, 500, 800, 1500, 1 << 20][round % 5];
            builder.begin();
            for (n, &len) in sizes.iter().enumerate() {
                let data = vec![round as u8; len];
                assert!(builder.push(
                    n as u32,
                    n as u64 + 100,
                    &PageChange::LeafInsert {
                        index: 0,
                        key: b"k",
                        value: &data,
                    },
                ));
            }
            let mut got: Vec<(u8, Vec<u8>)> = Vec::new();
            let last = builder
                .finish(max, |record_type, payload| {
                    got.push((record_type, payload.to_vec()));
                    Ok::<usize, ()>(got.len())
                })
                .unwrap();
            assert!(!builder.is_open());
            let expected: Vec<(u8, Vec<u8>)> = match members.len() {
                0 => Vec::new(),
                1 => vec![(format::RECORD_PAGE_CHANGE, members[0].clone())],
                _ => encode_parts(&members, max)
                    .into_iter()
                    .map(|part| (RECORD_GROUP, part))
                    .collect(),
            };
            assert_eq!(got, expected, "seed {seed} round {round}");
            assert_eq!(last, (!got.is_empty()).then_some(got.len()));
            let mut decoded = Vec::new();
            for (record_type, payload) in &got {
                decoded.extend(engine_records(*record_type, payload).unwrap());
            }
            assert_eq!(decoded.len(), count, "seed {seed} round {round}");
        }
        // Closed or discarded: nothing is appended, and a push is refused.
        builder.begin();
        builder.discard();
        assert!(!builder.push(1, 1, &PageChange::MapBit { bit: 1, used: true }));
        let none = builder.finish(100, |_, _| Err::<(), ()>(())).unwrap();
        assert_eq!(none, None);
    }

    #[test]
    fn groups_round_trip_split_into_parts_and_damage_is_an_error() {
        let members: Vec<Vec<u8>> = (0..5).map(|n| member(n, n as u8, 300)).collect();
        let whole = encode_parts(&members, 1 << 20);
        assert_eq!(whole.len(), 1);
        let part = decode_group(&whole[0]).unwrap();
        assert!(!part.more);
        assert_eq!(part.changes.len(), 5);
        for (n, change) in part.changes.iter().enumerate() {
            match change {
                EngineRecord::PageChange { page, .. } => assert_eq!(*page as usize, n),
                other => panic!("{other:?}"),
            }
        }
        // Small parts: every part but the last says more follow, and all members come back.
        let parts = encode_parts(&members, 800);
        assert!(parts.len() > 1);
        let mut found = 0;
        for (i, payload) in parts.iter().enumerate() {
            assert!(payload.len() <= 800 || decode_group(payload).unwrap().changes.len() == 1);
            let part = decode_group(payload).unwrap();
            assert_eq!(part.more, i + 1 < parts.len());
            found += part.changes.len();
        }
        assert_eq!(found, 5);
        // Every strict prefix and a wrong count are refused, never a panic.
        for cut in 0..whole[0].len() {
            assert!(decode_group(&whole[0][..cut]).is_err(), "cut {cut}");
        }
        let mut wrong = whole[0].clone();
        wrong[1] = 200;
        assert!(decode_group(&wrong).is_err());
    }
}
