//! The planner on the issue's case, its properties on random small fleets, and equality with
//! exhaustive search (every option of every card) up to four cards.

use chrono::TimeZone;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

use super::*;
use crate::model::mig::{LayoutSpec, enumerate, lookup, parse_layout};
use crate::model::{Card, MigState, Node, SourceKind, SourceStatus, WorkloadKind};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 14, 0, 0).single().unwrap_or_default()
}

const H200: &str = "NVIDIA H200";
const A100: &str = "NVIDIA A100-SXM4-80GB";
const A30: &str = "NVIDIA A30";
/// Shares its profile names with the A100-80GB (1g.10gb, 3g.40gb…): one family, two models.
const H100: &str = "NVIDIA H100 80GB HBM3";

fn card(index: u32, model: &str, layout: Option<&str>, holder: Option<&str>) -> Card {
    let mut c = Card { index, model: model.into(), ..Card::default() };
    if let Some(l) = layout {
        c.mig = MigState::from_layout(model, l);
        assert!(c.mig.enabled, "{model} {l}");
    }
    if let Some(h) = holder {
        match c.mig.instances.first_mut() {
            Some(i) => i.workloads.push(h.into()),
            None => c.workloads.push(h.into()),
        }
    }
    c
}

fn pending(id: &str, profile: Option<&str>, prio: i64, waited_min: i64) -> Workload {
    let mut w = Workload::new(id, id, WorkloadKind::Inference, WorkloadState::Pending);
    w.request.gpus = Some(1);
    w.request.mig_profile = profile.map(str::to_string);
    w.priority = Some(prio);
    w.submitted_at = Some(now() - chrono::Duration::minutes(waited_min));
    w
}

/// Node `n` of the simulator (which can change any card) with these cards and workloads.
fn fleet(cards: Vec<Card>, workloads: Vec<Workload>) -> Fleet {
    fleet_of(SourceKind::Simulated, cards, workloads)
}

fn fleet_of(kind: SourceKind, cards: Vec<Card>, workloads: Vec<Workload>) -> Fleet {
    let node = Node { cards, sources: vec!["src".into()], ..Node::new("n") };
    let sources = vec![SourceStatus::live("src", kind, now())];
    let mut f = Fleet { nodes: vec![node], workloads, sources, taken_at: Some(now()), ..Fleet::default() };
    f.index_workloads();
    f
}

#[test]
fn the_issues_case_a_waiting_2g_35gb_gets_an_idle_h200() {
    let mut cards = vec![card(0, H200, Some("3g.71gb@0,2g.35gb@4,1g.18gb@6"), Some("sim:1"))];
    cards[0].mig.instances[1].workloads.push("sim:2".into());
    cards.push(card(1, H200, None, Some("sim:3")));
    cards.push(card(2, H200, None, None));
    let f = fleet(cards, vec![pending("sim:9", Some("2g.35gb"), 100, 81)]);
    let p = plan(&f, now());
    assert_eq!(p.served, vec!["sim:9".to_string()]);
    assert_eq!(p.changes.len(), 1, "{p:?}");
    let c = &p.changes[0];
    assert_eq!(c.card, CardRef::new("n", 2), "the idle card, never a held one");
    assert_eq!(c.from, "whole");
    assert!(c.to.contains("2g.35gb"), "{}", c.to);
    assert_eq!(c.serves, vec!["sim:9".to_string()]);
    let Some(m) = lookup(H200) else { panic!("H200") };
    assert!(matches!(parse_layout(m, &c.to), Ok(LayoutSpec::Mig(_))), "{}", c.to);
}

#[test]
fn free_instances_serve_before_any_change() {
    let cards = vec![card(0, A100, Some("3g.40gb@0,3g.40gb@4"), None), card(1, A100, None, None)];
    let f = fleet(cards, vec![pending("a", Some("3g.40gb"), 100, 40)]);
    let p = plan(&f, now());
    assert!(p.changes.is_empty(), "{p:?}");
    assert_eq!(p.served_now, vec!["a".to_string()]);
}

#[test]
fn heavier_work_wins_when_one_card_cannot_serve_both() {
    // One idle A30: 4g.24gb or 2g.12gb+..., never both; the long-waiting one wins.
    let f = fleet(
        vec![card(0, A30, None, None)],
        vec![pending("big", Some("4g.24gb"), 100, 120), pending("small", Some("2g.12gb"), 100, 5)],
    );
    let p = plan(&f, now());
    assert_eq!(p.served, vec!["big".to_string()]);
    assert_eq!(p.changes.first().map(|c| c.to.as_str()), Some("4g.24gb@0"));
}

#[test]
fn a_request_for_a_model_tessera_lacks_is_left_alone() {
    let mut w = pending("w", None, 100, 60);
    w.request.model = Some("B300".into());
    let f = fleet(vec![card(0, A100, Some("7g.80gb@0"), None)], vec![w]);
    assert_eq!(plan(&f, now()), Plan::default());
}

