//! Record content of a stated reducibility (issue 33): what an array that compresses and
//! deduplicates inline gets to reduce.
//!
//! Every byte `init` lays into a database (record values, the free space it leaves in each leaf,
//! the bodies of the free pages it formats) and every value a run inserts or replaces comes from
//! a [`Content`] generator, and what a run's engine writes where its pages hold nothing (the
//! space it frees, the free pages it grows by) from a [`PositionedContent`], so the stored data
//! compresses at the job's `workload.compression_ratio` and holds no repeated block. The log carries the values it
//! logs, so its payload follows the same setting.
//!
//! **How.** Content is a stream of chunks of [`CHUNK_BYTES`] (512, fio's
//! `buffer_compress_chunk`): the first [`Content::random_bytes_per_chunk`] bytes of each chunk
//! pseudo-random, the rest zero, as fio's `buffer_compress_percentage` and vdbench's
//! `compratio` do. Successive values continue the stream where the last one stopped. A compressor
//! stores the random part whole and the zero run as a few bytes, so a chunk shrinks to about
//! `1 / ratio` of itself; the few bytes each zero run still costs a compressor are allowed for
//! ([`RUN_COST_BYTES`]), so the measured figure (zstd level 1 on 8 KiB blocks) is the setting
//! within a few percent at 1, 2 and 4 (`tests/content.rs` measures it). At 1.0 every byte is
//! random: nothing compresses.
//!
//! **No repeats.** The random bytes are a wyrand stream (one 64-bit multiply per 8 bytes, no
//! allocation): a generator seeded apart from another's (each database's from its own seed,
//! each session's from its own) never gives the same 8-byte word sequence in practice, so no
//! block of the content equals another, within a database or across databases. A chunk's zero
//! run is never longer than `CHUNK_BYTES` minus its random part, so even at a high ratio every
//! 8 KiB block holds random bytes and is unique.
//!
//! **Cost.** About a nanosecond per 8 random bytes, plus a `memset` for the zero part: filling a
//! 2,400-byte value takes well under a microsecond, against tens of microseconds of CPU per
//! transactional I/O (`bench/run-overhead.sh`).

/// Bytes per chunk of the pattern (fio's default `buffer_compress_chunk`).
pub const CHUNK_BYTES: usize = 512;

/// What a zero run costs a fast LZ compressor (a literal, a match length and an offset): the
/// random part is shortened by it, so the chunk's compressed size is `CHUNK_BYTES / ratio`.
pub const RUN_COST_BYTES: usize = 4;

pub use jetproof_job::MAX_COMPRESSION_RATIO;

/// A generator of content that compresses at a set ratio. Cheap to make and to clone; one per
/// thread (it is a stream).
#[derive(Clone, Debug)]
pub struct Content {
    state: u64,
    random_per_chunk: usize,
    /// Where in its chunk the next byte falls: the pattern runs on from one `fill` to the
    /// next, so that values cut at any length keep the ratio (a pattern restarting at every
    /// value would begin each with random bytes and end most with a short, random-heavy chunk:
    /// 4:1 content measured 3.7:1 in a database that way).
    phase: usize,
}

impl Content {
    /// Content compressing at `ratio` (1.0: incompressible; clamped to 1..=8), its random
    /// stream seeded by `seed`.
    pub fn new(ratio: f64, seed: u64) -> Content {
        Content {
            // Scramble the seed so nearby seeds (1, 2, 3...) start far apart.
            state: splitmix(seed),
            random_per_chunk: random_bytes_per_chunk(ratio),
            phase: 0,
        }
    }

    /// Random bytes at the start of each chunk.
    pub fn random_bytes_per_chunk(&self) -> usize {
        self.random_per_chunk
    }

    /// Fills `out` with the next bytes of the content stream.
    pub fn fill(&mut self, out: &mut [u8]) {
        if self.random_per_chunk >= CHUNK_BYTES {
            self.random(out);
            return;
        }
        let mut rest = out;
        while !rest.is_empty() {
            let (run, random) = if self.phase < self.random_per_chunk {
                (self.random_per_chunk - self.phase, true)
            } else {
                (CHUNK_BYTES - self.phase, false)
            };
            let (now, later) = rest.split_at_mut(run.min(rest.len()));
            if random {
                self.random(now);
            } else {
                now.fill(0);
            }
            self.phase = (self.phase + now.len()) % CHUNK_BYTES;
            rest = later;
        }
    }

