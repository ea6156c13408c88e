//! The what-if engine's correctness: invariants at every instant (checked inside the replay
//! under test), jobs run exactly their durations plus what they lost, the preemption guard,
//! determinism, and `exclusive` against a plain reference written here.

use proptest::prelude::*;

use super::*;

pub(super) fn fleet(spec: &str) -> Fleet {
    Fleet::from_spec(spec).unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn frac(name: &str, submit: i64, duration: i64, milli: u32, class: Class) -> Job {
    let mut j = Job::new(name, submit, duration, 1);
    j.milli = milli;
    j.class = class;
    j
}

fn run(jobs: &[Job], f: &Fleet, policy: Policy, s: &Settings) -> Report {
    replay(jobs, f, policy, s, &mut |_| {})
}

/// The plain reference for `exclusive` with first fit: one second at a time, ends, then
/// arrivals, then the queue in arrival order, each job that fits starting on the first node
/// with enough free cards.
fn reference(jobs: &[Job], node_sizes: &[u32]) -> Vec<Option<i64>> {
    let mut free: Vec<u32> = node_sizes.to_vec();
    let mut running: Vec<(i64, usize, u32)> = Vec::new();
    let mut queue: Vec<usize> = Vec::new();
    let mut start = vec![None; jobs.len()];
    let end = jobs.iter().map(|j| j.submit).max().unwrap_or(0) + jobs.iter().map(|j| j.duration).sum::<i64>() + 1;
    for t in 0..=end {
        running.retain(|&(e, n, g)| {
            if e == t {
                free[n] += g;
            }
            e != t
        });
        queue.extend((0..jobs.len()).filter(|&i| jobs[i].submit == t));
        queue.retain(|&i| {
            let g = jobs[i].gpus;
            match free.iter().position(|&f| f >= g) {
                Some(n) => {
                    free[n] -= g;
                    running.push((t + jobs[i].duration, n, g));
                    start[i] = Some(t);
                    false
                }
                None => true,
            }
        });
    }
    start
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `exclusive` with first fit starts every job when the plain reference does.
    #[test]
    fn exclusive_agrees_with_the_reference(
        specs in prop::collection::vec((0i64..40, 1i64..30, prop::sample::select(vec![1u32, 1, 2, 4])), 1..40),
        fractions in prop::collection::vec(1u32..1000, 40),
    ) {
        let mut jobs: Vec<Job> = specs
            .iter()
            .enumerate()
            .map(|(i, &(t, d, g))| {
                let mut j = Job::new(&format!("j{i}"), t, d, g);
                if g == 1 && i % 3 == 0 {
                    j.milli = fractions[i];
                }
                j
            })
            .collect();
        jobs.sort_by_key(|j| j.submit);
        let f = fleet("4xL4,2xL4");
        let s = Settings { placement: Placement::FirstFit, ..Settings::default() };
        let r = run(&jobs, &f, Policy::Exclusive, &s);
        let sizes: Vec<u32> = f.nodes.iter().map(|n| n.gpus).collect();
        let want = reference(&jobs, &sizes);
        let got: Vec<Option<i64>> = r.job_runs.iter().map(|j| j.first_start).collect();
        prop_assert_eq!(got, want);
    }

    /// Under every policy and placement: each job runs its duration plus what it lost, the
    /// guard holds, and the same input gives the same result.
    #[test]
    fn every_policy_keeps_the_books(
        specs in prop::collection::vec((0i64..3600, 60i64..7200, 0u32..4, 0u8..3), 1..30),
        placement in prop::sample::select(Placement::REPLAY.to_vec()),
    ) {
        let jobs: Vec<Job> = {
            let mut v: Vec<Job> = specs
                .iter()
                .enumerate()
                .map(|(i, &(t, d, kind, class))| {
                    let class = [Class::Inference, Class::Training, Class::Other][class as usize];
                    let mut j = match kind {
                        0 => Job::new(&format!("w{i}"), t, d, 1 + (i as u32 % 3)),
                        1 => frac(&format!("f{i}"), t, d, 142, class),
                        2 => frac(&format!("h{i}"), t, d, 460, class),
                        _ => frac(&format!("m{i}"), t, d, 300, class),
                    };
                    j.class = class;
                    j.checkpoint_s = (class == Class::Training).then_some(600);
                    j.mem_mib = 5 * 1024;
                    j
                })
                .collect();
            v.sort_by_key(|j| j.submit);
            v
        };
        let f = fleet("4xA100-80GB,2xL4");
        let s = Settings { placement, min_runtime_s: 600, interval_s: 120, ..Settings::default() };
        for policy in Policy::ALL {
            let r = run(&jobs, &f, policy, &s);
            // Static layouts can leave a job of several cards nowhere to go; the rest start all.
            if !matches!(policy, Policy::Mig | Policy::Schedule) {
                prop_assert_eq!(r.never_started + r.unplaceable, 0, "{:?}", policy);
            }
            for (j, o) in jobs.iter().zip(&r.job_runs).filter(|(_, o)| o.first_start.is_some()) {
                prop_assert_eq!(o.ran_s, j.duration + o.lost_s, "{:?} {}", policy, j.name);
                if j.class != Class::Training {
                    prop_assert!(o.preempted_after.is_empty(), "{:?} preempted {}", policy, j.name);
                }
                for &after in &o.preempted_after {
                    prop_assert!(after >= s.min_runtime_s, "{:?}: {} preempted after {after}s", policy, j.name);
                }
            }
            prop_assert!(r.held_peak_gpus <= f.gpus() as f64 + 1e-9);
            prop_assert!(r.timeline.iter().all(|p| p.held_gpus <= f.gpus() as f64 + 1e-9));
            let again = run(&jobs, &f, policy, &s);
            prop_assert!(r == again, "{:?} differs on a second run", policy);
        }
    }
}

#[test]
fn sharing_starts_fractional_work_sooner() {
    let jobs: Vec<Job> = (0..8).map(|i| frac(&format!("f{i}"), 0, 3600, 250, Class::Inference)).collect();
    let f = fleet("2xL4");
    let s = Settings::default();
    let ex = run(&jobs, &f, Policy::Exclusive, &s);
    let sh = run(&jobs, &f, Policy::Share, &s);
    assert_eq!(sh.wait.p90_s, 0, "{:?}", sh.wait);
    assert_eq!(ex.wait.p90_s, 3 * 3600);
    assert!((sh.held_peak_gpus - 2.0).abs() < 1e-9);
    assert_eq!(ex.demand_gpu_hours, sh.demand_gpu_hours);
    assert!((ex.demand_gpu_hours - 2.0).abs() < 1e-9);
}

#[test]
fn mig_gives_the_smallest_instance_that_holds_the_job() {
    // Two 1g jobs and a 3g job on one A100 laid out 3g+2g+1g+1g: all start at once.
    let mut f = fleet("1xA100-80GB");
    assert!(f.set_layout("A100-80GB", "3g.40gb@0,2g.20gb@4,1g.10gb@6").is_ok());
    let mut jobs = vec![frac("a", 0, 100, 142, Class::Inference), frac("b", 0, 100, 250, Class::Inference)];
    jobs.push(frac("c", 0, 100, 428, Class::Inference));
    jobs[0].mem_mib = 8 * 1024;
    let r = run(&jobs, &f, Policy::Mig, &Settings::default());
    assert_eq!(r.wait.p90_s, 0, "{:?}", r.job_runs);
    // Held: 1/7 + 2/7 + 3/7 of the card.
    assert!((r.held_peak_gpus - 6.0 / 7.0).abs() < 0.01, "{}", r.held_peak_gpus);
    // Exclusive: one at a time.
    let ex = run(&jobs, &f, Policy::Exclusive, &Settings::default());
    assert_eq!(ex.wait.p99_s, 200);
}

#[test]
fn adaptive_preempts_training_only_past_its_minimum_runtime() {
    // Training holds the only card; inference arrives at 10 min and waits until training has
    // run 30 min (the default minimum), then preempts it; training resumes from its checkpoint.
    let mut train = Job::new("train", 0, 7200, 1);
    train.checkpoint_s = Some(900);
    let infer = frac("infer", 600, 600, 1000, Class::Inference);
    let jobs = vec![train, infer];
    let f = fleet("1xL4");
    let s = Settings { interval_s: 60, ..Settings::default() };
    let r = run(&jobs, &f, Policy::Adaptive, &s);
    assert_eq!(r.preemptions, 1);
    let t = &r.job_runs[0];
    assert_eq!(t.preempted_after, vec![1800]);
    // Two 15-minute checkpoints kept: nothing lost but the reload.
    assert_eq!(t.lost_s, s.restore_s);
    assert_eq!(r.job_runs[1].first_start, Some(1800));
    assert_eq!(t.ran_s, 7200 + t.lost_s);
    // Exclusive never preempts: inference waits the whole training.
    let ex = run(&jobs, &f, Policy::Exclusive, &s);
    assert_eq!(ex.preemptions, 0);
    assert_eq!(ex.job_runs[1].first_start, Some(7200));
}

#[test]
fn adaptive_lays_idle_cards_out_for_the_queue() {
    // Four 1g inference services and a whole-card fleet: adaptive cuts one card into 1g
    // instances after its first look.
    let jobs: Vec<Job> = (0..9).map(|i| frac(&format!("s{i}"), 0, 3600, 142, Class::Inference)).collect();
    let f = fleet("1xA100-80GB");
    let s = Settings { interval_s: 60, ..Settings::default() };
    let mut lay = f.clone();
    assert!(lay.set_layout("A100-80GB", "whole").is_ok());
    let r = replay::Run::new(&jobs, &lay, Policy::Adaptive, &[None], &s).run(&mut |_| {});
    assert_eq!(r.reconfigurations, 1, "{:?}", r.job_runs);
    assert!(r.downtime_gpu_hours > 0.0);
    // One ran at once on the whole card; the change lets the next seven share it.
    assert!(r.wait.p50_s < 3600, "{:?}", r.wait);
}

#[test]
fn a_schedule_changes_idle_cards_at_its_windows() {
    // Day (08-18): 7 x 1g; night: whole. Demand second 0 is midnight.
    let seven = crate::model::mig::lookup("A100-80GB").and_then(|m| {
        crate::model::mig::parse_layout(m, "1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb").ok()
    });
    let Some(crate::model::mig::LayoutSpec::Mig(day)) = seven else { panic!("layout") };
    let windows = vec![
        Window { model: None, nodes: Vec::new(), start_s: 8 * 3600, end_s: 18 * 3600, layout: Some(day) },
        Window { model: None, nodes: Vec::new(), start_s: 18 * 3600, end_s: 8 * 3600, layout: None },
    ];
    let s = Settings { windows, ..Settings::default() };
    // A night job on the whole card, then seven day services.
    let mut jobs = vec![Job::new("night", 0, 3600, 1)];
    jobs.extend((0..7).map(|i| frac(&format!("d{i}"), 9 * 3600, 3600, 142, Class::Inference)));
    let f = fleet("1xA100-80GB");
    let r = run(&jobs, &f, Policy::Schedule, &s);
    assert_eq!(r.reconfigurations, 1, "{:?}", r.job_runs);
    assert_eq!(r.wait.p99_s, 0);
}

#[test]
fn interference_is_counted_where_inference_shares_with_training() {
    let mut t = frac("t", 0, 3600, 500, Class::Training);
    t.checkpoint_s = Some(600);
    let jobs = vec![t, frac("i", 0, 3600, 500, Class::Inference)];
    let f = fleet("1xL4");
    let r = run(&jobs, &f, Policy::Share, &Settings::default());
    assert!((r.interference_hours - 1.0).abs() < 1e-9, "{}", r.interference_hours);
    let m = run(&jobs, &f, Policy::Exclusive, &Settings::default());
    assert_eq!(m.interference_hours, 0.0);
    // MIG instances isolate: side by side on one card, no exposure.
    let mut a100 = fleet("1xA100-80GB");
    assert!(a100.set_layout("A100-80GB", "4g.40gb@0,3g.40gb@4").is_ok());
    let small: Vec<Job> = jobs.iter().map(|j| Job { milli: 428, ..j.clone() }).collect();
    let mig = run(&small, &a100, Policy::Mig, &Settings::default());
    assert_eq!(mig.wait.p99_s, 0);
    assert_eq!(mig.interference_hours, 0.0);
}

#[test]
fn a_job_bigger_than_any_node_is_counted_never_queued() {
    let jobs = vec![Job::new("big", 0, 60, 16), Job::new("ok", 0, 60, 1)];
    let r = run(&jobs, &fleet("8xL4"), Policy::Exclusive, &Settings::default());
    assert_eq!((r.unplaceable, r.started, r.never_started), (1, 1, 0));
}

#[test]
fn the_horizon_leaves_waiting_work_never_started() {
    let jobs = vec![Job::new("a", 0, 3600, 1), Job::new("b", 0, 3600, 1)];
    let s = Settings { horizon_s: Some(1800), ..Settings::default() };
    let r = run(&jobs, &fleet("1xL4"), Policy::Exclusive, &s);
    assert_eq!((r.started, r.never_started), (1, 1));
    assert_eq!(r.wait.p99_s, 1800);
}

#[test]
fn idle_cards_cost_their_price() {
    let jobs = vec![Job::new("a", 0, 3600, 1)];
    let s = Settings { prices: vec![("L4".into(), 2.0)], ..Settings::default() };
    let r = run(&jobs, &fleet("2xL4"), Policy::Exclusive, &s);
    assert!((r.idle_gpu_hours - 1.0).abs() < 1e-9);
    assert_eq!(r.idle_cost, Some(2.0));
}

#[test]
fn frag_aware_packing_leaves_fewer_gpus_unallocated() {
    // Half-card and quarter-card requests in an adversarial order: best fit strands halves.
    let mut jobs = Vec::new();
    for i in 0..64 {
        let milli = if i % 4 == 0 { 600 } else { 300 };
        jobs.push(frac(&format!("p{i}"), i, 100, milli, Class::Inference));
    }
    let refs: Vec<&Job> = jobs.iter().collect();
    let f = fleet("16xL4");
    let with = |placement| PackWith {
        placements: vec![placement],
        protocol: paper::Protocol {
            runs: 1,
            seed: 7,
            level: 1.0,
            order: paper::Order::Trace,
            cap: Some(4),
            levels: vec![100],
        },
    };
    let one = |placement| pack(&refs, &f, Policy::Share, &with(placement)).unwrap_or_default().remove(0);
    let best = one(Placement::BestFit);
    let frag = one(Placement::FragAware);
    assert!(frag.unallocated_gpus <= best.unallocated_gpus, "{} vs {}", frag.unallocated_gpus, best.unallocated_gpus);
    assert!(best.steps.windows(2).all(|w| w[0].arrived <= w[1].arrived));
    assert_eq!(frag, one(Placement::FragAware));
}

#[test]
fn the_search_finds_fewer_gpus_for_sharing() {
    let jobs: Vec<Job> = (0..32).map(|i| frac(&format!("s{i}"), i * 60, 3600, 250, Class::Inference)).collect();
    let f = fleet("32xL4");
    let s = Settings::default();
    let ex = fewest_gpus(&jobs, &f, Policy::Exclusive, &s, 600);
    let sh = fewest_gpus(&jobs, &f, Policy::Share, &s, 600);
    let (Some(e), Some(h)) = (ex.gpus, sh.gpus) else { panic!("no answer: {:?} {:?}", ex.gpus, sh.gpus) };
    assert!(h < e, "share {h} exclusive {e}");
    assert!(h >= 8, "32 quarter-card jobs need at least 8 cards: {h}");
}

#[test]
fn a_long_backlog_keeps_the_timeline_bounded_and_evenly_stepped() {
    // Forty one-hour jobs on one card: the run lasts forty times the demand's own span.
    let jobs: Vec<Job> = (0..40).map(|i| Job::new(&format!("j{i}"), i, 3600, 1)).collect();
    let s = Settings { timeline_points: 50, ..Settings::default() };
    let r = run(&jobs, &fleet("1xL4"), Policy::Exclusive, &s);
    assert!(r.timeline.len() < 100, "{}", r.timeline.len());
    let steps: Vec<i64> = r.timeline.windows(2).map(|w| w[1].t - w[0].t).collect();
    assert!(steps.windows(2).all(|w| w[0] <= w[1]), "steps only grow: {steps:?}");
    assert!(r.timeline.last().is_some_and(|p| p.t > 30 * 3600));
}

#[test]
fn best_fit_puts_a_small_job_in_an_instance_before_a_whole_card() {
    // One whole card first in the fleet, one cut card after it: the 1g job takes the 1g.
    let mut f = fleet("2xA100-80GB");
    f.nodes[0].layouts = vec![
        None,
        crate::model::mig::lookup("A100-80GB").and_then(|m| {
            match crate::model::mig::parse_layout(m, "1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb").ok()? {
                crate::model::mig::LayoutSpec::Mig(l) => Some(l),
                crate::model::mig::LayoutSpec::Whole => None,
            }
        }),
    ];
    let jobs = vec![frac("small", 0, 100, 142, Class::Inference), Job::new("whole", 1, 100, 1)];
    let r = run(&jobs, &f, Policy::Mig, &Settings::default());
    assert_eq!(r.wait.p99_s, 0, "the whole job found the whole card free");
    assert!((r.held_peak_gpus - (1.0 + 1.0 / 7.0)).abs() < 0.01, "{}", r.held_peak_gpus);
}

#[test]
fn a_layout_with_media_extensions_is_the_same_layout_at_the_next_boundary() {
    // Day and night want the same layout, one instance with media extensions: nothing changes.
    let Some(gm) = crate::model::mig::lookup("A100-80GB") else { panic!("catalog") };
    let Ok(crate::model::mig::LayoutSpec::Mig(l)) =
        crate::model::mig::parse_layout(gm, "3g.40gb@0,2g.20gb@4,1g.10gb+me@6")
    else {
        panic!("layout")
    };
    let windows = vec![
        Window { model: None, nodes: Vec::new(), start_s: 8 * 3600, end_s: 18 * 3600, layout: Some(l.clone()) },
        Window { model: None, nodes: Vec::new(), start_s: 18 * 3600, end_s: 8 * 3600, layout: Some(l) },
    ];
    let s = Settings { windows, ..Settings::default() };
    let jobs: Vec<Job> = (0..6).map(|i| frac(&format!("j{i}"), i * 4 * 3600, 600, 142, Class::Inference)).collect();
    let r = run(&jobs, &fleet("1xA100-80GB"), Policy::Schedule, &s);
    assert_eq!(r.reconfigurations, 0);
    assert_eq!(r.wait.p99_s, 0);
}

/// Random jobs for fleets without MIG: whole and fractional, every class, some with card
/// memory and host CPU; `spread` seconds of arrivals (small: a compressed trace).
fn random_jobs(specs: &[(i64, i64, u8, u8)], spread: i64) -> Vec<Job> {
    let mut v: Vec<Job> = specs
        .iter()
        .enumerate()
        .map(|(i, &(t, d, kind, class))| {
            let class = [Class::Inference, Class::Training, Class::Other][usize::from(class % 3)];
            let mut j = match kind % 5 {
                0 => Job::new(&format!("w{i}"), 0, d, 1 + (i as u32 % 3)),
                1 => frac(&format!("f{i}"), 0, d, 142, class),
                2 => frac(&format!("h{i}"), 0, d, 460, class),
                3 => frac(&format!("m{i}"), 0, d, 300, class),
                _ => Job::new(&format!("o{i}"), 0, d, 1),
            };
            j.submit = t % spread.max(1);
            j.class = class;
            j.checkpoint_s = (class == Class::Training).then_some(600);
            j.mem_mib = u64::from(kind % 3) * 4 * 1024;
            j.cpu_milli = u32::from(kind % 4) * 8000;
            j
        })
        .collect();
    v.sort_by_key(|j| j.submit);
    v
}

/// The report with the policy's name taken out: what two policies must agree on.
fn books(mut r: Report) -> Report {
    r.policy = Policy::Exclusive;
    r
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// On a fleet with no MIG-capable card, `mig`, `schedule` and `dynamic` are `exclusive`
    /// exactly (`dynamic` with the placement every policy has: with nothing to carve it is
    /// not first-fit), and `adaptive` too where nothing may be preempted (no training past
    /// its minimum).
    #[test]
    fn policies_that_cannot_differ_do_not_differ(
        specs in prop::collection::vec((0i64..7200, 60i64..5400, 0u8..5, 0u8..3), 1..40),
        spread in prop::sample::select(vec![60i64, 900, 7200]),
        placement in prop::sample::select(Placement::REPLAY.to_vec()),
        spec in prop::sample::select(vec!["6xT4", "4xL4,3xT4", "8xG2,2xV100M32"]),
    ) {
        let jobs = random_jobs(&specs, spread);
        let mut f = fleet(spec);
        for n in &mut f.nodes {
            n.cpu_milli = 32_000;
        }
        let day = crate::model::mig::lookup("A100-80GB").and_then(|m| {
            match crate::model::mig::parse_layout(m, "1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb").ok()? {
                crate::model::mig::LayoutSpec::Mig(l) => Some(l),
                crate::model::mig::LayoutSpec::Whole => None,
            }
        });
        let windows = vec![Window { model: None, nodes: Vec::new(), start_s: 0, end_s: 3600, layout: day }];
        let s = Settings { placement, windows, min_runtime_s: 1_000_000, interval_s: 120, ..Settings::default() };
        let ex = books(run(&jobs, &f, Policy::Exclusive, &s));
        for policy in [Policy::Mig, Policy::Schedule, Policy::Adaptive, Policy::Dynamic] {
            let r = books(run(&jobs, &f, policy, &s));
            prop_assert!(r == ex, "{:?} differs from exclusive: wait {:?} vs {:?}, runs {:?} vs {:?}",
                policy, r.wait, ex.wait, r.job_runs, ex.job_runs);
        }
    }
}

#[test]
fn every_policy_of_a_run_is_measured_over_one_window() {
    // A whole-card job on a fleet of one A100 laid out 3g+3g: under mig it can never start.
    // It does not keep mig's replay going; every row covers the same window and mig's row
    // says NOT RUN with its cause.
    let mut f = fleet("2xA100-80GB");
    assert!(f.set_layout("A100-80GB", "3g.40gb,3g.40gb").is_ok());
    let mut jobs = vec![Job::new("whole", 0, 3600, 2)];
    jobs.extend((0..4).map(|i| frac(&format!("s{i}"), 10 + 60 * i, 7200, 400, Class::Inference)));
    let s = Settings::default();
    let all = replay_all(&jobs, &f, &[Policy::Exclusive, Policy::Mig, Policy::Share], &s, &mut |_, _| {});
    assert_eq!(all.window.start_s, 0);
    // Exclusive serves the whole job first, then the four shares two at a time: 3600 + 7200
    // + 7200 (the shares arrive at 10 s to 190 s).
    let ends: Vec<i64> = all.reports.iter().map(|r| r.window_end_s).collect();
    assert!(ends.iter().all(|&e| e == all.window.end_s), "{ends:?} vs {:?}", all.window);
    assert_eq!(all.window.end_s, 3600 + 7200 + 7200);
    let spans: Vec<f64> = all.reports.iter().map(|r| r.span_hours).collect();
    assert!(spans.iter().all(|&h| (h - 5.0).abs() < 1e-9), "{spans:?}");
    let mig = &all.reports[1];
    assert_eq!(mig.never_started, 1);
    let causes: Vec<&str> = mig.not_run.iter().map(|n| n.text.as_str()).collect();
    assert!(
        causes.iter().any(|t| t.contains("1 job needs 2 whole A100-80GB on one node") && t.contains("under mig")),
        "{causes:?}"
    );
    // Alone, mig's replay ends with the last work that started (the shares, at 190 + 7200 s):
    // the job that never starts does not keep it going.
    let alone = run(&jobs, &f, Policy::Mig, &s);
    assert_eq!(alone.window_end_s, 190 + 7200);
    // Nor a schedule's: its windows come round for days, but nothing more starts.
    let Some(Some(cut)) = f.nodes[0].layouts.first().cloned() else { panic!("layout") };
    let windows = vec![Window { model: None, nodes: Vec::new(), start_s: 0, end_s: 0, layout: Some(cut) }];
    let sched = run(&jobs, &f, Policy::Schedule, &Settings { windows, ..Settings::default() });
    assert_eq!((sched.window_end_s, sched.never_started), (190 + 7200, 1));
    // Held and idle use the same window: GPU-hours held plus idle card-hours is the fleet's
    // card-hours over it for a policy that never shares a card.
    let ex = &all.reports[0];
    let held_h = ex.held_mean * ex.span_hours * 2.0;
    assert!((held_h - (2.0 + 4.0 * 2.0)).abs() < 1e-6, "{held_h}");
}

#[test]
fn a_job_that_never_starts_does_not_stretch_the_window_when_it_arrives_last() {
    // Every job ends by 3,600 s; the last line, at 30 h, asks for a model the fleet lacks,
    // and one more at 20 h waits for a node shape no layout leaves.
    let mut jobs = vec![Job::new("a", 0, 3600, 1), Job::new("b", 60, 1800, 1)];
    let mut absent = Job::new("absent", 30 * 3600, 600, 1);
    absent.models = vec!["H100-80GB".into()];
    jobs.push(absent);
    let f = fleet("8xL4");
    let s = Settings::default();
    let all = replay_all(&jobs, &f, &[Policy::Exclusive, Policy::Share], &s, &mut |_, _| {});
    assert_eq!(all.window.end_s, 3600, "{:?}", all.window);
    for r in &all.reports {
        assert_eq!(r.window_end_s, 3600);
        assert_eq!(r.unplaceable, 1);
        let explained: u64 = r.not_run.iter().map(|n| n.jobs).sum();
        assert_eq!(explained, 1, "the late job has its cause: {:?}", r.not_run);
        assert!(r.wait.p99_s >= 0);
    }
    // A late job that waits for good (a whole A100 node under mig) neither.
    let mut a100 = fleet("8xA100-80GB");
    assert!(a100.set_layout("A100-80GB", "3g.40gb,3g.40gb").is_ok());
    let late = vec![frac("a", 0, 3600, 400, Class::Inference), Job::new("whole", 20 * 3600, 600, 8)];
    let r = run(&late, &a100, Policy::Mig, &s);
    assert_eq!((r.window_end_s, r.never_started), (3600, 1));
    assert!(r.wait.p99_s >= 0, "{:?}", r.wait);
}

#[test]
fn adaptive_does_not_tick_through_empty_time() {
    // Two jobs a near-eternity apart: the planner has nothing to look at in between.
    let jobs = vec![Job::new("a", 0, 600, 1), Job::new("b", 900_000_000_000, 600, 1)];
    let f = fleet("8xA100-80GB");
    let s = Settings::default();
    let layouts = layouts::initial(&f, &jobs);
    let mut r = replay::Run::new(&jobs, &f, Policy::Adaptive, &layouts, &s);
    r.play(&mut |_| {});
    assert!(r.ticks < 10, "{} ticks", r.ticks);
    let report = r.report_until(900_000_000_600);
    assert_eq!(report.started, 2);
    assert_eq!(report.wait.p99_s, 0);
}

/// `n` shares of `milli` thousandths of an H100 with 8 GiB each, all at `submit`.
fn shares(n: usize, submit: i64, duration: i64, milli: u32) -> Vec<Job> {
    (0..n)
        .map(|i| {
            let mut j = frac(&format!("s{submit}-{i}"), submit, duration, milli, Class::Inference);
            j.mem_mib = 8 * 1024;
            j
        })
        .collect()
}

#[test]
fn dynamic_creates_an_instance_per_job_and_destroys_it_at_the_end() {
    // Seven 1g.10gb jobs fill one H100 at once, each instance created for it (the
    // reconfiguration time before its work, counted under RECONF); a whole-card job waits
    // until the last instance is destroyed, and then has the card.
    let f = fleet("1xH100-80GB");
    let mut jobs = shares(7, 0, 3600, 142);
    jobs.push(Job::new("whole", 100, 600, 1));
    let s = Settings::default();
    let r = run(&jobs, &f, Policy::Dynamic, &s);
    assert_eq!(r.placement, Placement::FirstFit, "the scheduler's placement by default");
    let starts: Vec<Option<i64>> = r.job_runs.iter().map(|o| o.first_start).collect();
    assert!(starts[..7].iter().all(|&t| t == Some(0)), "{starts:?}");
    // Created at 0, working from 60 s for an hour; the whole job then, with no creation.
    assert!(r.job_runs[..7].iter().all(|o| o.end == Some(3660) && o.ran_s == 3600), "{:?}", r.job_runs);
    assert_eq!(starts[7], Some(3660));
    assert_eq!(r.job_runs[7].end, Some(4260));
    assert_eq!(r.reconfigurations, 7);
    // Seven instances of 142 thousandths each, a minute each: a GPU-minute, near enough.
    assert!((r.downtime_gpu_hours * 3600.0 - 7.0 * 0.142 * 60.0).abs() < 1e-6, "{}", r.downtime_gpu_hours);
    // Seven sevenths held while the shares run.
    assert!((r.held_peak_gpus - 1.0).abs() < 1e-9, "{}", r.held_peak_gpus);
    // An eighth share waits for a slice: 1g.10gb has seven placements.
    let mut jobs = shares(8, 0, 3600, 142);
    jobs.sort_by_key(|j| j.submit);
    let r = run(&jobs, &f, Policy::Dynamic, &s);
    assert_eq!(r.job_runs.iter().filter(|o| o.first_start == Some(0)).count(), 7);
    assert_eq!(r.job_runs[7].first_start, Some(3660));
}

#[test]
fn dynamic_whole_work_takes_only_cards_with_nothing_on_them() {
    // One share on the first of two H100s: a 2-card job waits for it to end; a 1-card job
    // takes the second card.
    let f = fleet("2xH100-80GB");
    let mut jobs = shares(1, 0, 3600, 142);
    jobs.push(Job::new("two", 10, 600, 2));
    jobs.push(Job::new("one", 20, 600, 1));
    let r = run(&jobs, &f, Policy::Dynamic, &Settings::default());
    assert_eq!(r.job_runs[1].first_start, Some(3660), "{:?}", r.job_runs);
    assert_eq!(r.job_runs[2].first_start, Some(20));
    assert_eq!(r.reconfigurations, 1);
}

#[test]
fn tessera_s_placement_keeps_room_first_fit_gives_away() {
    // A 3g job, then a 4g job, on one H100. First fit (the scheduler) puts the 3g at slice 0,
    // where the 4g's only placement is: the 4g waits for it. Best fit and frag-aware put the
    // 3g at slice 4 and both run.
    let f = fleet("1xH100-80GB");
    let mut jobs = shares(1, 0, 7200, 400);
    jobs.extend(shares(1, 10, 600, 500));
    let ff = run(&jobs, &f, Policy::Dynamic, &Settings::default());
    assert_eq!(ff.job_runs[1].first_start, Some(7260), "{:?}", ff.job_runs);
    for placement in [Placement::BestFit, Placement::FragAware] {
        let s = Settings { dynamic_placement: placement, ..Settings::default() };
        let r = run(&jobs, &f, Policy::Dynamic, &s);
        assert_eq!(r.placement, placement);
        assert_eq!(r.job_runs[1].first_start, Some(10), "{placement:?}: {:?}", r.job_runs);
    }
}

#[test]
fn first_fit_fills_the_first_card_best_fit_the_fullest() {
    // Two H100s: a 3g share on the second card (the first held whole meanwhile), then the
    // whole job ends and a 1g share comes. First fit puts it on the first card (now empty);
    // best fit on the second, beside the 3g, keeping the first whole for a whole job.
    let f = fleet("2xH100-80GB");
    let mut jobs = vec![Job::new("whole", 0, 600, 1)];
    jobs.extend(shares(1, 1, 7200, 400));
    jobs.extend(shares(1, 1000, 3600, 142));
    jobs.push(Job::new("later", 1001, 600, 1));
    let ff = run(&jobs, &f, Policy::Dynamic, &Settings::default());
    // First fit: the 1g on card 0, so the later whole job has no empty card until it ends.
    assert_eq!(ff.job_runs[3].first_start, Some(1000 + 60 + 3600), "{:?}", ff.job_runs);
    let s = Settings { dynamic_placement: Placement::BestFit, ..Settings::default() };
    let bf = run(&jobs, &f, Policy::Dynamic, &s);
    assert_eq!(bf.job_runs[3].first_start, Some(1001), "{:?}", bf.job_runs);
}
