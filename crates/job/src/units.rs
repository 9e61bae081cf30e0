//! Sizes and durations as users write them in job files and flags: "32KiB", "1.5GB", "90s", "2h".

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A byte count. Parses units as written: binary `KiB`, `MiB`, `GiB`, `TiB` (2^10, 2^20, 2^30,
/// 2^40) and decimal `KB`, `MB`, `GB`, `TB` (10^3, 10^6, 10^9, 10^12), so "1.5GB" is
/// 1,500,000,000 bytes and "1.5GiB" 1,610,612,736; a bare number is bytes. Prints in the largest
/// binary unit that divides it exactly, else the largest decimal one, else bytes, so a written
/// job file reads as a person would write it and reads back to the same count.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub const KIB: u64 = 1024;
    pub const MIB: u64 = 1024 * 1024;
    pub const GIB: u64 = 1024 * 1024 * 1024;

    pub fn kib(n: u64) -> ByteSize {
        ByteSize(n * Self::KIB)
    }
    pub fn mib(n: u64) -> ByteSize {
        ByteSize(n * Self::MIB)
    }
    pub fn gib(n: u64) -> ByteSize {
        ByteSize(n * Self::GIB)
    }
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        // Decimal and binary as written (issue 32, item 10): a vendor's "1.5GB mailbox" is 10^9
        // bytes, as the reference reports and Microsoft's calculators mean it. Until 2026-12-02
        // "KB", "MB", "GB" were read as binary; every job under jobs/ and every test writes the
        // binary units, so they mean what they meant.
        let config = parse_size::Config::new();
        config.parse_size(text.trim()).map(ByteSize).map_err(|e| {
            format!("`{text}` is not a size ({e}); write a number with a unit, like 32KiB, 256MiB or 1GiB (binary, 2^10, 2^20, 2^30) or 1.5GB (decimal, 10^9)")
        })
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = [
            (1u64 << 40, "TiB"),
            (Self::GIB, "GiB"),
            (Self::MIB, "MiB"),
            (Self::KIB, "KiB"),
        ];
        let decimal = [
            (1_000_000_000_000u64, "TB"),
            (1_000_000_000, "GB"),
            (1_000_000, "MB"),
            (1_000, "KB"),
        ];
        for (unit, name) in units.into_iter().chain(decimal) {
            if self.0 >= unit && self.0.is_multiple_of(unit) {
                return write!(f, "{}{}", self.0 / unit, name);
            }
        }
        write!(f, "{}B", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(ByteSize(n)),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// A duration written as "90s", "15m", "2h 30m".
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Span(pub Duration);

impl Span {
    pub fn secs(n: u64) -> Span {
        Span(Duration::from_secs(n))
    }
    pub fn as_duration(self) -> Duration {
        self.0
    }
}

impl std::str::FromStr for Span {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(text.trim()).map(Span).map_err(|e| {
            format!("`{text}` is not a duration ({e}); write a number with a unit, like 90s, 15m or 2h")
        })
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!("32KiB".parse::<ByteSize>(), Ok(ByteSize(32768)));
        assert_eq!("32KB".parse::<ByteSize>(), Ok(ByteSize(32_000)));
        assert_eq!("1 GiB".parse::<ByteSize>(), Ok(ByteSize(1 << 30)));
        assert_eq!("1.5GB".parse::<ByteSize>(), Ok(ByteSize(1_500_000_000)));
        assert_eq!("1.5GiB".parse::<ByteSize>(), Ok(ByteSize(3 << 29)));
        assert_eq!("256MB".parse::<ByteSize>(), Ok(ByteSize(256_000_000)));
        assert_eq!("4096".parse::<ByteSize>(), Ok(ByteSize(4096)));
        assert!("lots".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize(256 << 20).to_string(), "256MiB");
        assert_eq!(ByteSize(1000).to_string(), "1KB");
        assert_eq!(ByteSize(1001).to_string(), "1001B");
        assert_eq!(ByteSize(1_500_000_000).to_string(), "1500MB");
        assert_eq!(ByteSize(3 << 30).to_string(), "3GiB");
        // Printed sizes read back to the same count, binary or decimal.
        for bytes in [1000, 32_000, 1_500_000_000, 3 << 29, 4096, 12_345] {
            let printed = ByteSize(bytes).to_string();
            assert_eq!(
                printed.parse::<ByteSize>(),
                Ok(ByteSize(bytes)),
                "{printed}"
            );
        }
    }

    #[test]
    fn spans_parse_and_print() {
        assert_eq!("90s".parse::<Span>(), Ok(Span::secs(90)));
        assert_eq!("2h".parse::<Span>(), Ok(Span::secs(7200)));
        assert!("soon".parse::<Span>().is_err());
        assert_eq!(
            "15s".parse::<Span>().map(|s| s.to_string()),
            Ok("15s".into())
        );
    }
}
