//! The card view: one card's instances with placement, memory and utilisation (N/A where the
//! source has none), who holds each, sparklines of recent activity, and the card's events.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Sparkline};

use super::fleet::card_state;
use super::{cell, pct, rcell};
use crate::model::{Card, CardRef, Fleet, SharingMode};
use crate::ui::state::{Sample, UiState};
use crate::ui::theme::Theme;
use crate::ui::widgets::mig_bar::mig_bar;
use crate::ui::widgets::text::fit;
use crate::ui::{gib_pair, holder_name};

/// Sparkline levels in plain ASCII for `--ascii`.
const ASCII_BARS: ratatui::symbols::bar::Set<'static> = ratatui::symbols::bar::Set {
    full: "#",
    seven_eighths: "#",
    three_quarters: "=",
    five_eighths: "=",
    half: "-",
    three_eighths: "-",
    one_quarter: "_",
    one_eighth: "_",
    empty: " ",
};

pub fn draw(f: &mut Frame, area: Rect, st: &UiState, fleet: &Fleet, theme: &Theme, r: &CardRef) {
    let Some(card) = fleet.card(r) else {
        let msg = format!("card {r} is gone from every source (Esc goes back)");
        f.render_widget(Paragraph::new(Span::styled(msg, theme.fg(theme.c.warning))), area);
        return;
    };
    let a = st.settings.ascii;
    let w = usize::from(area.width);
    let (title, facts) = title_and_facts(r, card, a);
    let (state, state_style) = card_state(card, theme);
    let name = |id: &str| holder_name(fleet, id);
    let mut top = vec![
        Line::from(Span::styled(fit(&title, w, a), theme.title())),
        Line::from(vec![
            Span::styled(fit(&facts, w.saturating_sub(state.len()), a), theme.text()),
            Span::styled(state, state_style),
        ]),
        mig_bar(card, area.width, theme, &name),
    ];
    let dra = super::dra::lines(card, w, theme, a);
    let dra_h = dra.len() as u16;
    top.extend(dra);
    top.push(Line::default());
    top.extend(instance_lines(fleet, card, w, theme, a));

    let events: Vec<_> = fleet.events.iter().rev().filter(|e| e.card.as_ref() == Some(r)).take(8).collect();
    // The instance table comes first; sparklines and events take what a small screen spares.
    let shared_h = if card.sharing_mode().is_some_and(SharingMode::unisolated) {
        2 + (card.workloads.len() as u16).min(17)
    } else {
        u16::from(card.sharing_mode().is_some())
    };
    let table_h = 4 + dra_h + card.mig.instances.len() as u16 + 1 + (card.processes.len() as u16).min(8) + shared_h;
    let spare = area.height.saturating_sub(table_h);
    let ev_h = (events.len() as u16 + 1).min(9).min(spare / 2);
    let spark_h = if spare.saturating_sub(ev_h) >= 4 { (area.height / 4).clamp(4, 12).min(spare - ev_h) } else { 0 };
    let rows =
        Layout::vertical([Constraint::Min(3), Constraint::Length(spark_h), Constraint::Length(ev_h)]).split(area);
    f.render_widget(Paragraph::new(top), rows[0]);

    if spark_h > 0 {
        draw_sparklines(f, rows[1], st, r, theme);
    }

    draw_events(f, rows[2], events, theme, w, a);
}

/// The card's title line (name, model, UUID) and its facts line (utilisation, memory,
/// temperature, power, mode, ECC, XID).
fn title_and_facts(r: &CardRef, card: &Card, a: bool) -> (String, String) {
    let model = match (card.gpu_model(), card.short_model()) {
        (Some(m), _) => m.name.clone(),
        (None, Some(short)) => format!("{short} (no MIG)"),
        (None, None) => "unknown model: MIG planning off".into(),
    };
    let dot = if a { "-" } else { "·" };
    let title = format!(" {r} {dot} {model} {dot} {} {dot} {} ", card.model, card.uuid.as_deref().unwrap_or("no UUID"));
    let facts = format!(
        "util {}  mem {} GiB  temp {}  power {}/{}  mode {}  ECC {}  XID {}{}  ",
        if card.mig.enabled {
            card.activity_pct().map_or("N/A".into(), |u| format!("~{}%", crate::units::whole(u)))
        } else {
            pct(card.utilization_pct)
        },
        gib_pair(card.memory_used_mib, card.memory_total_mib),
        card.temperature_c.map_or("-".into(), |t| format!("{t:.0}C")),
        card.power_w.map_or("-".into(), |p| format!("{p:.0}W")),
        card.power_limit_w.map_or("-".into(), |p| format!("{p:.0}W")),
        card.compute_mode.map_or("-".into(), |m| format!("{m:?}").to_lowercase()),
        card.health.ecc_volatile_uncorrected.map_or("-".into(), |e| e.to_string()),
        card.health.last_xid.map_or("-".into(), |x| x.to_string()),
        card.health
            .remapped_rows_uncorrectable
            .filter(|r| *r > 0)
            .map_or(String::new(), |r| format!("  remapped rows {r}")),
    );
    (title, facts)
}

