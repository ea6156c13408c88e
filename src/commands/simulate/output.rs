//! What `simulate` prints: the lines above the table, the table or the JSON, the picture.

use std::path::Path;

use serde_json::json;

use super::demand::Demand;
use super::options::Options;
use super::{SCHEMA_VERSION, plot, table};
use crate::error::CmdError;
use crate::out;
use crate::simulate::{self, Fleet, Job, Packing, Settings};

fn fleet_json(f: &Fleet) -> serde_json::Value {
    let models: Vec<serde_json::Value> = f
        .models
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let gpus: u64 = f.nodes.iter().filter(|n| n.model as usize == i).map(|n| u64::from(n.gpus)).sum();
            json!({ "model": &*m.name, "gpus": gpus, "mig": m.mig.is_some() })
        })
        .collect();
    json!({ "gpus": f.gpus(), "nodes": f.nodes.len(), "models": models })
}

fn demand_json(d: &Demand) -> serde_json::Value {
    let gpu_hours: f64 = d.jobs.iter().map(Job::gpu_seconds).sum::<f64>() / 3600.0;
    json!({
        "source": d.source,
        "jobs": d.jobs.len(),
        "without_gpu": d.without_gpu,
        "skipped_lines": d.skipped,
        "gpu_hours": gpu_hours,
        "notes": d.notes,
    })
}

/// The JSON every mode shares (schema version, mode, demand, fleet) with the mode's own
/// fields after them.
fn envelope(mode: &str, d: &Demand, f: &Fleet, own: serde_json::Value) -> serde_json::Value {
    let mut v = json!({
        "schema_version": SCHEMA_VERSION,
        "mode": mode,
        "simulated": true,
        "demand": demand_json(d),
        "fleet": fleet_json(f),
    });
    if let (Some(all), serde_json::Value::Object(mine)) = (v.as_object_mut(), own) {
        all.extend(mine);
    }
    v
}

/// The lines above the table: the demand, the fleet, the notes.
fn header(d: &Demand, f: &Fleet, extra: &str) -> String {
    let gpu_hours: f64 = d.jobs.iter().map(Job::gpu_seconds).sum::<f64>() / 3600.0;
    let models: Vec<String> = f
        .models
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let gpus: u64 = f.nodes.iter().filter(|n| n.model as usize == i).map(|n| u64::from(n.gpus)).sum();
            format!("{gpus}x{}", m.name)
        })
        .collect();
    let mut s = format!(
        "Demand: {}: {} GPU jobs, {:.1} GPU-hours asked{}\nFleet:  {} GPUs on {} nodes ({}){extra}\n",
        d.source,
        d.jobs.len(),
        gpu_hours,
        if d.without_gpu > 0 { format!(" ({} without a GPU left out)", d.without_gpu) } else { String::new() },
        f.gpus(),
        f.nodes.len(),
        models.join(", ")
    );
    for n in &d.notes {
        s.push_str(&format!("Note:   {n}\n"));
    }
    s.push_str("(a simulation: a what-if on this demand, not a measurement)\n\n");
    s
}

fn write_plot(path: &Path, svg: &str) -> Result<(), CmdError> {
    crate::files::write_atomic(path, svg.as_bytes())
        .map_err(|e| CmdError::Failed(format!("--plot {}: {e}", path.display())))
}

pub(super) fn finish_replay(
    o: &Options,
    cfg: &crate::config::Config,
    d: &Demand,
    f: &Fleet,
    s: &Settings,
    replays: &simulate::Replays,
    answers: &[simulate::Answer],
) -> Result<(), CmdError> {
    let reports = &replays.reports;
    if let Some(path) = &o.plot {
        write_plot(path, &plot::replay(&format!("tessera simulate: {}", d.source), reports))?;
    }
    let text = if o.json {
        let v = envelope(
            "replay",
            d,
            f,
            json!({
                "settings": {
                    "placement": s.placement,
                    "replicas": s.replicas,
                    "min_runtime_s": s.min_runtime_s,
                    "reconfigure_s": s.reconfigure_s,
                    "interval_s": s.interval_s,
                    "max_changes_per_hour": s.max_changes_per_hour,
                    "horizon_s": s.horizon_s,
                },
                "currency": cfg.advisor.currency,
                "window": replays.window,
                "policies": reports,
                "capacity": answers,
            }),
        );
        serde_json::to_string_pretty(&v).map_err(|e| CmdError::Failed(e.to_string()))? + "\n"
    } else {
        let mut t = header(d, f, &format!("; placement {}", s.placement.as_str()));
        t.push_str(&table::replay(reports, &cfg.advisor.currency));
        t.push_str(&table::replay_notes(reports, replays.window));
        t.push_str(&table::capacity(answers, &cfg.advisor.currency));
        if let Some(p) = &o.plot {
            t.push_str(&format!("\nPicture: {}\n", p.display()));
        }
        t
    };
    out::print(&text)
}

pub(super) fn finish_packing(o: &Options, d: &Demand, f: &Fleet, runs: &[Packing], share: f64) -> Result<(), CmdError> {
    if let Some(path) = &o.plot {
        write_plot(path, &plot::packing(&format!("tessera simulate --pack: {}", d.source), runs))?;
    }
    let text = if o.json {
        let v = envelope("packing", d, f, json!({ "target_share": share, "packing": runs }));
        serde_json::to_string_pretty(&v).map_err(|e| CmdError::Failed(e.to_string()))? + "\n"
    } else {
        let mut t = header(d, f, &format!("; packed until the GPUs asked reach {:.0}% of the fleet", share * 100.0));
        t.push_str(&table::packing(runs));
        t
    };
    out::print(&text)
}
