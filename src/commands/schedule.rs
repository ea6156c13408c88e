//! `tessera schedule [--json]`: the next 24 h of MIG schedule changes per card, from one
//! collection; `tessera schedule export --format mig-parted`: the schedules as a mig-parted
//! config with the GPU Operator steps. Without `[[schedule]]` in the config it says so, except
//! on the simulated cluster, which has an example schedule of its own (`schedule::demo::DEMO`) to show.

use chrono::{DateTime, Utc};

mod apply;
mod run;
mod suggest;

use super::{collect_once, settings};
use crate::cli::{ExportFormat, Global, ScheduleCommand};
use crate::error::CmdError;
use crate::out;
use crate::schedule::{Timeline, export, timelines};
use crate::units::duration;
pub use apply::apply;
pub use run::run;

/// The timeline covers this many hours.
pub const HOURS: i64 = 24;

/// The configured schedules, or on the simulated cluster with none configured its example
/// (said on stderr); `None` when there are none to use.
pub(super) fn effective(cfg: &crate::config::Config, simulated: bool) -> Option<Vec<crate::model::schedule::Schedule>> {
    let (schedules, demo) = crate::schedule::demo::effective(cfg, simulated)?;
    if demo {
        // On stderr: stdout stays the timeline or its JSON.
        super::to_stderr(
            "no [[schedule]] configured: showing the simulated cluster's example (tessera check-config --example has the form)",
        );
    }
    Some(schedules)
}

pub(super) fn no_schedules(cfg: &crate::config::Config) -> CmdError {
    let file = cfg.path.as_ref().map_or_else(|| "the config (none loaded)".to_string(), |p| p.display().to_string());
    CmdError::Usage(format!("no [[schedule]] in {file}: add one (tessera check-config --example shows the form)"))
}

pub fn schedule(g: &Global, json_out: bool, what: Option<ScheduleCommand>) -> Result<(), CmdError> {
    let cfg = settings(g)?;
    // A suggestion needs no schedule of its own.
    if let Some(ScheduleCommand::Suggest { json }) = what {
        return suggest::suggest(&cfg, json_out || json);
    }
    // Only the simulated cluster can stand in for a missing [[schedule]].
    let maybe_demo = cfg.sources.demo || !cfg.sources.any_real();
    // (`run` applies only schedules that say unattended = true; the example does not.)
    let demo_stands_in = maybe_demo && !matches!(what, Some(ScheduleCommand::Run { .. }));
    if cfg.schedules.is_empty() && !demo_stands_in {
        return Err(no_schedules(&cfg));
    }
    if let Some(ScheduleCommand::Apply { name, how }) = &what {
        return apply(g, name, *how);
    }
    if let Some(ScheduleCommand::Run { run_for, despite_open_intent }) = &what {
        let limit = run_for.as_deref().map(duration::parse).transpose().map_err(CmdError::usage)?;
        return run(g, limit, *despite_open_intent);
    }
    if let Some(ScheduleCommand::Export { format: ExportFormat::MigParted }) = what {
        // The nodes each change applies to, where a source answers; the config alone otherwise.
        let collected = collect_once(&cfg).ok();
        let simulated = collected.as_ref().is_some_and(|(_, s)| *s);
        let schedules = effective(&cfg, simulated).ok_or_else(|| no_schedules(&cfg))?;
        let text = export::mig_parted(&schedules, collected.as_ref().map(|(f, _)| f)).map_err(CmdError::usage)?;
        return out::print(&text);
    }
    let (fleet, simulated) = collect_once(&cfg)?;
    let schedules = effective(&cfg, simulated).ok_or_else(|| no_schedules(&cfg))?;
    let now = fleet.taken_at.unwrap_or_else(Utc::now);
    let t = timelines(&schedules, &fleet, now, cfg.policy.min_runtime, HOURS);
    let text = if json_out {
        let v = serde_json::json!({
            "schema_version": super::snapshot::SCHEMA_VERSION,
            "taken_at": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "simulated": simulated,
            "hours": HOURS,
            "schedules": t,
        });
        serde_json::to_string_pretty(&v).map_err(|e| CmdError::Failed(e.to_string()))? + "\n"
    } else {
        text(&schedules, &t, now)
    };
    out::print(&text)
}

/// `Tue 20:00 CET` in the schedule's zone.
fn local(t: DateTime<Utc>, tz: &jiff::tz::TimeZone) -> String {
    jiff::Timestamp::from_second(t.timestamp())
        .map(|ts| ts.to_zoned(tz.clone()).strftime("%a %H:%M %Z").to_string())
        .unwrap_or_else(|_| t.to_rfc3339())
}

/// A layout with where each instance lands, as `repartition` and `snapshot` write it (a
/// window's `mig_config` gives none).
fn placed(model: &str, layout: &str) -> String {
    use crate::model::mig::{LayoutSpec, lookup, parse_layout};
    match lookup(model).map(|m| parse_layout(m, layout)) {
        Some(Ok(LayoutSpec::Mig(l))) => l.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
        _ => layout.to_string(),
    }
}

fn text(schedules: &[crate::model::schedule::Schedule], timelines: &[Timeline], now: DateTime<Utc>) -> String {
    let mut out = format!("MIG schedules, the next {HOURS} h from {}\n", now.format("%Y-%m-%d %H:%M UTC"));
    for (s, t) in schedules.iter().zip(timelines) {
        let window = t.window_now.clone().unwrap_or_else(|| "none".into());
        out.push_str(&format!(
            "\nschedule {} ({}; lead {}, min_hold {}, running: {}): {} cards, window now: {window}\n",
            t.schedule,
            t.timezone,
            duration::format(s.lead),
            duration::format(s.min_hold),
            match t.running {
                crate::model::schedule::Running::Wait => "wait",
                crate::model::schedule::Running::Preempt => "preempt eligible training",
            },
            t.cards.len()
        ));
        if t.cards.is_empty() {
            out.push_str("  no card any source reports matches its nodes and model\n");
        }
        for c in &t.conflicts {
            out.push_str(&format!("  conflict: {c}: the first schedule that covers a card should be the only one\n"));
        }
        for c in &t.cards {
            out.push_str(&format!("  {}  {}  now {}\n", c.card, c.model, c.layout_now));
            if c.steps.is_empty() {
                out.push_str("    no change in the next 24 h\n");
            }
            for st in &c.steps {
                let when = local(st.at, &s.tz);
                if let Some(why) = &st.skipped {
                    out.push_str(&format!("    {when}  {}: skipped, {why}\n", st.window));
                    continue;
                }
                if st.no_op {
                    out.push_str(&format!("    {when}  {}: {} already\n", st.window, st.layout));
                    continue;
                }
                // Due now: new work stops now, not at a time already past.
                let drain = if st.due || st.drain_at <= now { "now".to_string() } else { local(st.drain_at, &s.tz) };
                out.push_str(&format!(
                    "    {when}  {} -> {}  (no new work from {drain}; {}; waiting work it would start: {} -> {})\n",
                    st.window,
                    placed(&c.model, &st.layout),
                    st.readiness,
                    st.serves_now,
                    st.serves_after
                ));
                for n in &st.requires {
                    out.push_str(&format!("        {} {} ({}): {}\n", n.workload, n.name, n.kind, n.verdict));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_demo_schedule_parses() {
        let c = crate::config::parse(crate::schedule::demo::DEMO, "demo").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.schedules.len(), 1);
    }
}
