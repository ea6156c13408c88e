//! The workloads view: running work with runtime, activity now and over 30 minutes (held but
//! idle stands out), memory used against what it holds, whether preemption is allowed now,
//! and placement.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{cell, rcell};
use crate::model::{Fleet, Workload, WorkloadKind};
use crate::ui::gib_pair;
use crate::ui::state::UiState;
use crate::ui::theme::Theme;
use crate::ui::widgets::text::fit;
use crate::units::duration::short;
use unicode_width::UnicodeWidthStr;

/// Whether policy lets an operator preempt `w` now, in words.
pub fn preempt_text(w: &Workload, st: &UiState) -> (String, bool) {
    match w.kind {
        WorkloadKind::Inference => ("never (inference)".into(), false),
        _ => {
            let ran = w.runtime(st.clock.now).map_or(0, |d| d.num_seconds());
            let min = st.settings.min_runtime.as_secs() as i64;
            if ran >= min { ("yes".into(), true) } else { (format!("in {}", short(min - ran)), false) }
        }
    }
}

/// Placement, longest form first: `node/0,1` or `node/2 1g.10gb` (cards on several nodes:
/// `n1/0,1 n2/0`), then shorter forms that still name a node and a card: the instance as its
/// compute slices and first memory slice (`node/2 1g@3`), the first node's cards and a count
/// of the rest (`node/0,1 +2`), the first card and that count (`node/0 +3`).
fn placements(w: &Workload, fleet: &Fleet) -> Vec<String> {
    let Some(first) = w.cards.first() else { return vec!["-".into()] };
    let instance = fleet.card(first).and_then(|c| c.mig.instances.iter().find(|i| i.workloads.contains(&w.id)));
    let mut nodes: Vec<(&str, Vec<String>)> = Vec::new();
    for c in &w.cards {
        match nodes.iter_mut().find(|(n, _)| *n == c.node.as_str()) {
            Some((_, idx)) => idx.push(c.index.to_string()),
            None => nodes.push((c.node.as_str(), vec![c.index.to_string()])),
        }
    }
    let mut full: String = nodes.iter().map(|(n, idx)| format!("{n}/{}", idx.join(","))).collect::<Vec<_>>().join(" ");
    if let Some(i) = instance {
        full.push_str(&format!(" {}", i.profile));
    }
    let mut forms = vec![full];
    if let Some(i) = instance {
        let slices = i.profile.split('.').next().unwrap_or(&i.profile);
        forms.push(format!("{}/{} {slices}@{}", first.node, first.index, i.start));
    }
    let (node, idx) = &nodes[0];
    let rest = w.cards.len() - idx.len();
    if rest > 0 {
        forms.push(format!("{node}/{} +{rest}", idx.join(",")));
    }
    if w.cards.len() > 1 {
        forms.push(format!("{}/{} +{}", first.node, first.index, w.cards.len() - 1));
    }
    forms
}

/// The first form of `forms` that fits `width` columns; else the last, its node name cut in
/// the middle (node names differ at their ends) and, if that is still too long, at its end,
/// always with an ellipsis.
fn fit_placement(forms: &[String], width: usize, ascii: bool) -> String {
    if let Some(f) = forms.iter().find(|f| f.width() <= width) {
        return f.clone();
    }
    let last = forms.last().map_or("", String::as_str);
    let (node, rest) = last.split_at(last.find('/').unwrap_or(0));
    let over = last.width() - width;
    let node_w = node.chars().count();
    // Keep at least three characters of the node's start and four of its end.
    if node_w >= over + 1 + 7 {
        let keep = node_w - over - 1;
        let head: String = node.chars().take(keep / 2).collect();
        let tail: String = node.chars().skip(node_w - (keep - keep / 2)).collect();
        return format!("{head}{}{tail}{rest}", if ascii { '~' } else { '…' });
    }
    fit(last, width, ascii)
}