    /// The next 64 random bits (wyrand).
    #[inline]
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(WY_INCREMENT);
        wymix(self.state)
    }

    fn random(&mut self, out: &mut [u8]) {
        // Four words per round from four steps of the one stream: their multiplies do not wait
        // for each other, so the round costs about what one step did (the content filler was
        // a third of `init`'s CPU one word at a time).
        let mut rounds = out.chunks_exact_mut(32);
        for round in &mut rounds {
            let base = self.state;
            self.state = base.wrapping_add(WY_INCREMENT.wrapping_mul(4));
            for (lane, word) in round.chunks_exact_mut(8).enumerate() {
                let state = base.wrapping_add(WY_INCREMENT.wrapping_mul(lane as u64 + 1));
                word.copy_from_slice(&wymix(state).to_le_bytes());
            }
        }
        let mut words = rounds.into_remainder().chunks_exact_mut(8);
        for word in &mut words {
            word.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let tail = words.into_remainder();
        if !tail.is_empty() {
            let bytes = self.next_u64().to_le_bytes();
            tail.copy_from_slice(&bytes[..tail.len()]);
        }
    }
}

/// Content addressed by position (issue 33): the bytes a page's free space holds after a run
/// changes it. The byte at `offset` of the page keyed `key` is always the same, made from the
/// seed, the key and the offset alone, so filling any part of a page needs no state shared
/// between the sessions that change pages (no lock, no stream to advance), and a page's free
/// space is the same bytes however it was cut into the pieces that were freed.
///
/// The pattern is [`Content`]'s with its chunks at fixed places in the page (chunk `i` is bytes
/// `512 i .. 512 (i + 1)`): the first [`Content::random_bytes_per_chunk`] bytes of each chunk
/// random (the wyrand word of the byte's 8-byte-aligned position), the rest zeros. Cut into free
/// runs of any length at any offset, the page's free bytes so keep the ratio (a stream restarted
/// at each run would begin every run with random bytes). Two keys (pages), or two seeds
/// (databases), never give the same words.
#[derive(Clone, Debug)]
pub struct PositionedContent {
    random_per_chunk: usize,
    seed: u64,
}

impl PositionedContent {
    /// Content compressing at `ratio` (clamped as [`Content::new`] does) from `seed`.
    pub fn new(ratio: f64, seed: u64) -> PositionedContent {
        PositionedContent {
            random_per_chunk: random_bytes_per_chunk(ratio),
            seed: splitmix(seed ^ 0x706f_7369_7469_6f6e),
        }
    }

