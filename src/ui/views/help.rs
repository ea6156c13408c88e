//! The help screen: every binding of the keymap, what each filter term matches, and what the
//! MIG bar's glyphs mean. It takes the width it needs (up to the screen's), wraps long lines
//! under their description column, and scrolls.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use crate::ui::filter::TERMS;
use crate::ui::keymap::{bindings_for, label};
use crate::ui::theme::Theme;
use crate::ui::widgets::text::{fit, pad, wrap_words};

/// The key column of the bindings and of the filter terms.
const KEY_W: usize = 9;
const TERM_W: usize = 16;
/// Below this many columns for the description, the key takes a row of its own.
const MIN_TEXT_W: usize = 12;

/// One entry of the help before wrapping: a key and what it does, a heading, or plain text.
enum Item {
    Pair { key: String, col: usize, text: String },
    Heading(String),
    Text(String),
}

/// One row on screen: a key cell (perhaps blank), then text; headings are drawn as titles.
struct Row {
    key: String,
    text: String,
    heading: bool,
}

fn items(ascii: bool, read_only: bool, replay: bool) -> Vec<Item> {
    let mut items: Vec<Item> = bindings_for(read_only, replay)
        .map(|b| Item::Pair { key: label(b, replay).to_string(), col: KEY_W, text: b.description.to_string() })
        .collect();
    items.push(Item::Text(String::new()));
    items.push(Item::Heading("filter terms (/ in every list; all words must match)".into()));
    for (term, means) in TERMS {
        items.push(Item::Pair { key: (*term).to_string(), col: TERM_W, text: (*means).to_string() });
    }
    items.push(Item::Text(String::new()));
    let (free, stranded, sep) = if ascii { (".", "x", "|") } else { ("░", "╳", "▏") };
    items.push(Item::Heading("MIG bar: memory slices at their real positions".into()));
    items.push(Item::Text(format!(
        "{sep}3g.40gb name instance+holder  {free} free slice  {stranded} stranded  ~54% MIG activity"
    )));
    let (unused, approx) = if ascii { ("-", "~") } else { ("·", "≈") };
    items.push(Item::Text(format!(
        "{unused} unused part of a whole card  {approx} placements inferred (no source reports them)"
    )));
    items
}

/// The widest entry unwrapped: the box is no wider than this needs.
fn natural_width(items: &[Item]) -> usize {
    use unicode_width::UnicodeWidthStr;
    items
        .iter()
        .map(|i| match i {
            Item::Pair { col, text, .. } => col + text.width(),
            Item::Heading(t) | Item::Text(t) => t.width(),
        })
        .max()
        .unwrap_or(40)
}

/// The box's width on a screen `screen_w` columns wide (0: unknown, as wide as it needs).
fn box_width(items: &[Item], screen_w: u16) -> u16 {
    let want = u16::try_from(natural_width(items) + 4).unwrap_or(u16::MAX);
    if screen_w == 0 { want } else { screen_w.min(want) }
}

/// The entries wrapped to `inner` columns: a description goes on under its own column (a
/// hanging indent, so the keys stay a column of their own); where the column leaves too little
/// room, the key takes a row and the description follows indented by two.
fn rows(items: Vec<Item>, inner: usize, ascii: bool) -> Vec<Row> {
    let inner = inner.max(1);
    let mut rows = Vec::new();
    for item in items {
        match item {
            Item::Pair { key, col, text } => {
                let (first_key, indent) = if inner >= col + MIN_TEXT_W {
                    (pad(&key, col, ascii), col)
                } else {
                    rows.push(Row { key: fit(&key, inner, ascii), text: String::new(), heading: false });
                    (" ".repeat(2.min(inner - 1)), 2.min(inner - 1))
                };
                for (n, piece) in wrap_words(&text, inner - indent).into_iter().enumerate() {
                    let key = if n == 0 { first_key.clone() } else { " ".repeat(indent) };
                    rows.push(Row { key, text: piece, heading: false });
                }
            }
            Item::Heading(t) => rows.extend(plain(&t, inner, true)),
            Item::Text(t) => rows.extend(plain(&t, inner, false)),
        }
    }
    rows
}

