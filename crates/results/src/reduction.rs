//! Data reduction figures (issue 33): how far an array that compresses and deduplicates inline
//! could reduce what a test wrote, measured on the database files themselves.
//!
//! `init` measures the pages as it writes them, `checksum` as it reads them; both give one
//! figure per database and one across all of them (`result.json` `data_reduction`, the
//! reports' "Data Reduction" section). How the figures are taken: `docs/design.md`, "Content and
//! data reduction".

use serde::{Deserialize, Serialize};

/// What the job asked for and how the figures were taken.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReductionSetting {
    /// `workload.compression_ratio`: the ratio the content was made to compress at.
    pub compression_ratio: f64,
    /// `workload.dedup_ratio`: the share of repeated blocks asked for (1.0: none).
    pub dedup_ratio: f64,
    /// `workload.dedup_unit`: the array's block; both figures are taken on blocks of this size,
    /// aligned to it in the file.
    pub dedup_unit_bytes: u64,
    /// The compressor the compression figure was taken with ("zstd level 1").
    pub compressor: String,
}

/// The figures of one database file, or of all of them together.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReductionFigures {
    /// Whole `dedup_unit` blocks of the file(s) measured.
    pub blocks: u64,
    /// Blocks compressed (a sample spread over the file, chosen by position).
    pub blocks_compressed: u64,
    /// Bytes of the compressed blocks over their compressed size.
    pub compression_ratio: f64,
    /// Half the 95% confidence interval of `compression_ratio`, in percent of it (from the
    /// sample's own spread; 0 when every block was compressed).
    pub compression_ratio_ci95_percent: f64,
    /// Blocks whose content was compared for duplicates: every block whose content hash falls
    /// in the sampled share (all of them below ~4 million blocks in the job), so that every copy
    /// of a content is in the sample or none is.
    pub blocks_hashed: u64,
    /// Of those, blocks whose content occurs earlier: what deduplication removes.
    pub duplicate_blocks: u64,
    /// `duplicate_blocks` over `blocks_hashed`.
    pub duplicate_share: f64,
    /// Blocks over distinct blocks (1.0: nothing repeats).
    pub dedup_ratio: f64,
    /// Of the hashed blocks, those that are all zeros (counted among the duplicates when more
    /// than one).
    pub zero_blocks: u64,
}

/// One database's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatabaseReduction {
    /// The instance's name.
    pub instance: String,
    #[serde(flatten)]
    pub figures: ReductionFigures,
}

/// `result.json` `data_reduction` (init and checksum; absent from older results).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataReduction {
    pub setting: ReductionSetting,
    /// One per database, in the job's order.
    pub databases: Vec<DatabaseReduction>,
    /// All databases together: a block that occurs in two databases counts as a duplicate
    /// here, never in either database's own figure.
    pub across_databases: ReductionFigures,
}

impl DataReduction {
    /// The report's table: one row per database, then "(All)", with the setting's columns.
    pub fn table_rows(&self) -> Vec<[String; 6]> {
        let row = |name: &str, f: &ReductionFigures| {
            [
                name.to_string(),
                format!("{:.2}", f.compression_ratio),
                format!("±{:.1}%", f.compression_ratio_ci95_percent),
                format!("{:.2}%", f.duplicate_share * 100.0),
                format!("{:.3}", f.dedup_ratio),
                f.blocks.to_string(),
            ]
        };
        let mut rows: Vec<[String; 6]> = self
            .databases
            .iter()
            .map(|d| row(&d.instance, &d.figures))
            .collect();
        rows.push(row("(All)", &self.across_databases));
        rows
    }

    /// One sentence: what was asked and what was measured across all databases.
    pub fn summary(&self) -> String {
        let s = &self.setting;
        let all = &self.across_databases;
        format!(
            "Content set to compress {:.2}:1 with dedup ratio {:.2} on {} blocks; measured ({} on {} blocks): compression {:.2}:1 (±{:.1}%), {:.2}% of blocks duplicated across all databases (dedup {:.3}:1)",
            s.compression_ratio,
            s.dedup_ratio,
            unit_label(s.dedup_unit_bytes),
            s.compressor,
            unit_label(s.dedup_unit_bytes),
            all.compression_ratio,
            all.compression_ratio_ci95_percent,
            all.duplicate_share * 100.0,
            all.dedup_ratio,
        )
    }
}

/// The header of [`DataReduction::table_rows`].
pub const TABLE_HEADER: [&str; 6] = [
    "Database",
    "Compression ratio",
    "95% interval",
    "Duplicate blocks",
    "Dedup ratio",
    "Blocks",
];

/// "8 KiB", "512 B": a block size as the tables print it.
pub fn unit_label(bytes: u64) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}
