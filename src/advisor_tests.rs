//! Each rule as a table of cases over small fleets, and the whole advisor on the simulated
//! cluster.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

use super::*;
use crate::model::activity::Activity;
use crate::model::{Card, MigState, Node, Workload, WorkloadKind, WorkloadState};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 14, 0, 0).single().unwrap_or_default()
}

fn cx(a: &Advisor) -> Context<'_> {
    Context {
        advisor: a,
        min_runtime: Duration::from_secs(1800),
        queue_wait: Duration::from_secs(900),
        scale_in_pct: 50.0,
        now: now(),
        demand: None,
        suggested: None,
        schedules: &[],
    }
}

fn activity(mean: f64, idle_min: u64) -> Activity {
    Activity {
        now_pct: Some(mean),
        mean_pct: Some(mean),
        covered_s: 1800,
        idle_for_s: idle_min * 60,
        peak_mem_mib: None,
        mean_1h_pct: Some(mean),
    }
}

/// Node `n` with a whole H100 (card 0) held by `w`, and an A100 in 3g.40gb+... (card 1).
fn fleet(w: Workload) -> Fleet {
    let whole = Card {
        index: 0,
        model: "NVIDIA H100 80GB HBM3".into(),
        memory_total_mib: Some(81559),
        workloads: vec![w.id.clone()],
        ..Card::default()
    };
    let mut mig =
        Card { index: 1, model: "NVIDIA A100-SXM4-80GB".into(), memory_total_mib: Some(81920), ..Card::default() };
    mig.mig = MigState::from_layout(&mig.model, "3g.40gb@0,3g.40gb@4");
    let node = Node { cards: vec![whole, mig], sources: vec!["sim".into()], ..Node::new("n") };
    let sources = vec![crate::model::SourceStatus::live("sim", crate::model::SourceKind::Simulated, now())];
    let mut f = Fleet { nodes: vec![node], workloads: vec![w], sources, taken_at: Some(now()), ..Fleet::default() };
    f.index_workloads();
    f
}

fn running(id: &str, kind: WorkloadKind, ran_min: i64, a: Option<Activity>) -> Workload {
    let mut w = Workload::new(id, id, kind, WorkloadState::Running);
    w.started_at = Some(now() - chrono::Duration::minutes(ran_min));
    w.cards = vec![crate::model::CardRef::new("n", 0)];
    w.activity = a;
    w
}

/// The demo at `now()`, and a store that has seen it.
fn demo() -> (crate::sources::sim::Sim, crate::store::Store) {
    let mut sim = crate::sources::sim::Sim::new(crate::sources::sim::SimConfig::new(42, now()));
    let mut store = crate::store::Store::new();
    store.register("sim", crate::model::SourceKind::Simulated, Duration::from_secs(1));
    observe(&mut sim, &mut store);
    (sim, store)
}

/// The store sees the simulator as it is now.
fn observe(sim: &mut crate::sources::sim::Sim, store: &mut crate::store::Store) {
    let update = crate::sources::SourceUpdate {
        source: "sim".into(),
        kind: crate::model::SourceKind::Simulated,
        at: sim.now(),
        result: Ok(sim.snapshot()),
    };
    store.apply(update, now());
}

fn of(kind: Kind, f: &Fleet, a: &Advisor) -> Vec<Finding> {
    advise(f, &cx(a)).into_iter().filter(|x| x.kind == kind).collect()
}

#[test]
fn held_idle_cases() {
    let a = Advisor::default();
    #[rustfmt::skip]
    let cases = [
        // kind, ran, idle minutes, severity, suggests a preemption
        (WorkloadKind::Other,     300, 10,  None,                 false),
        (WorkloadKind::Other,     300, 40,  Some(Severity::Warn), false),
        (WorkloadKind::Other,     300, 130, Some(Severity::High), false),
        (WorkloadKind::Training,  300, 40,  Some(Severity::Warn), true),
        (WorkloadKind::Training,  20,  40,  Some(Severity::Warn), false),
        (WorkloadKind::Inference, 300, 40,  Some(Severity::Warn), false),
    ];
    for (kind, ran, idle, want, preempts) in cases {
        let f = fleet(running("w", kind, ran, Some(activity(1.0, idle))));
        let got = of(Kind::HeldIdle, &f, &a);
        assert_eq!(got.first().map(|x| x.severity), want, "{kind:?} ran {ran} idle {idle}");
        if let Some(x) = got.first() {
            assert_eq!(x.suggestion.action().is_some(), preempts, "{kind:?} ran {ran}");
            assert!((x.gpu_hours_per_day - 24.0).abs() < 1e-9, "one whole card a day");
        }
    }
    // Checkpointing dips on purpose: not idle.
    let mut w = running("w", WorkloadKind::Training, 300, Some(activity(1.0, 200)));
    w.state = WorkloadState::Checkpointing;
    assert!(of(Kind::HeldIdle, &fleet(w), &a).is_empty());
    // A price makes it money.
    let priced = Advisor { prices: vec![("H100-80GB".into(), 2.5)], ..Advisor::default() };
    let f = fleet(running("w", WorkloadKind::Other, 300, Some(activity(1.0, 40))));
    assert_eq!(of(Kind::HeldIdle, &f, &priced)[0].cost_per_day, Some(60.0));
}

#[test]
fn oversized_cases() {
    let a = Advisor::default();
    // mean %, memory GiB in use, finding's profile
    for (mean, gib, want) in
        [(10.0, 8, Some("1g.10gb")), (10.0, 30, Some("3g.40gb")), (50.0, 8, None), (10.0, 75, None)]
    {
        let mut w = running("w", WorkloadKind::Inference, 300, Some(activity(mean, 0)));
        w.memory_used_mib = Some(gib * 1024);
        let got = of(Kind::Oversized, &fleet(w), &a);
        let profile = got.first().map(|x| x.title.rsplit(' ').next().unwrap_or_default().to_string());
        assert_eq!(profile.as_deref(), want, "mean {mean} used {gib} GiB: {got:?}");
    }
}

#[test]
fn mig_waste_cases() {
    let a = Advisor::default();
    let mut f = fleet(running("w", WorkloadKind::Other, 300, None));
    let inst = &mut f.nodes[0].cards[1].mig.instances;
    inst[0].workloads = vec!["small".into()];
    inst[0].memory_used_mib = Some(15 * 1024);
    inst[0].memory_total_mib = Some(40 * 1024);
    inst[1].workloads = vec!["big".into()];
    inst[1].memory_used_mib = Some(38 * 1024);
    inst[1].memory_total_mib = Some(40 * 1024);
    // Holders whose activity covers the idle rules' window, using a tenth of their compute.
    for id in ["small", "big"] {
        f.workloads.push(running(id, WorkloadKind::Inference, 300, Some(activity(10.0, 0))));
    }
    f.index_workloads();
    let got = of(Kind::MigWaste, &f, &a);
    assert_eq!(got.len(), 1, "only the instance with 25 GiB idle: {got:?}");
    assert!(got[0].title.contains("25.0 GiB idle"), "{}", got[0].title);
    assert!(
        got[0].suggestion.text().contains("1g.20gb"),
        "the smallest that holds 15 GiB: {}",
        got[0].suggestion.text()
    );
    // Judged on the peak: the job used 17 GiB an hour ago, so 23 GiB idle, not 25; at half of
    // the 3g's compute it needs two slices: a 2g.20gb, not a 1g.
    let small = f.workloads.iter_mut().find(|w| w.id == "small").unwrap_or_else(|| panic!("small"));
    small.activity = Some(Activity { peak_mem_mib: Some(17 * 1024), ..activity(50.0, 0) });
    let got = of(Kind::MigWaste, &f, &a);
    assert!(got[0].title.contains("23.0 GiB idle"), "{}", got[0].title);
    assert!(got[0].suggestion.text().contains("2g.20gb"), "{}", got[0].suggestion.text());
    // At a 30 GiB peak no smaller profile holds it (#36): the 10 GiB left is the catalog's
    // granularity, not waste.
    let small = f.workloads.iter_mut().find(|w| w.id == "small").unwrap_or_else(|| panic!("small"));
    small.activity = small.activity.map(|a| Activity { peak_mem_mib: Some(30 * 1024), ..a });
    assert!(of(Kind::MigWaste, &f, &a).is_empty());
}