/// A heading or a line of text, wrapped to `inner` columns.
fn plain(text: &str, inner: usize, heading: bool) -> impl Iterator<Item = Row> {
    wrap_words(text, inner).into_iter().map(move |text| Row { key: String::new(), text, heading })
}

/// Rows the help has on a screen `screen_w` columns wide (0: unknown, unwrapped), for
/// scrolling: what `draw` shows at that width.
pub fn line_count(read_only: bool, replay: bool, screen_w: u16) -> usize {
    let items = items(false, read_only, replay);
    let inner = usize::from(box_width(&items, screen_w).saturating_sub(2));
    rows(items, inner, false).len()
}

pub fn draw(f: &mut Frame, area: Rect, theme: &Theme, read_only: bool, replay: bool, scroll: usize) {
    let a = theme.ascii;
    let items = items(a, read_only, replay);
    let w = box_width(&items, area.width);
    let all = rows(items, usize::from(w.saturating_sub(2)), a);
    let h = area.height.min(u16::try_from(all.len()).unwrap_or(u16::MAX).saturating_add(3));
    let r = Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h };
    let room = usize::from(h.saturating_sub(3)).max(1);
    let top = scroll.min(all.len().saturating_sub(room));
    let below = all.len().saturating_sub(top + room);
    let style = |heading: bool| -> Style { if heading { theme.title() } else { theme.text() } };
    let mut shown: Vec<Line> = all
        .into_iter()
        .skip(top)
        .take(room)
        .map(|row| Line::from(vec![Span::styled(row.key, theme.title()), Span::styled(row.text, style(row.heading))]))
        .collect();
    let foot = if top > 0 || below > 0 {
        format!("j/k scroll ({top} above, {below} below)  Esc or ? closes this help")
    } else {
        "Esc or ? closes this help".into()
    };
    shown.push(Line::from(Span::styled(fit(&foot, usize::from(w.saturating_sub(2)), a), theme.dim())));
    let borders = if a { Borders::NONE } else { Borders::ALL };
    let block = Block::new().borders(borders).border_style(theme.border()).title(Span::styled(" help ", theme.title()));
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(shown).block(block), r);
}

#[cfg(test)]
mod tests {
    use super::*;
    use unicode_width::UnicodeWidthStr;

    /// The count the keys scroll by is the rows drawn, wrapped or not.
    #[test]
    fn the_line_count_is_the_lines_drawn() {
        for w in [0u16, 20, 80, 160] {
            for (ro, replay) in [(false, false), (true, false), (false, true)] {
                let items = items(false, ro, replay);
                let inner = usize::from(box_width(&items, w).saturating_sub(2));
                assert_eq!(line_count(ro, replay, w), rows(items, inner, false).len());
            }
        }
        assert_eq!(line_count(false, false, 0), items(false, false, false).len());
    }

    /// At 80 columns long descriptions wrap under their column: every row fits, no word is
    /// lost, and a continuation row leaves the key column blank.
    #[test]
    fn long_lines_wrap_under_the_description_at_80_columns() {
        let items = items(false, false, false);
        let want: Vec<String> = items
            .iter()
            .map(|i| match i {
                Item::Pair { key, text, .. } => format!("{key} {text}"),
                Item::Heading(t) | Item::Text(t) => t.clone(),
            })
            .collect();
        let inner = usize::from(box_width(&items, 80) - 2);
        let rows = rows(items, inner, false);
        assert!(rows.iter().all(|r| r.key.width() + r.text.width() <= inner));
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let got: Vec<String> = rows.iter().flat_map(|r| words(&format!("{} {}", r.key, r.text))).collect();
        assert_eq!(got, want.iter().flat_map(|s| words(s)).collect::<Vec<_>>());
        assert!(rows.iter().any(|r| r.key == " ".repeat(KEY_W) && !r.text.is_empty()), "a hanging indent");
    }
}
