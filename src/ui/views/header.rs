//! The header: where the data comes from, fleet totals, queue, tabs and source health.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::model::{Fleet, SourceHealth};
use crate::ui::state::{Tab, UiState};
use crate::ui::theme::Theme;
use crate::ui::widgets::text::fit;
use crate::units::duration::short;

/// Used and total memory in one unit, the total's (`0.9TiB/3.2TiB`, not `920GiB/3.2TiB`).
fn mem_pair(used_mib: u64, total_mib: u64) -> String {
    if total_mib >= 1024 * 1024 {
        format!("{:.1}/{:.1}TiB", used_mib as f64 / 1048576.0, total_mib as f64 / 1048576.0)
    } else {
        format!("{:.0}/{:.0}GiB", used_mib as f64 / 1024.0, total_mib as f64 / 1024.0)
    }
}

/// The fleet's totals as labelled parts, most needed first: each part keeps its label with
/// its numbers, and a part that does not fit in `room` columns is left out whole (narrow
/// terminals show fewer parts, never a bare number or one cut in half).
fn summary(st: &UiState, wide: bool, room: usize) -> String {
    let t = &st.fleet.totals;
    let q = &st.queue.summary;
    let oldest = q.oldest_wait_s.map_or_else(|| "-".into(), short);
    let util = t.mean_util.map_or_else(|| "N/A".into(), |u| format!("{}%", crate::units::whole(u)));
    // No source reports memory (a scheduler alone): unknown, not zero.
    let mem = if t.mem_total_mib == 0 { "N/A".to_string() } else { mem_pair(t.mem_used_mib, t.mem_total_mib) };
    // Unhealthy cards are counted where the eye starts: they need someone.
    // Cards whose health nothing reads are said too: unknown is not healthy.
    let sick = match (t.unhealthy, t.health_unknown) {
        (0, 0) => String::new(),
        (s, 0) => format!(" ({s} unhealthy)"),
        (0, u) => format!(" ({u} health unknown)"),
        (s, u) => format!(" ({s} unhealthy, {u} health unknown)"),
    };
    let cards = format!("{}{sick}", crate::units::count(t.cards as u64, "card", "cards"));
    let queued = q.known.count_text(q.pending);
    // Advice that needs someone: high and warn findings, and a short form ("8H 2W") to try
    // before leaving it out.
    let advice = match st.advice.counts {
        (0, 0, _) => None,
        (0, w, _) => Some(vec![format!("advice {w} warn"), format!("{w}W")]),
        (h, 0, _) => Some(vec![format!("advice {h} high"), format!("{h}H")]),
        (h, w, _) => Some(vec![format!("advice {h} high {w} warn"), format!("{h}H {w}W")]),
    };
    // Each part with a shorter form to try where the first does not fit.
    let mut parts: Vec<Vec<String>> = vec![vec![cards]];
    if t.unhealthy > 0 {
        parts[0].push(format!("{} unhealthy", t.unhealthy));
    }
    parts.push(vec![format!("util {util}")]);
    // Wide, the clock is kept: its room is set aside before the other parts take theirs.
    let mut clock = None;
    let mut room = room;
    if wide {
        parts.push(vec![format!("mem {mem}")]);
        parts.push(vec![format!("MIG {}/{} used", t.mig_used, t.mig_total)]);
        parts.push(vec![format!("queue {queued} (oldest {oldest})")]);
        parts.extend(advice);
        let c = st.clock.now.format("%H:%M:%S UTC").to_string();
        if st.replay.is_some() {
            // A replay's label says its moment: the clock comes last, where it fits.
            parts.push(vec![c]);
        } else {
            room = room.saturating_sub(c.chars().count() + 3);
            clock = Some(c);
        }
    } else {
        // Narrow: the queue and advice before MIG and memory, which the fleet view shows.
        parts.push(vec![format!("queue {queued}, oldest {oldest}")]);
        // Narrow, every part keeps its label: the long form or nothing.
        parts.extend(advice.map(|a| a[..1].to_vec()));
        parts.push(vec![format!("MIG {}/{}", t.mig_used, t.mig_total)]);
        parts.push(vec![format!("mem {mem}")]);
    }
    let mut out = String::new();
    for forms in &parts {
        let sep = if out.is_empty() { " " } else { " │ " };
        let room = room.saturating_sub(out.chars().count() + sep.chars().count());
        if let Some(part) = forms.iter().find(|p| p.chars().count() <= room) {
            out.push_str(sep);
            out.push_str(part);
        }
    }
    if let Some(c) = clock {
        out.push_str(if out.is_empty() { " " } else { " │ " });
        out.push_str(&c);
    }
    out
}