/// #36: a job using 15 GiB of a 20 GiB instance wastes 5 GiB only where a smaller profile
/// would hold it; on a 1g.20gb (the A100-80GB's smallest that holds 15 GiB) it is the
/// catalog's granularity: no finding, not counted, said in the profile's summary.
#[test]
fn unused_memory_no_smaller_profile_could_save_is_granularity_not_waste() {
    let a = Advisor::default();
    let mut f = fleet(running("w", WorkloadKind::Other, 300, None));
    let c = &mut f.nodes[0].cards[1];
    c.mig = MigState::from_layout(&c.model, "1g.20gb@0,1g.20gb@2,1g.20gb@4,1g.20gb@6");
    for (i, (who, gib)) in [("a", 15), ("b", 15), ("c", 5), ("d", 5)].into_iter().enumerate() {
        let inst = &mut c.mig.instances[i];
        inst.workloads = vec![who.into()];
        inst.memory_used_mib = Some(gib * 1024);
        inst.memory_total_mib = Some(20 * 1024);
    }
    for id in ["a", "b", "c", "d"] {
        f.workloads.push(running(id, WorkloadKind::Inference, 300, Some(activity(10.0, 0))));
    }
    f.index_workloads();
    let got = of(Kind::MigWaste, &f, &a);
    let titles: Vec<&str> = got.iter().map(|x| x.title.as_str()).collect();
    assert!(!titles.iter().any(|t| t.starts_with("a uses") || t.starts_with("b uses")), "{titles:?}");
    assert_eq!(titles.iter().filter(|t| t.starts_with("c uses") || t.starts_with("d uses")).count(), 2, "{titles:?}");
    let Some(sum) = got.iter().find(|x| matches!(x.subject, Subject::Profile { .. })) else { panic!("{got:#?}") };
    assert!(sum.title.starts_with("2 1g.20gb instances leave 30.0 GiB idle"), "{}", sum.title);
    assert!((sum.gpu_hours_per_day - 2.0 * 15.0 / 80.0 * 24.0).abs() < 1e-9, "{}", sum.gpu_hours_per_day);
    assert!(
        sum.evidence.iter().any(|e| e.contains("10.0 GiB unused on 2 more is the catalog's granularity")),
        "{:?}",
        sum.evidence
    );
}

#[test]
fn unhealthy_cards_with_work_are_high_and_drained_first() {
    let a = Advisor::default();
    let mut f = fleet(running("w", WorkloadKind::Training, 300, None));
    f.nodes[0].cards[0].health.last_xid = Some(79);
    let got = of(Kind::UnhealthyHeld, &f, &a);
    assert_eq!(got[0].severity, Severity::High);
    assert_eq!(got[0].suggestion.action(), Some(&Action::Drain { target: "n/0".into(), evict: false }));
    f.nodes[0].cards[0].draining = true;
    // #47: drained, its training past the minimum runtime is moved by the preemption the
    // finding suggests (it said so in words only); inference is moved by hand.
    assert_eq!(
        of(Kind::UnhealthyHeld, &f, &a)[0].suggestion.action(),
        Some(&Action::Preempt { workload: "w".into(), force: false })
    );
    f.workloads[0].kind = WorkloadKind::Inference;
    assert!(of(Kind::UnhealthyHeld, &f, &a)[0].suggestion.action().is_none(), "drained: move the work");
}

#[test]
fn waiting_inference_names_the_training_to_preempt() {
    let a = Advisor::default();
    let mut f = fleet(running("t", WorkloadKind::Training, 300, None));
    // The training job holds both A100 instances; an inference job waits for a 3g.40gb.
    f.workloads[0].cards = vec![crate::model::CardRef::new("n", 1)];
    for i in &mut f.nodes[0].cards[1].mig.instances {
        i.workloads = vec!["t".into()];
    }
    f.nodes[0].cards[0].workloads.clear();
    let mut p = Workload::new("p", "p", WorkloadKind::Inference, WorkloadState::Pending);
    p.request.mig_profile = Some("3g.40gb".into());
    p.submitted_at = Some(now() - chrono::Duration::minutes(40));
    f.workloads.push(p);
    f.index_workloads();
    // The idle H100 could be repartitioned for it: that comes before stopping anyone.
    assert!(of(Kind::PreemptionCandidate, &f, &a).is_empty());
    let plan = of(Kind::LayoutPlan, &f, &a);
    assert_eq!(plan.first().map(|x| x.cards.clone()), Some(vec![crate::model::CardRef::new("n", 0)]), "{plan:?}");
    // With that card busy, preempting the training is what starts it.
    f.nodes[0].cards[0].workloads.push("someone".into());
    let got = of(Kind::PreemptionCandidate, &f, &a);
    assert_eq!(got[0].suggestion.action(), Some(&Action::Preempt { workload: "t".into(), force: false }));
    assert_eq!(got[0].severity, Severity::High, "40 min is over twice the 15 min threshold");
    // Young training is not a candidate.
    f.workloads[0].started_at = Some(now() - chrono::Duration::minutes(10));
    assert!(of(Kind::PreemptionCandidate, &f, &a).is_empty());
}

#[test]
fn the_simulated_cluster_shows_its_waste() {
    let f = crate::engine::simulated_store(42, now()).fleet().clone();
    let a = Advisor::default();
    let got = advise(&f, &cx(&a));
    assert!(got.iter().any(|x| x.kind == Kind::HeldIdle), "the idle notebook: {got:#?}");
    assert!(got.iter().any(|x| x.kind == Kind::MigWaste), "{got:#?}");
    // The most severe first, then the most costly (#36: high findings of no GPU-hours, such as
    // crowding, were listed last).
    assert!(got.windows(2).all(|w| (w[0].severity, w[0].gpu_hours_per_day) >= (w[1].severity, w[1].gpu_hours_per_day)));
}