#[test]
fn a_waiting_whole_card_job_gets_an_idle_mig_card_turned_whole() {
    let f = fleet(vec![card(0, A100, Some("3g.40gb@0,3g.40gb@4"), None)], vec![pending("t", None, 50, 45)]);
    let p = plan(&f, now());
    assert_eq!(p.changes.first().map(|c| (c.from.as_str(), c.to.as_str())), Some(("3g.40gb@0,3g.40gb@4", "whole")));
}

#[test]
fn only_what_a_backend_can_do_is_proposed() {
    let cards = || vec![card(0, A100, None, None), card(1, A100, Some("7g.80gb@0"), None)];
    let wants = || vec![pending("small", Some("1g.10gb"), 100, 60), pending("whole", None, 100, 60)];
    // NVML changes instances but not the MIG mode (a GPU reset): the MIG card, within MIG.
    let p = plan(&fleet_of(SourceKind::Nvml, cards(), wants()), now());
    assert_eq!(p.changes.len(), 1, "{p:?}");
    assert_eq!(p.changes[0].card, CardRef::new("n", 1));
    assert_ne!(p.changes[0].to, "whole");
    assert_eq!(p.served_now, vec!["whole".to_string()], "the idle whole card serves as it is");
    // Nothing can repartition a node only Slurm or Kubernetes reports.
    for kind in [SourceKind::Slurm, SourceKind::Kubernetes] {
        assert!(plan(&fleet_of(kind, cards(), wants()), now()).changes.is_empty(), "{kind:?}");
    }
    // A card with a process no workload claims is not idle, whatever its holders say.
    let mut busy = cards();
    busy[1].processes.push(crate::model::Process {
        pid: 7,
        name: Some("python".into()),
        user: None,
        used_mib: Some(900),
        gi_id: None,
        mps: false,
    });
    assert!(plan(&fleet(busy, wants()), now()).changes.iter().all(|c| c.card != CardRef::new("n", 1)));
}

#[test]
fn heavier_work_wins_a_unit_whichever_model_it_names() {
    // One idle H100 that nothing may change (a Slurm node): a fresh low-priority job naming
    // H100s and an old high-priority one taking any model want it; the old one gets it.
    let mut named = pending("named", None, 0, 1);
    named.request.model = Some("NVIDIA H100 80GB HBM3".into());
    let any = pending("any", None, 100, 120);
    let f = fleet_of(SourceKind::Slurm, vec![card(0, "NVIDIA H100 80GB HBM3", None, None)], vec![named, any]);
    assert_eq!(plan(&f, now()).served_now, vec!["any".to_string()]);
}

