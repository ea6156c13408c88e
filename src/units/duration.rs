//! Human durations in config and flags: `500ms`, `15s`, `30m`, `1h30m`, `2d`.

use std::time::Duration;

use super::ParseError;

/// `30m`, `1h30m`, `500ms` as a duration, at most [`MAX`].
pub fn parse(text: &str) -> Result<Duration, ParseError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(ParseError::EmptyDuration);
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(ParseError::NoNumber(t.into()));
        }
        let n: u64 = rest[..digits].parse().map_err(|_| ParseError::NumberTooLarge(t.into()))?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86400)),
            "" => return Err(ParseError::NoUnit(t.into())),
            u => return Err(ParseError::UnknownUnit { unit: u.into(), text: t.into() }),
        };
        total = total.saturating_add(part);
        if total > MAX {
            return Err(ParseError::TooLong(t.into()));
        }
    }
    Ok(total)
}

/// The longest duration anything takes (ten years): beyond it a value is a typo, and the
/// clock arithmetic of the guards and views would saturate differently.
pub const MAX: Duration = Duration::from_secs(3650 * 86400);

/// The shortest form `parse` reads back: 1800 s is `30m`, 5400 s is `1h30m`.
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let mut s = d.as_secs();
    let mut out = String::new();
    for (unit, size) in [("d", 86400), ("h", 3600), ("m", 60), ("s", 1)] {
        if s >= size {
            out.push_str(&format!("{}{unit}", s / size));
            s %= size;
        }
    }
    out
}

/// Compact age for tables: `45s`, `12m`, `3h05m`, `2d04h`.
pub fn short(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for (text, secs) in [("30m", 1800), ("1h30m", 5400), ("15s", 15), ("2d", 172_800)] {
            assert_eq!(parse(text), Ok(Duration::from_secs(secs)));
            assert_eq!(format(Duration::from_secs(secs)), text);
        }
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(format(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn rejects_nonsense() {
        for bad in ["", "m", "30", "30x", "1h30", "-5m", "ten minutes"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn short_ages() {
        assert_eq!(short(-3), "0s");
        assert_eq!(short(59), "59s");
        assert_eq!(short(125), "2m");
        assert_eq!(short(3600 + 5 * 60), "1h05m");
        assert_eq!(short(2 * 86400 + 4 * 3600), "2d04h");
    }
}
