//! Sizes and durations as users write them in job files and flags: "32KiB", "1.5GB", "90s", "2h".

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A byte count. Parses "32KiB", "256 MiB", "1GB", "4096"; prints in the largest binary unit that
/// divides it exactly, so a written job file reads as a person would write it.
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
        let config = parse_size::Config::new().with_binary();
        // "32KiB" and "32KB" both mean 32768: storage people write KB for KiB, and so did
        // Jetstress. A decimal reading is asked for with an explicit "kB"-free number of bytes.
        config.parse_size(text.trim()).map(ByteSize).map_err(|e| {
            format!("`{text}` is not a size ({e}); write a number with a unit, like 32KiB, 256MiB or 1GiB")
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
        for (unit, name) in units {
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
        assert_eq!("32KB".parse::<ByteSize>(), Ok(ByteSize(32768)));
        assert_eq!("1 GiB".parse::<ByteSize>(), Ok(ByteSize(1 << 30)));
        assert_eq!("4096".parse::<ByteSize>(), Ok(ByteSize(4096)));
        assert!("lots".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize(256 << 20).to_string(), "256MiB");
        assert_eq!(ByteSize(1000).to_string(), "1000B");
        assert_eq!(ByteSize(3 << 30).to_string(), "3GiB");
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