/// One answer (#36): for every model and profile, the layout plan for one idle card and one
/// waiting request is `card_layout`'s, whether asked for the waiting work (the picker) or for
/// that request alone (`:fit`), and the same on a card laid out otherwise (greedy included).
#[test]
fn card_layout_is_the_plans_layout_for_every_model_and_profile() {
    for m in &crate::model::mig::catalog::catalog().models {
        let Some(model) = lookup(&m.name) else { continue };
        for p in model.profiles.iter().filter(|p| !p.has_media_extensions()) {
            let f = fleet(vec![card(0, &m.name, None, None)], vec![pending("w", Some(&p.name), 10, 30)]);
            let r = CardRef::new("n", 0);
            let planned = plan(&f, now()).changes.first().map(|c| c.to.clone());
            assert!(planned.as_deref().is_some_and(|l| l.contains(&p.name)), "{} {}: {planned:?}", m.name, p.name);
            assert_eq!(card_layout(&f, &r, &Ask::Waiting, now()), planned, "{} {}", m.name, p.name);
            let one = Ask::One { profile: Some(p.name.clone()) };
            assert_eq!(card_layout(&f, &r, &one, now()), planned, "{} {}", m.name, p.name);
            let p = Problem::new(&f, now());
            assert_eq!(p.score(&p.greedy()), p.score(&p.search()), "{}", m.name);
            assert_eq!(p.plan(&p.greedy()).changes.first().map(|c| c.to.clone()), planned, "greedy: {}", m.name);
        }
    }
    // A card that serves the request as it is keeps its layout; one that cannot serve it, none.
    let f = fleet(vec![card(0, A100, Some("3g.40gb@0,3g.40gb@4"), None)], vec![pending("w", Some("3g.40gb"), 10, 30)]);
    let one = |p: &str| Ask::One { profile: Some(p.into()) };
    assert_eq!(card_layout(&f, &CardRef::new("n", 0), &one("3g.40gb"), now()).as_deref(), Some("3g.40gb@0,3g.40gb@4"));
    assert_eq!(card_layout(&f, &CardRef::new("n", 0), &Ask::Waiting, now()).as_deref(), Some("3g.40gb@0,3g.40gb@4"));
    assert_eq!(card_layout(&f, &CardRef::new("n", 0), &one("2g.35gb"), now()), None);
    let held = fleet(vec![card(0, A100, None, Some("h"))], Vec::new());
    assert_eq!(card_layout(&held, &CardRef::new("n", 0), &one("1g.10gb"), now()), None, "a held card");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The matching serves the most weight any placeable set of requests has (brute force over
    /// every subset: requests naming a model within its idle cards, all within the total).
    #[test]
    fn the_matching_serves_the_most_weight(
        cards in prop::collection::vec(0usize..2, 1..=4),
        wants in prop::collection::vec((0usize..3, 1u64..200), 0..=7),
    ) {
        let models = ["NVIDIA H100 80GB HBM3", A100];
        let idle: Vec<Card> = cards.iter().enumerate().map(|(i, &m)| card(i as u32, models[m], None, None)).collect();
        let workloads: Vec<Workload> = wants
            .iter()
            .enumerate()
            .map(|(i, &(m, prio))| {
                let mut w = pending(&format!("w{i}"), None, prio as i64, 0);
                w.request.model = models.get(m.wrapping_sub(1)).map(|s| s.to_string());
                w
            })
            .collect();
        let f = fleet_of(SourceKind::Slurm, idle, workloads.clone());
        let got = plan(&f, now()).score.weight;
        let supply = |m: usize| cards.iter().filter(|&&c| c == m).count();
        let mut best = 0;
        for set in 0u32..(1 << wants.len()) {
            let chosen: Vec<usize> = (0..wants.len()).filter(|i| set & (1 << i) != 0).collect();
            let per = |m: usize| chosen.iter().filter(|&&i| wants[i].0 == m + 1).count();
            if per(0) <= supply(0) && per(1) <= supply(1) && chosen.len() <= cards.len() {
                best = best.max(chosen.iter().map(|&i| weight(&workloads[i], now())).sum::<u64>());
            }
        }
        prop_assert_eq!(got, best);
    }
}

/// The best score over every combination of every card's options.
fn exhaustive(p: &Problem) -> Score {
    fn walk(p: &Problem, i: usize, choice: &mut Vec<usize>, best: &mut Score) {
        if i == p.cards.len() {
            *best = (*best).max(p.score(choice));
            return;
        }
        for o in 0..p.options(i) {
            choice.push(o);
            walk(p, i + 1, choice, best);
            choice.pop();
        }
    }
    let mut best = p.score(&p.cards.iter().map(|c| c.2).collect::<Vec<_>>());
    walk(p, 0, &mut Vec::new(), &mut best);
    best
}

/// A card of `model`: whole, or the `layout`-th of its simulated layouts, maybe held.
fn arb_card(models: &'static [&'static str]) -> impl Strategy<Value = (usize, Option<usize>, bool)> {
    (0..models.len(), prop::option::of(0usize..80), prop::bool::weighted(0.25))
}

fn build(models: &[&str], specs: &[(usize, Option<usize>, bool)], wants: &[(usize, u8, i64, i64)]) -> Fleet {
    let mut profiles: Vec<Option<String>> = vec![None];
    let cards = specs
        .iter()
        .enumerate()
        .map(|(i, &(m, layout, held))| {
            let name = models[m];
            let g = lookup(name).unwrap_or_else(|| panic!("{name}"));
            profiles.extend(g.profiles.iter().filter(|p| !p.has_media_extensions()).map(|p| Some(p.name.clone())));
            let all = enumerate(g);
            let text = layout.map(|l| all[l % all.len()].iter().map(ToString::to_string).collect::<Vec<_>>().join(","));
            card(i as u32, name, text.as_deref(), held.then_some("holder"))
        })
        .collect();
    profiles.sort();
    profiles.dedup();
    let workloads = wants
        .iter()
        .enumerate()
        .map(|(i, &(p, named, prio, wait))| {
            let mut w = pending(&format!("w{i}"), profiles[p % profiles.len()].as_deref(), prio, wait);
            // 0: any model; else the model of the fleet's (named − 1)-th card, when there is one.
            w.request.model = specs.get(usize::from(named).wrapping_sub(1)).map(|s| models[s.0].to_string());
            w
        })
        .collect();
    fleet(cards, workloads)
}

