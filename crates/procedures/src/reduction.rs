//! Measuring how far an array could reduce the database files (issue 33): a compression ratio
//! and a share of duplicate blocks, on blocks of the job's `workload.dedup_unit` aligned to it in
//! the file, as an array that deduplicates and compresses in fixed blocks sees them.
//!
//! `init` feeds every batch of pages it writes ([`Meter::observe`], from the bulk loader's
//! meter thread) and `checksum` every chunk it reads; the figures cover the whole file (page
//! headers, checksums, free space and free pages included: what the array stores).
//!
//! * **Compression**: zstd at level 1 (a fast LZ compressor, as arrays use) on each block of a
//!   sample chosen by the block's *position* (a hash of its index under a fixed key, so the
//!   sample does not depend on content or on the order chunks arrive): at most
//!   [`COMPRESSED_BLOCKS_TARGET`] blocks per file, spread over it. The ratio is the sample's
//!   bytes over their compressed size; its 95% interval comes from the spread of the compressed
//!   sizes (normal approximation, finite-population corrected). With 16,384 blocks the interval
//!   is within ±2% unless the compressed sizes vary by more than their mean.
//! * **Duplicates**: every block's content is hashed (XXH3-128); a block is kept when its hash
//!   falls in the first [`Meter::keep_share`] of the hash space, the same share for every
//!   database of a job, so every copy of a content is kept or none is, and the share of
//!   duplicates among the kept blocks estimates the share among all ("content-defined
//!   sampling"). The share keeps at most [`HASHED_BLOCKS_TARGET`] blocks for the whole job (8
//!   bytes each): all of them for jobs up to 32 GiB of 8 KiB blocks. A kept block is a
//!   duplicate when its content occurs earlier in the file (per database) or in any database
//!   (across databases).
//! * Blocks that are not whole (a file whose size is not a multiple of the unit) are left out.

use std::collections::HashMap;

use jetproof_results::reduction::{
    DataReduction, DatabaseReduction, ReductionFigures, ReductionSetting,
};

/// Blocks compressed per file, at most.
pub const COMPRESSED_BLOCKS_TARGET: u64 = 16_384;

/// Blocks kept for the duplicate count across the whole job, at most (8 bytes each).
pub const HASHED_BLOCKS_TARGET: u64 = 4 << 20;

/// The compressor, as the figures name it.
pub const COMPRESSOR: &str = "zstd level 1";

/// Key of the position hash that picks the compressed sample.
const SAMPLE_KEY: u64 = 0x6a09_e667_f3bc_c908;

/// The measurement of one database file.
pub struct Meter {
    unit: usize,
    /// A block is compressed when the position hash of its index is below this.
    compress_below: u64,
    /// A block's content is kept when its hash's low word is below this.
    keep_below: u64,
    compressor: zstd::bulk::Compressor<'static>,
    out: Vec<u8>,
    zero_hash: u128,
    blocks: u64,
    compressed: u64,
    compressed_bytes: f64,
    compressed_bytes_squared: f64,
    /// Kept content hashes (the high word: independent of the low word that chose them).
    kept: Vec<u64>,
    zero_blocks: u64,
    /// Blocks seen only in part so far (a chunk edge inside a block): index → bytes, with how
    /// many of them are filled.
    partial: HashMap<u64, (Vec<u8>, usize)>,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter")
            .field("unit", &self.unit)
            .field("blocks", &self.blocks)
            .finish()
    }
}

impl Meter {
    /// A meter of a file of about `file_bytes`, in a job of `job_bytes` in all, on blocks of
    /// `unit` bytes (a power of two).
    pub fn new(unit: usize, file_bytes: u64, job_bytes: u64) -> std::io::Result<Meter> {
        let unit = unit.max(512);
        let file_blocks = (file_bytes / unit as u64).max(1);
        let job_blocks = (job_bytes / unit as u64).max(1);
        let mut compressor = zstd::bulk::Compressor::new(1)?;
        // One block at a time: no checksum, the size known; the figure is the payload's.
        compressor.include_checksum(false)?;
        compressor.include_contentsize(false)?;
        Ok(Meter {
            unit,
            compress_below: share_threshold(COMPRESSED_BLOCKS_TARGET, file_blocks),
            keep_below: share_threshold(HASHED_BLOCKS_TARGET, job_blocks),
            compressor,
            out: Vec::with_capacity(zstd::compress_bound(unit)),
            zero_hash: xxhash_rust::xxh3::xxh3_128(&vec![0u8; unit]),
            blocks: 0,
            compressed: 0,
            compressed_bytes: 0.0,
            compressed_bytes_squared: 0.0,
            kept: Vec::new(),
            zero_blocks: 0,
            partial: HashMap::new(),
        })
    }

