//! The fleet view: cards grouped by node (or sorted flat), each with its MIG bar. Only the
//! visible rows are built, so 4096 cards cost what a screenful costs.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::{cell, pct, rcell};
use crate::model::capacity::free_units;
use crate::model::{Card, Fleet, Node};
use crate::ui::state::{Row, SortKey, UiState};
use crate::ui::theme::Theme;
use crate::ui::widgets::mig_bar::mig_bar;
use crate::ui::{gib_pair, holder_name};

/// Column widths for a terminal width; `wide` adds power and state columns.
pub struct Cols {
    pub first: usize,
    pub model: usize,
    pub bar: usize,
    pub mem: usize,
    pub wide: bool,
    pub holders: usize,
    /// The sharing mode and contexts columns (wide only).
    pub share: usize,
}

pub fn cols(width: u16, flat: bool) -> Cols {
    let w = usize::from(width);
    let wide = w >= 120;
    let first = if flat { if wide { 16 } else { 13 } } else { 3 };
    let model = if wide { 11 } else { 9 };
    let mem = if wide { 13 } else { 11 };
    let share = if wide { 13 } else { 0 };
    // Fixed columns, each followed by a space: util 5, temp 4, (share 13, ctx 3, power 5,
    // state 9).
    let fixed =
        first + 1 + model + 1 + 5 + 1 + mem + 1 + 4 + 1 + if wide { share + 1 + 3 + 1 + 5 + 1 + 9 + 1 } else { 0 };
    let rest = w.saturating_sub(fixed);
    let bar = if wide { (rest * 3 / 5).clamp(16, 64) } else { rest.saturating_sub(14).clamp(8, 24) };
    let holders = rest.saturating_sub(bar + 1);
    Cols { first, model, bar, mem, wide, holders, share }
}

pub fn draw(f: &mut Frame, area: Rect, st: &UiState, fleet: &Fleet, theme: &Theme) {
    if area.height == 0 {
        return;
    }
    let flat = st.fleet.sort != SortKey::Node;
    let c = cols(area.width, flat);
    let a = st.settings.ascii;
    let head = theme.title();
    let mut heading = vec![
        cell(if flat { "NODE/GPU" } else { "GPU" }, c.first, head, a),
        cell("MODEL", c.model, head, a),
        cell("MIG LAYOUT", c.bar, head, a),
    ];
    if c.wide {
        heading.push(cell("SHARE", c.share, head, a));
        heading.push(rcell("CTX", 3, head, a));
    }
    // The sort column is marked: underlined, with the direction where it fits.
    let sorted = |name: &str, key: SortKey, width: usize| {
        if st.fleet.sort != key {
            return rcell(name, width, head, a);
        }
        let arrow = match (st.fleet.reverse, a) {
            (false, false) => "▼",
            (true, false) => "▲",
            (false, true) => "v",
            (true, true) => "^",
        };
        let text = if name.chars().count() < width { format!("{name}{arrow}") } else { name.to_string() };
        rcell(&text, width, head.add_modifier(ratatui::style::Modifier::UNDERLINED), a)
    };
    heading.extend([
        sorted("UTIL", SortKey::Util, 5),
        sorted("MEM GiB", SortKey::Memory, c.mem),
        sorted("TEMP", SortKey::Temp, 4),
    ]);
    if c.wide {
        heading.push(sorted("POWER", SortKey::Power, 5));
        heading.push(cell("STATE", 9, head, a));
    }
    heading.push(cell("HOLDERS", c.holders, head, a));
    let mut lines = vec![Line::from(heading)];
    let vp = usize::from(area.height.saturating_sub(1));
    let start = st.fleet.list.offset;
    for (i, row) in st.fleet.list.rows.iter().enumerate().skip(start).take(vp) {
        let selected = i == st.fleet.list.selected;
        let line = match *row {
            Row::Node(ni) => node_line(&fleet.nodes[ni], theme, area.width),
            Row::Card(ni, ci) => {
                let node = &fleet.nodes[ni];
                let card = &node.cards[ci];
                let flagged = st.advice.flagged.contains(&crate::model::CardRef::new(node.name.clone(), card.index));
                card_line(fleet, node, card, &c, theme, flat, flagged)
            }
        };
        lines.push(if selected { line.patch_style(theme.selection()) } else { line });
    }
    if st.fleet.list.rows.is_empty() {
        let msg = if st.filter.text.is_empty() { "no cards yet" } else { "no card matches the filter (Esc clears it)" };
        lines.push(Line::from(Span::styled(msg, theme.dim())));
    }
    crate::ui::widgets::rows::draw(f.buffer_mut(), area, &lines);
}

