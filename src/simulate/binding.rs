//! What decided a capacity answer, in words: the wait target, jobs that only some node
//! types can host (a node shape or a GPU model; then also the answer for the other jobs
//! alone), or whole cards that MIG layouts take away, judged by replaying the answer with
//! one node fewer of each type it uses.

use std::collections::BTreeMap;

use serde::Serialize;

use super::job::Job;
use super::search::space::Search;

/// The constraint that decided an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binding {
    /// `wait_target`, `node_shape`, `gpu_model`, `mig_whole_cards` or `every_job_starts`.
    pub kind: &'static str,
    /// Jobs it concerns (0 for the wait target).
    pub jobs: u64,
    pub text: String,
}

/// The share of the fleet's GPUs below which the node types that can host a job make it a
/// job of a rare shape or model.
pub const FEW: f64 = 0.25;

/// A binding and, where jobs of a shape or model decided it, the answer without them.
pub(super) struct Decided {
    pub binding: Binding,
    pub queue_alone_gpus: Option<u64>,
}

/// What `job` needs on one node, in words that follow "N jobs need".
fn need(job: &Job) -> String {
    let mut s = format!("{} {}", job.gpus, if job.gpus == 1 { "GPU" } else { "GPUs" });
    if !job.models.is_empty() {
        let m: Vec<&str> = job.models.iter().map(|m| &**m).collect();
        s = format!("{s} of {}", m.join(" or "));
    }
    let mut host = Vec::new();
    if job.cpu_milli > 0 {
        host.push(format!("{}+ cores", job.cpu_milli / 1000));
    }
    if job.host_mem_mib > 0 {
        host.push(format!("{}+ GiB", job.host_mem_mib / 1024));
    }
    if !host.is_empty() {
        s = format!("{s} with {}", host.join(" and "));
    }
    format!("{s} on one node")
}

/// Decide what bound the answer `counts` (found within `bounds`). `fewest_without` answers
/// the search again for other jobs.
pub(super) fn decide(
    search: &mut Search,
    counts: &[usize],
    bounds: &[usize],
    mut fewest_without: impl FnMut(&mut Search, &[Job], &[usize]) -> Option<u64>,
) -> Decided {
    let types = search.types;
    let present: Vec<usize> = (0..bounds.len()).filter(|&t| bounds[t] > 0).collect();
    let fleet_gpus = types.gpus(bounds).max(1);
    // Jobs that only a few of the fleet's GPUs can host (node types holding less than
    // `FEW` of them): a node shape or a model the rest of the fleet lacks.
    let (mut only_some, mut rest): (Vec<&Job>, Vec<Job>) = (Vec::new(), Vec::new());
    for j in search.hostable_jobs() {
        let hosting: u64 = present
            .iter()
            .filter(|&&t| types.hosts(t, j))
            .map(|&t| u64::from(types.kinds[t].node.gpus) * bounds[t] as u64)
            .sum();
        if (hosting as f64) < FEW * fleet_gpus as f64 {
            only_some.push(j);
        } else {
            rest.push(j.clone());
        }
    }
    let gpus = types.gpus(counts);
    // Said as what decided the answer where the other jobs alone need fewer GPUs, else as an
    // aside to what did.
    let mut aside = String::new();
    if !only_some.is_empty() && !rest.is_empty() {
        let alone = fewest_without(search, &rest, bounds);
        let (text, model_only) = rare(search, &present, &only_some);
        match alone {
            Some(a) if a >= gpus => {
                aside = format!(" ({text}: without them the answer is no smaller, {a} GPUs)");
            }
            _ => {
                let text = match alone {
                    Some(a) => format!("{text}; the other jobs alone need {a} GPUs"),
                    None => format!("{text}; the other jobs alone do not meet the target either"),
                };
                return Decided {
                    binding: Binding {
                        kind: if model_only { "gpu_model" } else { "node_shape" },
                        jobs: only_some.len() as u64,
                        text,
                    },
                    queue_alone_gpus: alone,
                };
            }
        }
    }
    let mut d = by_one_node_fewer(search, counts);
    d.binding.text.push_str(&aside);
    d
}