/// Node `n` of four whole H100s; `held` of them held by a training job at `mean` %.
fn pool(held: usize, mean: f64) -> Fleet {
    let cards: Vec<Card> = (0..4)
        .map(|i| Card {
            index: i,
            model: "NVIDIA H100 80GB HBM3".into(),
            memory_total_mib: Some(81559),
            workloads: if (i as usize) < held { vec![format!("t{i}")] } else { Vec::new() },
            ..Card::default()
        })
        .collect();
    let node = Node { cards, ..Node::new("n") };
    let workloads = (0..held)
        .map(|i| {
            let mut w = running(&format!("t{i}"), WorkloadKind::Training, 300, Some(activity(mean, 0)));
            w.cards = vec![crate::model::CardRef::new("n", i as u32)];
            w
        })
        .collect();
    let mut f = Fleet { nodes: vec![node], workloads, taken_at: Some(now()), ..Fleet::default() };
    f.index_workloads();
    f
}

#[test]
fn scale_in_cases() {
    let a = Advisor::default();
    // held cards, their mean, cards the pool could release (none: no finding)
    for (held, mean, spare) in [(2, 10.0, Some(3.0)), (4, 40.0, None), (4, 80.0, None), (1, 90.0, Some(2.0))] {
        let got = of(Kind::ScaleIn, &pool(held, mean), &a);
        let released = got.first().map(|x| x.gpu_hours_per_day / 24.0);
        assert_eq!(released, spare, "{held} held at {mean} %: {got:?}");
    }
    // A holder without a covered window: no activity data, no finding.
    let mut f = pool(2, 10.0);
    f.workloads[0].activity = None;
    assert!(of(Kind::ScaleIn, &f, &a).is_empty());
}

#[test]
fn scale_out_when_waiting_work_has_nowhere_to_go() {
    let a = Advisor::default();
    let mut f = pool(4, 90.0);
    let mut p = Workload::new("p", "p", WorkloadKind::Training, WorkloadState::Pending);
    p.request.gpus = Some(1);
    p.request.model = Some("NVIDIA H100 80GB HBM3".into());
    p.submitted_at = Some(now() - chrono::Duration::minutes(20));
    f.workloads.push(p);
    f.index_workloads();
    let got = of(Kind::ScaleOut, &f, &a);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].severity, Severity::Warn);
    assert!(got[0].suggestion.text().contains("1 × whole H100-80GB"), "{}", got[0].suggestion.text());
    // Not yet past the threshold: nothing.
    f.workloads[4].submitted_at = Some(now() - chrono::Duration::minutes(5));
    assert!(of(Kind::ScaleOut, &f, &a).is_empty());
}

/// `pool(4, 10.0)` made of A100s, with `waiting` pending jobs of one whole card of any model,
/// submitted `ago` minutes before now.
fn a100_pool_with_queue(waiting: usize, ago: i64) -> Fleet {
    let mut f = pool(4, 10.0);
    for c in &mut f.nodes[0].cards {
        c.model = "NVIDIA A100-SXM4-80GB".into();
    }
    for i in 0..waiting {
        let mut p = Workload::new(format!("p{i}"), format!("p{i}"), WorkloadKind::Training, WorkloadState::Pending);
        p.request.gpus = Some(1);
        p.submitted_at = Some(now() - chrono::Duration::minutes(ago));
        f.workloads.push(p);
    }
    f.index_workloads();
    f
}

#[test]
fn scale_in_keeps_the_cards_waiting_work_could_use() {
    let a = Advisor::default();
    // Four A100s at 10 %: one carries the work, three could go.
    let got = of(Kind::ScaleIn, &a100_pool_with_queue(0, 0), &a);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].gpu_hours_per_day, 72.0, "{got:#?}");
    // Two whole-card jobs waited 20 minutes with nothing free: capacity to add, so none to
    // release; the scale-out says why the scale-in is not there.
    let f = a100_pool_with_queue(2, 20);
    let all = advise(&f, &cx(&a));
    assert!(!all.iter().any(|x| x.kind == Kind::ScaleIn), "{all:#?}");
    let out = all.iter().find(|x| x.kind == Kind::ScaleOut).unwrap_or_else(|| panic!("a scale-out: {all:#?}"));
    assert!(
        out.evidence.iter().any(|e| e == "scale-in of 3 A100-80GB withheld: 2 jobs wait for whole cards"),
        "{:#?}",
        out.evidence
    );
    // The same two, just arrived (no scale-out yet): two of the three are kept for them.
    let got = of(Kind::ScaleIn, &a100_pool_with_queue(2, 1), &a);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].gpu_hours_per_day, 24.0, "{got:#?}");
    assert!(got[0].suggestion.text().starts_with("release or lend 1 A100-80GB card,"), "{}", got[0].suggestion.text());
    assert!(
        got[0].evidence.iter().any(|e| e.contains("2 cards kept for waiting work: 2 jobs wait for whole cards")),
        "{:#?}",
        got[0].evidence
    );
    // Work the pool cannot serve keeps nothing: whole H100s, an A30 profile.
    let mut f = a100_pool_with_queue(2, 1);
    f.workloads[4].request.model = Some("NVIDIA H100 80GB HBM3".into());
    f.workloads[5].request.gpus = None;
    f.workloads[5].request.mig_profile = Some("1g.6gb".into());
    let got = of(Kind::ScaleIn, &f, &a);
    assert_eq!(got.first().map(|x| x.gpu_hours_per_day), Some(72.0), "{got:#?}");
    // A profile of the A100 keeps the card it would be cut from.
    f.workloads[5].request.mig_profile = Some("1g.10gb".into());
    let got = of(Kind::ScaleIn, &f, &a);
    assert_eq!(got.first().map(|x| x.gpu_hours_per_day), Some(48.0), "{got:#?}");
}

/// A pending single-unit job for a MIG profile (`None`: a whole card), waiting `ago` minutes.
fn waiting(id: &str, profile: Option<&str>, ago: i64) -> Workload {
    let mut w = Workload::new(id, id, WorkloadKind::Inference, WorkloadState::Pending);
    w.request.gpus = Some(1);
    w.request.mig_profile = profile.map(str::to_string);
    w.submitted_at = Some(now() - chrono::Duration::minutes(ago));
    w
}