fn node_line(n: &Node, theme: &Theme, width: u16) -> Line<'static> {
    let arrow = if theme.ascii { "v" } else { "▾" };
    let models: Vec<String> = {
        let mut m: Vec<String> = n
            .cards
            .iter()
            .map(|c| {
                c.gpu_model().map(|g| g.name.clone()).or_else(|| c.short_model()).unwrap_or_else(|| c.model.clone())
            })
            .collect();
        m.dedup();
        m
    };
    // Free replicas of shared cards are counted apart from cards and instances.
    let shared = |c: &&Card| c.free_replicas().is_some();
    let free: u32 = n.cards.iter().filter(|c| !shared(c)).map(|c| free_units(n, c)).sum();
    let replicas: u32 = n.cards.iter().filter(shared).map(|c| free_units(n, c)).sum();
    let units = n.cards.iter().find(|c| shared(c)).map_or("replicas", |c| c.share_unit().plural());
    let mut free = match (n.cards.iter().any(|c| shared(&c)), n.cards.iter().all(|c| shared(&c))) {
        (true, true) => format!("{replicas} {units}"),
        (true, false) => format!("{free} + {replicas} {units}"),
        _ => free.to_string(),
    };
    if let Some(c) = n.cards.iter().find(|c| c.sharing.replicas.is_some() && c.free_replicas().is_none()) {
        // A scheduler that counts shares per node only (Kubernetes), or shares in use no source
        // placed: the scheduler's count follows.
        free.push_str(&format!(" ({} in use per card unknown)", c.share_unit().plural()));
    }
    let times = if theme.ascii { "x" } else { "×" };
    let mut text = format!("{arrow} {}  {} {times} {}  free {free}", n.name, n.cards.len(), models.join(", "));
    if !n.capacity.is_empty() {
        // What the scheduler can still hand out, which a busy-looking card may not show.
        let parts: Vec<String> = n
            .capacity
            .iter()
            .map(|c| {
                let what = match &c.resource {
                    crate::model::Resource::WholeCard { model } => model.clone().unwrap_or_else(|| "gpu".into()),
                    crate::model::Resource::MigInstance { profile } => profile.clone(),
                    crate::model::Resource::Shared { unit, model } => {
                        format!("{} {}", model.clone().unwrap_or_else(|| "gpu".into()), unit.as_str())
                    }
                };
                format!("{what} {}/{}", c.free(), c.total)
            })
            .collect();
        text.push_str(&format!("  sched free {}", parts.join(" ")));
    }
    if !n.schedulable {
        let why = n.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
        text.push_str(&format!("  UNSCHEDULABLE{why}"));
    }
    let text = crate::ui::widgets::text::fit(&text, usize::from(width), theme.ascii);
    Line::from(Span::styled(text, theme.title().add_modifier(Modifier::BOLD)))
}