    /// The share of the hash space whose blocks are kept for the duplicate count.
    pub fn keep_share(&self) -> f64 {
        (self.keep_below as f64 / u64::MAX as f64).min(1.0)
    }

    /// Measures the bytes of the file at `offset..offset + bytes.len()`. Chunks may come in any
    /// order; a block cut by a chunk's edge is measured once all of it has been seen.
    pub fn observe(&mut self, offset: u64, bytes: &[u8]) {
        let unit = self.unit as u64;
        let end = offset + bytes.len() as u64;
        let mut at = offset;
        while at < end {
            let index = at / unit;
            let block_start = index * unit;
            let block_end = block_start + unit;
            let from = (at - offset) as usize;
            let to = (block_end.min(end) - offset) as usize;
            let Some(piece) = bytes.get(from..to) else {
                break;
            };
            if block_start == at && block_end <= end {
                self.measure(index, piece);
            } else {
                self.add_partial(index, (at - block_start) as usize, piece);
            }
            at = block_end.min(end);
        }
    }

    fn add_partial(&mut self, index: u64, within: usize, piece: &[u8]) {
        let unit = self.unit;
        let entry = self
            .partial
            .entry(index)
            .or_insert_with(|| (vec![0u8; unit], 0));
        if let Some(dst) = entry.0.get_mut(within..within + piece.len()) {
            dst.copy_from_slice(piece);
            entry.1 += piece.len();
        }
        if entry.1 >= unit
            && let Some((block, _)) = self.partial.remove(&index)
        {
            self.measure(index, &block);
        }
    }

    fn measure(&mut self, index: u64, block: &[u8]) {
        self.blocks += 1;
        let hash = xxhash_rust::xxh3::xxh3_128(block);
        if (hash as u64) < self.keep_below {
            self.kept.push((hash >> 64) as u64);
            if hash == self.zero_hash {
                self.zero_blocks += 1;
            }
        }
        if position_hash(index) < self.compress_below {
            self.out.clear();
            // A block the compressor cannot take counts as stored whole.
            let size = match self.compressor.compress_to_buffer(block, &mut self.out) {
                Ok(size) => size.min(block.len()),
                Err(_) => block.len(),
            } as f64;
            self.compressed += 1;
            self.compressed_bytes += size;
            self.compressed_bytes_squared += size * size;
        }
    }

    /// The figures of this file, and its kept hashes for the figure across databases.
    pub fn finish(mut self, total_blocks: u64) -> (ReductionFigures, Vec<u64>) {
        let unit = self.unit as f64;
        let compression_ratio = if self.compressed_bytes > 0.0 {
            self.compressed as f64 * unit / self.compressed_bytes
        } else {
            1.0
        };
        let ci = relative_ci95(
            self.compressed,
            self.compressed_bytes,
            self.compressed_bytes_squared,
            total_blocks.max(self.blocks),
        );
        self.kept.sort_unstable();
        let duplicates = duplicates_in_sorted(&self.kept);
        let hashed = self.kept.len() as u64;
        let figures = ReductionFigures {
            blocks: self.blocks,
            blocks_compressed: self.compressed,
            compression_ratio,
            compression_ratio_ci95_percent: ci * 100.0,
            blocks_hashed: hashed,
            duplicate_blocks: duplicates,
            duplicate_share: share(duplicates, hashed),
            dedup_ratio: ratio(hashed, hashed - duplicates),
            zero_blocks: self.zero_blocks,
        };
        (figures, self.kept)
    }
}

/// The parts of one file's figures needed to combine files.
#[derive(Debug)]
pub struct Measured {
    pub instance: String,
    pub figures: ReductionFigures,
    pub kept: Vec<u64>,
}