/// #36: a packed layout (7 x 1g.10gb, the schedule's all-1g.10gb) is as full as the model
/// gets: slice 7 is the catalog's, not fragmentation. Stranded slices next to a layout that is
/// not packed are fragmentation only when waiting or measured demand could use them.
#[test]
fn packed_layouts_are_never_fragmentation_and_stranded_slices_count_for_demand() {
    let a = Advisor::default();
    let mut f = fleet(running("w", WorkloadKind::Other, 300, None));
    f.workloads.push(waiting("p", Some("1g.20gb"), 30));
    f.index_workloads();
    let c = &mut f.nodes[0].cards[1];
    c.mig = MigState::from_layout(&c.model, "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6");
    assert!(of(Kind::Fragmentation, &f, &a).is_empty(), "7 x 1g.10gb is packed");
    let c = &mut f.nodes[0].cards[1];
    c.mig = MigState::from_layout(&c.model, "3g.40gb@0,2g.20gb@4,1g.10gb@6");
    assert!(of(Kind::Fragmentation, &f, &a).is_empty(), "a maximal layout is packed");
    // 1g.10gb@6 alone strands slice 7 (1g.20gb@6 and 3g.40gb@4 would cover it) and is not packed.
    let c = &mut f.nodes[0].cards[1];
    c.mig = MigState::from_layout(&c.model, "1g.10gb@6");
    let got = of(Kind::Fragmentation, &f, &a);
    assert_eq!(got.len(), 1, "a waiting 1g.20gb could use slice 7: {got:?}");
    assert!(got[0].title.contains("1 memory slice"), "{}", got[0].title);
    assert!(got[0].evidence.iter().any(|e| e.contains("p waits for 1g.20gb")), "{:?}", got[0].evidence);
    // Nobody waits for anything that could use it: not waste.
    f.workloads.retain(|w| w.id != "p");
    f.index_workloads();
    assert!(of(Kind::Fragmentation, &f, &a).is_empty());
    // A 1g.10gb cannot use slice 7; a whole card can.
    f.workloads.push(waiting("small", Some("1g.10gb"), 30));
    f.index_workloads();
    assert!(of(Kind::Fragmentation, &f, &a).is_empty());
    f.workloads.push(waiting("big", None, 30));
    f.index_workloads();
    assert_eq!(of(Kind::Fragmentation, &f, &a).len(), 1);
    // Measured demand counts as waiting demand does.
    f.workloads.retain(|w| w.id != "big");
    f.index_workloads();
    let mut demand = crate::model::demand::DemandHistory::default();
    demand.hours[9].mean.insert("3g.40gb".into(), 1.0);
    demand.hours[9].samples = 6;
    let got: Vec<Finding> = advise(&f, &Context { demand: Some(&demand), ..cx(&a) })
        .into_iter()
        .filter(|x| x.kind == Kind::Fragmentation)
        .collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].evidence.iter().any(|e| e.contains("3g.40gb")), "{:?}", got[0].evidence);
}

/// #36: the planner's layouts, carried out on the demo, are not reported as fragmentation on
/// the next pass; nor is the layout the issue applied to gpu-h200-01/7.
#[test]
fn the_planners_layouts_are_not_fragmentation_on_the_next_pass() {
    use crate::sources::sim::SimOp;
    let (mut sim, mut store) = demo();
    let a = Advisor::default();
    let mut changed: Vec<(String, String)> = advise(store.fleet(), &cx(&a))
        .iter()
        .filter_map(|x| match x.suggestion.action() {
            Some(Action::Repartition { target, layout }) if x.kind == Kind::LayoutPlan => {
                Some((target.clone(), layout.clone()))
            }
            _ => None,
        })
        .collect();
    assert!(!changed.is_empty(), "the demo plans layouts");
    // The repro: the layout an earlier plan gave the idle H200.
    if !changed.iter().any(|(t, _)| t == "gpu-h200-01/7") {
        changed.push(("gpu-h200-01/7".into(), "1g.35gb@0,1g.35gb@2,2g.35gb@4,1g.18gb@6".into()));
    }
    for (target, layout) in &changed {
        let (node, index) = target.rsplit_once('/').unwrap_or_default();
        let op = SimOp::Repartition { node: node.into(), index: index.parse().unwrap_or(0), layout: layout.clone() };
        sim.apply(&op).unwrap_or_else(|e| panic!("{target} {layout}: {e}"));
    }
    sim.advance(Duration::from_secs(10));
    observe(&mut sim, &mut store);
    let frag: Vec<Finding> =
        advise(store.fleet(), &cx(&a)).into_iter().filter(|x| x.kind == Kind::Fragmentation).collect();
    for (target, layout) in &changed {
        let bad: Vec<&Finding> = frag.iter().filter(|x| x.cards.iter().any(|c| c.to_string() == *target)).collect();
        assert!(bad.is_empty(), "{target} laid out {layout}: {bad:#?}");
    }
    // Every card of the demo in a packed layout is left alone.
    for (n, c) in store.fleet().cards().filter(|(_, c)| c.mig.enabled) {
        let Some(m) = c.gpu_model() else { continue };
        if crate::model::mig::layout::is_packed(m, &c.layout()) {
            let r = crate::model::CardRef::new(n.name.clone(), c.index);
            assert!(!frag.iter().any(|x| x.cards.contains(&r)), "{r} {}: {frag:#?}", c.layout_text());
        }
    }
}