    /// Fills `out` with the bytes at `offset..offset + out.len()` of the page keyed `key`.
    pub fn fill(&self, key: u64, offset: usize, out: &mut [u8]) {
        // The state of word 0 of this page; word `w`'s is `base + (w + 1) * WY_INCREMENT`.
        let base = splitmix(self.seed ^ key.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut at = offset;
        let mut rest = out;
        while !rest.is_empty() {
            let phase = at % CHUNK_BYTES;
            let (run, random) = if phase < self.random_per_chunk {
                (self.random_per_chunk - phase, true)
            } else {
                (CHUNK_BYTES - phase, false)
            };
            let (now, later) = rest.split_at_mut(run.min(rest.len()));
            if random {
                positioned_random(base, at, now);
            } else {
                now.fill(0);
            }
            at += now.len();
            rest = later;
        }
    }
}

/// The random bytes at page positions `at..at + out.len()`: byte `p` is byte `p % 8` of word
/// `p / 8`, and each word's state is computed from its position (no word waits for another, so
/// the multiplies overlap).
fn positioned_random(base: u64, at: usize, out: &mut [u8]) {
    let word = |w: usize| wymix(base.wrapping_add(WY_INCREMENT.wrapping_mul(w as u64 + 1)));
    let mut pos = at;
    let mut rest = out;
    // A head up to the next word boundary.
    let head = (8 - pos % 8) % 8;
    if head > 0 {
        let (now, later) = rest.split_at_mut(head.min(rest.len()));
        let bytes = word(pos / 8).to_le_bytes();
        let from = pos % 8;
        now.copy_from_slice(bytes.get(from..from + now.len()).unwrap_or_default());
        pos += now.len();
        rest = later;
    }
    let mut words = rest.chunks_exact_mut(8);
    let mut w = pos / 8;
    for out_word in &mut words {
        out_word.copy_from_slice(&word(w).to_le_bytes());
        w += 1;
    }
    let tail = words.into_remainder();
    if !tail.is_empty() {
        let bytes = word(w).to_le_bytes();
        tail.copy_from_slice(bytes.get(..tail.len()).unwrap_or_default());
    }
}

/// Pages of one attachment (a long value): 128 KiB at 32 KiB pages. Each page holds one chunk
/// of it, at the same place in the page whichever copy, so every copy of an attachment repeats
/// the blocks of each of its pages but the first (the page header's).
pub const ATTACHMENT_PAGES: u64 = 4;

/// The long values (attachments) of one database for `workload.dedup_ratio` above 1 (issue 33):
/// the body of each long-value page `init` lays down, page after page. An attachment is either
/// a copy of one of the job's shared pool (a share [`jetproof_job::LONG_VALUE_POOL_SHARE`],
/// drawn uniformly, the same content in every database: the same file sent to many mailboxes)
/// or one of this database's own; its pages' content is of the job's compression ratio, made
/// from the attachment's seed and the page's place in it, so two copies are equal page body for
/// page body.
#[derive(Clone, Debug)]
pub struct Attachments {
    ratio: f64,
    pool_seed: u64,
    own_seed: u64,
    pool: u64,
    /// Draws (pool or own), own attachments made, page within the current attachment.
    draws: u64,
    own: u64,
    page: u64,
    current: u64,
}

impl Attachments {
    /// `job_seed`: the same for every database (the pool's content); `database_seed`: this
    /// database's own attachments; `pool`: attachments in the pool (at least 1).
    pub fn new(ratio: f64, job_seed: u64, database_seed: u64, pool: u64) -> Attachments {
        Attachments {
            ratio,
            pool_seed: splitmix(job_seed ^ 0x6174_7461_6368_706f),
            own_seed: splitmix(database_seed ^ 0x6f77_6e61_7474_6163),
            pool: pool.max(1),
            draws: 0,
            own: 0,
            page: 0,
            current: 0,
        }
    }

    /// The pool's size for a job whose long-value pages come to `long_value_pages` in all: the
    /// pool's pages are [`jetproof_job::LONG_VALUE_POOL_COPIES`] times fewer than the pages
    /// drawn from it, so its own first copies take a hundredth of the repeats.
    pub fn pool_for(long_value_pages: f64) -> u64 {
        let drawn = long_value_pages * jetproof_job::LONG_VALUE_POOL_SHARE;
        let pool = drawn / jetproof_job::LONG_VALUE_POOL_COPIES / ATTACHMENT_PAGES as f64;
        if pool.is_finite() && pool >= 1.0 {
            pool as u64
        } else {
            1
        }
    }

