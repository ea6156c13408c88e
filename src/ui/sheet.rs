//! A confirmation as a sheet: a fixed head, a body of items that scrolls, a fixed foot and the
//! question; what of it shows at a screen size. The drawing and the keys share this layout, so
//! a confirmation is accepted only when the question shows whole and every item of the plan
//! has been drawn; when even the fixed parts cannot show, the dialog asks for a larger
//! terminal and only Esc (and the keys that scroll, and Backspace) work. Pure: no IO, no
//! drawing.

use ratatui::layout::Rect;

use crate::ui::widgets::text::wrap_words;

/// How a line is drawn (the view maps it to the theme).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Title,
    Text,
    Dim,
    Warning,
    Danger,
    /// The question: bold, in the title's colour.
    Ask,
    /// The question of a refusal or of a second answer.
    AskDanger,
    AskWarning,
}

/// One logical line (it may wrap into several rows).
pub type Part = (String, Tone);

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sheet {
    pub head: Vec<Part>,
    /// Items that scroll as wholes: a step (what, then the call), a card of a group change.
    pub body: Vec<Vec<Part>>,
    pub foot: Vec<Part>,
    pub question: Option<Part>,
    /// What the body's items are, for the row that says where it stands ("steps", "lines").
    pub noun: &'static str,
}

/// Where a confirmation's body stands: its first item shown and the items seen so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scroll {
    pub at: usize,
    /// Items `0..seen` have been on screen.
    pub seen: usize,
    /// A second question (forcing, preempting) has been drawn: answering it needs that too.
    pub second_drawn: bool,
}

/// What the dialog shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub rows: Vec<Part>,
    /// The head, the foot and the question show whole, with at least one item of the body.
    pub legible: bool,
    /// The first item shown, and one past the last.
    pub first: usize,
    pub end: usize,
    pub items: usize,
}

/// The dialog's box on `area`, as the action dialogs are drawn: 4 columns narrower (at most
/// 100), 2 rows shorter (at most 30), centred.
pub fn frame(area: Rect) -> Rect {
    let w = area.width.saturating_sub(4).min(100);
    let h = area.height.saturating_sub(2).min(30);
    Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h }
}

fn rows_max(area: Rect) -> usize {
    inner(area).1.max(1)
}

/// The text rows inside the box's borders.
pub fn inner(area: Rect) -> (usize, usize) {
    let f = frame(area);
    (usize::from(f.width.saturating_sub(2)), usize::from(f.height.saturating_sub(2)))
}

fn wrapped(parts: &[Part], w: usize) -> Vec<Part> {
    parts.iter().flat_map(|(t, tone)| wrap_words(t, w).into_iter().map(|r| (r, *tone))).collect()
}

/// The sheet on `area` with the body from item `scroll.at` (clamped).
pub fn show(sheet: &Sheet, area: Rect, scroll: Scroll) -> Shown {
    let at = scroll.at;
    let (w, rows) = inner(area);
    let items = sheet.body.len();
    let head = wrapped(&sheet.head, w);
    let foot = wrapped(&sheet.foot, w);
    let question = sheet.question.as_ref().map(|q| wrapped(std::slice::from_ref(q), w)).unwrap_or_default();
    let body: Vec<Vec<Part>> = sheet.body.iter().map(|item| wrapped(item, w)).collect();
    // The blank row before the question.
    let fixed = head.len() + foot.len() + question.len() + usize::from(!question.is_empty());
    let all: usize = body.iter().map(Vec::len).sum();
    let assemble = |middle: Vec<Part>| {
        let mut out = head.clone();
        out.extend(middle);
        out.extend(foot.iter().cloned());
        if !question.is_empty() {
            out.push((String::new(), Tone::Text));
            out.extend(question.iter().cloned());
        }
        out
    };
    if w > 0 && fixed + all <= rows {
        return Shown { rows: assemble(body.concat()), legible: true, first: 0, end: items, items };
    }
    // Scrolling: one row says where the body stands.
    let room = rows.saturating_sub(fixed + 1);
    let at = at.min(items.saturating_sub(1));
    let mut middle = Vec::new();
    let mut end = at;
    for item in body.iter().skip(at) {
        if middle.len() + item.len() > room {
            break;
        }
        middle.extend(item.iter().cloned());
        end += 1;
    }
    if w == 0 || end == at {
        // The longest way of saying it that shows whole.
        let says = [
            "the plan does not fit: enlarge the terminal (Esc cancels)",
            "enlarge the terminal (Esc)",
            "enlarge (Esc)",
        ];
        let rows = says
            .iter()
            .map(|t| wrap_words(t, w.max(1)))
            .find(|r| r.len() <= rows_max(area))
            .unwrap_or_else(|| wrap_words(says[2], w.max(1)));
        return Shown {
            rows: rows.into_iter().map(|r| (r, Tone::AskDanger)).collect(),
            legible: false,
            first: at,
            end: at,
            items,
        };
    }
    let up = if at > 0 { format!(" · {at} above: Up, PgUp") } else { String::new() };
    let below = items - end;
    let down = if below > 0 { format!(" · {below} below: Down, PgDn") } else { " · the end".into() };
    let unread = if scroll.seen.max(end) < items || at > scroll.seen { " (read to the end to confirm)" } else { "" };
    let noun = if sheet.noun.is_empty() { "items" } else { sheet.noun };
    let mut place = wrap_words(&format!("{noun} {}-{end} of {items}{up}{down}{unread}", at + 1), w);
    place.truncate(1);
    middle.extend(place.into_iter().map(|r| (r, Tone::Dim)));
    Shown { rows: assemble(middle), legible: true, first: at, end, items }
}

