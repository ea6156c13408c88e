//! Words for numbers, the same everywhere: a count with its noun in the right number
//! ("1 card", "3 cards"), sizes in bytes read and shown ("512MiB", "12.3 MiB"), and durations
//! (in `duration`).

pub mod duration;

/// `n` and the noun for it: `one` for exactly one, `many` otherwise ("0 cards", "32,768 cards").
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{} {}", grouped(n), if n == 1 { one } else { many })
}

/// `n` with its thousands separated by commas: "1,428", "32,768", "980".
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A percentage rounded to a whole number, never `-0` (a reading of -0.3 % is 0 %).
pub fn whole(pct: f64) -> String {
    let s = format!("{pct:.0}");
    if s == "-0" { "0".into() } else { s }
}

/// `12.3 MiB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / f64::from(1u32 << 30)),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// Why a size or a duration did not read; each says the text it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("{0:?}: expected a size such as 512MiB or 2GiB")]
    NotASize(String),
    #[error("{0:?}: expected a size of at least one byte")]
    SizeTooSmall(String),
    #[error("{0:?}: expected a size below 1 EB (10^18 bytes)")]
    SizeTooLarge(String),
    #[error("empty duration")]
    EmptyDuration,
    #[error("expected a number in {0:?} (like 30m, 1h30m, 500ms)")]
    NoNumber(String),
    #[error("number too large in {0:?}")]
    NumberTooLarge(String),
    #[error("missing unit in {0:?}: use ms, s, m, h or d")]
    NoUnit(String),
    #[error("unknown unit {unit:?} in {text:?}: use ms, s, m, h or d")]
    UnknownUnit { unit: String, text: String },
    #[error("{0:?} is too long: at most 3650d")]
    TooLong(String),
}

/// `512MiB`, `2GiB`, `100MB`, `4096` as bytes.
pub fn parse_size(text: &str) -> Result<u64, ParseError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: f64 = n.parse().map_err(|_| ParseError::NotASize(t.into()))?;
    let k = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1048576.0,
        "g" | "gb" => 1e9,
        "gib" => 1073741824.0,
        "t" | "tb" => 1e12,
        "tib" => 1099511627776.0,
        _ => return Err(ParseError::NotASize(t.into())),
    };
    let bytes = n * k;
    if bytes.is_nan() || bytes < 1.0 {
        return Err(ParseError::SizeTooSmall(t.into()));
    }
    if bytes >= 1e18 {
        return Err(ParseError::SizeTooLarge(t.into()));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::{count, grouped, parse_size, size};

    /// #47 (words): large numbers with separators.
    #[test]
    fn large_counts_are_grouped() {
        assert_eq!(count(32_768u64, "card", "cards"), "32,768 cards");
        assert_eq!(grouped(1_428), "1,428");
        assert_eq!(grouped(980), "980");
        assert_eq!(grouped(1_000_000), "1,000,000");
        assert_eq!(count(1u64, "card", "cards"), "1 card");
    }

    #[test]
    fn a_percentage_is_never_minus_zero() {
        assert_eq!(super::whole(-0.3), "0");
        assert_eq!(super::whole(-0.0), "0");
        assert_eq!(super::whole(42.6), "43");
        // Rounded as the formatter rounds (half to even), as before.
        assert_eq!(super::whole(70.5), "70");
        assert_eq!(super::whole(-7.0), "-7");
    }

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1u32, "workload", "workloads"), "1 workload");
        assert_eq!(count(0u32, "card", "cards"), "0 cards");
        assert_eq!(count(7u64, "memory slice", "memory slices"), "7 memory slices");
    }

    #[test]
    fn sizes_read_and_print() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2 GiB"), Ok(2 << 30));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("big").is_err() && parse_size("0").is_err() && parse_size("5 parsecs").is_err());
        // Too large says so (it said "at least one byte").
        let e = parse_size("99999999TiB").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("below 1 EB"), "{e}");
        assert!(parse_size("0.1").err().is_some_and(|e| e.to_string().contains("at least one byte")));
        assert_eq!(size(3 << 20), "3.0 MiB");
    }
}