    /// Fills the body of the next long-value page.
    pub fn fill_page(&mut self, body: &mut [u8]) {
        if self.page == 0 {
            let draw = splitmix(self.own_seed ^ self.draws.wrapping_mul(WY_INCREMENT));
            self.draws += 1;
            let uniform = (draw >> 11) as f64 / (1u64 << 53) as f64;
            self.current = if uniform < jetproof_job::LONG_VALUE_POOL_SHARE {
                let pick = splitmix(draw) % self.pool;
                splitmix(self.pool_seed ^ pick.wrapping_mul(WY_INCREMENT))
            } else {
                self.own += 1;
                splitmix(
                    self.own_seed
                        .wrapping_add(self.own.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                )
            };
        }
        let seed = self.current ^ (self.page + 1).wrapping_mul(0xd6e8_feb8_6659_fd93);
        Content::new(self.ratio, seed).fill(body);
        self.page = (self.page + 1) % ATTACHMENT_PAGES;
    }

    /// Fills the body of long-value page `page` of the file as a run's growth lays it down
    /// (the engine's `PageContent`): without state, so any session's growth can call it. The
    /// attachment is the one of the [`ATTACHMENT_PAGES`]-page run `page` falls in, drawn as
    /// [`Attachments::fill_page`] draws (a share [`jetproof_job::LONG_VALUE_POOL_SHARE`] from
    /// the same pool, so its pages equal init's copies of it, page body for page body), but from
    /// the page's place in the file rather than from a count of draws: a run's own attachments
    /// are never init's or another run's (the file only grows, so no page is laid down twice).
    pub fn fill_page_at(&self, page: u64, body: &mut [u8]) {
        let attachment = page / ATTACHMENT_PAGES;
        let draw = splitmix(self.grown_seed() ^ attachment.wrapping_mul(WY_INCREMENT));
        let uniform = (draw >> 11) as f64 / (1u64 << 53) as f64;
        let current = if uniform < jetproof_job::LONG_VALUE_POOL_SHARE {
            let pick = splitmix(draw) % self.pool;
            splitmix(self.pool_seed ^ pick.wrapping_mul(WY_INCREMENT))
        } else {
            splitmix(draw ^ 0x6772_6f77_6e6f_776e)
        };
        let chunk = page % ATTACHMENT_PAGES;
        let seed = current ^ (chunk + 1).wrapping_mul(0xd6e8_feb8_6659_fd93);
        Content::new(self.ratio, seed).fill(body);
    }

    /// The seed of the draws of [`Attachments::fill_page_at`]: the database's, apart from
    /// init's.
    fn grown_seed(&self) -> u64 {
        splitmix(self.own_seed ^ 0x6772_6f77_7468_0001)
    }
}

/// wyrand's step: the state advances by this.
const WY_INCREMENT: u64 = 0xa076_1d64_78bd_642f;

/// wyrand's output of a state.
#[inline]
fn wymix(state: u64) -> u64 {
    let t = u128::from(state) * u128::from(state ^ 0xe703_7ed1_a0b4_28db);
    (t >> 64) as u64 ^ t as u64
}

/// The random bytes per chunk for a compression ratio: the chunk over the ratio, less what the
/// zero run costs a compressor; all of it at 1.0.
pub fn random_bytes_per_chunk(ratio: f64) -> usize {
    let ratio = if ratio.is_finite() {
        ratio.clamp(1.0, MAX_COMPRESSION_RATIO)
    } else {
        1.0
    };
    if ratio <= 1.0 {
        return CHUNK_BYTES;
    }
    let compressed = (CHUNK_BYTES as f64 / ratio).round() as usize;
    compressed
        .saturating_sub(RUN_COST_BYTES)
        .clamp(8, CHUNK_BYTES)
}

/// SplitMix64's finaliser: spreads a small seed over all 64 bits.
fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incompressible_content_is_all_random_and_compressible_content_has_zero_runs() {
        let mut plain = Content::new(1.0, 7);
        let mut out = vec![0u8; 4096];
        plain.fill(&mut out);
        // Random bytes: about 1 in 256 is zero.
        let zeros = out.iter().filter(|b| **b == 0).count();
        assert!(zeros < 64, "{zeros} zero bytes of 4096 at ratio 1");

        let mut half = Content::new(2.0, 7);
        // Cut in odd pieces: the pattern runs on across them.
        for piece in out.chunks_mut(777) {
            half.fill(piece);
        }
        let random = half.random_bytes_per_chunk();
        assert_eq!(random, 256 - RUN_COST_BYTES);
        for chunk in out.chunks(CHUNK_BYTES) {
            assert!(chunk[random..].iter().all(|b| *b == 0));
            assert!(chunk[..random].iter().filter(|b| **b != 0).count() > random * 9 / 10);
        }
    }

    #[test]
    fn two_seeds_never_give_the_same_words() {
        let mut a = Content::new(1.0, 1);
        let mut b = Content::new(1.0, 2);
        let (mut x, mut y) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
        a.fill(&mut x);
        b.fill(&mut y);
        let words = |v: &[u8]| -> std::collections::HashSet<u64> {
            v.chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
                .collect()
        };
        let (wx, wy) = (words(&x), words(&y));
        assert_eq!(wx.len(), x.len() / 8, "a stream repeats itself");
        assert_eq!(wx.intersection(&wy).count(), 0);
    }

    #[test]
    fn attachments_repeat_pool_pages_whole_and_keep_their_own_unique() {
        // Two databases drawing from one pool of 8 attachments: 90% of their attachments are
        // the pool's, so nearly all pages repeat (within and across), and own ones never.
        let pages = 4000usize;
        let mut seen = std::collections::HashMap::<Vec<u8>, u32>::new();
        for database in 0..2u64 {
            let mut lv = Attachments::new(2.0, 42, 1000 + database, 8);
            let mut body = vec![0u8; 1024];
            for _ in 0..pages {
                lv.fill_page(&mut body);
                *seen.entry(body.clone()).or_default() += 1;
            }
        }
        let total = 2 * pages as u32;
        let distinct = seen.len() as u32;
        let repeated = f64::from(total - distinct) / f64::from(total);
        // Own pages: 10% of all, each once; pool pages: 8 x 4 distinct.
        assert!((repeated - 0.9).abs() < 0.03, "{repeated}");
        assert!(distinct >= 32, "{distinct}");
        // Content keeps the compression setting's zero runs.
        let mut lv = Attachments::new(2.0, 42, 7, 8);
        let mut body = vec![0u8; 4096];
        lv.fill_page(&mut body);
        let zeros = body.iter().filter(|b| **b == 0).count();
        assert!((1900..2300).contains(&zeros), "{zeros}");
        assert_eq!(Attachments::pool_for(0.0), 1);
        assert_eq!(Attachments::pool_for(44_445.0), 100);
    }

