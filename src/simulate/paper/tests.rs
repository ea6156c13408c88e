//! The packing experiment end to end: the protocol's parts (CPU-only pods take host
//! resources, no holder cap unless asked), the trace sample's figures pinned per placement,
//! tessera's placement against FGD and first fit on the sample and its variants, and (ignored,
//! run in release) the whole trace against the paper's figures.

use std::path::{Path, PathBuf};

use super::variants::{more_models, more_multi_gpu, more_sharing};
use super::{Order, Protocol};
use crate::simulate::input::{openb_nodes, openb_pods};
use crate::simulate::{Fleet, Job, PackWith, Packing, Placement, Policy, pack};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The pods (CPU-only ones in their place) and nodes of a pod list and a node list.
fn read(pods: &Path, nodes: &Path) -> (Vec<Job>, Fleet) {
    let text = std::fs::read_to_string(pods).unwrap_or_else(|e| panic!("{}: {e}", pods.display()));
    let p = openb_pods("pods", text.as_bytes(), false).unwrap_or_default();
    let text = std::fs::read_to_string(nodes).unwrap_or_else(|e| panic!("{}: {e}", nodes.display()));
    let fleet = openb_nodes("nodes", text.as_bytes()).unwrap_or_default();
    let mut all = Vec::new();
    let mut cpu = p.cpu_only.into_iter().peekable();
    for (i, j) in p.jobs.into_iter().enumerate() {
        while let Some((_, c)) = cpu.next_if(|(at, _)| *at <= i) {
            all.push(c);
        }
        all.push(j);
    }
    all.extend(cpu.map(|(_, c)| c));
    (all, fleet)
}

fn sample() -> (Vec<Job>, Fleet) {
    let dir = root().join("tests/fixtures/traces");
    read(&dir.join("openb_pod_list_sample.csv"), &dir.join("openb_node_list_sample.csv"))
}

fn paper(runs: u32, level: f64, levels: Vec<u32>) -> Protocol {
    Protocol { runs, seed: 42, level, order: Order::Shuffled, cap: None, levels }
}

fn packed(jobs: &[Job], fleet: &Fleet, placements: &[Placement], p: Protocol) -> Vec<Packing> {
    let refs: Vec<&Job> = jobs.iter().collect();
    let with = PackWith { placements: placements.to_vec(), protocol: p };
    pack(&refs, fleet, Policy::Share, &with).unwrap_or_else(|e| panic!("{e}"))
}

/// Median unallocated percent at the first level asked, per placement.
fn at_level(runs: &[Packing]) -> Vec<(Placement, f64)> {
    runs.iter().map(|p| (p.placement, p.levels.first().map_or(f64::NAN, |l| l.unallocated * 100.0))).collect()
}

#[test]
fn cpu_only_pods_take_host_cpu() {
    // One node of 8 cores: a CPU-only pod of 6 cores first leaves no room for a GPU pod of 4.
    let mut fleet = Fleet::from_spec("1xT4").unwrap_or_default();
    fleet.nodes[0].cpu_milli = 8000;
    let cpu = Job { gpus: 0, milli: 0, cpu_milli: 6000, ..Job::new("a", 0, 1, 1) };
    let gpu = Job { cpu_milli: 4000, ..Job::new("b", 0, 1, 1) };
    let p = Protocol { order: Order::Trace, ..paper(1, 1.0, vec![100]) };
    let runs = packed(&[cpu, gpu], &fleet, &[Placement::Fgd], p);
    assert_eq!((runs[0].placed, runs[0].failed), (1, 1));
    assert_eq!(runs[0].levels[0].failed_by_cause.get("cpu"), Some(&1.0));
}

#[test]
fn no_holder_cap_unless_asked() {
    // Ten pods of a tenth of a GPU on one GPU: all ten fit with no cap, four with a cap of 4.
    let fleet = Fleet::from_spec("1xT4").unwrap_or_default();
    let jobs: Vec<Job> = (0..10).map(|i| Job { milli: 100, ..Job::new(&format!("p{i}"), 0, 1, 1) }).collect();
    let p = Protocol { order: Order::Trace, ..paper(1, 1.0, vec![100]) };
    let free = packed(&jobs, &fleet, &[Placement::FirstFit], p.clone());
    assert_eq!(free[0].placed, 10);
    let capped = packed(&jobs, &fleet, &[Placement::FirstFit], Protocol { cap: Some(4), ..p });
    assert_eq!(capped[0].placed, 4);
}

