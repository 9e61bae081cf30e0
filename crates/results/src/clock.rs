//! Wall-clock times as `result.json` and `--start-at` write them.
//!
//! Many hosts measure one window only if they agree on when it starts, and the only thing they
//! share is the wall clock (kept in step by NTP or PTP). So a start time is a point on the host's
//! `SystemTime`, given as RFC 3339 (`2026-11-26T23:40:00Z`, `2026-11-26 23:40:00+01:00`, with or
//! without a fraction of a second) or as Unix seconds (`1795736400`, `1795736400.250`), and
//! results write their times as RFC 3339 UTC with milliseconds, so samples of many hosts line up
//! to the millisecond.
//!
//! The parser is ours (not `humantime`'s, which takes UTC only) because `date --rfc-3339=seconds`
//! and most schedulers write an offset and a space instead of the `T`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `time` as RFC 3339 UTC with milliseconds: `2026-11-26T23:40:00.000Z`.
pub fn rfc3339_millis(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}

/// Signed milliseconds from `earlier` to `later` (negative when `later` is before `earlier`).
pub fn millis_between(earlier: SystemTime, later: SystemTime) -> f64 {
    match later.duration_since(earlier) {
        Ok(ahead) => ahead.as_secs_f64() * 1e3,
        Err(behind) => -behind.duration().as_secs_f64() * 1e3,
    }
}

/// Parses a start time: Unix seconds, or RFC 3339 (`T`, `t` or a space between date and time;
/// `Z`, `z` or `±HH:MM` after it). The error says what is accepted.
pub fn parse_time(text: &str) -> Result<SystemTime, String> {
    let text = text.trim();
    let explain = || {
        format!(
            "`{text}` is not a time; give RFC 3339 like 2026-11-26T23:40:00Z or \
             2026-11-26 23:40:00+01:00, or Unix seconds like 1795736400"
        )
    };
    if text.is_empty() {
        return Err(explain());
    }
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let seconds: f64 = text.parse().map_err(|_| explain())?;
        if !seconds.is_finite() || seconds > 1e11 {
            return Err(explain());
        }
        return Ok(UNIX_EPOCH + Duration::from_secs_f64(seconds));
    }
    parse_rfc3339(text).ok_or_else(explain)
}

fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let bytes = text.as_bytes();
    let number = |from: usize, len: usize| -> Option<i64> {
        let part = text.get(from..from + len)?;
        if !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let at = |index: usize| bytes.get(index).copied();
    let year = number(0, 4)?;
    let month = number(5, 2)?;
    let day = number(8, 2)?;
    let hour = number(11, 2)?;
    let minute = number(14, 2)?;
    let second = number(17, 2)?;
    if at(4) != Some(b'-')
        || at(7) != Some(b'-')
        || !matches!(at(10), Some(b'T' | b't' | b' '))
        || at(13) != Some(b':')
        || at(16) != Some(b':')
    {
        return None;
    }
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut index = 19;
    let mut nanos: u64 = 0;
    if at(index) == Some(b'.') {
        index += 1;
        let digits_from = index;
        while at(index).is_some_and(|b| b.is_ascii_digit()) {
            index += 1;
        }
        let digits = text.get(digits_from..index)?;
        if digits.is_empty() {
            return None;
        }
        // Nanoseconds: the first nine digits, padded.
        let mut scaled = String::from(digits);
        scaled.truncate(9);
        while scaled.len() < 9 {
            scaled.push('0');
        }
        nanos = scaled.parse().ok()?;
    }
    let offset_seconds: i64 = match text.get(index..)? {
        "Z" | "z" => 0,
        rest => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes().get(3) != Some(&b':') {
                return None;
            }
            let hours = number(index + 1, 2)?;
            let minutes = number(index + 4, 2)?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            sign * (hours * 3600 + minutes * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_seconds;
    let seconds = u64::try_from(seconds).ok()?;
    Some(UNIX_EPOCH + Duration::new(seconds, nanos as u32))
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the civil date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unix(seconds: u64, nanos: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(seconds, nanos)
    }

    #[test]
    fn rfc3339_forms_and_unix_seconds_name_the_same_instant() {
        // 2026-11-26T23:40:00Z = 1795736400 (checked with `date -u -d @1795736400`).
        let instant = unix(1_795_736_400, 0);
        for text in [
            "2026-11-26T23:40:00Z",
            "2026-11-26t23:40:00z",
            "2026-11-26 23:40:00+00:00",
            "2026-11-27T00:40:00+01:00",
            "2026-11-26T18:40:00-05:00",
            "1795736400",
            " 1795736400 ",
        ] {
            assert_eq!(parse_time(text), Ok(instant), "{text}");
        }
        assert_eq!(
            parse_time("2026-11-26T23:40:00.25Z"),
            Ok(unix(1_795_736_400, 250_000_000))
        );
        assert_eq!(
            parse_time("1795736400.5"),
            Ok(unix(1_795_736_400, 500_000_000))
        );
        assert_eq!(
            parse_time("2024-02-29T00:00:00Z"),
            Ok(unix(1_709_164_800, 0))
        );
    }

    #[test]
    fn nonsense_is_refused_with_the_accepted_forms() {
        for text in [
            "",
            "tomorrow",
            "2026-11-26",
            "2026-11-26T23:40:00",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-11-26T24:00:00Z",
            "2026-11-26T23:40:00+1:00",
            "2026-11-26T23:40:00.Z",
            "1e9",
            "99999999999999",
        ] {
            let error = parse_time(text).expect_err(text);
            assert!(error.contains("RFC 3339"), "{text}: {error}");
        }
    }

    #[test]
    fn milliseconds_round_trip() {
        let time = unix(1_795_736_400, 123_000_000);
        let text = rfc3339_millis(time);
        assert_eq!(text, "2026-11-26T23:40:00.123Z");
        assert_eq!(parse_time(&text), Ok(time));
        assert_eq!(millis_between(time, unix(1_795_736_400, 0)), -123.0);
        assert_eq!(millis_between(unix(1_795_736_400, 0), time), 123.0);
    }
}
