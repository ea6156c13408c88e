//! `tessera schedule suggest [--json]`: the advisor's day/night schedule from the demand
//! measured by hour, with the hourly curve it read, what the suggestion does against the
//! cards as they are now and against either layout all day, and the `[[schedule]]` to paste.

use crate::advisor::schedule::{MIN_GAIN_GPU_H, MIN_HOURS, Suggested, suggest as suggestions};
use crate::error::CmdError;
use crate::model::demand::DemandHistory;
use crate::out;

pub fn suggest(cfg: &crate::config::Config, json_out: bool) -> Result<(), CmdError> {
    let (fleet, simulated, demand) = super::super::snapshot::collect_with_demand(cfg)?;
    // The layout now is what every suggestion is weighed against: unknown, nothing to say.
    if !fleet.sources.iter().any(|s| matches!(s.health, crate::model::SourceHealth::Live { .. })) {
        return Err(CmdError::Failed("no source answered: the cards' layouts are unknown, nothing suggested".into()));
    }
    // Cards a configured schedule covers are not suggested again.
    let skip = |n: &crate::model::Node, c: &crate::model::Card| cfg.schedules.iter().any(|s| s.covers(n, c));
    let found = suggestions(&fleet, &demand, &skip);
    let source = if simulated {
        "the simulated cluster's previous day, replayed from its seed".to_string()
    } else {
        crate::engine::demand_path().map_or_else(
            || "this run only (no state directory to keep it in)".to_string(),
            |p| format!("kept in {} by the console and schedule run", p.display()),
        )
    };
    let text = if json_out {
        let v = serde_json::json!({
            "schema_version": super::super::snapshot::SCHEMA_VERSION,
            "taken_at": fleet.taken_at.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            "simulated": simulated,
            "hours_measured": demand.covered(),
            "hours_needed": MIN_HOURS,
            "measured_from": source,
            "suggestions": found,
        });
        serde_json::to_string_pretty(&v).map_err(|e| CmdError::Failed(e.to_string()))? + "\n"
    } else {
        text(&found, &demand, &source)
    };
    out::print(&text)
}

fn text(found: &[Suggested], demand: &DemandHistory, source: &str) -> String {
    let mut out = format!(
        "MIG schedule suggestion from the demand measured by hour ({} of 24 hours; {source})\n",
        demand.covered()
    );
    if demand.covered() < MIN_HOURS {
        out.push_str(&format!(
            "\nnot enough measured yet: a suggestion needs all {MIN_HOURS} hours of the day (the console and \
             `tessera schedule run` sample the queue every 10 minutes while a queue source is live)\n"
        ));
        return out;
    }
    if !found.iter().any(|s| s.recommended) {
        out.push_str(&format!(
            "\nthe best schedule found for each model (the least GPU-hours waiting) does not save {MIN_GAIN_GPU_H} \
             GPU-hour of waiting a day over the cards as they are laid out now and over either layout all day, \
             or leaves more requests waiting: keep them as they are\n"
        ));
    }
    for s in found.iter().filter(|s| !s.recommended) {
        out.push_str(&format!(
            "  the best found for {}: all-{} on {} {:02}:00-{:02}:00 UTC, not suggested: {}\n",
            s.model,
            s.profile,
            s.nodes.join(", "),
            s.day_start,
            s.day_end,
            s.why_not.as_deref().unwrap_or("")
        ));
    }
    if !found.iter().any(|s| s.recommended) {
        out.push_str(&curve(demand));
        return out;
    }
    for s in found.iter().filter(|s| s.recommended) {
        out.push_str(&format!(
            "\n{} on {} ({} cards): all-{} ({} per card) {:02}:00-{:02}:00 UTC, whole otherwise\n",
            s.model,
            s.nodes.join(", "),
            s.cards,
            s.profile,
            s.per_card,
            s.day_start,
            s.day_end
        ));
        out.push_str("  a day                                waiting GPU-h  waiting units-h  idle GiB-h\n");
        let row = |name: &str, o: &crate::advisor::schedule::Outcome| {
            format!("  {name:<36} {:>13.1}  {:>15.1}  {:>10.0}\n", o.waiting_gpu_h, o.waiting_h, o.idle_gib_h)
        };
        out.push_str(&row("as laid out now", &s.current));
        out.push_str(&row("suggested", &s.suggested));
        out.push_str(&row("those cards whole all day", &s.all_whole));
        out.push_str(&row(&format!("those cards all-{} all day", s.profile), &s.all_small));
        out.push_str(&format!("  hour  {:>12}  {:>12}  layout\n", format!("{} asked", s.profile), "whole asked"));
        for h in &s.hours {
            let layout = if h.small_layout { s.profile.as_str() } else { "whole" };
            out.push_str(&format!("  {:02}    {:>12.1}  {:>12.1}  {layout}\n", h.hour, h.small, h.whole));
        }
        out.push_str("  the [[schedule]] (tessera check-config checks it once pasted into the config):\n\n");
        for l in s.toml.lines() {
            out.push_str(&format!("    {l}\n"));
        }
    }
    out.push_str(
        "\nmodel: a MIG request needs an instance of its profile, a whole-card request a whole card; \
         hourly means of running and waiting work, not peaks; waiting GPU-hours count an instance as its share \
         of a card, units-hours one instance or card asked for and not there for an hour; cards a configured \
         [[schedule]] covers are left out\n",
    );
    out
}

/// The most asked-for shapes by hour, when nothing is suggested.
fn curve(d: &DemandHistory) -> String {
    let mut totals: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
    for h in &d.hours {
        for (k, v) in &h.mean {
            *totals.entry(k.as_str()).or_default() += v;
        }
    }
    let mut top: Vec<(&str, f64)> = totals.into_iter().collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    let top: Vec<&str> = top.into_iter().take(4).map(|(k, _)| k).collect();
    if top.is_empty() {
        return "no GPU demand was seen\n".into();
    }
    let mut out = String::from("\nmeasured demand by hour (UTC; instances or cards, running and waiting):\n  hour");
    for k in &top {
        out.push_str(&format!("  {k:>14}"));
    }
    out.push('\n');
    for (h, hour) in d.hours.iter().enumerate() {
        if hour.samples == 0 {
            out.push_str(&format!("  {h:02}    (not measured)\n"));
            continue;
        }
        out.push_str(&format!("  {h:02}  "));
        for k in &top {
            out.push_str(&format!("  {:>14.1}", d.mean(h, k)));
        }
        out.push('\n');
    }
    out
}