/// The `data_reduction` of a result from each file's measurement.
pub fn combine(setting: ReductionSetting, files: Vec<Measured>) -> DataReduction {
    let mut all = ReductionFigures::default();
    let mut compressed_bytes = 0.0;
    let mut kept: Vec<u64> = Vec::new();
    let mut variance_terms = 0.0;
    for file in &files {
        let f = &file.figures;
        all.blocks += f.blocks;
        all.blocks_compressed += f.blocks_compressed;
        all.zero_blocks += f.zero_blocks;
        compressed_bytes += f.blocks_compressed as f64 * setting.dedup_unit_bytes as f64
            / f.compression_ratio.max(f64::MIN_POSITIVE);
        // Files sampled at different rates: the interval of the pooled ratio from each file's
        // own (weighted by its compressed bytes).
        let part = f.compression_ratio_ci95_percent
            * (f.blocks_compressed as f64 / f.compression_ratio.max(f64::MIN_POSITIVE));
        variance_terms += part * part;
        kept.extend_from_slice(&file.kept);
    }
    let unit = setting.dedup_unit_bytes as f64;
    all.compression_ratio = if compressed_bytes > 0.0 {
        all.blocks_compressed as f64 * unit / compressed_bytes
    } else {
        1.0
    };
    let weight: f64 = files
        .iter()
        .map(|f| f.figures.blocks_compressed as f64 / f.figures.compression_ratio.max(1e-9))
        .sum();
    all.compression_ratio_ci95_percent = if weight > 0.0 {
        variance_terms.sqrt() / weight
    } else {
        0.0
    };
    kept.sort_unstable();
    let hashed = kept.len() as u64;
    let duplicates = duplicates_in_sorted(&kept);
    all.blocks_hashed = hashed;
    all.duplicate_blocks = duplicates;
    all.duplicate_share = share(duplicates, hashed);
    all.dedup_ratio = ratio(hashed, hashed - duplicates);
    DataReduction {
        setting,
        databases: files
            .into_iter()
            .map(|f| DatabaseReduction {
                instance: f.instance,
                figures: f.figures,
            })
            .collect(),
        across_databases: all,
    }
}

/// The setting of a job, as the figures record it.
pub fn setting_of(job: &jetproof_job::Job) -> ReductionSetting {
    ReductionSetting {
        compression_ratio: job.workload.compression_ratio,
        dedup_ratio: job.workload.dedup_ratio,
        dedup_unit_bytes: job.workload.dedup_unit.bytes(),
        compressor: COMPRESSOR.to_string(),
    }
}

