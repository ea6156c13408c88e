//! Why work did not run in a replay, in words a planner can act on: each cause once, with
//! its count and the shape it needs ("16 jobs need 8 whole A100-80GB on one node; under mig
//! no node keeps 8 whole cards"), so a row never reads as "no waiting" for work that never ran.

use std::collections::BTreeMap;

use serde::Serialize;

use super::fleet::Fleet;
use super::job::Job;
use super::policy::Policy;
use super::state::{Cluster, Mode};

/// One cause of work not run, with how many jobs it kept out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotRun {
    /// `model_absent`, `no_node_big_enough`, `card_memory`, `layout_keeps_no_whole_cards`
    /// or `waiting_at_window_end`.
    pub cause: &'static str,
    pub jobs: u64,
    /// The sentence the table's notes print.
    pub text: String,
}

fn jobs_word(n: u64) -> (&'static str, &'static str) {
    if n == 1 { ("job", "needs") } else { ("jobs", "need") }
}

fn gib(mib: u64) -> String {
    format!("{:.0}", mib as f64 / 1024.0)
}

/// Why `job` fits no node of `fleet` even empty: the cause and what it needs, in words
/// that follow "N jobs need" / "1 job needs".
pub fn too_big(fleet: &Fleet, job: &Job) -> (&'static str, String) {
    let allowed: Vec<usize> =
        (0..fleet.nodes.len()).filter(|&i| job.may_run_on(&fleet.models[fleet.nodes[i].model as usize].name)).collect();
    if allowed.is_empty() {
        let have: Vec<&str> = fleet.models.iter().map(|m| &*m.name).collect();
        let asked: Vec<&str> = job.models.iter().map(|m| &**m).collect();
        return ("model_absent", format!("{}; the fleet has only {}", asked.join(" or "), have.join(", ")));
    }
    let model_of = |i: usize| &*fleet.models[fleet.nodes[i].model as usize].name;
    let most = allowed.iter().map(|&i| fleet.nodes[i].gpus).max().unwrap_or(0);
    if most < job.gpus {
        return ("no_node_big_enough", format!("{} GPUs on one node; the largest node has {most}", job.gpus));
    }
    let big: Vec<usize> = allowed.iter().copied().filter(|&i| fleet.nodes[i].gpus >= job.gpus).collect();
    let mem = |i: usize| fleet.models[fleet.nodes[i].model as usize].memory_mib;
    if big.iter().all(|&i| mem(i) != 0 && job.mem_mib > mem(i)) {
        let most = big.iter().map(|&i| mem(i)).max().unwrap_or(0);
        return (
            "card_memory",
            format!("{} GiB of card memory; the cards have at most {}", gib(job.mem_mib), gib(most)),
        );
    }
    let cores = |m: u32| format!("{:.0}", f64::from(m) / 1000.0);
    let mut shape = format!("{} GPUs", job.gpus);
    if job.cpu_milli > 0 {
        shape.push_str(&format!(" with {}+ cores", cores(job.cpu_milli)));
    }
    if job.host_mem_mib > 0 {
        shape.push_str(&format!(" and {}+ GiB", gib(job.host_mem_mib)));
    }
    let best = big
        .iter()
        .map(|&i| &fleet.nodes[i])
        .max_by_key(|n| (n.cpu_milli, n.mem_mib))
        .map(|n| format!("{} cores and {} GiB", cores(n.cpu_milli), gib(n.mem_mib)))
        .unwrap_or_default();
    let model = model_of(big[0]);
    ("no_node_big_enough", format!("{shape} on one node; the biggest such node ({model}) has {best}"))
}

/// The most cards one node of a model `job` may use keeps whole (not cut into MIG
/// instances) as the run left them.
fn whole_cards_kept(cl: &Cluster, fleet: &Fleet, job: &Job) -> u32 {
    cl.nodes
        .iter()
        .filter(|n| job.may_run_on(&fleet.models[n.model as usize].name))
        .map(|n| (n.first..n.first + n.count).filter(|&c| cl.cards[c as usize].mode != Mode::Mig).count() as u32)
        .max()
        .unwrap_or(0)
}

/// Every cause of work not run: `unplaced` fit no node, `waiting` were still queued at the
/// window's end.
pub fn explain(fleet: &Fleet, cl: &Cluster, policy: Policy, unplaced: &[&Job], waiting: &[&Job]) -> Vec<NotRun> {
    let mut groups: BTreeMap<(&'static str, String), u64> = BTreeMap::new();
    for j in unplaced {
        *groups.entry(too_big(fleet, j)).or_default() += 1;
    }
    // Whole cards kept per node, by the models a job may use: counted once per such set.
    let mut kept: BTreeMap<Vec<Box<str>>, u32> = BTreeMap::new();
    for j in waiting {
        let most = if j.milli >= 1000 && policy.uses_mig() {
            *kept.entry(j.models.clone()).or_insert_with(|| whole_cards_kept(cl, fleet, j))
        } else {
            u32::MAX
        };
        let key = if most < j.gpus {
            let model = j.models.first().map_or_else(
                || fleet.models.iter().find(|m| m.mig.is_some()).map_or("", |m| &*m.name).to_string(),
                |m| m.to_string(),
            );
            ("layout_keeps_no_whole_cards", format!("{} whole {model} on one node", j.gpus))
        } else {
            ("waiting_at_window_end", String::new())
        };
        *groups.entry(key).or_default() += 1;
    }
    groups
        .into_iter()
        .map(|((cause, shape), n)| {
            let (job, need) = jobs_word(n);
            let text = match cause {
                "layout_keeps_no_whole_cards" => {
                    let cards = shape.split(' ').next().unwrap_or("");
                    format!(
                        "{n} {job} {need} {shape}; under {} no node keeps {cards} whole cards (its MIG layouts cut them)",
                        policy.as_str()
                    )
                }
                "waiting_at_window_end" => format!("{n} {job} still waiting when the window ended"),
                "model_absent" => format!("{n} {job} {} for {shape}", if n == 1 { "asks" } else { "ask" }),
                _ => format!("{n} {job} {need} {shape}"),
            };
            NotRun { cause, jobs: n, text }
        })
        .collect()
}