/// One card's row; `flagged`: the advisor has a finding about it (its state says `advice`).
fn card_line(
    fleet: &Fleet,
    node: &Node,
    card: &Card,
    c: &Cols,
    theme: &Theme,
    flat: bool,
    flagged: bool,
) -> Line<'static> {
    let a = theme.ascii;
    let text = theme.text();
    let first = if flat { format!("{}/{}", node.name, card.index) } else { card.index.to_string() };
    let known = card.gpu_model().map(|m| m.name.clone()).or_else(|| card.short_model());
    let model = known.clone().unwrap_or_else(|| format!("?{}", card.model));
    let activity = card.activity_pct();
    let util = match (card.mig.enabled, activity) {
        (true, Some(u)) => format!("~{}%", crate::units::whole(u)),
        (_, v) => pct(v),
    };
    let util_style = activity.map_or(theme.dim(), |u| theme.fg(theme.util_color(u)));
    let temp = card.temperature_c.map_or_else(|| "-".into(), |t| format!("{t:.0}C"));
    let temp_style = match card.temperature_c {
        Some(t) if t >= 85.0 => theme.fg(theme.c.danger),
        Some(t) if t >= 75.0 => theme.fg(theme.c.warning),
        _ => text,
    };
    let name = |id: &str| holder_name(fleet, id);
    let mut spans = vec![
        cell(&first, c.first, text, a),
        cell(&model, c.model, if known.is_some() { text } else { theme.fg(theme.c.warning) }, a),
    ];
    spans.extend(mig_bar(card, c.bar as u16, theme, &name).spans);
    spans.push(Span::raw(" "));
    if c.wide {
        let mode = card.sharing_mode();
        let style = match mode {
            Some(m) if m.unisolated() => theme.fg(theme.c.warning),
            None => theme.dim(),
            _ => text,
        };
        spans.push(cell(&card.sharing_text(a), c.share, style, a));
        spans.push(rcell(&card.contexts_text(), 3, text, a));
    }
    spans.push(rcell(&util, 5, util_style, a));
    spans.push(rcell(&gib_pair(card.memory_used_mib, card.memory_total_mib), c.mem, text, a));
    spans.push(rcell(&temp, 4, temp_style, a));
    let (mut state, mut state_style) = card_state(card, theme);
    if flagged && state == "ok" {
        (state, state_style) = ("advice".into(), theme.fg(theme.c.warning));
    }
    if c.wide {
        let power = card.power_w.map_or_else(|| "-".into(), |p| format!("{p:.0}W"));
        spans.push(rcell(&power, 5, text, a));
        spans.push(cell(&state, 9, state_style, a));
    }
    let mut holders: Vec<String> =
        card.holders().map(|h| holder_name(fleet, h).unwrap_or_else(|| h.to_string())).collect();
    holders.dedup();
    let mut who = holders.join(",");
    if !c.wide && !state.is_empty() && state != "ok" {
        who = format!("{state} {who}");
    }
    let who_style = if !c.wide && state != "ok" { state_style } else { theme.dim() };
    spans.push(cell(&who, c.holders, who_style, a));
    Line::from(spans)
}

/// A card's condition in one word: its fault (lost, XID, ECC) before a drain, then draining,
/// remapped rows, health unknown, or ok.
pub fn card_state(card: &Card, theme: &Theme) -> (String, Style) {
    if card.health.lost {
        ("LOST".into(), theme.fg(theme.c.danger).add_modifier(Modifier::BOLD))
    } else if let Some(x) = card.health.last_xid {
        (format!("XID {x}"), theme.fg(theme.c.danger))
    } else if card.health.ecc_volatile_uncorrected.is_some_and(|e| e > 0) {
        // A fault, as lost and XID are: a drain does not hide why it was drained.
        ("ECC".into(), theme.fg(theme.c.danger))
    } else if card.draining {
        ("DRAINING".into(), theme.fg(theme.c.warning))
    } else if card.health.remapped_rows_uncorrectable.is_some_and(|r| r > 0) {
        ("REMAPPED".into(), theme.fg(theme.c.warning))
    } else if card.health.unknown.is_some() {
        // Nothing reads its health: not "ok".
        ("health ?".into(), theme.fg(theme.c.warning))
    } else {
        ("ok".into(), theme.fg(theme.c.ok))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #47 (words): a drained card with uncorrectable ECC errors still says ECC (the drain hid
    /// why it was drained), and a lost card's fault reads without nested brackets.
    #[test]
    fn a_fault_is_said_before_a_drain() {
        let theme = Theme::load(None, crate::ui::theme::Depth::TrueColor, false).unwrap_or_else(|e| panic!("{e}"));
        let mut c = Card { draining: true, ..Card::default() };
        assert_eq!(card_state(&c, &theme).0, "DRAINING");
        c.health.ecc_volatile_uncorrected = Some(2);
        assert_eq!(card_state(&c, &theme).0, "ECC");
        c.health.lost = true;
        assert_eq!(c.health.fault().as_deref(), Some("lost, not answering"));
    }
}
