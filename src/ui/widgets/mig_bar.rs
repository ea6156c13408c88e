//! The MIG bar: a card's memory slices drawn in proportion at their real start positions,
//! each instance labelled (profile, and holder where room allows), free slices and stranded
//! slices distinct, coloured by activity. A whole card is one bar filled to its utilisation.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::model::Card;
use crate::ui::theme::Theme;

/// What tessera knows of a holder, for the label: a short name.
pub type HolderName<'a> = &'a dyn Fn(&str) -> Option<String>;

struct Cell {
    ch: char,
    style: Style,
}

fn first_cell(slice: usize, width: usize, slices: usize) -> usize {
    slice * width / slices
}

/// Draw `card` in exactly `width` cells.
pub fn mig_bar(card: &Card, width: u16, theme: &Theme, holder: HolderName) -> Line<'static> {
    let w = usize::from(width);
    if w == 0 {
        return Line::default();
    }
    let cells = if card.mig.enabled && card.mig.instances.is_empty() && card.mig.error.is_some() {
        // Unknown is not free: say so rather than draw empty slices.
        let mut cells: Vec<Cell> = (0..w).map(|_| Cell { ch: ' ', style: theme.dim() }).collect();
        write_label(&mut cells, 0, w, "MIG: instances unknown", theme);
        cells
    } else if card.mig.enabled && card.mig.placements == crate::model::Placements::Unknown {
        // Instances no valid layout holds: where they are, and so what is free, is unknown.
        let mut cells: Vec<Cell> = (0..w).map(|_| Cell { ch: ' ', style: theme.dim() }).collect();
        let text = format!("MIG: {} instances, placements unknown", card.mig.instances.len());
        write_label(&mut cells, 0, w, &text, theme);
        cells
    } else if card.mig.enabled {
        let mut cells = mig_cells(card, w, theme, holder);
        // Placements tessera inferred: the last cell says the picture is approximate.
        if card.mig.placements == crate::model::Placements::Inferred
            && let Some(last) = cells.last_mut()
        {
            *last = Cell { ch: if theme.ascii { '~' } else { '≈' }, style: theme.fg(theme.c.warning) };
        }
        cells
    } else {
        whole_cells(card, w, theme)
    };
    // Merge runs of equal style into spans.
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut run = String::new();
    let mut style = cells.first().map(|c| c.style).unwrap_or_default();
    for c in cells {
        if c.style != style && !run.is_empty() {
            spans.push(Span::styled(std::mem::take(&mut run), style));
        }
        style = c.style;
        run.push(c.ch);
    }
    if !run.is_empty() {
        spans.push(Span::styled(run, style));
    }
    Line::from(spans)
}

fn whole_cells(card: &Card, w: usize, theme: &Theme) -> Vec<Cell> {
    // Unused utilisation is not a free slice: its own glyph.
    let (free_ch, fill_ch) = if theme.ascii { ('-', '#') } else { ('·', '█') };
    let Some(util) = card.utilization_pct else {
        let mut cells: Vec<Cell> = (0..w).map(|_| Cell { ch: free_ch, style: theme.dim() }).collect();
        write_label(&mut cells, 0, w, "util N/A", theme);
        return cells;
    };
    let filled = ((util.clamp(0.0, 100.0) / 100.0) * w as f64).round() as usize;
    let fill = if theme.mono {
        Style::new().add_modifier(Modifier::REVERSED)
    } else {
        Style::new().fg(Color::Black).bg(theme.util_color(util))
    };
    let mut cells: Vec<Cell> = (0..w)
        .map(|i| if i < filled { Cell { ch: ' ', style: fill } } else { Cell { ch: free_ch, style: theme.dim() } })
        .collect();
    if theme.mono {
        cells.iter_mut().take(filled).for_each(|c| c.ch = fill_ch);
    }
    // A shared card says how: `TS×4 3/4 ctx 3 85%`; an exclusive one `whole 85%`.
    let label = if card.sharing_mode().is_some_and(crate::model::SharingMode::unisolated) {
        let ctx = card.sharing.contexts.map_or_else(String::new, |n| format!(" ctx {n}"));
        format!("{}{ctx} {}%", card.sharing_text(theme.ascii), crate::units::whole(util.max(0.0)))
    } else {
        format!("whole {}%", crate::units::whole(util.max(0.0)))
    };
    write_label(&mut cells, 0, w, &label, theme);
    cells
}

