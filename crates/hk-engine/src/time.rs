//! Time, said once: the clock read, calendar fields of a timestamp, and durations in words.
//!
//! Owns: [`now`] (the one clock read for journals and live panes), the UTC calendar of a
//! [`Timestamp`] and its reverse (on jiff: no calendar arithmetic is written here), and
//! [`span`], the one rendering of a duration for people.
//! Must not: hold state or decide anything; the run machine never calls [`now`] (callers
//! stamp its events).

use std::time::Duration;

use std::fmt;

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, UTC. The machine never reads the clock; callers stamp
/// each event when it happens (the journal offers `journal::now()`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl fmt::Display for Timestamp {
    /// RFC 3339 in UTC with milliseconds, e.g. `2026-09-07T10:15:00.000Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", instant(*self).strftime("%Y-%m-%dT%H:%M:%S.%3fZ"))
    }
}

/// The current time, in the journal's milliseconds since the Unix epoch.
pub fn now() -> Timestamp {
    Timestamp(u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0))
}

/// `t` on jiff's time line (a value past jiff's range, year 9999, is clamped to its end).
pub fn instant(t: Timestamp) -> jiff::Timestamp {
    i64::try_from(t.0)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .unwrap_or(jiff::Timestamp::MAX)
}

/// UTC calendar fields of a millisecond timestamp: (year, month, day, hour, minute,
/// second, millisecond).
pub fn utc_fields(ms: u64) -> (i64, u32, u32, u64, u64, u64, u64) {
    let dt = instant(Timestamp(ms))
        .to_zoned(jiff::tz::TimeZone::UTC)
        .datetime();
    let small = |v: i8| u64::try_from(v).unwrap_or(0);
    (
        i64::from(dt.year()),
        u32::try_from(dt.month()).unwrap_or(1),
        u32::try_from(dt.day()).unwrap_or(1),
        small(dt.hour()),
        small(dt.minute()),
        small(dt.second()),
        u64::try_from(dt.millisecond()).unwrap_or(0),
    )
}

/// `HH:MM:SS` (UTC) of a timestamp.
pub fn clock(t: Timestamp) -> String {
    let (_, _, _, h, mi, s, _) = utc_fields(t.0);
    format!("{h:02}:{mi:02}:{s:02}")
}

/// Seconds since the epoch of a UTC calendar date and time, `None` for a date the calendar
/// does not have (February 30th) or one before 1970. A leap second (`:60`) is the next
/// minute's first second, as a POSIX clock counts it.
pub fn utc_seconds(y: u64, mo: u64, d: u64, h: u64, mi: u64, s: u64) -> Option<u64> {
    if y < 1970 || s > 60 {
        return None;
    }
    let small = |v: u64| i8::try_from(v).ok();
    let dt = jiff::civil::DateTime::new(
        i16::try_from(y).ok()?,
        small(mo)?,
        small(d)?,
        small(h)?,
        small(mi)?,
        small(s.min(59))?,
        0,
    )
    .ok()?;
    let at = dt.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    u64::try_from(at.as_second())
        .ok()
        .map(|t| t + s.saturating_sub(59))
}

/// How [`span`] lays a duration out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// For messages: `45s`, `1m 30s`, `30m`, `1h 5m`; under a minute with a fraction of a
    /// second, in milliseconds (`1500ms`), so a timeout reads as it was set.
    Words,
    /// For narrow panes, fixed-width-ish: `5s`, `2m05s`, `1h03m`.
    Compact,
}

/// A duration for people, to the second (or the millisecond, see [`Style::Words`]).
pub fn span(d: Duration, style: Style) -> String {
    let s = d.as_secs();
    match style {
        Style::Words if s < 60 && d.subsec_millis() != 0 => format!("{}ms", d.as_millis()),
        _ if s < 60 => format!("{s}s"),
        Style::Words if s < 3600 => match (s / 60, s % 60) {
            (m, 0) => format!("{m}m"),
            (m, r) => format!("{m}m {r}s"),
        },
        Style::Words => format!("{}h {}m", s / 3600, (s / 60) % 60),
        Style::Compact if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        Style::Compact => format!("{}h{:02}m", s / 3600, (s / 60) % 60),
    }
}

/// [`span`] of a count of milliseconds.
pub fn span_ms(ms: u64, style: Style) -> String {
    span(Duration::from_millis(ms), style)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_round_trips_through_jiff() {
        assert_eq!(utc_seconds(1970, 1, 1, 0, 0, 0), Some(0));
        assert_eq!(utc_seconds(2000, 3, 1, 0, 0, 0), Some(11_017 * 86_400));
        let t = utc_seconds(2026, 9, 12, 22, 57, 5).expect("a date");
        assert_eq!(utc_fields(t * 1000 + 7), (2026, 9, 12, 22, 57, 5, 7));
        assert_eq!(clock(Timestamp(t * 1000)), "22:57:05");
        assert_eq!(
            utc_seconds(2026, 9, 12, 23, 59, 60),
            utc_seconds(2026, 9, 13, 0, 0, 0)
        );
        assert_eq!(utc_seconds(2026, 2, 30, 0, 0, 0), None);
        assert_eq!(utc_seconds(1969, 12, 31, 0, 0, 0), None);
    }

    #[test]
    fn durations_in_both_styles() {
        assert_eq!(span_ms(90_000, Style::Words), "1m 30s");
        assert_eq!(span_ms(1_800_000, Style::Words), "30m");
        assert_eq!(span_ms(3_900_000, Style::Words), "1h 5m");
        assert_eq!(span_ms(1_500, Style::Words), "1500ms");
        assert_eq!(span_ms(2_000, Style::Words), "2s");
        assert_eq!(span_ms(125_000, Style::Compact), "2m05s");
        assert_eq!(span_ms(3_780_000, Style::Compact), "1h03m");
        assert_eq!(span_ms(5_400, Style::Compact), "5s");
    }
}