/// Jobs only rare node types can host, grouped by those types, in words; and whether a GPU
/// model (not a node shape) is what keeps every one of them off the other types.
fn rare(search: &Search, present: &[usize], only_some: &[&Job]) -> (String, bool) {
    let types = search.types;
    // By the node types that can host them: how many, and the biggest need.
    let mut groups: BTreeMap<Vec<String>, (u64, Vec<String>, &Job)> = BTreeMap::new();
    let mut model_only = true;
    for j in only_some {
        let mut hosts: Vec<String> = present.iter().filter(|&&t| types.hosts(t, j)).map(|&t| types.shape(t)).collect();
        hosts.dedup();
        model_only &=
            !j.models.is_empty() && present.iter().all(|&t| types.hosts(t, j) || !j.may_run_on(types.model(t)));
        let e = groups.entry(hosts).or_insert((0, Vec::new(), j));
        e.0 += 1;
        let n = need(j);
        if !e.1.contains(&n) {
            e.1.push(n);
        }
        if (j.gpus, j.cpu_milli, j.host_mem_mib) > (e.2.gpus, e.2.cpu_milli, e.2.host_mem_mib) {
            e.2 = j;
        }
    }
    let text: Vec<String> = groups
        .iter()
        .map(|(hosts, (n, needs, biggest))| {
            let who = format!("only {} nodes have it", hosts.join(", "));
            let verb = if *n == 1 { "job needs" } else { "jobs need" };
            match needs.as_slice() {
                [one] => format!("{n} {verb} {one} ({who})"),
                _ => format!("{n} {verb} up to {} ({who})", need(biggest)),
            }
        })
        .collect();
    (text.join("; "), model_only)
}

/// What fails first with one node fewer of each type the answer uses.
fn by_one_node_fewer(search: &mut Search, counts: &[usize]) -> Decided {
    let types = search.types;
    for t in (0..counts.len()).filter(|&t| counts[t] > 0) {
        let mut less = counts.to_vec();
        less[t] -= 1;
        if less.iter().all(|&c| c == 0) {
            continue;
        }
        let r = search.replay(&less);
        let shape = types.shape(t);
        // The last node of a shape some jobs need: those jobs decide it.
        let lost = search.lost_hosts(&r);
        if lost > 0 {
            let why: Vec<&str> = r
                .not_run
                .iter()
                .filter(|n| matches!(n.cause, "model_absent" | "no_node_big_enough" | "card_memory"))
                .map(|n| n.text.as_str())
                .collect();
            let model = r.not_run.iter().all(|n| n.cause != "no_node_big_enough" && n.cause != "card_memory");
            return Decided {
                binding: Binding {
                    kind: if model { "gpu_model" } else { "node_shape" },
                    jobs: lost,
                    text: format!("jobs only a {shape} node hosts: with one fewer, {}", why.join("; ")),
                },
                queue_alone_gpus: None,
            };
        }
        if r.never_started > 0 && r.wait.p90_s <= search.target_s {
            let layout = r.not_run.iter().find(|n| n.cause == "layout_keeps_no_whole_cards");
            return Decided {
                binding: match layout {
                    Some(n) => {
                        Binding { kind: "mig_whole_cards", jobs: n.jobs, text: format!("with fewer GPUs, {}", n.text) }
                    }
                    None => Binding {
                        kind: "every_job_starts",
                        jobs: r.never_started,
                        text: format!(
                            "with fewer GPUs the wait target holds but {} {} never start",
                            r.never_started,
                            if r.never_started == 1 { "job" } else { "jobs" }
                        ),
                    },
                },
                queue_alone_gpus: None,
            };
        }
        if r.wait.p90_s > search.target_s || r.never_started > 0 {
            return Decided {
                binding: Binding {
                    kind: "wait_target",
                    jobs: 0,
                    text: format!(
                        "the wait target: with one {shape} node fewer the p90 wait is {}",
                        super::metrics::format_wait(r.wait.p90_s)
                    ),
                },
                queue_alone_gpus: None,
            };
        }
    }
    Decided {
        binding: Binding {
            kind: "wait_target",
            jobs: 0,
            text: "the smallest fleet of these node types that hosts every job meets the target".into(),
        },
        queue_alone_gpus: None,
    }
}
