//! The console: draws the fleet, the queue and the workloads; never does IO. State, pure
//! input logic, views, widgets and themes live here; the owner loop is `crate::app`, and
//! `draw` is a pure function of state, fleet and theme.

pub mod dialogs;
pub mod filter;
pub mod input;
pub mod keymap;
pub mod replay;
pub mod sheet;
pub mod state;
pub mod theme;
pub mod views;
pub mod widgets;

use ratatui::Frame;
use ratatui::layout::Rect;

use crate::model::Fleet;
use state::UiState;
use theme::Theme;

/// The screen's regions: header lines, body, footer line.
pub struct Areas {
    pub header: Rect,
    pub body: Rect,
    pub footer: Rect,
}

pub const HEADER_LINES: u16 = 2;

pub fn areas(area: Rect) -> Areas {
    let header_h = HEADER_LINES.min(area.height);
    let footer_h = u16::from(area.height > header_h);
    Areas {
        header: Rect { height: header_h, ..area },
        body: Rect { y: area.y + header_h, height: area.height.saturating_sub(header_h + footer_h), ..area },
        footer: Rect { y: area.y + area.height.saturating_sub(footer_h), height: footer_h, ..area },
    }
}

/// Rows of data the body shows under its column heading.
pub fn viewport(area: Rect) -> usize {
    usize::from(areas(area).body.height.saturating_sub(1))
}

/// Lines above the view: the replay's timeline, else a schedule banner.
pub fn lines_above(st: &UiState) -> u16 {
    u16::from(st.replay.is_some() || st.advice.banner.is_some())
}

/// The same with a schedule banner or the replay's timeline on screen (it takes a row of
/// the body).
pub fn viewport_for(area: Rect, st: &UiState) -> usize {
    viewport(area).saturating_sub(usize::from(lines_above(st) > 0 && areas(area).body.height > 1))
}

/// Draw one frame.
pub fn draw(f: &mut Frame, st: &UiState, fleet: &Fleet, theme: &Theme, simulated: bool) {
    let mut a = areas(f.area());
    views::header::draw(f, a.header, st, fleet, theme, simulated);
    // The replay's timeline, or a schedule change due: one line above the view, which gives
    // it up.
    if st.replay.is_some() && a.body.height > 1 {
        views::replay::timeline(f, Rect { height: 1, ..a.body }, st, theme);
        a.body = Rect { y: a.body.y + 1, height: a.body.height - 1, ..a.body };
    } else if st.advice.banner.is_some() && a.body.height > 1 {
        views::group::banner(f, Rect { height: 1, ..a.body }, st, theme);
        a.body = Rect { y: a.body.y + 1, height: a.body.height - 1, ..a.body };
    }
    match (&st.open.card, st.tab) {
        (Some(card), _) => views::card::draw(f, a.body, st, fleet, theme, card),
        (None, _) if st.open.workload.is_some() => {
            views::workload::draw(f, a.body, st, fleet, theme, st.open.workload.as_deref().unwrap_or_default());
        }
        (None, state::Tab::Fleet) => views::fleet::draw(f, a.body, st, fleet, theme),
        (None, state::Tab::Queue) => views::queue::draw(f, a.body, st, fleet, theme),
        (None, state::Tab::Workloads) => views::workloads::draw(f, a.body, st, fleet, theme),
        (None, state::Tab::Sources) => views::sources::draw(f, a.body, st, fleet, theme),
        (None, state::Tab::Advice) => views::advice::draw(f, a.body, st, theme),
    }
    views::footer::draw(f, a.footer, st, theme);
    if let Some((title, lines)) = &st.advice.panel {
        views::panel::draw(f, f.area(), theme, title, lines);
    }
    if st.open.help {
        views::help::draw(f, f.area(), theme, st.settings.read_only, st.replay.is_some(), st.open.help_scroll);
    }
    if let Some(m) = st.dialog.modal.as_ref().filter(|_| !st.dialog.hidden) {
        views::modal::draw(f, f.area(), m, fleet, theme);
    }
    if theme.ascii {
        ascii_only(f.buffer_mut());
    }
}

/// `--ascii`: whatever a view drew beyond ASCII (an arrow, a `·`, a `×`, a name's letters) is
/// written in ASCII, one character a cell (a wide character's second cell becomes a space).
fn ascii_only(buf: &mut ratatui::buffer::Buffer) {
    let area = buf.area;
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            let cell = &mut buf[(x, y)];
            let sym = cell.symbol();
            if sym.is_ascii() {
                continue;
            }
            let plain = match sym.chars().next() {
                Some('→' | '▶' | '›' | '»') => ">",
                Some('←' | '◀' | '‹' | '«') => "<",
                Some('·' | '─' | '━' | '–' | '—') => "-",
                Some('×') => "x",
                Some('│' | '┃' | '▏') => "|",
                Some('…') => "~",
                Some('⏸') => "=",
                Some('●') => "*",
                Some('▾' | '▼') => "v",
                Some('▸') => ">",
                // Anything else: a placeholder.
                _ => "?",
            };
            let wide = unicode_width::UnicodeWidthStr::width(sym) > 1;
            cell.set_symbol(plain);
            // The cell a wide character covered shows a space, not nothing.
            if wide && x + 1 < area.right() {
                buf[(x + 1, y)].set_symbol(" ");
            }
        }
    }
}

/// Holder label for bars and tables: the workload's short name, else its id.
pub fn holder_name(fleet: &Fleet, id: &str) -> Option<String> {
    let w = fleet.workload(id)?;
    Some(w.name.rsplit('/').next().unwrap_or(&w.name).to_string())
}

/// `12.3/80.0` in GiB, or `-` parts where unknown.
pub fn gib_pair(used: Option<u64>, total: Option<u64>) -> String {
    let g = |m: Option<u64>| m.map_or_else(|| "-".into(), |m| format!("{:.1}", m as f64 / 1024.0));
    format!("{}/{}", g(used), g(total))
}
