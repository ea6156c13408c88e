//! Text fitting for narrow cells: truncate with an ellipsis, pad to a width.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// `s` cut to at most `width` columns, ending in `…` (or `~` in ASCII mode) when cut. Control
/// characters, tabs and the invisible ones (bidi overrides and isolates, zero-width spaces) are
/// shown escaped (`\u202e`), as the commands print them: a name cannot read reversed, look
/// like another, or break a column.
pub fn fit(s: &str, width: usize, ascii: bool) -> String {
    let s = &*crate::out::printable(s);
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

/// `text` word-wrapped to rows of at most `w` columns, nothing dropped: words longer than a
/// row are broken, a leading indent is kept on the first row, control characters are left out.
/// An empty text is one empty row.
pub fn wrap_words(text: &str, w: usize) -> Vec<String> {
    let w = w.max(1);
    let text: String = text.chars().filter(|c| !c.is_control()).collect();
    // A line that fits stays as it is, its column alignment included.
    if text.width() <= w {
        return vec![text];
    }
    let mut rows = Vec::new();
    let mut row = String::new();
    let mut used = 0;
    let indent = text.len() - text.trim_start_matches(' ').len();
    if indent > 0 {
        let lead = " ".repeat(indent.min(w));
        used = lead.len();
        row.push_str(&lead);
    }
    for word in text[indent..].split(' ').filter(|s| !s.is_empty()) {
        let ww = word.width();
        // The word on this row (after a space), else on the next, broken if it is too long.
        let gap = usize::from(used > 0 && !row.trim().is_empty());
        if used + gap + ww <= w {
            if gap == 1 {
                row.push(' ');
            }
            row.push_str(word);
            used += gap + ww;
            continue;
        }
        if !row.trim().is_empty() {
            rows.push(std::mem::take(&mut row));
            used = 0;
        }
        for ch in word.chars() {
            let cw = ch.width().unwrap_or(0);
            if used + cw > w && used > 0 {
                rows.push(std::mem::take(&mut row));
                used = 0;
            }
            row.push(ch);
            used += cw;
        }
    }
    if !row.is_empty() || rows.is_empty() {
        rows.push(row);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #46: a node named with a right-to-left override, a zero-width space and a tab shows them
    /// escaped in the console too (they were drawn raw: the name read reversed).
    #[test]
    fn invisible_characters_are_shown_escaped() {
        assert_eq!(fit("gpu-\u{202e}10\u{200b}\tx", 40, false), "gpu-\\u202e10\\u200b\\u0009x");
    }

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

    #[test]
    fn words_wrap_whole_and_nothing_is_lost() {
        assert_eq!(wrap_words("type sim:21 and Enter", 10), ["type", "sim:21 and", "Enter"]);
        assert_eq!(wrap_words("   nvmlGpuInstanceDestroy(GPU 0)", 12), ["   nvmlGpuIn", "stanceDestro", "y(GPU 0)"]);
        assert_eq!(wrap_words("", 5), [""]);
        assert_eq!(wrap_words("a\u{1b}b", 5), ["ab"]);
    }

    proptest::proptest! {
        /// Every row fits, and the words come back in order, none lost.
        #[test]
        fn wrapped_rows_fit_and_keep_every_character(text in "[ a-zA-Z0-9:/.()é全]{0,120}", w in 1usize..40) {
            let rows = wrap_words(&text, w);
            for r in &rows {
                proptest::prop_assert!(r.width() <= w.max(2), "{r:?} wider than {w}");
            }
            let strip = |s: &str| s.chars().filter(|c| *c != ' ').collect::<String>();
            proptest::prop_assert_eq!(strip(&rows.concat()), strip(&text));
        }
    }
}
