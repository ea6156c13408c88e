//! Subcommands: settings from flags over config, `snapshot`, `layouts`, `check-config`.

mod act;
mod advise;
mod device;
mod interrupts;
use crate::out;
pub use crate::out::to_stderr;
mod record;
mod replay;
mod schedule;
mod simulate;
mod snapshot;

use std::path::Path;

use crate::cli::Global;
use crate::config::{self, Config, ConfigError};
use crate::error::CmdError;
use crate::model::mig::{catalog, enumerate};

pub use act::act;
pub use advise::advise;
pub use device::device_check;
pub use record::{RecordOptions, record};
pub use replay::{replay, snapshot_cmd};
pub use schedule::schedule;
pub use simulate::{Options as SimulateOptions, simulate};
pub use snapshot::{collect_once, snapshot_json, snapshot_table};

/// A config error ends the command with the config's exit code (here, so that `error` on the
/// ground floor does not import `config`).
impl From<ConfigError> for CmdError {
    fn from(e: ConfigError) -> Self {
        Self::Config(e.to_string())
    }
}

/// The config file with the command line laid over it.
pub fn settings(g: &Global) -> Result<Config, CmdError> {
    let mut cfg = config::load(g.config.as_deref())?;
    cfg.read_only |= g.read_only;
    cfg.sources.demo |= g.demo;
    if let Some(t) = &g.theme {
        cfg.theme = Some(t.clone());
    }
    if let Some(r) = &g.refresh {
        let d = crate::units::duration::parse(r).map_err(|e| CmdError::Usage(format!("--refresh {r}: {e}")))?;
        config::check_refresh(d).map_err(|why| CmdError::Usage(format!("--refresh {r}: {why}")))?;
        cfg.refresh = d;
    }
    if g.nvml.is_some() {
        cfg.sources.nvml.clone_from(&g.nvml);
    }
    if g.prometheus.is_some() {
        cfg.sources.prometheus.clone_from(&g.prometheus);
    }
    if !g.scrape.is_empty() {
        cfg.sources.scrape.clone_from(&g.scrape);
    }
    for (flag, url) in g.scrape.iter().map(|u| ("--scrape", u)).chain(g.prometheus.iter().map(|u| ("--prometheus", u)))
    {
        if let Err(why) = crate::url::check_url(url) {
            let shown = crate::url::redact(url);
            return Err(CmdError::Usage(format!("{flag} {shown}: expected an http:// or https:// URL ({why})")));
        }
    }
    cfg.sources.slurm |= g.slurm;
    if g.kubernetes.is_some() {
        cfg.sources.kubernetes.clone_from(&g.kubernetes);
    }
    if let Some(s) = g.seed {
        cfg.demo.seed = s;
    }
    if let Some(s) = g.speed {
        if !(s > 0.0 && s <= 10_000.0) {
            return Err(CmdError::Usage(format!("--speed {s}: expected a number above 0 and at most 10000")));
        }
        cfg.demo.speed = s;
    }
    if let Some(size) = &g.demo_size {
        cfg.demo.size = Some(config::parse_size(size).map_err(|e| CmdError::Usage(format!("--demo-size: {e}")))?);
    }
    Ok(cfg)
}

pub fn layouts(model_name: &str, json: bool) -> Result<(), CmdError> {
    let Some(model) = catalog::lookup(model_name) else {
        if let crate::simulate::names::Resolved::Known { name, mig: None, .. } =
            crate::simulate::names::resolve(model_name)
        {
            return Err(CmdError::Usage(format!(
                "{name} has no MIG: its cards are used whole or shared by time-slicing or MPS"
            )));
        }
        let known: Vec<&str> = catalog::catalog().models.iter().map(|m| m.name.as_str()).collect();
        let near = catalog::suggest(model_name);
        let hint = if near.is_empty() { String::new() } else { format!(" (did you mean {}?)", near.join(" or ")) };
        return Err(CmdError::Usage(format!("unknown GPU model {model_name:?}{hint}; known: {}", known.join(", "))));
    };
    let all = enumerate(model);
    if json {
        let v = serde_json::json!({ "model": model.name, "layouts": all });
        let text = serde_json::to_string_pretty(&v).map_err(|e| CmdError::Failed(e.to_string()))?;
        return out::print(&format!("{text}\n"));
    }
    let mut text = format!(
        "{}: {} maximal layouts ({} memory slices; +me variants not listed separately)\n",
        model.name,
        all.len(),
        model.memory_slices
    );
    for (i, l) in all.iter().enumerate() {
        let parts: Vec<String> = l.iter().map(ToString::to_string).collect();
        text.push_str(&format!("{:>3}. {}\n", i + 1, parts.join(",")));
    }
    out::print(&text)
}