/// One source's health in `width` columns: its summary where it fits, else the state's word
/// first and the name cut after it ("down scrape:gpu…"), so the health reads without colour
/// (NO_COLOR, the mono theme) however narrow.
fn health_text(
    s: &crate::model::SourceStatus,
    wall: chrono::DateTime<chrono::Utc>,
    width: usize,
    ascii: bool,
) -> String {
    let full = format!(" {} ", s.summary(wall));
    if full.chars().count() <= width {
        return full;
    }
    let word = match s.health {
        SourceHealth::Live { .. } => "live",
        SourceHealth::Connecting => "wait",
        SourceHealth::Stale { .. } => "stale",
        SourceHealth::Unavailable { .. } => "down",
    };
    fit(&format!(" {word} {} ", s.name), width, ascii)
}

pub fn draw(f: &mut Frame, area: Rect, st: &UiState, fleet: &Fleet, theme: &Theme, simulated: bool) {
    if area.height == 0 {
        return;
    }
    let w = usize::from(area.width);
    let line1 = title_line(st, theme, simulated, w);
    let line2 = tabs_and_health(st, fleet, theme, w);
    f.render_widget(Paragraph::new(vec![line1, line2]), area);
}

/// Line 1: the name, the mode badges (simulated, replay or read-only, recording), the summary.
fn title_line(st: &UiState, theme: &Theme, simulated: bool, w: usize) -> Line<'static> {
    let hs = theme.header();
    let mut spans = vec![Span::styled(" tessera ", hs.add_modifier(Modifier::BOLD))];
    if simulated {
        let sim = if theme.mono {
            Style::new().add_modifier(Modifier::BOLD)
        } else {
            Style::new().fg(theme.c.header_fg).bg(theme.c.simulated).add_modifier(Modifier::BOLD)
        };
        spans.push(Span::styled(" SIMULATED ", sim));
    }
    if let Some(r) = &st.replay {
        // A replay is read-only by nature: its label says so.
        spans.push(Span::styled(
            crate::ui::views::replay::header_label(r, theme.ascii),
            hs.add_modifier(Modifier::REVERSED | Modifier::BOLD),
        ));
    } else if st.settings.read_only {
        spans.push(Span::styled(" READ-ONLY ", hs.add_modifier(Modifier::REVERSED)));
    }
    if st.settings.recording.is_some() {
        let rec = if theme.ascii { " REC " } else { " ● REC " };
        let style = if theme.mono {
            hs.add_modifier(Modifier::BOLD)
        } else {
            theme.fg(theme.c.danger).add_modifier(Modifier::BOLD)
        };
        spans.push(Span::styled(rec, style));
    }
    let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
    let summary = summary(st, w >= 120, w.saturating_sub(used));
    let summary = if theme.ascii { summary.replace('│', "|").replace('…', "~") } else { summary };
    spans
        .push(Span::styled(format!("{:<1$}", fit(&summary, w.saturating_sub(used), theme.ascii), w - used.min(w)), hs));
    Line::from(spans)
}

