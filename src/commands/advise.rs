//! `tessera advise [--json] [--fail-on high|warn]`: collect once, run the advisor, print the
//! findings (the most severe first, then the most GPU-hours) or the JSON contract; exit 4
//! when a finding of the given severity exists, for cron and alerting.

use serde_json::json;

use super::settings;
use crate::advisor::{self, Context, Finding, Severity};
use crate::cli::Global;
use crate::error::CmdError;
use crate::model::Fleet;
use crate::out;

/// `advise --json`'s contract version: 2 added `plan` and findings whose suggestion lost a
/// conflict (rewritten to words saying what it lost to).
pub const SCHEMA_VERSION: u32 = 2;

fn context(
    cfg: &crate::config::Config,
    fleet: &Fleet,
    demand: &crate::model::demand::DemandHistory,
) -> (Vec<Finding>, Vec<advisor::reconcile::Planned>, usize, usize) {
    let mut cx = Context::new(cfg, fleet.taken_at.unwrap_or_else(chrono::Utc::now));
    cx.demand = Some(demand);
    // Cards a configured schedule covers are not suggested again.
    let skip = |n: &crate::model::Node, c: &crate::model::Card| cfg.schedules.iter().any(|s| s.covers(n, c));
    let suggested = advisor::schedule::suggest(fleet, demand, &skip);
    cx.suggested = Some(&suggested);
    let running: Vec<_> = fleet.workloads.iter().filter(|w| w.state.is_active() && !w.cards.is_empty()).collect();
    let seen = running.iter().filter(|w| w.activity.is_some_and(|a| a.window_covered())).count();
    let (findings, plan) = advisor::advise_with_plan(fleet, &cx);
    (findings, plan, seen, running.len())
}

pub fn advise(g: &Global, json_out: bool, fail_on: Option<Severity>) -> Result<(), CmdError> {
    let cfg = settings(g)?;
    let (fleet, simulated, demand) = super::snapshot::collect_with_demand(&cfg)?;
    let (findings, plan, seen, running) = context(&cfg, &fleet, &demand);
    let text = if json_out {
        let v = json!({
            "schema_version": SCHEMA_VERSION,
            "taken_at": fleet.taken_at.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            "simulated": simulated,
            "activity_covered": { "workloads": seen, "of": running },
            "currency": cfg.advisor.currency,
            "findings": findings,
            "plan": plan,
        });
        serde_json::to_string_pretty(&v).map_err(|e| CmdError::Failed(e.to_string()))? + "\n"
    } else {
        table(&findings, seen, running, &cfg.advisor.currency)
    };
    out::print(&text)?;
    if !fleet.sources.iter().any(|s| matches!(s.health, crate::model::SourceHealth::Live { .. })) {
        return Err(CmdError::Failed("no source answered: nothing to advise on".into()));
    }
    match fail_on {
        Some(level) if findings.iter().any(|f| f.severity >= level) => {
            Err(CmdError::Findings(format!("findings at {} or above", level.as_str())))
        }
        _ => Ok(()),
    }
}

fn table(findings: &[Finding], seen: usize, running: usize, currency: &str) -> String {
    let (h, w, i) = advisor::counts(findings);
    let mut out = format!(
        "{} findings: {h} high, {w} warn, {i} info (the most severe first, then the most GPU-hours)\n",
        findings.len()
    );
    if seen < running {
        out.push_str(&format!(
            "activity: {seen} of {running} running workloads have 30 minutes of history; idle and oversized \
             need it (the console learns it as it runs; Prometheus and the simulator send theirs)\n"
        ));
    }
    for f in findings {
        let cost = match f.cost_per_day {
            Some(c) => format!("{:.1} GPU-h/day, {c:.2} {currency}/day", f.gpu_hours_per_day),
            // Interference and crowding are risks to what runs, not idle GPUs.
            None if f.gpu_hours_per_day == 0.0 => "a risk, not waste: no GPU-hours counted".into(),
            None => format!("{:.1} GPU-h/day", f.gpu_hours_per_day),
        };
        out.push_str(&format!("\n[{}] {}: {}\n    {cost}\n", f.severity.as_str(), f.kind.as_str(), f.title));
        for e in &f.evidence {
            out.push_str(&format!("    - {e}\n"));
        }
        out.push_str(&format!("    => {}\n", f.suggestion.text()));
    }
    out
}