pub fn check_config(path: Option<&Path>, example: bool) -> Result<(), CmdError> {
    if example {
        return out::print(&config::example());
    }
    let cfg = config::load(path)?;
    let file = cfg.path.as_ref().map_or_else(|| "config".into(), |p| p.display().to_string());
    // Everything the console would refuse later is refused here: the theme too.
    crate::ui::theme::Theme::load(cfg.theme.as_deref(), crate::ui::theme::Depth::TrueColor, false)
        .map_err(|e| CmdError::Usage(format!("{file}: theme: {e}")))?;
    // The files and variables the sources read at start: token and password files, the CA
    // file, credentials over plain http (the Slurm JWT too); as the engine would refuse them.
    crate::engine::check_slurm_rest(&cfg.slurm).map_err(|e| CmdError::Usage(format!("{file}: {e}")))?;
    if crate::engine::uses_http(&cfg.sources) || cfg.sources.http.credentials.any() || !cfg.sources.auth.is_empty() {
        let prometheus = cfg.sources.prometheus.clone().or_else(|| {
            // Credentials for a Prometheus not configured here (given with --prometheus): the
            // checks of an https origin.
            cfg.sources.http.credentials.any().then(|| "https://prometheus.invalid".to_string())
        });
        crate::engine::http_client(&cfg.sources, prometheus.as_deref())
            .map_err(|e| CmdError::Usage(format!("{file}: {e}")))?;
    }
    match &cfg.path {
        Some(p) => out::print(&format!("{}: ok\n", p.display())),
        None => out::print(&format!(
            "no config file found ({}); using the defaults\n",
            config::default_path().map_or_else(|| "no home directory".into(), |p| p.display().to_string())
        )),
    }
}

/// The interactive console; when stdout is not a terminal, the snapshot table instead.
pub fn console(g: &Global) -> Result<(), CmdError> {
    use std::io::IsTerminal;
    let cfg = settings(g)?;
    // A bad theme is a usage error however the output goes.
    let theme = crate::ui::theme::Theme::load(cfg.theme.as_deref(), crate::ui::theme::Depth::detect(), g.ascii)
        .map_err(|e| CmdError::Usage(e.to_string()))?;
    let terminal = std::io::stdout().is_terminal();
    // A past moment from Prometheus: the replay of that one moment (printed without a terminal).
    if g.at.is_some() {
        if g.record.is_some() {
            return Err(CmdError::Usage("--record records the present; --at looks at the past".into()));
        }
        if !terminal {
            return replay::snapshot_cmd(g, false, &[]);
        }
        return replay::replay(g, &[], None, None, None);
    }
    if !terminal {
        if g.record.is_some() {
            return Err(CmdError::Usage(
                "--record records the console, which needs a terminal; headless: tessera record --out FILE".into(),
            ));
        }
        return snapshot(g, false);
    }
    let record = match &g.record {
        Some(path) => {
            Some(record::writer_settings(&RecordOptions { out: Some(path.clone()), ..RecordOptions::default() }, &cfg)?)
        }
        None => None,
    };
    crate::app::run(&cfg, theme, g.ascii, record)
}

pub fn snapshot(g: &Global, json: bool) -> Result<(), CmdError> {
    let cfg = settings(g)?;
    let fleet = collect_once(&cfg)?;
    if json {
        out::print_json(&snapshot::SnapshotJson::new(&fleet, None))?;
    } else {
        out::print(&format!("{}\n", snapshot_table(&fleet)))?;
    }
    // Cron and monitoring must tell "every source is down" from "an empty cluster".
    if !fleet.0.sources.iter().any(|s| matches!(s.health, crate::model::SourceHealth::Live { .. })) {
        let why: Vec<String> = fleet.0.sources.iter().map(|s| s.summary(chrono::Utc::now())).collect();
        return Err(CmdError::Failed(format!("no source answered ({})", why.join("; "))));
    }
    Ok(())
}