impl Scroll {
    /// The scroll after `key` (Up, Down, PgUp, PgDn as -1, +1, -page, +page items). Nothing is
    /// counted as seen here: only a frame drawn counts (`saw`, after the draw), so keys typed
    /// ahead of the screen cannot read for the operator.
    pub fn moved(self, sheet: &Sheet, area: Rect, by: isize) -> Scroll {
        let shown = show(sheet, area, self);
        let page = (shown.end - shown.first).max(1) as isize;
        let step = match by {
            isize::MIN..=-2 => -page,
            2.. => page,
            b => b,
        };
        let last = sheet.body.len().saturating_sub(1) as isize;
        let at = (self.at as isize + step).clamp(0, last.max(0)) as usize;
        Scroll { at, ..self }
    }

    /// Count what shows now as seen: called once a frame showing it has been drawn.
    pub fn saw(&mut self, sheet: &Sheet, area: Rect) {
        let shown = show(sheet, area, *self);
        // Items seen only count from the top down, with nothing skipped.
        if shown.legible && shown.first <= self.seen {
            self.seen = self.seen.max(shown.end);
        }
    }

    /// The question may be answered: it shows whole and every item has been drawn.
    pub fn answerable(&self, sheet: &Sheet, area: Rect) -> bool {
        show(sheet, area, *self).legible && self.seen >= sheet.body.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sheet(steps: usize) -> Sheet {
        Sheet {
            head: vec![("Repartition gpu-h200-01/0 via nvml (nvml)".into(), Tone::Title)],
            body: (0..steps)
                .map(|i| {
                    vec![
                        (format!("{}. Destroy GPU instance {i}", i + 1), Tone::Text),
                        (format!("   nvmlGpuInstanceDestroy(GPU 0 GI {i})"), Tone::Dim),
                    ]
                })
                .collect(),
            foot: vec![("warning: the card is busy".into(), Tone::Warning)],
            question: Some(("type gpu-h200-01/0 and Enter to confirm (Esc cancels): ".into(), Tone::Ask)),
            noun: "steps",
        }
    }

    #[test]
    fn a_short_plan_shows_whole_and_may_be_answered_at_once() {
        let s = sheet(3);
        let area = Rect::new(0, 0, 80, 24);
        let shown = show(&s, area, Scroll::default());
        assert!(shown.legible);
        assert_eq!((shown.first, shown.end), (0, 3));
        assert!(!Scroll::default().answerable(&s, area), "not before it was drawn");
        let mut drawn = Scroll::default();
        drawn.saw(&s, area);
        assert!(drawn.answerable(&s, area));
    }

    #[test]
    fn a_long_plan_must_be_scrolled_through_before_the_question_counts() {
        let s = sheet(22);
        let area = Rect::new(0, 0, 80, 24);
        let mut scroll = Scroll::default();
        scroll.saw(&s, area);
        assert!(!scroll.answerable(&s, area), "22 steps do not show at once at 80x24");
        let mut pages = 0;
        while !scroll.answerable(&s, area) {
            scroll = scroll.moved(&s, area, 2);
            // Moved, not yet drawn: nothing more is seen.
            assert!(pages > 0 || scroll.seen < 22);
            scroll.saw(&s, area);
            pages += 1;
            assert!(pages < 10);
        }
        assert_eq!(scroll.seen, 22);
        // Back to the top: still answerable, everything was seen.
        assert!(scroll.moved(&s, area, -99).answerable(&s, area));
    }

    #[test]
    fn a_jump_past_unseen_items_does_not_count_them() {
        let s = sheet(40);
        let area = Rect::new(0, 0, 80, 24);
        let mut scroll = Scroll { at: 30, ..Scroll::default() };
        scroll.saw(&s, area);
        assert_eq!(scroll.seen, 0);
        assert!(!scroll.answerable(&s, area));
    }

    #[test]
    fn a_tiny_terminal_asks_for_a_larger_one_and_nothing_is_answerable() {
        let s = sheet(3);
        for (w, h) in [(20, 5), (30, 8), (4, 3), (0, 0), (200, 6)] {
            let area = Rect::new(0, 0, w, h);
            let shown = show(&s, area, Scroll::default());
            assert!(!shown.legible, "{w}x{h}");
            assert!(!Scroll::default().answerable(&s, area), "{w}x{h}");
            let (iw, ih) = inner(area);
            assert!(shown.rows.iter().all(|(r, _)| unicode_width::UnicodeWidthStr::width(r.as_str()) <= iw.max(1)));
            let _ = ih;
        }
    }

    proptest::proptest! {
        /// At any size and scroll, the rows never exceed the box, and a legible sheet shows the
        /// whole question.
        #[test]
        fn rows_fit_the_box(steps in 0usize..30, w in 0u16..200, h in 0u16..60, at in 0usize..40) {
            let s = sheet(steps);
            let area = Rect::new(0, 0, w, h);
            let shown = show(&s, area, Scroll { at, ..Scroll::default() });
            let (_, rows) = inner(area);
            if shown.legible {
                proptest::prop_assert!(shown.rows.len() <= rows);
                let q = wrap_words(&s.question.as_ref().map(|q| q.0.clone()).unwrap_or_default(), inner(area).0);
                let tail: Vec<String> = shown.rows[shown.rows.len() - q.len()..].iter().map(|r| r.0.clone()).collect();
                proptest::prop_assert_eq!(tail, q);
            }
        }
    }
}