    #[test]
    fn positioned_content_is_the_same_however_a_page_is_cut_and_keeps_the_pattern() {
        let content = PositionedContent::new(2.0, 5);
        let mut whole = vec![0u8; 32768];
        content.fill(9, 0, &mut whole);
        // Any cut at any offset gives the same bytes as the whole page.
        let mut pieces = vec![0xEEu8; 32768];
        let mut at = 0;
        let mut cut = 1usize;
        while at < pieces.len() {
            let end = (at + cut).min(pieces.len());
            content.fill(9, at, &mut pieces[at..end]);
            at = end;
            cut = cut * 7 % 1999 + 1;
        }
        assert!(whole == pieces);
        // The pattern of `Content` at fixed chunks: random, then zeros.
        let random = random_bytes_per_chunk(2.0);
        for chunk in whole.chunks(CHUNK_BYTES) {
            assert!(chunk[random..].iter().all(|b| *b == 0));
            assert!(chunk[..random].iter().filter(|b| **b != 0).count() > random * 9 / 10);
        }
        // Another page, another seed: other words.
        let words = |v: &[u8]| -> std::collections::HashSet<u64> {
            v.chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
                .filter(|w| *w != 0)
                .collect()
        };
        let mut other_page = vec![0u8; 32768];
        content.fill(10, 0, &mut other_page);
        let mut other_seed = vec![0u8; 32768];
        PositionedContent::new(2.0, 6).fill(9, 0, &mut other_seed);
        let w = words(&whole);
        assert!(w.len() > 32768 / 8 / 2 - 64, "{}", w.len());
        assert_eq!(w.intersection(&words(&other_page)).count(), 0);
        assert_eq!(w.intersection(&words(&other_seed)).count(), 0);
        // At 1.0 every byte is random.
        let mut plain = vec![0u8; 4096];
        PositionedContent::new(1.0, 5).fill(3, 100, &mut plain);
        assert!(plain.iter().filter(|b| **b == 0).count() < 64);
    }

    #[test]
    fn a_runs_attachments_copy_inits_pool_and_keep_their_own_unique() {
        // Init's pages of database 0 (drawn in order) and a run's pages of database 1 (drawn by
        // their place in the file): the run's pool pages are init's pages, its own ones new.
        let (pool, body) = (8, 1024);
        let mut init = Attachments::new(2.0, 42, 1000, pool);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..4000 {
            let mut page = vec![0u8; body];
            init.fill_page(&mut page);
            seen.insert(page);
        }
        let run = Attachments::new(2.0, 42, 1001, pool);
        let (mut copies, mut own) = (0, std::collections::HashSet::new());
        for page in 5000..9000u64 {
            let mut bytes = vec![0u8; body];
            run.fill_page_at(page, &mut bytes);
            let mut again = vec![0u8; body];
            run.fill_page_at(page, &mut again);
            assert!(bytes == again, "page {page}: not the same twice");
            if seen.contains(&bytes) {
                copies += 1;
            } else {
                assert!(own.insert(bytes), "page {page}: an own page repeats");
            }
        }
        let share = f64::from(copies) / 4000.0;
        assert!((share - 0.9).abs() < 0.03, "{share}");
    }

    #[test]
    fn ratios_out_of_range_are_clamped() {
        assert_eq!(random_bytes_per_chunk(0.5), CHUNK_BYTES);
        assert_eq!(random_bytes_per_chunk(f64::NAN), CHUNK_BYTES);
        assert_eq!(
            random_bytes_per_chunk(1000.0),
            random_bytes_per_chunk(MAX_COMPRESSION_RATIO)
        );
        assert!(random_bytes_per_chunk(MAX_COMPRESSION_RATIO) >= 56);
    }
}