/// Write `text` over cells [from, to), keeping each cell's style, truncated with an ellipsis.
fn write_label(cells: &mut [Cell], from: usize, to: usize, text: &str, theme: &Theme) {
    let room = to.saturating_sub(from);
    // One cell per character: a wide character (CJK, emoji) from a source becomes '?'.
    let narrow: String =
        text.chars().map(|c| if unicode_width::UnicodeWidthChar::width(c) == Some(1) { c } else { '?' }).collect();
    let fitted = super::text::fit(&narrow, room, theme.ascii);
    for (i, ch) in fitted.chars().enumerate().take(room) {
        if let Some(c) = cells.get_mut(from + i) {
            c.ch = ch;
        }
    }
}

fn mig_cells(card: &Card, w: usize, theme: &Theme, holder: HolderName) -> Vec<Cell> {
    let model = card.gpu_model();
    let slices = model.map_or_else(
        || card.mig.instances.iter().map(|i| usize::from(i.start) + usize::from(i.size)).max().unwrap_or(8).max(8),
        |m| usize::from(m.memory_slices),
    );
    let reachable = card.reachable_slices();
    let used = card.used_slice_mask();
    let (free_ch, stranded_ch, sep) = if theme.ascii { ('.', 'x', '|') } else { ('░', '╳', '▏') };
    let mut cells: Vec<Cell> = (0..w)
        .map(|x| {
            let slice = (x * slices / w).min(15);
            if used & (1 << slice) != 0 {
                Cell { ch: ' ', style: Style::new() }
            } else if reachable & (1 << slice) != 0 {
                Cell { ch: free_ch, style: theme.fg(theme.c.free_slice) }
            } else {
                Cell { ch: stranded_ch, style: theme.fg(theme.c.unusable_slice) }
            }
        })
        .collect();
    for inst in &card.mig.instances {
        let from = first_cell(usize::from(inst.start), w, slices);
        let to = first_cell(usize::from(inst.start) + usize::from(inst.size), w, slices).min(w);
        if to <= from {
            continue;
        }
        // Busy with no known holder is drawn as held: it is not free.
        let held = !inst.workloads.is_empty() || inst.in_use_by_unknown();
        let style = match (held, theme.mono) {
            (true, true) => Style::new().add_modifier(Modifier::REVERSED),
            (false, true) => Style::new().add_modifier(Modifier::UNDERLINED),
            (true, false) => {
                let bg = inst.utilization_pct.map_or(theme.c.util_low, |u| theme.util_color(u));
                Style::new().fg(Color::Black).bg(bg)
            }
            (false, false) => Style::new().fg(theme.c.text).bg(theme.c.mig_free_instance),
        };
        for c in &mut cells[from..to] {
            *c = Cell { ch: ' ', style };
        }
        let who = match inst.workloads.first() {
            Some(id) => holder(id).unwrap_or_default(),
            None if inst.in_use_by_unknown() => "holder unknown".into(),
            None => String::new(),
        };
        // Room after the separator, the same for every instance of a size however cells
        // round; the compute part ("1g") stands in for a name that does not fit.
        let room = (w * usize::from(inst.size) / slices).saturating_sub(1).min(to - from - 1);
        let short = inst.profile.split('.').next().unwrap_or_default();
        let label = match held {
            // A name that does not fit whole is cut with an ellipsis (it was dropped), where at
            // least two of its characters fit.
            true if room >= inst.profile.len() + 3 && !who.is_empty() => format!("{} {who}", inst.profile),
            false if room >= inst.profile.len() + 5 => format!("{} free", inst.profile),
            _ if room >= inst.profile.len() => inst.profile.clone(),
            _ => short.to_string(),
        };
        // A separator in the first cell shows where one instance ends and the next starts.
        cells[from].ch = sep;
        if to - from > 1 {
            write_label(&mut cells, from + 1, to, &label, theme);
        }
    }
    // In ASCII the free and stranded marks are letters and dots: a separator where they begin
    // after an instance keeps them from running into its label ("1gxxx" read as a name).
    if theme.ascii {
        for inst in &card.mig.instances {
            let to = first_cell(usize::from(inst.start) + usize::from(inst.size), w, slices);
            if let Some(c) = cells.get_mut(to).filter(|c| c.ch == stranded_ch || c.ch == free_ch) {
                c.ch = sep;
            }
        }
    }
    cells
}

#[cfg(test)]
#[path = "mig_bar_tests.rs"]
mod tests;