/// Entries of a sorted list equal to the one before them.
fn duplicates_in_sorted(sorted: &[u64]) -> u64 {
    sorted.windows(2).filter(|w| w[0] == w[1]).count() as u64
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn ratio(whole: u64, distinct: u64) -> f64 {
    if distinct == 0 {
        1.0
    } else {
        whole as f64 / distinct as f64
    }
}

/// The threshold below which a uniform 64-bit hash falls for `target` of `population` items
/// (all of them when the population is no larger).
fn share_threshold(target: u64, population: u64) -> u64 {
    if population <= target {
        u64::MAX
    } else {
        ((target as f64 / population as f64) * u64::MAX as f64) as u64
    }
}

/// A fixed, well-mixed hash of a block's index (SplitMix64 of the index under a key).
fn position_hash(index: u64) -> u64 {
    let mut z = (index ^ SAMPLE_KEY).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Half the 95% interval of `n · unit / Σ sizes`, relative to it: the relative standard error
/// of the mean compressed size (finite-population corrected), times 1.96.
fn relative_ci95(n: u64, sum: f64, sum_squared: f64, population: u64) -> f64 {
    if n < 2 || sum <= 0.0 {
        return 0.0;
    }
    let count = n as f64;
    let mean = sum / count;
    let variance = ((sum_squared - count * mean * mean) / (count - 1.0)).max(0.0);
    let correction = (1.0 - count / population.max(n) as f64).max(0.0);
    1.96 * (variance / count * correction).sqrt() / mean
}

#[cfg(test)]
mod tests {
    use super::*;
    use jetproof_workload::content::Content;

    fn measure(
        bytes: &[u8],
        unit: usize,
        chunk: usize,
        job_bytes: u64,
    ) -> (ReductionFigures, Vec<u64>) {
        let mut meter =
            Meter::new(unit, bytes.len() as u64, job_bytes).unwrap_or_else(|e| panic!("{e}"));
        // Chunks in reverse order, edges inside blocks.
        let mut offsets: Vec<usize> = (0..bytes.len()).step_by(chunk).collect();
        offsets.reverse();
        for at in offsets {
            let end = (at + chunk).min(bytes.len());
            meter.observe(at as u64, &bytes[at..end]);
        }
        meter.finish((bytes.len() / unit) as u64)
    }

    #[test]
    fn repeated_blocks_are_counted_whatever_the_chunking() {
        let unit = 4096;
        let mut content = Content::new(1.0, 3);
        let mut data = vec![0u8; 64 * unit];
        content.fill(&mut data);
        // Blocks 10..20 repeat blocks 0..10; blocks 30 and 31 are zeros.
        let (head, tail) = data.split_at_mut(10 * unit);
        tail[..10 * unit].copy_from_slice(head);
        data[30 * unit..32 * unit].fill(0);
        for chunk in [unit, 3 * unit + 512, 7 * unit - 4096 + 100, data.len()] {
            let (f, kept) = measure(&data, unit, chunk, data.len() as u64);
            assert_eq!(f.blocks, 64, "chunk {chunk}");
            assert_eq!(f.blocks_hashed, 64);
            assert_eq!(kept.len(), 64);
            assert_eq!(f.duplicate_blocks, 11, "chunk {chunk}");
            assert_eq!(f.zero_blocks, 2);
            assert!((f.dedup_ratio - 64.0 / 53.0).abs() < 1e-9);
        }
    }

    #[test]
    fn the_compression_figure_follows_the_content_and_two_files_combine() {
        let unit = 8192;
        let mut files = Vec::new();
        for (seed, ratio) in [(1u64, 1.0f64), (2, 4.0)] {
            let mut data = vec![0u8; 512 * unit];
            Content::new(ratio, seed).fill(&mut data);
            let (figures, kept) = measure(&data, unit, 1 << 20, 2 * data.len() as u64);
            assert!(
                (figures.compression_ratio / ratio - 1.0).abs() < 0.05,
                "{ratio}: {figures:?}"
            );
            assert_eq!(figures.duplicate_blocks, 0);
            files.push(Measured {
                instance: format!("db{seed}"),
                figures,
                kept,
            });
        }
        let setting = ReductionSetting {
            compression_ratio: 2.0,
            dedup_ratio: 1.0,
            dedup_unit_bytes: unit as u64,
            compressor: COMPRESSOR.into(),
        };
        let all = combine(setting, files).across_databases;
        // Half the blocks at 1:1, half at 4:1: 2 blocks in 1.25 blocks' bytes.
        assert!((all.compression_ratio - 1.6).abs() < 0.08, "{all:?}");
        assert_eq!(all.blocks, 1024);
        assert_eq!(all.duplicate_blocks, 0);
    }

    #[test]
    fn a_large_file_is_sampled_and_the_interval_is_within_two_percent() {
        let unit = 4096;
        let mut data = vec![0u8; 50_000 * unit];
        Content::new(2.0, 9).fill(&mut data);
        let (f, _) = measure(&data, unit, 1 << 20, 1 << 40);
        assert!(f.blocks_compressed < f.blocks / 2, "{f:?}");
        assert!(
            f.blocks_compressed > COMPRESSED_BLOCKS_TARGET * 9 / 10,
            "{f:?}"
        );
        assert!(f.compression_ratio_ci95_percent < 2.0, "{f:?}");
        assert!(f.compression_ratio_ci95_percent > 0.0, "{f:?}");
        // A job of 2^40 bytes keeps 4 Mi of its 268 Mi blocks: about 1 in 64.
        assert!(
            f.blocks_hashed > 50_000 / 100 && f.blocks_hashed < 50_000 / 30,
            "{f:?}"
        );
    }
}
