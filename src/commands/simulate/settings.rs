//! The engine's settings for a replay: from the config, the flags and the demand (its day
//! offset, its first arrival, whether it is the demo's), with the schedules' windows.

use super::demand::Demand;
use super::options::{Options, duration_s};
use super::usage;
use crate::error::CmdError;
use crate::simulate::{self, Fleet, Placement, Settings};

/// The engine's settings from the config and the flags.
pub(super) fn engine_settings(
    o: &Options,
    cfg: &crate::config::Config,
    fleet: &Fleet,
    d: &Demand,
) -> Result<Settings, CmdError> {
    let (day_offset_s, first_submit) = (d.day_offset_s, d.jobs.first().map_or(0, |j| j.submit));
    let mut s =
        Settings { min_runtime_s: cfg.policy.min_runtime.as_secs() as i64, day_offset_s, ..Settings::default() };
    if let Some(p) = &o.placement {
        s.placement = Placement::parse(p).ok_or_else(|| {
            usage(&format!(
                "--placement {p}: first-fit, best-fit or frag-aware (a packing also fgd, paper-bestfit, paper-dotprod)"
            ))
        })?;
        if s.placement.packing_only() && o.pack.is_none() {
            return Err(usage(&format!(
                "--placement {p}: the paper's placements run in a packing only (--pack); a replay takes first-fit, best-fit or frag-aware"
            )));
        }
        // Named, it holds for dynamic too (tessera's placement instead of the scheduler's).
        s.dynamic_placement = s.placement;
    }
    if let Some(r) = o.replicas {
        if !(1..=64).contains(&r) {
            return Err(usage(&format!("--replicas {r}: from 1 to 64")));
        }
        s.replicas = r;
    }
    if let Some(h) = &o.horizon {
        s.horizon_s = Some(first_submit + duration_s("--horizon", h)?);
    }
    s.prices = cfg.advisor.prices.clone();
    // The demo's example schedule stands in on the demo only, as in the console.
    let schedules = crate::schedule::demo::effective(cfg, d.demo).map(|(s, _)| s).unwrap_or_default();
    s.windows = windows(&schedules, fleet);
    if let Some(first) = schedules.first() {
        s.lead_s = first.lead.as_secs() as i64;
        s.min_hold_s = first.min_hold.as_secs() as i64;
    }
    Ok(s)
}

/// The schedules' windows for the engine: per MIG model of the fleet the schedule covers,
/// in UTC at the offset its time zone has now (days of the week and DST are not modelled).
fn windows(schedules: &[crate::model::schedule::Schedule], fleet: &Fleet) -> Vec<simulate::Window> {
    let mut out = Vec::new();
    for sch in schedules {
        let offset = sch.tz.to_offset(jiff::Timestamp::now()).seconds();
        for m in fleet.models.iter().filter(|m| m.mig.is_some()) {
            let have: Vec<&str> = fleet.models.iter().map(|m| &*m.name).collect();
            let covers = |x: &str| match simulate::names::resolve_among(x, &have) {
                simulate::names::Resolved::Known { name, .. } => name == m.name,
                _ => false,
            };
            if sch.model.as_deref().is_some_and(|x| !covers(x)) {
                continue;
            }
            let Some(gm) = m.mig else { continue };
            for w in &sch.windows {
                let layout = match crate::model::mig::parse_layout(gm, &w.layout) {
                    Ok(crate::model::mig::LayoutSpec::Mig(l)) => Some(l),
                    Ok(crate::model::mig::LayoutSpec::Whole) => None,
                    Err(_) => continue,
                };
                let utc = |min: u16| (i64::from(min) * 60 - i64::from(offset)).rem_euclid(86_400) as u32;
                out.push(simulate::Window {
                    model: Some(m.name.clone()),
                    nodes: sch.nodes.clone(),
                    start_s: utc(w.start_min),
                    end_s: utc(w.end_min % 1440),
                    layout,
                });
            }
        }
    }
    out
}