/// The utilisation and memory sparklines of card `r`, side by side in `area`.
fn draw_sparklines(f: &mut Frame, area: Rect, st: &UiState, r: &CardRef, theme: &Theme) {
    let a = st.settings.ascii;
    let halves = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).split(area);
    let hist = st.samples(r);
    let series = |pick: fn(&Sample) -> Option<f64>| -> Vec<Option<u64>> {
        hist.map(|h| h.iter().map(|s| pick(s).map(|v| v.round() as u64)).collect()).unwrap_or_default()
    };
    let borders = if a { Borders::NONE } else { Borders::TOP };
    for (i, (what, data)) in
        [("utilisation", series(Sample::util)), ("memory", series(Sample::mem_pct))].into_iter().enumerate()
    {
        let width = usize::from(halves[i].width);
        let tail: Vec<u64> = data.iter().rev().take(width).rev().map(|v| v.unwrap_or(0)).collect();
        // The scale is always 0-100 %; samples come a second apart, or at a source's own
        // step where it sent history, so the span is not claimed.
        let label = format!("{what} 0-100% (newest right)");
        let block = Block::new().borders(borders).border_style(theme.border()).title(Span::styled(label, theme.dim()));
        let mut spark = Sparkline::default().block(block).data(&tail).max(100).style(theme.fg(theme.c.util_mid));
        if a {
            spark = spark.bar_set(ASCII_BARS);
        }
        f.render_widget(spark, halves[i]);
    }
}

/// The card's recent events, the newest first, in `area`.
fn draw_events(f: &mut Frame, area: Rect, events: Vec<&crate::model::Event>, theme: &Theme, w: usize, a: bool) {
    let mut ev_lines = vec![Line::from(Span::styled("recent events", theme.title()))];
    if events.is_empty() {
        ev_lines.push(Line::from(Span::styled("none", theme.dim())));
    }
    for e in events {
        let style = match e.severity {
            crate::model::Severity::Critical => theme.fg(theme.c.danger),
            crate::model::Severity::Warning => theme.fg(theme.c.warning),
            crate::model::Severity::Info => theme.dim(),
        };
        let text = format!("{}  {}", e.at.format("%m-%d %H:%M:%S"), e.text);
        ev_lines.push(Line::from(Span::styled(fit(&text, w, a), style)));
    }
    f.render_widget(Paragraph::new(ev_lines), area);
}

/// What an unheld card is: free, or why nothing can start on it.
fn idle_words(card: &Card) -> String {
    if card.in_use_by_unknown() {
        return "in use, holder unknown (activity or memory in use that no source attributes)".into();
    }
    match (card.health.fault(), card.draining) {
        (Some(f), true) => format!("not usable: {f}, drained"),
        (Some(f), false) => format!("not usable: {f}"),
        (None, true) => "drained: no new work".into(),
        (None, false) => "idle".into(),
    }
}

/// The card's workloads: on a whole card, who holds or shares it; on a MIG card, its
/// instances one a line; then the processes, and the free and stranded slices.
fn instance_lines(fleet: &Fleet, card: &Card, w: usize, theme: &Theme, a: bool) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if !card.mig.enabled {
        out.extend(whole_card_lines(fleet, card, w, theme, a));
        out.extend(process_lines(card, theme, a));
        return out;
    }
    out.extend(mig_notes(card, w, theme, a));
    out.extend(instance_table(fleet, card, w, theme, a));
    out.extend(process_lines(card, theme, a));
    out.extend(free_slices_line(card, theme));
    out
}

