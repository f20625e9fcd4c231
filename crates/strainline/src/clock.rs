//! Wall-clock timestamps for the results store and reports, as RFC 3339 UTC text
//! (`2026-11-20T23:00:00.123Z`), and the calendar where a user writes a date: the `jiff`
//! crate's, not our own arithmetic.

use std::time::SystemTime;

use jiff::Timestamp;

/// Now, as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    format_rfc3339(SystemTime::now())
}

pub fn format_rfc3339(t: SystemTime) -> String {
    let ts = Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH);
    ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Seconds since 1970-01-01 UTC as `2026-11-22 09:00` (with seconds when asked).
pub fn utc_minute(unix_seconds: i64, with_seconds: bool) -> String {
    let ts = Timestamp::from_second(unix_seconds).unwrap_or(Timestamp::UNIX_EPOCH);
    let f = if with_seconds {
        "%Y-%m-%d %H:%M:%S"
    } else {
        "%Y-%m-%d %H:%M"
    };
    ts.strftime(f).to_string()
}

/// Whether `s` is a real date (`2026-11-01`), a date and time (`2026-11-01 08:00`,
/// `…T08:00:00`) or an RFC 3339 instant (`…Z`, `…+01:00`, a leap second included).
pub fn is_date_or_time(s: &str) -> bool {
    // The shape the store's text comparison needs (jiff alone would also take ISO's
    // basic format, 20261101, which sorts wrong against stored times)…
    let shape = regex_lite::Regex::new(
        r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?$",
    )
    .expect("a valid pattern");
    // …and a real calendar day and time (jiff takes a leap second as the second
    // before it; a 61st second is no time).
    shape.is_match(s)
        && (s.parse::<jiff::civil::Date>().is_ok()
            || s.parse::<jiff::civil::DateTime>().is_ok()
            || s.parse::<Timestamp>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // `date -u -d @1795215600.25` → 2026-11-20T23:00:00Z
        let t = UNIX_EPOCH + Duration::from_millis(1_795_215_600_250);
        assert_eq!(format_rfc3339(t), "2026-11-20T23:00:00.250Z");
        // A leap day.
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(format_rfc3339(t), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc_minute(1_795_215_659, false), "2026-11-20 23:00");
        assert_eq!(utc_minute(1_795_215_659, true), "2026-11-20 23:00:59");
    }
}