/// The width a column needs for its widest shown value, within `min..=max`.
pub fn content_width<'a>(values: impl Iterator<Item = &'a str>, min: usize, max: usize) -> usize {
    values.map(|v| v.chars().count()).max().unwrap_or(0).clamp(min, max.max(min))
}

/// An activity percentage, `-` where unknown.
pub fn pct_text(p: Option<f64>) -> String {
    p.map_or_else(|| "-".into(), |u| format!("{}%", crate::units::whole(u)))
}

pub fn draw(f: &mut Frame, area: Rect, st: &UiState, fleet: &Fleet, theme: &Theme) {
    let a = st.settings.ascii;
    let w = usize::from(area.width);
    let vp = usize::from(area.height.saturating_sub(1));
    let rows: Vec<&Workload> =
        st.workloads.rows.iter().skip(st.workloads.offset).take(vp).map(|&i| &fleet.workloads[i]).collect();
    let forms: Vec<Vec<String>> = rows.iter().map(|w| placements(w, fleet)).collect();
    let cols = Columns::fit(&rows, &forms, w);
    let mut lines = vec![cols.heading(theme.title(), a)];
    for (i, (wl, forms)) in rows.into_iter().zip(&forms).enumerate() {
        let line = cols.row(wl, forms, st, theme);
        lines.push(if st.workloads.offset + i == st.workloads.selected {
            line.patch_style(theme.selection())
        } else {
            line
        });
    }
    if st.workloads.rows.is_empty() {
        let empty = if st.filter.text.is_empty() { "nothing is running" } else { "nothing running matches the filter" };
        lines.push(Line::from(Span::styled(empty, theme.dim())));
    }
    f.render_widget(Paragraph::new(lines), area);
}

/// The table's columns at a width: how wide each is and which show.
struct Columns {
    wide: bool,
    id_w: usize,
    name_w: usize,
    kind_w: usize,
    pre_w: usize,
    mem_w: usize,
    place_w: usize,
    show_kind: bool,
    show_runtime: bool,
}

impl Columns {
    /// Columns as wide as what they show; the placement takes the rest. Narrow, kind and then
    /// runtime make way until the placement fits whole (the workload's own view shows both).
    fn fit(rows: &[&Workload], forms: &[Vec<String>], w: usize) -> Self {
        let wide = w >= 120;
        let id_w = content_width(rows.iter().map(|w| w.id.as_str()), 6, if wide { 28 } else { 10 });
        let name_w = content_width(rows.iter().map(|w| w.name.as_str()), 8, if wide { 36 } else { 14 });
        let (kind_w, pre_w) = if wide { (9, 17) } else { (5, 7) };
        let mems: Vec<String> = rows.iter().map(|w| gib_pair(w.memory_used_mib, w.request.gpu_memory_mib)).collect();
        let mem_w = if wide { 13 } else { content_width(mems.iter().map(String::as_str), 7, 13) };
        let place_need = content_width(forms.iter().filter_map(|f| f.first()).map(String::as_str), 9, 60);
        let base = id_w + 1 + name_w + 1 + 5 + 10 + mem_w + 1 + pre_w + 1;
        let (show_kind, show_runtime) = if wide || w >= base + kind_w + 1 + 8 + place_need {
            (true, true)
        } else {
            (false, w >= base + 8 + place_need)
        };
        let fixed = base + if show_kind { kind_w + 1 } else { 0 } + if show_runtime { 8 } else { 0 };
        // The last cell's trailing space may fall off the screen.
        let place_w = w.saturating_sub(fixed);
        Self { wide, id_w, name_w, kind_w, pre_w, mem_w, place_w, show_kind, show_runtime }
    }