/// A card without MIG: how it is shared and who shares it, or who holds it whole.
fn whole_card_lines(fleet: &Fleet, card: &Card, w: usize, theme: &Theme, a: bool) -> Vec<Line<'static>> {
    let head = theme.title();
    let text = theme.text();
    let mut out = Vec::new();
    if let Some(line) = sharing_line(card, a) {
        let style = if card.sharing_mode().is_some_and(SharingMode::unisolated) {
            theme.fg(theme.c.warning)
        } else {
            theme.dim()
        };
        out.push(Line::from(Span::styled(fit(&line, w, a), style)));
    }
    if card.sharing_mode().is_some_and(SharingMode::unisolated) && !card.workloads.is_empty() {
        // Everyone sharing the card, one a line: the replicas' holders.
        out.push(Line::from(Span::styled(format!("sharing it ({}):", card.workloads.len()), head)));
        for id in card.workloads.iter().take(16) {
            let mem = fleet
                .workload(id)
                .and_then(|x| x.memory_used_mib)
                .map_or_else(String::new, |m| format!("  {:.1} GiB", m as f64 / 1024.0));
            out.push(Line::from(Span::styled(fit(&format!("  {}{mem}", describe(fleet, id)), w, a), text)));
        }
        if card.workloads.len() > 16 {
            out.push(Line::from(Span::styled(format!("  … {} more", card.workloads.len() - 16), theme.dim())));
        }
    } else {
        let who: Vec<String> = card.workloads.iter().map(|id| describe(fleet, id)).collect();
        out.push(Line::from(vec![
            Span::styled(if a { "whole card - " } else { "whole card · " }, head),
            Span::styled(
                fit(&if who.is_empty() { idle_words(card) } else { who.join(", ") }, w.saturating_sub(13), a),
                text,
            ),
        ]));
    }
    out
}

/// What is not known about a MIG card's instances: an error, placements inferred or unknown.
fn mig_notes(card: &Card, w: usize, theme: &Theme, a: bool) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Some(e) = &card.mig.error {
        out.push(Line::from(Span::styled(
            fit(&format!("MIG instances unknown: {e}"), w, a),
            theme.fg(theme.c.warning),
        )));
    }
    let placements = match card.mig.placements {
        crate::model::Placements::Known => None,
        crate::model::Placements::Inferred => {
            Some("placements inferred by tessera (no source reports them): slices are approximate, counts are exact")
        }
        crate::model::Placements::Unknown => {
            Some("placements unknown: no valid layout holds these instances, so free slices are not counted")
        }
    };
    if let Some(p) = placements {
        out.push(Line::from(Span::styled(fit(p, w, a), theme.fg(theme.c.warning))));
    }
    out
}

/// A MIG card's instances, one a line: profile, placement, memory, utilisation, holders.
fn instance_table(fleet: &Fleet, card: &Card, w: usize, theme: &Theme, a: bool) -> Vec<Line<'static>> {
    let head = theme.title();
    let text = theme.text();
    let holders_w = w.saturating_sub(4 + 11 + 6 + 12 + 6 + 5);
    let mut out = Vec::new();
    out.push(Line::from(vec![
        cell("GI", 3, head, a),
        cell("PROFILE", 10, head, a),
        cell("PLACE", 5, head, a),
        rcell("MEM GiB", 11, head, a),
        rcell("UTIL", 5, head, a),
        cell("HOLDERS", holders_w, head, a),
    ]));
    for i in &card.mig.instances {
        let who: Vec<String> = i.workloads.iter().map(|id| describe(fleet, id)).collect();
        let who = match (who.is_empty(), i.in_use_by_unknown()) {
            (false, _) => who.join(", "),
            (true, true) => "in use, holder unknown".to_string(),
            (true, false) => "free".to_string(),
        };
        let util_style = i.utilization_pct.map_or(theme.dim(), |u| theme.fg(theme.util_color(u)));
        out.push(Line::from(vec![
            cell(&i.gi_id.to_string(), 3, text, a),
            cell(&i.profile, 10, text, a),
            // As layouts write it (`3g.40gb@0`): the first memory slice.
            cell(&format!("@{}", i.start), 5, text, a),
            rcell(&gib_pair(i.memory_used_mib, i.memory_total_mib), 11, text, a),
            rcell(&pct(i.utilization_pct), 5, util_style, a),
            cell(&who, holders_w, if i.workloads.is_empty() { theme.dim() } else { text }, a),
        ]));
    }
    out
}