#[test]
fn a_pod_list_without_gpu_jobs_or_a_fleet_that_hosts_none_is_an_error() {
    let fleet = Fleet::from_spec("1xT4").unwrap_or_default();
    let refs = [&Job { gpus: 0, milli: 0, ..Job::new("a", 0, 1, 1) }];
    let with = PackWith { placements: vec![Placement::Fgd], protocol: paper(1, 1.0, vec![100]) };
    let e = pack(&refs, &fleet, Policy::Share, &with).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("no GPU job"), "{e}");
    let refs = [&Job::new("a", 0, 1, 2)];
    let e = pack(&refs, &fleet, Policy::Share, &with).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("asks 2 GPUs, the largest node has 1"), "{e}");
    let e = pack(&refs, &fleet, Policy::Mig, &with).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("--policy mig"), "{e}");
}

#[test]
fn the_sample_packs_as_pinned() {
    let (jobs, fleet) = sample();
    assert_eq!(jobs.len(), 300, "CPU-only pods kept");
    let runs = packed(&jobs, &fleet, &Placement::PACKING, paper(10, 1.3, vec![100]));
    let got: Vec<(Placement, f64)> = at_level(&runs);
    let pinned = [
        (Placement::FirstFit, PIN[0]),
        (Placement::PaperBestFit, PIN[1]),
        (Placement::PaperDotProd, PIN[2]),
        (Placement::Fgd, PIN[3]),
        (Placement::FragAware, PIN[4]),
    ];
    println!("sample: {got:?}");
    for ((p, g), (q, want)) in got.iter().zip(pinned) {
        assert_eq!(*p, q);
        assert!((g - want).abs() < 1e-9, "{}: {g} (pinned {want})", p.as_str());
    }
}

/// The sample's median unallocated percent at 100 % arrived (10 runs, seeds 42–51), computed
/// once with this code and pinned.
const PIN: [f64; 5] = [2.89, 3.64, 4.32, 2.64, 2.635];

#[test]
fn tessera_beats_fgd_and_first_fit_on_the_sample_and_its_variants() {
    let (jobs, fleet) = sample();
    for (name, v) in variants(&jobs, &fleet) {
        let runs =
            packed(&v, &fleet, &[Placement::FirstFit, Placement::Fgd, Placement::FragAware], paper(10, 1.3, vec![100]));
        let u = at_level(&runs);
        let (ff, fgd, ours) = (u[0].1, u[1].1, u[2].1);
        println!("{name}: frag-aware {ours}, fgd {fgd}, first-fit {ff}");
        assert!(ours <= fgd && ours <= ff, "{name}: frag-aware {ours}, fgd {fgd}, first-fit {ff}");
    }
}

/// The trace and the three variants generated from it, named.
fn variants(jobs: &[Job], fleet: &Fleet) -> [(&'static str, Vec<Job>); 4] {
    [
        ("default", jobs.to_vec()),
        ("more sharing", more_sharing(jobs)),
        ("more GPU models", more_models(jobs, fleet)),
        ("more multi-GPU", more_multi_gpu(jobs)),
    ]
}

fn shared(name: &str) -> Option<PathBuf> {
    let p = root().join("../shared/reference/traces").join(name);
    p.is_file().then_some(p)
}

/// The whole trace (`cargo test --release -- --ignored whole_trace`): the paper's BestFit
/// and FGD within half a point of its 7.09 and 4.77 at 100 % arrived; every placement on the
/// trace and its variants printed for docs/benchmarks.md.
#[test]
#[ignore]
fn whole_trace_reproduces_the_paper() {
    let (Some(pods), Some(nodes)) = (shared("openb_pod_list_default.csv"), shared("openb_node_list_gpu_node.csv"))
    else {
        return;
    };
    let (jobs, fleet) = read(&pods, &nodes);
    for (name, v) in variants(&jobs, &fleet) {
        let runs = packed(&v, &fleet, &Placement::PACKING, paper(10, 1.3, vec![100, 130]));
        let line: Vec<String> = runs
            .iter()
            .map(|p| {
                let l = &p.levels;
                format!("{} {:.2}/{:.2}", p.placement.as_str(), l[0].unallocated * 100.0, l[1].unallocated * 100.0)
            })
            .collect();
        println!("{name}: {}", line.join(", "));
        if name == "default" {
            let u = at_level(&runs);
            assert!((u[1].1 - 7.09).abs() <= 0.5, "paper-bestfit {}", u[1].1);
            assert!((u[3].1 - 4.77).abs() <= 0.5, "fgd {}", u[3].1);
        }
    }
}
