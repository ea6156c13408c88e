//! `simulate --pack`: the paper's packing experiment from the command line's options (level,
//! runs, levels, order, placements, policies, holder cap), every bad value a usage error.

use super::demand::Demand;
use super::options::{Options, parse_share};
use super::usage;
use crate::error::CmdError;
use crate::simulate::paper::{Order, Protocol};
use crate::simulate::{self, Fleet, Job, Placement, Policy};

/// The paper's seeds start at 42 (42..51 for its ten runs).
pub const PAPER_SEED: u64 = 42;
/// Runs where `--runs` does not say (the paper's ten).
pub const DEFAULT_RUNS: u32 = 10;
/// The most runs one command makes.
pub const MAX_RUNS: u32 = 1000;

/// The levels to report: `--levels` (percent, 1 to 1000), else every 5 % up to the target.
pub(super) fn levels(o: &Options, target: f64) -> Result<Vec<u32>, CmdError> {
    let top = (target * 100.0).round() as u32;
    if o.levels.is_empty() {
        return Ok((1..=top / 5).map(|k| k * 5).collect());
    }
    let mut v = Vec::new();
    for l in &o.levels {
        let n: u32 = l
            .trim()
            .trim_end_matches('%')
            .parse()
            .map_err(|_| usage(&format!("--levels {l}: whole percents of the fleet, e.g. 90,95,100")))?;
        if !(1..=1000).contains(&n) {
            return Err(usage(&format!("--levels {l}: from 1% to 1000%")));
        }
        if n > top {
            return Err(usage(&format!("--levels {l}: past the packing's {top}% (--pack)")));
        }
        v.push(n);
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// The protocol the options ask for.
pub(super) fn protocol(o: &Options, seed: Option<u64>) -> Result<Protocol, CmdError> {
    let level = parse_share(o.pack.as_deref().unwrap_or("130%"))?;
    let runs = o.runs.unwrap_or(DEFAULT_RUNS);
    if !(1..=MAX_RUNS).contains(&runs) {
        return Err(usage(&format!("--runs {runs}: from 1 to {MAX_RUNS}")));
    }
    let order = match o.order.as_deref().map(|s| s.trim().to_ascii_lowercase()) {
        None => Order::Shuffled,
        Some(s) if s == "shuffled" || s == "shuffle" => Order::Shuffled,
        Some(s) if s == "trace" => Order::Trace,
        Some(s) => return Err(usage(&format!("--order {s}: shuffled (the paper's) or trace"))),
    };
    if let Some(r) = o.replicas
        && !(1..=64).contains(&r)
    {
        return Err(usage(&format!("--replicas {r}: from 1 to 64")));
    }
    let seed = seed.unwrap_or(PAPER_SEED).min(i64::MAX as u64) as i64;
    Ok(Protocol { runs, seed, level, order, cap: o.replicas, levels: levels(o, level)? })
}

/// The GPU jobs and the CPU-only ones in the trace's order.
pub(super) fn in_trace_order<'a>(jobs: &'a [Job], cpu_only: &'a [(usize, Job)]) -> Vec<&'a Job> {
    let mut out = Vec::with_capacity(jobs.len() + cpu_only.len());
    let mut extra = cpu_only.iter().peekable();
    for (i, j) in jobs.iter().enumerate() {
        while let Some((_, c)) = extra.next_if(|(at, _)| *at <= i) {
            out.push(c);
        }
        out.push(j);
    }
    out.extend(extra.map(|(_, c)| c));
    out
}

/// Run the packing the options ask for on `fleet`.
pub(super) fn run(
    o: &Options,
    seed: Option<u64>,
    d: &Demand,
    fleet: &Fleet,
) -> Result<super::output::Packed, CmdError> {
    if o.target_p90_wait.is_some() || o.horizon.is_some() || o.compress.is_some() {
        return Err(usage("--target-p90-wait, --horizon and --compress are for a replay, not a packing (--pack)"));
    }
    let protocol = protocol(o, seed)?;
    let placements = match &o.placement {
        Some(p) => vec![Placement::parse(p).ok_or_else(|| {
            usage(&format!("--placement {p}: first-fit, best-fit, frag-aware, fgd, paper-bestfit or paper-dotprod"))
        })?],
        None => Placement::PACKING.to_vec(),
    };
    let policies = if o.policy.is_empty() { vec![Policy::Share] } else { super::options::policies(o)? };
    let jobs = in_trace_order(&d.jobs, &d.cpu_only);
    let with = simulate::PackWith { placements, protocol: protocol.clone() };
    let mut runs = Vec::new();
    for policy in policies {
        runs.extend(simulate::pack(&jobs, fleet, policy, &with).map_err(|e| usage(&e.to_string()))?);
    }
    Ok(super::output::Packed { runs, protocol, pods: jobs.len(), cpu_only: d.cpu_only.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_only_pods_go_back_where_they_were() {
        let jobs: Vec<Job> = ["a", "c"].iter().map(|n| Job::new(n, 0, 1, 1)).collect();
        let cpu = vec![(0, Job::new("x", 0, 1, 1)), (1, Job::new("b", 0, 1, 1)), (2, Job::new("z", 0, 1, 1))];
        let names: Vec<&str> = in_trace_order(&jobs, &cpu).iter().map(|j| &*j.name).collect();
        assert_eq!(names, ["x", "a", "b", "c", "z"]);
    }

    #[test]
    fn levels_default_to_every_five_and_refuse_past_the_target() {
        let o = Options::default();
        assert_eq!(levels(&o, 0.2).ok(), Some(vec![5, 10, 15, 20]));
        let o = Options { levels: vec!["100".into(), "90%".into(), "95".into()], ..Options::default() };
        assert_eq!(levels(&o, 1.3).ok(), Some(vec![90, 95, 100]));
        assert!(levels(&o, 0.95).is_err());
        let o = Options { levels: vec!["0".into()], ..Options::default() };
        assert!(levels(&o, 1.3).is_err());
    }

    #[test]
    fn zero_runs_are_refused() {
        let o = Options { pack: Some("100%".into()), runs: Some(0), ..Options::default() };
        assert!(protocol(&o, None).is_err());
        let o = Options { pack: Some("100%".into()), ..Options::default() };
        let p = protocol(&o, None).ok();
        assert_eq!(p.map(|p| (p.runs, p.seed, p.order, p.cap)), Some((10, 42, Order::Shuffled, None)));
    }
}