/// Line 2: tabs on the left, source health on the right.
fn tabs_and_health(st: &UiState, fleet: &Fleet, theme: &Theme, w: usize) -> Line<'static> {
    let mut tabs: Vec<Span> = Vec::new();
    for tab in Tab::ALL {
        let label = format!(" {} {} ", tab.index() + 1, tab.title());
        let style = if tab == st.tab && st.open.card.is_none() { theme.selection() } else { theme.dim() };
        tabs.push(Span::styled(label, style));
    }
    if let Some(id) = st.open.workload.as_ref().filter(|_| st.open.card.is_none()) {
        tabs.push(Span::styled(format!(" {id} "), theme.selection()));
    }
    if let Some(c) = &st.open.card {
        tabs.push(Span::styled(format!(" card {c} "), theme.selection()));
    }
    let tab_w: usize = tabs.iter().map(|s| s.content.chars().count()).sum();
    let room = w.saturating_sub(tab_w + 1);
    let (health, used) = health_spans(st, fleet, theme, room);
    let gap = w.saturating_sub(tab_w + used);
    let mut line2 = tabs;
    line2.push(Span::raw(" ".repeat(gap)));
    line2.extend(health);
    Line::from(line2)
}

/// Each source's health in `room` columns (past a handful, one summary per kind), and the
/// columns they take.
fn health_spans(st: &UiState, fleet: &Fleet, theme: &Theme, room: usize) -> (Vec<Span<'static>>, usize) {
    let mut health: Vec<Span> = Vec::new();
    let mut used = 0;
    // Hundreds of exporters do not fit a line: past a handful, one summary per kind.
    if fleet.sources.len() > 4 {
        let mut kinds: Vec<(&str, [usize; 4])> = Vec::new();
        for s in &fleet.sources {
            let slot = match s.health {
                SourceHealth::Live { .. } => 0,
                SourceHealth::Connecting => 1,
                SourceHealth::Stale { .. } => 2,
                SourceHealth::Unavailable { .. } => 3,
            };
            match kinds.iter_mut().find(|(k, _)| *k == s.kind.as_str()) {
                Some((_, c)) => c[slot] += 1,
                None => {
                    let mut c = [0; 4];
                    c[slot] = 1;
                    kinds.push((s.kind.as_str(), c));
                }
            }
        }
        for (kind, c) in kinds {
            let names = ["live", "connecting", "stale", "unavailable"];
            let parts: Vec<String> = (0..4).filter(|&i| c[i] > 0).map(|i| format!("{} {}", c[i], names[i])).collect();
            let style = if c[3] > 0 {
                theme.fg(theme.c.danger)
            } else if c[2] > 0 {
                theme.fg(theme.c.warning)
            } else {
                theme.fg(theme.c.ok)
            };
            let text = fit(&format!(" {kind}: {} ", parts.join(", ")), room.saturating_sub(used), theme.ascii);
            used += text.chars().count();
            health.push(Span::styled(text, style));
        }
    }
    for s in fleet.sources.iter().filter(|_| fleet.sources.len() <= 4) {
        let style = match s.health {
            SourceHealth::Live { .. } => theme.fg(theme.c.ok),
            SourceHealth::Connecting => theme.dim(),
            SourceHealth::Stale { .. } => theme.fg(theme.c.warning),
            SourceHealth::Unavailable { .. } => theme.fg(theme.c.danger),
        };
        // Each source gets a fair share, so one long reason cannot hide the others' health.
        let share = (room / fleet.sources.len().max(1)).max(1);
        let text = health_text(s, st.clock.wall, share.min(room.saturating_sub(used)), theme.ascii);
        used += text.chars().count();
        health.push(Span::styled(text, style));
    }
    (health, used)
}

#[cfg(test)]
mod tests {
    /// #47 (words): one unit for both sides of the header's memory ("920GiB/3.2TiB" mixed them).
    #[test]
    fn memory_is_said_in_one_unit() {
        assert_eq!(super::mem_pair(920 * 1024, 3 * 1024 * 1024 + 200 * 1024), "0.9/3.2TiB");
        assert_eq!(super::mem_pair(300 * 1024, 640 * 1024), "300/640GiB");
    }
}