/// #36: the picker, `:fit` and the advisor ask one planner the same question (a 2g.35gb
/// request, an idle H200) and give the same layout.
#[test]
fn the_picker_fit_and_the_advisor_give_one_layout() {
    let a = Advisor::default();
    let mut f = fleet(running("w", WorkloadKind::Other, 300, None));
    let h200 = Card { index: 2, model: "NVIDIA H200".into(), memory_total_mib: Some(143_771), ..Card::default() };
    f.nodes[0].cards.push(h200);
    f.workloads.push(waiting("p", Some("2g.35gb"), 40));
    f.index_workloads();
    let r = crate::model::CardRef::new("n", 2);
    let plan = of(Kind::LayoutPlan, &f, &a);
    let advisor = match plan.first().and_then(|x| x.suggestion.action()) {
        Some(Action::Repartition { target, layout }) if *target == r.to_string() => layout.clone(),
        other => panic!("{other:?}: {plan:#?}"),
    };
    let want = fit::parse(&f, "p").unwrap_or_else(|e| panic!("{e}"));
    let answer = fit::fit(&f, &want, now(), Duration::from_secs(1800));
    let fit = answer
        .after_repartition
        .iter()
        .find_map(|l| l.strip_prefix("n/2 whole to "))
        .unwrap_or_else(|| panic!("{answer:?}"))
        .to_string();
    let card = f.card(&r).unwrap_or_else(|| panic!("n/2"));
    let picker = match crate::ui::dialogs::picker(&f, &r, card) {
        Ok(crate::ui::dialogs::Modal::Picker { choices, selected, .. }) => choices[selected].layout.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!((fit.as_str(), picker.as_str()), (advisor.as_str(), advisor.as_str()));
}

/// The demo's promise: the planner's suggestion, carried out on the simulated cluster, starts
/// the work it names.
#[test]
fn a_layout_plan_carried_out_on_the_simulator_starts_what_it_promised() {
    use crate::sources::sim::SimOp;
    let (mut sim, mut store) = demo();
    let a = Advisor::default();
    let found = advise(store.fleet(), &cx(&a));
    let plan = found.iter().find(|f| f.kind == Kind::LayoutPlan).unwrap_or_else(|| panic!("a layout plan: {found:#?}"));
    let Some(Action::Repartition { target, layout }) = plan.suggestion.action() else { panic!("{plan:?}") };
    let promised: Vec<String> = plan
        .evidence
        .iter()
        .filter_map(|e| e.split(' ').next())
        .filter(|w| w.starts_with("sim:"))
        .map(str::to_string)
        .collect();
    assert!(!promised.is_empty(), "{plan:?}");
    // The runner would carry it out: a plan without blockers.
    let runner = crate::actions::run::Runner::new(&crate::config::Config::default(), crate::actions::Env::default());
    let proposed = runner.propose(plan.suggestion.action().unwrap_or_else(|| panic!("an action")), store.fleet());
    let proposed = proposed.unwrap_or_else(|e| panic!("{e}"));
    assert!(proposed.allowed(), "{:?}", proposed.blockers);
    let (node, index) = target.rsplit_once('/').unwrap_or_default();
    let op = SimOp::Repartition { node: node.into(), index: index.parse().unwrap_or(0), layout: layout.clone() };
    sim.apply(&op).unwrap_or_else(|e| panic!("{e}"));
    sim.advance(Duration::from_secs(10));
    observe(&mut sim, &mut store);
    for id in &promised {
        let w = store.fleet().workload(id).unwrap_or_else(|| panic!("{id}"));
        assert_eq!(w.state, WorkloadState::Running, "{id} did not start");
        assert_eq!(w.cards.first().map(ToString::to_string).as_deref(), Some(target.as_str()), "{id}");
    }
    // Served: no longer advised.
    let after = advise(store.fleet(), &cx(&a));
    assert!(!after.iter().any(|f| f.kind == Kind::LayoutPlan && f.cards == plan.cards), "{after:#?}");
}

/// The demo's promise to a new user: every kind of advice has a case from the first minute,
/// whatever the hour it is started.
#[test]
fn the_demo_shows_every_kind_from_its_first_minute_at_any_hour() {
    let a = Advisor::default();
    let all = [
        Kind::HeldIdle,
        Kind::Oversized,
        Kind::MigWaste,
        Kind::UnhealthyHeld,
        Kind::PreemptionCandidate,
        Kind::ScaleIn,
        Kind::ScaleOut,
        Kind::Fragmentation,
        Kind::LayoutPlan,
        Kind::Interference,
        Kind::Crowded,
        Kind::UseMig,
    ];
    let mut missing = Vec::new();
    for hour in (0..24).step_by(3) {
        let t = Utc.with_ymd_and_hms(2026, 3, 2, hour, 17, 0).single().unwrap_or_default();
        let f = crate::engine::simulated_store(42, t).fleet().clone();
        let got = advise(&f, &Context { now: t, ..cx(&a) });
        // A scale-in withheld for waiting work is said on the scale-out that wants the cards.
        let withheld = got
            .iter()
            .filter(|x| x.kind == Kind::ScaleOut)
            .any(|x| x.evidence.iter().any(|e| e.starts_with("scale-in of ") && e.contains(" withheld: ")));
        for k in all {
            let said = got.iter().any(|x| x.kind == k) || (k == Kind::ScaleIn && withheld);
            if !said {
                missing.push(format!("{hour:02}:17 {k:?}"));
            }
        }
    }
    // Scale-in is a night finding: from midday (the daytime wave of small services) through
    // the afternoon peak (inference at full load) the pools are busy, and the advisor
    // truthfully says nothing (see the simulated day below). At night the demo's queue starts
    // with whole cards of any model wanted (an 8-GPU and a 4-GPU job), so the idle pools'
    // scale-in is withheld and said on the scale-out (#36: it offered those cards for release).
    // Since the DynamicMIG node (issue 49) creates instances for the wave's services that
    // waited, its H100s are busy by 09:00 too.
    missing.retain(|m| !(m.ends_with("ScaleIn") && ["09:", "12:", "15:", "18:"].iter().any(|h| m.starts_with(h))));
    // The demo's MIG cards are all in packed layouts (7 x 1g.10gb among them), so it truthfully
    // shows no fragmentation (#36: their stranded slice 7 was reported as waste).
    missing.retain(|m| !m.ends_with("Fragmentation"));
    assert!(missing.is_empty(), "missing: {missing:?}");
}

/// Whether a usable card of `pool` (a model key) serves `resource` (as a finding names it):
/// whole cards of its model or of any on a card neither MIG-enabled nor shared, a profile of its
/// model, a share in a unit its card is shared in.
fn pool_serves(f: &Fleet, pool: &str, resource: &str) -> bool {
    use crate::model::capacity::usable;
    use crate::model::mig::catalog::model_key;
    f.cards().filter(|(n, c)| usable(n, c) && model_key(&c.model) == pool).any(|(_, c)| {
        let named = |kind: &str| resource == format!("{kind} (any)") || resource == format!("{kind} {pool}");
        let whole = !c.mig.enabled && c.sharing.replicas.is_none() && named("whole");
        let mig = resource.strip_prefix("MIG ").is_some_and(|p| c.gpu_model().is_some_and(|m| m.profile(p).is_some()));
        whole || mig || c.sharing.unit.is_some_and(|u| named(u.as_str()))
    })
}

/// A simulated day, sampled every minute as the console would: pools scale in more at night
/// (inference runs at a fifth of its peak) than at the afternoon peak, and never while work
/// their cards serve has a scale-out; the queue asks for capacity by day.
#[test]
fn over_a_simulated_day_scale_in_at_night_and_scale_out_by_day() {
    use crate::sources::SourceUpdate;
    use crate::sources::sim::{Sim, SimConfig};
    let a = Advisor::default();
    let start = Utc.with_ymd_and_hms(2026, 3, 2, 0, 0, 0).single().unwrap_or_default();
    let mut sim = Sim::new(SimConfig::new(42, start));
    let mut store = crate::store::Store::new();
    store.register("sim", crate::model::SourceKind::Simulated, Duration::from_secs(60));
    // Cards a scale-in finding says could go, summed over the samples of each period.
    let (mut night, mut peak, mut day_out) = (0.0, 0.0, 0);
    for minute in 0..24 * 60 {
        if minute > 0 {
            sim.advance(Duration::from_secs(60));
        }
        let at = sim.now();
        let update = SourceUpdate {
            source: "sim".into(),
            kind: crate::model::SourceKind::Simulated,
            at,
            result: Ok(sim.snapshot()),
        };
        store.apply(update, at);
        if minute % 30 != 0 {
            continue;
        }
        let hour = minute / 60;
        let got = advise(store.fleet(), &Context { now: at, ..cx(&a) });
        let subjects = |kind: Kind| -> Vec<&String> {
            got.iter()
                .filter(|x| x.kind == kind)
                .filter_map(|x| match &x.subject {
                    Subject::Pool { model: s } | Subject::Resource { resource: s } => Some(s),
                    _ => None,
                })
                .collect()
        };
        for pool in subjects(Kind::ScaleIn) {
            for resource in subjects(Kind::ScaleOut) {
                let both = pool_serves(store.fleet(), pool, resource);
                assert!(!both, "{hour}h: a scale-in of {pool} beside a scale-out for {resource}");
            }
        }
        let spare: f64 = got.iter().filter(|x| x.kind == Kind::ScaleIn).map(|x| x.gpu_hours_per_day / 24.0).sum();
        match hour {
            1..=5 => night += spare,
            14..=18 => peak += spare,
            _ => {}
        }
        if (9..=18).contains(&hour) {
            day_out += usize::from(got.iter().any(|x| x.kind == Kind::ScaleOut));
        }
    }
    eprintln!(
        "cards a scale-in would release, summed over ten samples: night {night}, peak {peak}; scale-out in {day_out} of 20 day samples"
    );
    // Both periods are ten samples long. The night's idle cards are fewer than they were
    // (#36: the demo's night queue of whole-card jobs of any model keeps most of them).
    assert!(night > peak.max(1.0), "cards to release: {night} at night, {peak} at the peak");
    assert!(day_out >= 1, "scale-out in {day_out} day samples");
}

#[test]
fn drain_plans_only_when_asked_and_only_for_movable_training() {
    // Both cards busy: the H100 with training past its minimum runtime, the A100 with
    // inference. A 3g.40gb job has waited 40 minutes.
    let mut f = fleet(running("t", WorkloadKind::Training, 300, None));
    for i in &mut f.nodes[0].cards[1].mig.instances {
        i.workloads = vec!["serve".into()];
    }
    let mut serve = running("serve", WorkloadKind::Inference, 300, None);
    serve.cards = vec![crate::model::CardRef::new("n", 1)];
    let mut p = Workload::new("p", "p", WorkloadKind::Inference, WorkloadState::Pending);
    p.request.mig_profile = Some("3g.40gb".into());
    p.submitted_at = Some(now() - chrono::Duration::minutes(40));
    f.workloads.extend([serve, p]);
    f.index_workloads();
    let off = Advisor::default();
    assert!(of(Kind::DrainPlan, &f, &off).is_empty(), "off by default");
    let on = Advisor { drain_plans: true, ..Advisor::default() };
    let got = of(Kind::DrainPlan, &f, &on);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(
        got[0].suggestion.action(),
        Some(&Action::Preempt { workload: "t".into(), force: false }),
        "free the training card"
    );
    assert_eq!(got[0].cards, vec![crate::model::CardRef::new("n", 0)]);
    assert!(got[0].title.contains("then repartition to") && got[0].title.contains("3g.40gb"), "{}", got[0].title);
    // Young training is not moved.
    f.workloads[0].started_at = Some(now() - chrono::Duration::minutes(10));
    assert!(of(Kind::DrainPlan, &f, &on).is_empty());
}

/// Actions under way are advice carried out, not advice to give again: during a preemption's
/// checkpoint the waiting work is not given a second victim, and a drained card is not
/// suggested for draining again (#36: the finding switched to "preempting sim:21 would start
/// it" mid-checkpoint, and "crowded … drain" stayed on a DRAINING card).
#[test]
fn actions_under_way_are_said_and_not_suggested_again() {
    use crate::sources::sim::SimOp;
    let (mut sim, mut store) = demo();
    let a = Advisor::default();
    let found = advise(store.fleet(), &cx(&a));
    let preempt = found
        .iter()
        .find(|f| f.kind == Kind::PreemptionCandidate)
        .unwrap_or_else(|| panic!("a preemption candidate: {found:#?}"));
    let Some(Action::Preempt { workload: victim, .. }) = preempt.suggestion.action() else { panic!("{preempt:?}") };
    let drain = found
        .iter()
        .filter(|f| f.kind == Kind::Crowded)
        .find_map(|f| match f.suggestion.action() {
            Some(Action::Drain { target, .. }) => Some(target.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a crowded card to drain: {found:#?}"));
    let (node, index) = drain.rsplit_once('/').unwrap_or_default();
    sim.apply(&SimOp::Checkpoint { workload: victim.clone() }).unwrap_or_else(|e| panic!("{e}"));
    sim.apply(&SimOp::Drain { node: node.into(), index: index.parse().unwrap_or(0) }).unwrap_or_else(|e| panic!("{e}"));
    sim.advance(Duration::from_secs(5));
    observe(&mut sim, &mut store);
    let after = advise(store.fleet(), &cx(&a));
    let same: Vec<&Finding> = after.iter().filter(|f| f.subject == preempt.subject).collect();
    assert_eq!(same.len(), 1, "{same:#?}");
    match &same[0].suggestion {
        Suggestion::InProgress { action: Action::Preempt { workload, .. }, text } => {
            assert_eq!(workload, victim);
            assert!(same[0].suggestion.text().starts_with("in progress: preempting"), "{text}");
        }
        other => panic!("a second victim or none: {other:?}"),
    }
    for f in &after {
        assert!(
            !matches!(f.suggestion.action(), Some(Action::Drain { target, .. }) if *target == drain),
            "drain {drain} suggested again: {f:#?}"
        );
    }
    assert!(
        after.iter().any(|f| matches!(&f.suggestion, Suggestion::InProgress { action: Action::Drain { target, .. }, .. } if *target == drain)),
        "{after:#?}"
    );
}

/// One preemption starts one waiting job: a second job that needs the same victim is capacity
/// to add, not silence (both used to pick the same victim; the plan dropped the second's, and
/// it counted as served, so no scale-out said it either).
#[test]
fn one_victim_serves_one_waiting_job_and_the_next_is_capacity_to_add() {
    let a = Advisor::default();
    let mut f = fleet(running("t", WorkloadKind::Training, 300, None));
    // The A100's instances are busy too: nothing free or idle to repartition.
    let mut busy = running("b", WorkloadKind::Inference, 300, None);
    busy.cards = vec![crate::model::CardRef::new("n", 1)];
    for i in &mut f.nodes[0].cards[1].mig.instances {
        i.workloads = vec!["b".into()];
    }
    f.workloads.push(busy);
    for id in ["p1", "p2"] {
        let mut p = Workload::new(id, id, WorkloadKind::Inference, WorkloadState::Pending);
        p.request.gpus = Some(1);
        p.request.model = Some("H100-80GB".into());
        p.submitted_at = Some(now() - chrono::Duration::minutes(40));
        f.workloads.push(p);
    }
    f.index_workloads();
    let got = advise(&f, &cx(&a));
    let preempt: Vec<&Finding> =
        got.iter().filter(|x| x.kind == Kind::PreemptionCandidate && x.suggestion.action().is_some()).collect();
    assert_eq!(preempt.len(), 1, "{got:#?}");
    assert!(got.iter().any(|x| x.kind == Kind::ScaleOut), "the second job is said: {got:#?}");
}

/// Two idle H100s on `gpu-h100-01` laid out as `layout`, whole-card training waiting 40 minutes
/// and the starving day/night schedule (the README's example before #47) configured.
fn scheduled_h100s(layout: &str) -> (Fleet, Vec<crate::model::schedule::Schedule>) {
    let cards: Vec<Card> = (0..2)
        .map(|i| {
            let mut c = Card {
                index: i,
                model: "NVIDIA H100 80GB HBM3".into(),
                memory_total_mib: Some(81559),
                ..Card::default()
            };
            if layout != "whole" {
                c.mig = MigState::from_layout(&c.model, layout);
            }
            c
        })
        .collect();
    let node = Node { cards, sources: vec!["sim".into()], ..Node::new("gpu-h100-01") };
    let sources = vec![crate::model::SourceStatus::live("sim", crate::model::SourceKind::Simulated, now())];
    let mut train = Workload::new("t1", "train-1", WorkloadKind::Training, WorkloadState::Pending);
    train.request.gpus = Some(1);
    train.submitted_at = Some(now() - chrono::Duration::minutes(40));
    let mut f = Fleet { nodes: vec![node], workloads: vec![train], sources, taken_at: Some(now()), ..Fleet::default() };
    f.index_workloads();
    let text = include_str!("../tests/fixtures/schedules/starving-day-night.toml");
    let cfg = crate::config::parse(text, "starving-day-night.toml").unwrap_or_else(|e| panic!("{e}"));
    (f, cfg.schedules)
}

/// #47: a schedule's window in force owns its cards' layout. By day (all-1g.10gb) two idle
/// H100s sat as fourteen unused 1g.10gb while whole-card training waited, and the advice
/// proposed layouts against the window and asked for hardware; now it says what the window
/// costs, with the change to make now, and asks for no hardware.
#[test]
fn the_window_in_force_owns_its_cards_and_its_cost_is_said() {
    let a = Advisor::default();
    let (f, schedules) = scheduled_h100s("1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6");
    // Without the schedule: a layout plan for the waiting job (what the advice said before).
    assert_eq!(of(Kind::LayoutPlan, &f, &a).len(), 1);
    let with = Context { schedules: &schedules, ..cx(&a) };
    let got = advise(&f, &with);
    assert!(got.iter().all(|x| x.kind != Kind::LayoutPlan), "no plan against the window: {got:#?}");
    assert!(got.iter().all(|x| x.kind != Kind::ScaleOut), "a layout change gives it, not hardware: {got:#?}");
    let cost: Vec<&Finding> = got.iter().filter(|x| x.kind == Kind::ScheduleCost).collect();
    assert_eq!(cost.len(), 1, "{got:#?}");
    assert_eq!(
        cost[0].title,
        "schedule sim-day-night (window day) holds 1 idle H100-80GB card as 7 unused 1g.10gb until 20:00 while 1 \
         job waiting (1 GPU) could start on it: change now, or shorten the window"
    );
    assert_eq!(cost[0].severity, Severity::High);
    assert_eq!(
        cost[0].suggestion.action(),
        Some(&Action::Repartition { target: "gpu-h100-01/0".into(), layout: "whole".into() })
    );
    // By night the window makes them whole: a waiting 3g.40gb gets no plan against it either.
    let (mut f, schedules) = scheduled_h100s("whole");
    f.workloads[0].request.mig_profile = Some("3g.40gb".into());
    let night = now() + chrono::Duration::hours(8);
    f.workloads[0].submitted_at = Some(night - chrono::Duration::minutes(40));
    f.index_workloads();
    let got = advise(&f, &Context { schedules: &schedules, now: night, ..cx(&a) });
    assert!(got.iter().all(|x| x.kind != Kind::LayoutPlan), "{got:#?}");
    assert!(got.iter().any(|x| x.kind == Kind::ScheduleCost), "{got:#?}");
}

/// Two nodes of 8 whole A100s, `busy_a` and `busy_b` of them held, and one training job
/// waiting 40 minutes for `want` whole cards together.
fn two_nodes(busy_a: u32, busy_b: u32, want: u32) -> Fleet {
    let mut workloads = Vec::new();
    let node = |name: &str, busy: u32, workloads: &mut Vec<Workload>| {
        let cards = (0..8)
            .map(|i| {
                let held = if i < busy {
                    let mut w = running(&format!("{name}-{i}"), WorkloadKind::Training, 300, None);
                    w.cards = vec![CardRef::new(name, i)];
                    workloads.push(w);
                    vec![format!("{name}-{i}")]
                } else {
                    Vec::new()
                };
                Card {
                    index: i,
                    model: "NVIDIA A100-SXM4-80GB".into(),
                    memory_total_mib: Some(81920),
                    workloads: held,
                    ..Card::default()
                }
            })
            .collect();
        Node { cards, ..Node::new(name) }
    };
    let nodes = vec![node("a", busy_a, &mut workloads), node("b", busy_b, &mut workloads)];
    let mut p = Workload::new("big", "big", WorkloadKind::Training, WorkloadState::Pending);
    p.request.gpus = Some(want);
    p.submitted_at = Some(now() - chrono::Duration::minutes(40));
    workloads.push(p);
    let mut f = Fleet { nodes, workloads, taken_at: Some(now()), ..Fleet::default() };
    f.index_workloads();
    f
}

/// #47: a multi-card request the fleet has the cards for, but no node free together, is
/// packing: the node to empty (the fewest busy), its drain, and no "add capacity" (1,428 free,
/// at most 6 on one node, said "add capacity for 2 × whole"). What no node could give even
/// empty is a shortage still.
#[test]
fn fragmentation_across_nodes_is_packing_not_a_shortage() {
    use crate::model::CardRef;
    let a = Advisor::default();
    let f = two_nodes(5, 3, 8);
    assert!(of(Kind::ScaleOut, &f, &a).is_empty(), "{:#?}", of(Kind::ScaleOut, &f, &a));
    let got = of(Kind::Packing, &f, &a);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0].title.contains("8 free, at most 5 on one node; packing, not a shortage: emptying b (3 busy)"),
        "{}",
        got[0].title
    );
    assert_eq!(got[0].suggestion.action(), Some(&Action::Drain { target: "b".into(), evict: false }));
    assert_eq!(got[0].cards, vec![CardRef::new("b", 0), CardRef::new("b", 1), CardRef::new("b", 2)]);
    // Drained for it: the plan is under way, what is left said (no second action for the wait).
    let mut held = f.clone();
    held.nodes[1].cards.iter_mut().for_each(|c| c.draining = true);
    let got = of(Kind::Packing, &held, &a);
    assert!(
        matches!(&got[0].suggestion, Suggestion::InProgress { text, .. } if text.contains("b is drained for the 8-card job: waiting for its work to end (3 busy)")),
        "{got:#?}"
    );
    // Nine together: no node has nine cards, so one is short, however the work is packed.
    let f = two_nodes(0, 0, 9);
    let got = of(Kind::ScaleOut, &f, &a);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(got[0].title.contains("1 short"), "{}", got[0].title);
    assert!(of(Kind::Packing, &f, &a).is_empty());
}

/// #47: right-sizing that is right. A job using 17.9 GiB of a 2g.35gb on an H200, at 56-63 % of
/// its compute, was told a 1g.18gb (18 GiB, one slice) would hold it, ten seconds after the
/// instance was made: now it needs the idle rules' window covered, a tenth of memory to spare
/// and the compute it uses, and no smaller profile has them.
#[test]
fn mig_waste_needs_the_window_a_margin_and_the_compute() {
    let a = Advisor::default();
    let mut card = Card { index: 0, model: "NVIDIA H200".into(), memory_total_mib: Some(143_771), ..Card::default() };
    card.mig = MigState::from_layout(&card.model, "2g.35gb@0");
    card.mig.instances[0].workloads = vec!["job".into()];
    card.mig.instances[0].memory_used_mib = Some(17 * 1024 + 900);
    card.mig.instances[0].memory_total_mib = Some(35 * 1024);
    let node = Node { cards: vec![card], sources: vec!["sim".into()], ..Node::new("n") };
    let mut job = running("job", WorkloadKind::Inference, 300, None);
    job.cards = vec![crate::model::CardRef::new("n", 0)];
    // Seconds of history: not judged at all.
    job.activity = Some(Activity { covered_s: 10, now_pct: Some(60.0), mean_pct: Some(60.0), ..activity(60.0, 0) });
    let mut f = Fleet { nodes: vec![node], workloads: vec![job], taken_at: Some(now()), ..Fleet::default() };
    f.index_workloads();
    assert!(of(Kind::MigWaste, &f, &a).is_empty(), "judged on seconds");
    // The window covered, at 60 % of two slices: two slices and 19.7 GiB are needed.
    f.workloads[0].activity = Some(activity(60.0, 0));
    assert!(of(Kind::MigWaste, &f, &a).is_empty(), "{:#?}", of(Kind::MigWaste, &f, &a));
    // At 20 % of its compute and 10 GiB, a 1g.18gb holds it with room: that is waste.
    f.nodes[0].cards[0].mig.instances[0].memory_used_mib = Some(10 * 1024);
    f.workloads[0].activity = Some(activity(20.0, 0));
    let got = of(Kind::MigWaste, &f, &a);
    assert!(got.iter().any(|x| x.suggestion.text().contains("1g.18gb")), "{got:#?}");
}

/// The DRA fixtures (tests/fixtures/dra/) as the console holds them, with `change` made to
/// their objects first.
fn dra_fleet(change: impl FnOnce(&mut serde_json::Value)) -> Fleet {
    use crate::sources::kubernetes::dra_fixture;
    let mut doc = dra_fixture::doc(true);
    change(&mut doc);
    dra_fixture::fleet_of(&doc, now())
}

/// Leave out the claims and pods named (`NS/NAME`) from a fixture document.
fn without(doc: &mut serde_json::Value, list: &str, gone: &[&str]) {
    if let Some(items) = doc[list].as_array_mut() {
        items.retain(|o| {
            let m = &o["metadata"];
            let key =
                format!("{}/{}", m["namespace"].as_str().unwrap_or_default(), m["name"].as_str().unwrap_or_default());
            !gone.contains(&key.as_str())
        });
    }
}

#[test]
fn dra_claim_holders_are_seen_held_but_idle() {
    let a = Advisor::default();
    // The shared claim's pods are gone, but the claim is still allocated: it holds 1g.20gb@2.
    let mut f = dra_fleet(|doc| {
        without(doc, "pods", &["inference/vllm-a-0", "inference/vllm-b-0"]);
        if let Some(c) = doc["resourceclaims"]
            .as_array_mut()
            .and_then(|v| v.iter_mut().find(|c| c["metadata"]["name"] == "shared-1g20gb"))
        {
            c["status"]["reservedFor"] = serde_json::json!([]);
        }
    });
    // The training pod that holds gpu-1 through its claim has idled for two hours.
    if let Some(w) = f.workloads.iter_mut().find(|w| w.id == "k8s:training/finetune-llama-0") {
        w.activity = Some(activity(0.0, 120));
        // These tests' clock is not the fixtures': it ran three hours by it.
        w.started_at = Some(now() - chrono::Duration::hours(3));
    }
    let got = of(Kind::HeldIdle, &f, &a);
    let pod = got.iter().find(|x| x.subject == Subject::Workload { id: "k8s:training/finetune-llama-0".into() });
    let pod = pod.unwrap_or_else(|| panic!("{got:#?}"));
    assert_eq!(pod.cards, [crate::model::CardRef::new("h100-dyn-01", 1)]);
    assert_eq!(
        pod.suggestion.action(),
        Some(&Action::Preempt { workload: "k8s:training/finetune-llama-0".into(), force: false })
    );
    let claim = got.iter().find(|x| x.title.starts_with("claim inference/shared-1g20gb"));
    let claim = claim.unwrap_or_else(|| panic!("{got:#?}"));
    assert_eq!(claim.title, "claim inference/shared-1g20gb holds 1g.20gb@2 of h100-dyn-01/0 and no pod uses it");
    assert_eq!(claim.subject, Subject::Card { card: "h100-dyn-01/0".into() });
    assert!((claim.gpu_hours_per_day - 24.0 * 2.0 / 8.0).abs() < 1e-9, "{claim:#?}");
}

#[test]
fn dynamic_mig_fragmentation_names_the_holders_whose_move_frees_the_card() {
    let a = Advisor::default();
    // embed-0 (1g.10gb@0) and rerank-0 (3g.40gb@4) end: gpu-0 has slices 0 and 4-7 free, five
    // slices, but the H100's one 4g.40gb placement is 0-3, where embed-1 and the shared
    // 1g.20gb sit.
    let mut f = dra_fleet(|doc| {
        without(doc, "pods", &["inference/embed-0", "inference/rerank-0"]);
        without(doc, "resourceclaims", &["inference/embed-0-mig-fqfnt", "inference/rerank-0-mig-mtfgr"]);
    });
    let gpu0 = f.card(&crate::model::CardRef::new("h100-dyn-01", 0)).cloned().unwrap_or_default();
    assert_eq!(gpu0.layout_text(), "1g.10gb@1,1g.20gb@2");
    let mut w = Workload::new("k8s:inference/big-0", "big-0", WorkloadKind::Inference, WorkloadState::Pending);
    w.request.gpus = Some(1);
    w.request.mig_profile = Some("4g.40gb".into());
    f.workloads.push(w);
    f.index_workloads();
    let got = of(Kind::Fragmentation, &f, &a);
    let [x] = got.as_slice() else { panic!("{got:#?}") };
    assert_eq!(x.title, "h100-dyn-01/0: 5 memory slices free under DynamicMIG, but 4g.40gb fits in no placement there");
    assert!(
        x.evidence[0]
            .starts_with("k8s:inference/big-0 waits for 4g.40gb (4 memory slices); h100-dyn-01/0 has 5 free (0,4-7)"),
        "{x:#?}"
    );
    let moves = &x.evidence[2];
    assert!(moves.starts_with("moving 3 holders (k8s:inference/embed-1, k8s:inference/vllm-a-0, k8s:inference/vllm-b-0) would free h100-dyn-01/0 whole"), "{moves}");
    assert!(moves.contains("cards can still place their profiles (1g.10gb, 1g.20gb)"), "{moves}");
    assert!(matches!(&x.suggestion, Suggestion::Words { text } if text.contains("DynamicMIG has no layout to change")));
    // Without the waiting 4g.40gb, nothing is fragmented: every free slice is placeable.
    f.workloads.retain(|w| w.id != "k8s:inference/big-0");
    f.index_workloads();
    assert!(of(Kind::Fragmentation, &f, &a).is_empty());
}

#[test]
fn dynamic_mig_cards_get_no_layout_plans() {
    let a = Advisor::default();
    let mut f = dra_fleet(|_| {});
    // Work waits for 1g.10gb instances: the idle DynamicMIG cards would serve it by layout,
    // but the driver lays them out per claim.
    for i in 0..3 {
        let id = format!("k8s:inference/small-{i}");
        let mut w = Workload::new(&id, &id, WorkloadKind::Inference, WorkloadState::Pending);
        w.request.gpus = Some(1);
        w.request.mig_profile = Some("1g.10gb".into());
        w.submitted_at = Some(now() - chrono::Duration::hours(2));
        f.workloads.push(w);
    }
    f.index_workloads();
    let idle = crate::model::CardRef::new("h100-dyn-01", 2);
    assert!(f.card(&idle).is_some_and(crate::model::Card::is_idle));
    for ask in [planner::Ask::Waiting, planner::Ask::One { profile: Some("1g.10gb".into()) }] {
        assert_eq!(planner::card_layout(&f, &idle, &ask, now()), None, "{ask:?}");
    }
    let p = planner::plan(&f, now());
    assert!(p.changes.iter().all(|c| c.card.node != "h100-dyn-01"), "{p:#?}");
    assert!(of(Kind::LayoutPlan, &f, &a).iter().all(|x| !x.title.contains("h100-dyn-01")));
    assert!(of(Kind::Fragmentation, &f, &a).is_empty(), "no packed-layout advice for DynamicMIG cards");
}
