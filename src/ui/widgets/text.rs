//! Text fitting for narrow cells: truncate with an ellipsis, pad to a width.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// `s` cut to at most `width` columns, ending in `…` (or `~` in ASCII mode) when cut.
pub fn fit(s: &str, width: usize, ascii: bool) -> String {
    if s.width() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for ch in s.chars() {
        let w = ch.width().unwrap_or(0);
        if used + w > width - 1 {
            break;
        }
        out.push(ch);
        used += w;
    }
    out.push(if ascii { '~' } else { '…' });
    out
}

/// `fit`, then padded with spaces to exactly `width` columns (left-aligned).
pub fn pad(s: &str, width: usize, ascii: bool) -> String {
    let f = fit(s, width, ascii);
    let w = f.width();
    format!("{f}{}", " ".repeat(width.saturating_sub(w)))
}

/// Right-aligned to exactly `width` columns.
pub fn rpad(s: &str, width: usize, ascii: bool) -> String {
    let f = fit(s, width, ascii);
    let w = f.width();
    format!("{}{f}", " ".repeat(width.saturating_sub(w)))
}

/// `text` in pieces of at most `w` characters, control characters dropped: for a message that
/// must be read whole (an error, a pending reason) rather than cut.
pub fn wrap(text: &str, w: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().filter(|c| !c.is_control()).collect();
    chars.chunks(w.max(1)).map(|c| c.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits() {
        assert_eq!(fit("gpu-a100-01", 20, false), "gpu-a100-01");
        assert_eq!(fit("gpu-a100-01", 6, false), "gpu-a…");
        assert_eq!(fit("gpu-a100-01", 6, true), "gpu-a~");
        assert_eq!(fit("abc", 0, false), "");
        assert_eq!(fit("abc", 1, false), "…");
        assert_eq!(pad("ab", 4, false), "ab  ");
        assert_eq!(rpad("ab", 4, false), "  ab");
        assert_eq!(pad("abcdef", 4, false).width(), 4);
    }
}
