//! A moment typed by a person: `2026-11-30T03:12:00Z`, `2026-11-30 03:12`, `03:12[:SS]` (the
//! last such time at or before the reference, or within a recording's span), `-2h` (before
//! the reference). Times without an offset are UTC.

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, NaiveTime, Utc};

/// The text given is not a moment (it is quoted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: expected a time such as 2026-11-30T03:12:00Z, 2026-11-30 03:12, 03:12 or -2h")]
pub struct MomentError(pub String);

/// `text` as a moment. `reference` is "now" (the end of a recording, the wall clock); a bare
/// time of day is the last one at or before it, unless `span` holds an earlier day's.
pub fn parse(
    text: &str,
    reference: DateTime<Utc>,
    span: Option<(DateTime<Utc>, DateTime<Utc>)>,
) -> Result<DateTime<Utc>, MomentError> {
    let t = text.trim();
    let bad = || MomentError(t.into());
    if let Some(rest) = t.strip_prefix('-') {
        let d = crate::units::duration::parse(rest).map_err(|_| bad())?;
        return Duration::from_std(d).ok().and_then(|d| reference.checked_sub_signed(d)).ok_or_else(bad);
    }
    if let Ok(x) = DateTime::parse_from_rfc3339(t) {
        return Ok(x.with_timezone(&Utc));
    }
    for f in ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"] {
        if let Ok(x) = NaiveDateTime::parse_from_str(t, f) {
            return Ok(x.and_utc());
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(d.and_time(NaiveTime::MIN).and_utc());
    }
    let time = NaiveTime::parse_from_str(t, "%H:%M:%S")
        .or_else(|_| NaiveTime::parse_from_str(t, "%H:%M"))
        .map_err(|_| bad())?;
    // The last such time of day at or before the reference; within a recording, the first
    // one inside its span if the last is not.
    let day = Duration::days(1);
    let mut at = reference.date_naive().and_time(time).and_utc();
    if at > reference {
        at = at.checked_sub_signed(day).ok_or_else(bad)?;
    }
    if let Some((from, _)) = span {
        while let Some(next) = at.checked_add_signed(day).filter(|n| at < from && *n <= reference) {
            at = next;
        }
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).single().unwrap_or_default()
    }

    #[test]
    fn every_form_is_a_moment() {
        let now = t(2026, 11, 30, 9, 0);
        assert_eq!(parse("2026-11-30T03:12:00Z", now, None), Ok(t(2026, 11, 30, 3, 12)));
        assert_eq!(parse("2026-11-30T04:12:00+01:00", now, None), Ok(t(2026, 11, 30, 3, 12)));
        assert_eq!(parse("2026-11-30 03:12", now, None), Ok(t(2026, 11, 30, 3, 12)));
        assert_eq!(parse("03:12", now, None), Ok(t(2026, 11, 30, 3, 12)));
        // Later today than now: yesterday's.
        assert_eq!(parse("23:00", now, None), Ok(t(2026, 11, 29, 23, 0)));
        assert_eq!(parse("-2h", now, None), Ok(t(2026, 11, 30, 7, 0)));
        assert!(parse("soon", now, None).err().map(|e| e.to_string()).unwrap_or_default().contains("expected a time"));
        // Further back than a date can go: said, not a panic.
        assert!(parse("-100000000d", now, None).is_err());
    }

    #[test]
    fn a_time_of_day_falls_inside_the_recording() {
        // Recorded from 22:00 on the 28th to 09:00 on the 30th: 03:12 is the last one (the
        // 30th); 23:00 the last before the end (the 29th).
        let span = Some((t(2026, 11, 28, 22, 0), t(2026, 11, 30, 9, 0)));
        assert_eq!(parse("03:12", t(2026, 11, 30, 9, 0), span), Ok(t(2026, 11, 30, 3, 12)));
        assert_eq!(parse("23:00", t(2026, 11, 30, 9, 0), span), Ok(t(2026, 11, 29, 23, 0)));
    }
}