/// The free memory slices a profile can still use, and those stranded (none fits).
fn free_slices_line(card: &Card, theme: &Theme) -> Option<Line<'static>> {
    let free = card.free_slice_mask().filter(|m| *m != 0)?;
    let reachable = card.reachable_slices();
    let list =
        |mask: u16| (0..16).filter(|s| mask & (1 << s) != 0).map(|s| s.to_string()).collect::<Vec<_>>().join(",");
    let mut text = String::new();
    if free & reachable != 0 {
        text.push_str(&format!("free memory slices: {}  ", list(free & reachable)));
    }
    if free & !reachable != 0 {
        text.push_str(&format!("stranded (no profile fits): {}", list(free & !reachable)));
    }
    Some(Line::from(Span::styled(text, theme.dim())))
}

/// How the card is shared, in one line: `time-sliced ×4 · 3 of 4 replicas in use · 3 contexts
/// · MPS limits … · from …`; `None` where nothing is known.
fn sharing_line(card: &Card, a: bool) -> Option<String> {
    let mode = card.sharing_mode()?;
    let dot = if a { " - " } else { " · " };
    let s = &card.sharing;
    let times = if a { "x" } else { "×" };
    let mut parts = vec![match (mode, s.replicas) {
        (SharingMode::TimeSliced, Some(r)) => format!("time-sliced {times}{r}: no memory or fault isolation"),
        (SharingMode::TimeSliced, None) => "time-sliced by the driver: no memory or fault isolation".into(),
        (SharingMode::Mps, Some(r)) => format!("MPS {times}{r}: shared memory, a fatal fault can end every client"),
        (SharingMode::Mps, None) => "MPS: shared memory, a fatal fault can end every client".into(),
        (SharingMode::Exclusive, _) => "exclusive: one holder at a time".into(),
        (SharingMode::Mig, _) => "MIG".into(),
        (SharingMode::DraDynamic, _) => "DRA dynamic: the DRA driver lays the card out per claim (DynamicMIG)".into(),
        (SharingMode::Partitioned, _) => {
            format!("partition mode {}: a GPU of its own on a partitioned card, not MIG", card.sharing_text(a))
        }
    }];
    let units = card.share_unit().plural();
    if let (Some(u), Some(r)) = (s.replicas_used, s.replicas) {
        parts.push(format!("{u} of {r} {units} in use"));
    } else if s.replicas.is_some() {
        parts.push(format!("{units} in use per card not reported"));
    }
    parts.push(match s.contexts {
        None => "contexts unknown".into(),
        Some(1) => "1 context".into(),
        Some(c) => format!("{c} contexts"),
    });
    if s.mps_memory_limit_mib.is_some() || s.mps_thread_pct.is_some() {
        let mem = s.mps_memory_limit_mib.map_or_else(|| "?".into(), |m| format!("{:.1} GiB", m as f64 / 1024.0));
        let threads = s.mps_thread_pct.map_or_else(|| "?".into(), |t| format!("{t} %"));
        parts.push(format!("per client: memory {mem}, threads {threads}"));
    }
    if let Some(o) = &s.origin {
        parts.push(format!("from {o}"));
    }
    Some(parts.join(dot))
}

/// The compute processes NVML lists (MPS clients marked), where a source can see them.
fn process_lines(card: &Card, theme: &Theme, a: bool) -> Vec<Line<'static>> {
    let (head, text) = (theme.title(), theme.text());
    if card.processes.is_empty() {
        return Vec::new();
    }
    let mut out = vec![Line::from(vec![
        rcell("PID", 7, head, a),
        cell("PROCESS", 16, head, a),
        cell("USER", 10, head, a),
        rcell("MEM GiB", 8, head, a),
        cell("GI", 3, head, a),
        cell("MPS", 3, head, a),
    ])];
    for p in &card.processes {
        out.push(Line::from(vec![
            rcell(&p.pid.to_string(), 7, text, a),
            cell(p.name.as_deref().unwrap_or("?"), 16, text, a),
            cell(p.user.as_deref().unwrap_or("?"), 10, text, a),
            rcell(&p.used_mib.map_or("-".into(), |m| format!("{:.1}", m as f64 / 1024.0)), 8, text, a),
            cell(&p.gi_id.map_or("-".into(), |g| g.to_string()), 3, text, a),
            cell(if p.mps { "yes" } else { "" }, 3, text, a),
        ]));
    }
    out
}

/// `sim:3 search/embed-svc-3 (inference)`.
fn describe(fleet: &Fleet, id: &str) -> String {
    fleet.workload(id).map_or_else(|| id.to_string(), |w| format!("{id} {} ({})", w.name, w.kind.as_str()))
}