    /// The column heads.
    fn heading(&self, head: ratatui::style::Style, a: bool) -> Line<'static> {
        let mut heading = vec![cell("ID", self.id_w, head, a), cell("NAME", self.name_w, head, a)];
        if self.show_kind {
            heading.push(cell("KIND", self.kind_w, head, a));
        }
        if self.show_runtime {
            heading.push(rcell("RUNTIME", 7, head, a));
        }
        heading.extend([
            rcell("UTIL", 4, head, a),
            rcell("30m MEAN", 9, head, a),
            rcell("MEM GiB", self.mem_w, head, a),
            cell("PREEMPT", self.pre_w, head, a),
            cell("PLACEMENT", self.place_w, head, a),
        ]);
        Line::from(heading)
    }

    /// One workload's row, its placement in the first of its `forms` that fits.
    fn row(&self, wl: &Workload, forms: &[String], st: &UiState, theme: &Theme) -> Line<'static> {
        let a = st.settings.ascii;
        let text = theme.text();
        let (mut pre, allowed) = preempt_text(wl, st);
        if !self.wide && pre.starts_with("never") {
            pre = "never".into();
        }
        // Held but idle: under 5 % activity for the whole window.
        let idle = wl.activity.is_some_and(|x| x.held_idle());
        let act = wl.activity;
        let mut cells = vec![cell(&wl.id, self.id_w, text, a), cell(&wl.name, self.name_w, text, a)];
        if self.show_kind {
            let kind = wl.kind.as_str();
            cells.push(cell(if self.wide { kind } else { &kind[..5.min(kind.len())] }, self.kind_w, text, a));
        }
        if self.show_runtime {
            cells.push(rcell(&wl.runtime(st.clock.now).map_or("-".into(), |d| short(d.num_seconds())), 7, text, a));
        }
        cells.extend([
            rcell(&pct_text(act.and_then(|x| x.now_pct)), 4, text, a),
            rcell(&mean_text(wl), 9, if idle { theme.fg(theme.c.warning) } else { text }, a),
            rcell(&gib_pair(wl.memory_used_mib, wl.request.gpu_memory_mib), self.mem_w, text, a),
            cell(&pre, self.pre_w, if allowed { theme.fg(theme.c.ok) } else { theme.dim() }, a),
            cell(&fit_placement(forms, self.place_w, a), self.place_w, text, a),
        ]);
        Line::from(cells)
    }
}

/// The 30-minute mean activity; a mean over less says over how long (a replica seen for a
/// minute read as a 30-minute mean); held but idle says so.
fn mean_text(wl: &Workload) -> String {
    let idle = wl.activity.is_some_and(|x| x.held_idle());
    let act = wl.activity;
    let mean = act.and_then(|x| x.mean_pct);
    match (mean, idle, act) {
        (Some(_), true, _) => format!("idle {}", pct_text(mean)),
        (Some(_), false, Some(x)) if !x.window_covered() => {
            format!("{}/{}", pct_text(mean), short(i64::try_from(x.covered_s).unwrap_or(0)))
        }
        _ => pct_text(mean),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first form that fits, else the node cut in its middle, never a token cut bare.
    #[test]
    fn placements_shorten_to_forms_that_still_name_node_and_card() {
        let forms: Vec<String> = ["gpu-a100-01/0 3g.40gb", "gpu-a100-01/0 3g@4"].map(String::from).to_vec();
        assert_eq!(fit_placement(&forms, 30, false), "gpu-a100-01/0 3g.40gb");
        assert_eq!(fit_placement(&forms, 20, false), "gpu-a100-01/0 3g@4");
        assert_eq!(fit_placement(&forms, 16, false), "gpu-…0-01/0 3g@4");
        assert_eq!(fit_placement(&forms, 16, true), "gpu-~0-01/0 3g@4");
        assert_eq!(fit_placement(&forms, 10, false), "gpu-a100-…");
        let many: Vec<String> = ["gpu-h100-01/2,3,4,5", "gpu-h100-01/2 +3"].map(String::from).to_vec();
        assert_eq!(fit_placement(&many, 17, false), "gpu-h100-01/2 +3");
    }
}