/// `full`: against every option of every card; else against every useful option (the
/// small-card test shows that leaving the rest out loses nothing).
fn check(f: &Fleet, full: bool) -> Result<(), TestCaseError> {
    let p = Problem::new(f, now());
    let got = plan(f, now());
    let baseline = p.score(&p.cards.iter().map(|c| c.2).collect::<Vec<_>>());
    prop_assert!(got.score.weight >= baseline.weight, "served less than doing nothing");
    for c in &got.changes {
        let card = f.card(&c.card).unwrap_or_else(|| panic!("{}", c.card));
        prop_assert!(card.holders().next().is_none(), "touched held card {}", c.card);
        let g = lookup(&card.model).unwrap_or_else(|| panic!("{}", card.model));
        prop_assert!(parse_layout(g, &c.to).is_ok(), "{} does not validate", c.to);
        prop_assert!(!c.serves.is_empty(), "a change that serves nobody: {c:?}");
    }
    // The plan's parts agree with its score: the weights of what it serves sum to it, and what
    // it serves is what free capacity and each change serve.
    let sum: u64 = got.served.iter().filter_map(|id| f.workload(id)).map(|w| weight(w, now())).sum();
    prop_assert_eq!(sum, got.score.weight, "served weights vs the score");
    let mut parts: Vec<&String> = got.served_now.iter().chain(got.changes.iter().flat_map(|c| &c.serves)).collect();
    let mut all: Vec<&String> = got.served.iter().collect();
    parts.sort();
    all.sort();
    prop_assert_eq!(parts, all, "served now and by changes vs served");
    let best = if full { exhaustive(&p) } else { p.score(&p.exhaustive(u64::MAX).unwrap_or_default()) };
    prop_assert_eq!(got.score, best, "not the exhaustive optimum");
    // The greedy path (what large fleets get) never serves less than doing nothing.
    let greedy = p.score(&p.greedy());
    prop_assert!(greedy.weight >= baseline.weight, "greedy served less than doing nothing");
    Ok(())
}

/// How close the greedy path (what fleets past `EXACT_COMBINATIONS` get) comes to the
/// optimum on random small fleets: printed, and held to at least 85 % of the optimum's weight.
#[test]
fn the_greedy_path_is_near_the_optimum() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (prop::collection::vec(arb_card(&[A30, A100, H200]), 1..=3), wants());
    let (mut equal, mut total, mut worst) = (0u32, 0u32, 1.0f64);
    for _ in 0..400 {
        let Ok(tree) = strategy.new_tree(&mut runner) else { continue };
        let (specs, wants) = tree.current();
        let specs: Vec<_> =
            specs.into_iter().map(|(m, l, h)| (m, l.filter(|_| m == 0).or(l.map(|x| x % 3)), h)).collect();
        let f = build(&[A30, A100, H200], &specs, &wants);
        let p = Problem::new(&f, now());
        let Some(best) = p.exhaustive(u64::MAX).map(|c| p.score(&c)) else { continue };
        let greedy = p.score(&p.greedy());
        total += 1;
        equal += u32::from(greedy == best);
        if best.weight > 0 {
            let r = greedy.weight as f64 / best.weight as f64;
            if r < 0.85 {
                eprintln!(
                    "ratio {r}: {specs:?} {wants:?}\n greedy {:?}\n best {:?}",
                    p.greedy(),
                    p.exhaustive(u64::MAX)
                );
            }
            worst = worst.min(r);
        }
    }
    println!("greedy equals the optimum in {equal} of {total} fleets; worst weight ratio {worst:.3}");
    assert!(worst >= 0.85, "greedy served {worst:.3} of the optimum's weight");
}

fn wants() -> impl Strategy<Value = Vec<(usize, u8, i64, i64)>> {
    prop::collection::vec((0usize..16, 0u8..3, prop::sample::select(vec![10i64, 50, 100]), 0i64..200), 0..9)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn equals_exhaustive_search_on_four_small_cards(
        specs in prop::collection::vec(arb_card(&[A30]), 1..=4),
        wants in wants(),
    ) {
        check(&build(&[A30], &specs, &wants), true)?;
    }

    #[test]
    fn equals_exhaustive_search_on_two_large_and_two_small_cards(
        big in prop::collection::vec(arb_card(&[A100, H100, H200]), 1..=2),
        small in prop::collection::vec(arb_card(&[A30]), 0..=2),
        wants in wants(),
    ) {
        let specs: Vec<_> = big.iter().map(|&(m, l, h)| (m + 1, l, h)).chain(small).collect();
        check(&build(&[A30, A100, H100, H200], &specs, &wants), false)?;
    }
}

/// Four 8-slice cards: 79^4 combinations each; `cargo test --release -- --ignored`.
#[test]
#[ignore = "slow: exhaustive search over four 8-slice cards"]
fn equals_exhaustive_search_on_four_large_cards() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases: 12, ..ProptestConfig::default() });
    let strategy = (prop::collection::vec(arb_card(&[A100, H200]), 4..=4), wants());
    let result = runner.run(&strategy, |(specs, wants)| check(&build(&[A100, H200], &specs, &wants), false));
    if let Err(e) = result {
        panic!("{e}");
    }
}
