//! The capacity search's correctness: on small node lists, whose subsets are enumerated
//! here, the answer is the true optimum and never more than a subset's; a rare node shape is
//! named with the answer for the other jobs.

use proptest::prelude::*;

use super::space::probe;
use super::*;
use crate::simulate::tests::{fleet, frac};
use crate::simulate::{Class, Job, fleet, node_types};

/// Small fleets of two or three node types: `(model, cards, cores)` per node.
fn small_fleet(nodes: &[(u8, u8)]) -> Fleet {
    let kinds = [("A100-80GB", 8u32, 64u32), ("A100-80GB", 8, 128), ("L4", 2, 32)];
    let mut f = Fleet::default();
    for (i, &(k, _)) in nodes.iter().enumerate() {
        let (model, gpus, cores) = kinds[usize::from(k) % kinds.len()];
        let m = f.model_index(model);
        let mut n = fleet::Node::new(&format!("n{i}"), m, gpus);
        n.cpu_milli = cores * 1000;
        f.nodes.push(n);
    }
    f
}

/// The fleet with only the models its nodes use (as a list typed by hand would be).
fn only_models_used(f: &Fleet) -> Fleet {
    let mut out = Fleet::default();
    for n in &f.nodes {
        let m = out.model_index(&f.models[n.model as usize].name);
        out.nodes.push(fleet::Node { model: m, ..n.clone() });
    }
    out
}

/// Every subset of `f`'s nodes, as index lists.
fn subsets(f: &Fleet) -> Vec<Vec<usize>> {
    (1u32..1 << f.nodes.len()).map(|m| (0..f.nodes.len()).filter(|i| m & (1 << i) != 0).collect()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// On small fleets, whose subsets are enumerated here: the answer is the true optimum
    /// over every subset of the node list, and never more GPUs than the same search gives
    /// on any subset that hosts the same jobs.
    #[test]
    fn the_capacity_answer_is_the_optimum_over_every_subset(
        nodes in prop::collection::vec((0u8..3, Just(0u8)), 2..6),
        specs in prop::collection::vec((0i64..3600, 600i64..5400, 0u8..6), 2..14),
        target in prop::sample::select(vec![0i64, 600, 3600]),
        policy in prop::sample::select(vec![Policy::Exclusive, Policy::Share, Policy::Mig]),
    ) {
        let f = small_fleet(&nodes);
        let mut jobs: Vec<Job> = specs
            .iter()
            .enumerate()
            .map(|(i, &(t, d, kind))| {
                let mut j = match kind {
                    0 => Job::new(&format!("w{i}"), t, d, 1),
                    1 => Job::new(&format!("x{i}"), t, d, 4),
                    2 => frac(&format!("f{i}"), t, d, 300, Class::Inference),
                    3 => Job::new(&format!("l{i}"), t, d, 2),
                    4 => {
                        // Only a 128-core node hosts it.
                        let mut j = Job::new(&format!("c{i}"), t, d, 2);
                        j.cpu_milli = 100_000;
                        j
                    }
                    _ => frac(&format!("h{i}"), t, d, 460, Class::Other),
                };
                j.cpu_milli = j.cpu_milli.max(1000);
                j
            })
            .collect();
        jobs.sort_by_key(|j| j.submit);
        let s = Settings::default();
        let types = node_types::Types::of(&f);
        let hosts_all = |fl: &Fleet| -> Vec<bool> {
            let t = node_types::Types::of(fl);
            jobs.iter().map(|j| (0..t.kinds.len()).any(|k| t.hosts(k, j))).collect()
        };
        let unhostable = hosts_all(&f).iter().filter(|h| !**h).count() as u64;
        // The optimum, by brute force over every subset of the node list.
        let mut optimum: Option<u64> = None;
        for sub in subsets(&f) {
            let counts: Vec<usize> = {
                let st = node_types::Types::of(&f.subset(&sub));
                let mut c = vec![0; types.kinds.len()];
                for kind in &st.kinds {
                    let i = types.kinds.iter().position(|x| {
                        (x.node.gpus, x.node.cpu_milli, x.node.model) == (kind.node.gpus, kind.node.cpu_milli, kind.node.model)
                    });
                    if let Some(i) = i {
                        c[i] = kind.available;
                    }
                }
                c
            };
            let r = probe(&jobs, &types.fleet(&counts), policy, &s);
            if r.wait.p90_s <= target && r.never_started == 0 && r.unplaceable == unhostable {
                let g = types.gpus(&counts);
                optimum = Some(optimum.map_or(g, |o: u64| o.min(g)));
            }
        }
        let whole = fewest_gpus(&jobs, &f, policy, &s, target);
        if let Some(o) = optimum {
            prop_assert_eq!(whole.gpus, Some(o), "{:?}", whole);
            prop_assert_eq!(whole.method, "exhaustive");
            let row = whole.row.as_ref().map(|r| r.wait.p90_s);
            prop_assert!(row.is_some_and(|p| p <= target), "the answer's own row meets the target: {:?}", row);
        }
        for sub in subsets(&f) {
            // The subset as its own list: only the models its nodes have.
            let part = only_models_used(&f.subset(&sub));
            if hosts_all(&part) != hosts_all(&f) {
                continue;
            }
            let a = fewest_gpus(&jobs, &part, policy, &s, target);
            // A subset that falls short itself is grown past the list: no longer a subset.
            if a.grown > 1 {
                continue;
            }
            if let (Some(w), Some(p)) = (whole.gpus, a.gpus) {
                prop_assert!(w <= p, "the whole list answers {w} GPUs, its subset {sub:?} {p}");
            }
        }
    }
}

#[test]
fn a_rare_node_shape_is_named_with_the_answer_for_the_other_jobs() {
    // Six 64-core nodes and one 128-core node; one job needs 100 cores, eight need a card each,
    // all at once and the target is no wait: the big node and one more, 16 GPUs; without the
    // big job, one node.
    let mut f = fleet("56xA100-80GB");
    for (i, n) in f.nodes.iter_mut().enumerate() {
        n.cpu_milli = if i == 0 { 128_000 } else { 64_000 };
    }
    let mut jobs: Vec<Job> = (0..8).map(|i| Job::new(&format!("s{i}"), 0, 3600, 1)).collect();
    let mut big = Job::new("big", 0, 3600, 1);
    big.cpu_milli = 100_000;
    jobs.push(big);
    let a = fewest_gpus(&jobs, &f, Policy::Exclusive, &Settings::default(), 0);
    assert_eq!(a.gpus, Some(16), "{a:?}");
    let b = a.binding.unwrap_or_else(|| panic!("no binding"));
    assert_eq!((b.kind, b.jobs), ("node_shape", 1), "{b:?}");
    assert!(
        b.text.contains(
            "1 job needs 1 GPU with 100+ cores on one node (only A100-80GB (8 GPUs, 128 cores) nodes have it)"
        ),
        "{}",
        b.text
    );
    assert_eq!(a.queue_alone_gpus, Some(8));
    // The answer's own row is that size's replay.
    assert_eq!(a.row.map(|r| r.gpus), Some(16));
}
