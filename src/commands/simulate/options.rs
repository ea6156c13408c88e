//! What `simulate` was asked: the command line's options and the engine settings, policies and
//! shares read from them (each bad value a usage error naming the flag).

use std::path::PathBuf;

use super::usage;
use crate::error::CmdError;
use crate::simulate::Policy;

/// What `simulate` was asked, as the command line gives it.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub recording: Vec<PathBuf>,
    pub trace: Option<PathBuf>,
    pub nodes: Option<PathBuf>,
    pub demand: Option<PathBuf>,
    pub span: Option<String>,
    pub fleet: Option<String>,
    pub as_model: Option<String>,
    pub layout: Vec<String>,
    pub policy: Vec<String>,
    pub placement: Option<String>,
    pub replicas: Option<u32>,
    pub pack: Option<String>,
    pub runs: Option<u32>,
    pub levels: Vec<String>,
    pub order: Option<String>,
    pub target_p90_wait: Option<String>,
    pub horizon: Option<String>,
    pub compress: Option<f64>,
    pub json: bool,
    pub plot: Option<PathBuf>,
    pub skip_bad: bool,
}

pub(super) fn duration_s(flag: &str, text: &str) -> Result<i64, CmdError> {
    crate::units::duration::parse(text).map(|d| d.as_secs() as i64).map_err(|e| usage(&format!("{flag} {text}: {e}")))
}

/// The policies asked for, in the order given (every one, `Policy::ALL`, by default).
pub(super) fn policies(o: &Options) -> Result<Vec<Policy>, CmdError> {
    if o.policy.is_empty() {
        return Ok(Policy::ALL.to_vec());
    }
    o.policy
        .iter()
        .map(|p| Policy::parse(p).ok_or_else(|| usage(&format!("--policy {p}: one of {}", Policy::names()))))
        .collect()
}

pub(super) fn parse_share(p: &str) -> Result<f64, CmdError> {
    let v: f64 = p
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| usage(&format!("--pack {p}: a share of the fleet, e.g. 130%")))?;
    let v = if p.trim().ends_with('%') || v > 1.0 { v / 100.0 } else { v };
    if !(0.01..=10.0).contains(&v) {
        return Err(usage(&format!("--pack {p}: from 1% to 1000% of the fleet")));
    }
    Ok(v)
}

impl From<crate::cli::SimulateArgs> for Options {
    fn from(a: crate::cli::SimulateArgs) -> Self {
        Self {
            recording: a.recording,
            trace: a.trace,
            nodes: a.nodes,
            demand: a.demand,
            span: a.span,
            fleet: a.fleet,
            as_model: a.as_model,
            layout: a.layout,
            policy: a.policy,
            placement: a.placement,
            replicas: a.replicas,
            pack: a.pack,
            runs: a.runs,
            levels: a.levels,
            order: a.order,
            target_p90_wait: a.target_p90_wait,
            horizon: a.horizon,
            compress: a.compress,
            json: a.json,
            plot: a.plot,
            skip_bad: a.skip_bad,
        }
    }
}
