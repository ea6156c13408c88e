//! The sharing rules as tables of cases: which cards get an interference, crowding or
//! "use MIG instead" finding, and which never do.

use super::*;
use crate::config::Advisor;
use crate::model::{MigInstance, Sharing, WorkloadState};

fn now() -> chrono::DateTime<chrono::Utc> {
    chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 6, 1, 12, 0, 0).single().unwrap_or_default()
}

/// A card of `model` shared as `mode` with `replicas`, held by workloads of `kinds` (each
/// using `mem_mib`), memory in use `used_mib` of `total_mib`.
struct Case {
    model: &'static str,
    mode: Option<SharingMode>,
    replicas: Option<u32>,
    contexts: Option<u32>,
    kinds: &'static [WorkloadKind],
    mem_mib: u64,
    used_mib: u64,
    total_mib: u64,
}

const TS: Option<SharingMode> = Some(SharingMode::TimeSliced);
const MPS: Option<SharingMode> = Some(SharingMode::Mps);
const T: WorkloadKind = WorkloadKind::Training;
const I: WorkloadKind = WorkloadKind::Inference;
const O: WorkloadKind = WorkloadKind::Other;

fn fleet(c: &Case) -> Fleet {
    let mut card = Card {
        index: 0,
        model: c.model.into(),
        memory_total_mib: Some(c.total_mib),
        memory_used_mib: Some(c.used_mib),
        ..Card::default()
    };
    let mut workloads = Vec::new();
    for (i, k) in c.kinds.iter().enumerate() {
        let id = format!("sim:{i}");
        let mut w = Workload::new(&id, format!("{}-{i}", k.as_str()), *k, WorkloadState::Running);
        w.cards = vec![CardRef::new("n", 0)];
        w.memory_used_mib = Some(c.mem_mib);
        card.workloads.push(id);
        workloads.push(w);
    }
    let used = u32::try_from(c.kinds.len()).ok().filter(|_| c.replicas.is_some());
    card.sharing =
        Sharing { mode: c.mode, replicas: c.replicas, replicas_used: used, contexts: c.contexts, ..Sharing::default() };
    let node = Node { cards: vec![card], ..Node::new("n") };
    let mut f = Fleet { nodes: vec![node], workloads, ..Fleet::default() };
    f.index_workloads();
    f
}

/// The rules' context at `now()`: the default thresholds, a 30-minute minimum runtime.
fn cx(advisor: &Advisor) -> Context<'_> {
    Context {
        advisor,
        min_runtime: std::time::Duration::from_secs(1800),
        queue_wait: std::time::Duration::from_secs(900),
        scale_in_pct: 50.0,
        now: now(),
        demand: None,
        suggested: None,
        schedules: &[],
    }
}

fn kinds_found(f: &Fleet) -> Vec<Kind> {
    let advisor = Advisor::default();
    let cx = cx(&advisor);
    let mut out = Vec::new();
    interference(f, &mut out);
    crowded(f, &cx, &mut out);
    use_mig(f, &mut out);
    out.into_iter().map(|x| x.kind).collect()
}

const L4: &str = "NVIDIA L4";
const A30: &str = "NVIDIA A30";
const GIB: u64 = 1024;

#[test]
fn interference_exactly_where_training_and_inference_share_an_unisolated_card() {
    let base = Case {
        model: L4,
        mode: TS,
        replicas: Some(4),
        contexts: None,
        kinds: &[],
        mem_mib: 2 * GIB,
        used_mib: 8 * GIB,
        total_mib: 22 * GIB,
    };
    let cases: &[(&str, Case, bool)] = &[
        ("time-sliced, training and inference", Case { kinds: &[T, I], ..base }, true),
        ("MPS, training and inference", Case { mode: MPS, replicas: Some(2), kinds: &[I, T], ..base }, true),
        (
            "time-sliced by the driver, seen by NVML",
            Case { mode: None, replicas: None, contexts: Some(2), kinds: &[T, I], ..base },
            true,
        ),
        ("two services", Case { kinds: &[I, I], ..base }, false),
        ("training and a notebook", Case { kinds: &[T, O], ..base }, false),
        ("exclusive", Case { mode: Some(SharingMode::Exclusive), replicas: None, kinds: &[T, I], ..base }, false),
        ("mode unknown", Case { mode: None, replicas: None, kinds: &[T, I], ..base }, false),
    ];
    for (what, c, expect) in cases {
        let found = kinds_found(&fleet(c)).contains(&Kind::Interference);
        assert_eq!(found, *expect, "{what}");
    }
    // MIG isolates: training and inference on two instances of one card is no interference.
    let mut f = fleet(&Case { model: "NVIDIA A100-SXM4-80GB", mode: None, replicas: None, kinds: &[T, I], ..base });
    let card = &mut f.nodes[0].cards[0];
    card.mig.enabled = true;
    card.mig.instances = (0..2)
        .map(|i| MigInstance {
            gi_id: i + 1,
            profile: "3g.40gb".into(),
            start: 4 * i as u8,
            size: 4,
            workloads: vec![format!("sim:{i}")],
            ..MigInstance::default()
        })
        .collect();
    card.workloads.clear();
    assert!(!kinds_found(&f).contains(&Kind::Interference), "MIG");
}

#[test]
fn crowding_needs_the_limit_near_and_memory_nearly_full() {
    let base = Case {
        model: L4,
        mode: TS,
        replicas: Some(4),
        contexts: None,
        kinds: &[I, I, I, I],
        mem_mib: 5 * GIB,
        used_mib: 21 * GIB,
        total_mib: 22 * GIB,
    };
    let cases: &[(&str, Case, Option<Severity>)] = &[
        ("4 of 4 at 95 %", Case { ..base }, Some(Severity::High)),
        ("3 of 4 at 95 %", Case { kinds: &[I, I, I], ..base }, Some(Severity::Warn)),
        ("2 of 4 at 95 %", Case { kinds: &[I, I], ..base }, None),
        ("4 of 4 at 60 %", Case { used_mib: 13 * GIB, ..base }, None),
        ("MPS 2 of 2 at 95 %", Case { mode: MPS, replicas: Some(2), kinds: &[I, I], ..base }, Some(Severity::High)),
        (
            "3 contexts, no replicas, at 95 %",
            Case { mode: None, replicas: None, contexts: Some(3), ..base },
            Some(Severity::Warn),
        ),
        ("exclusive at 95 %", Case { mode: Some(SharingMode::Exclusive), replicas: None, kinds: &[T], ..base }, None),
    ];
    let advisor = Advisor::default();
    for (what, c, expect) in cases {
        let cx = cx(&advisor);
        let mut out = Vec::new();
        crowded(&fleet(c), &cx, &mut out);
        assert_eq!(out.first().map(|f| f.severity), *expect, "{what}");
    }
    // One job holding every unit (Slurm shard:4 of 4) at 95 %: no neighbour to crowd.
    let mut one = fleet(&Case { kinds: &[I], ..base });
    one.nodes[0].cards[0].sharing.replicas_used = Some(4);
    let cx = cx(&advisor);
    let mut out = Vec::new();
    crowded(&one, &cx, &mut out);
    assert!(out.is_empty(), "{out:#?}");
}

#[test]
fn use_mig_where_a_mig_card_is_time_sliced_between_workloads_that_each_fit() {
    let base = Case {
        model: A30,
        mode: TS,
        replicas: Some(2),
        contexts: None,
        kinds: &[I, I],
        mem_mib: 4 * GIB,
        used_mib: 8 * GIB,
        total_mib: 24 * GIB,
    };
    let cases: &[(&str, Case, bool)] = &[
        ("A30, two 4 GiB services", Case { ..base }, true),
        ("an L4 has no MIG", Case { model: L4, ..base }, false),
        ("a 20 GiB service fits no instance beside another", Case { mem_mib: 20 * GIB, ..base }, false),
        ("one holder", Case { kinds: &[I], ..base }, false),
        ("MPS", Case { mode: MPS, ..base }, false),
    ];
    for (what, c, expect) in cases {
        assert_eq!(kinds_found(&fleet(c)).contains(&Kind::UseMig), *expect, "{what}");
    }
    let mut out = Vec::new();
    use_mig(&fleet(&base), &mut out);
    assert!(out[0].evidence.iter().any(|e| e.contains("1g.6gb@")), "{:?}", out[0].evidence);
}

/// A time-sliced L4 ×4 held by a long-running training job and three services, with
/// `pending` workloads waiting 40 minutes (built by `wants`).
fn busy_shared_card(pending: &[fn(&mut Workload)]) -> Fleet {
    let mut f = fleet(&Case {
        model: L4,
        mode: TS,
        replicas: Some(4),
        contexts: None,
        kinds: &[T, I, I, I],
        mem_mib: 2 * GIB,
        used_mib: 8 * GIB,
        total_mib: 22 * GIB,
    });
    for w in &mut f.workloads {
        w.started_at = Some(now() - chrono::Duration::hours(3));
    }
    for (i, set) in pending.iter().enumerate() {
        let mut w = Workload::new(format!("sim:p{i}"), format!("waiting-{i}"), I, WorkloadState::Pending);
        w.submitted_at = Some(now() - chrono::Duration::minutes(40));
        set(&mut w);
        f.workloads.push(w);
    }
    f.index_workloads();
    f
}

fn advise_all(f: &Fleet) -> Vec<Finding> {
    let advisor = Advisor::default();
    let cx = cx(&advisor);
    super::super::advise(f, &cx)
}

#[test]
fn a_replica_holder_is_never_preempted_to_free_a_whole_card() {
    // Waiting inference wants a whole card; the training holds a replica of a shared one, so
    // preempting it frees no card.
    let f = busy_shared_card(&[|w| w.request.gpus = Some(1)]);
    let found = advise_all(&f);
    assert!(found.iter().all(|x| x.kind != Kind::PreemptionCandidate), "{found:#?}");
}

#[test]
fn shares_short_count_as_their_part_of_a_card() {
    use crate::model::{ShareUnit, Shares};
    // Two replicas wanted, none free, 4 replicas a card: half a card a day short, not two.
    let share = |w: &mut Workload| w.request.shares = Some(Shares { unit: ShareUnit::Replica, count: 1 });
    let mut f = busy_shared_card(&[share, share]);
    f.nodes[0].cards[0].sharing.unit = Some(ShareUnit::Replica);
    let found = advise_all(&f);
    let out = found.iter().find(|x| x.kind == Kind::ScaleOut).unwrap_or_else(|| panic!("{found:#?}"));
    assert!((out.gpu_hours_per_day - 12.0).abs() < 1e-9, "{}", out.gpu_hours_per_day);
    // Each wants one replica: what one card has free is not said, what is free and wanted is.
    assert!(
        out.evidence[0].starts_with("0 free; 2 waiting past the threshold (15m) want 2 in all"),
        "{:?}",
        out.evidence
    );
    // And the replica holders' share of the card in the interference finding's workloads.
    assert!(found.iter().any(|x| x.kind == Kind::Interference));
}

/// A request for several replicas needs them on one card: the scale-out says what one card
/// has free, after what is free, and that it wants them together.
#[test]
fn a_scale_out_for_several_replicas_says_what_one_card_has_free() {
    use crate::model::{ShareUnit, Shares};
    let two = |w: &mut Workload| w.request.shares = Some(Shares { unit: ShareUnit::Replica, count: 2 });
    let mut f = busy_shared_card(&[two]);
    f.nodes[0].cards[0].sharing.unit = Some(ShareUnit::Replica);
    let found = advise_all(&f);
    let out = found.iter().find(|x| x.kind == Kind::ScaleOut).unwrap_or_else(|| panic!("{found:#?}"));
    let e = &out.evidence[0];
    assert!(e.starts_with("0 free, at most 0 on one card"), "{e}");
    assert!(e.ends_with("1 waiting past the threshold (15m) wants 2 together"), "{e}");
}

#[test]
fn a_holder_counts_its_units_of_a_shared_card_and_a_whole_gpu_on_a_shard_node_is_whole() {
    use crate::model::{ShareUnit, Shares};
    let mut f = fleet(&Case {
        model: L4,
        mode: TS,
        replicas: Some(4),
        contexts: None,
        kinds: &[I, I],
        mem_mib: 2 * GIB,
        used_mib: 8 * GIB,
        total_mib: 22 * GIB,
    });
    f.workloads[0].request.shares = Some(Shares { unit: ShareUnit::Replica, count: 2 });
    let r = CardRef::new("n", 0);
    assert!((super::super::gpu_share(&f, "sim:0", std::slice::from_ref(&r)) - 0.5).abs() < 1e-9, "2 of 4");
    assert!((super::super::gpu_share(&f, "sim:1", std::slice::from_ref(&r)) - 0.25).abs() < 1e-9, "1 of 4");
    // Alone on a shard-capable GPU with no shares asked: Slurm gave it the GPU whole.
    let mut alone = fleet(&Case {
        kinds: &[T],
        ..Case {
            model: L4,
            mode: TS,
            replicas: Some(4),
            contexts: None,
            kinds: &[],
            mem_mib: 0,
            used_mib: 0,
            total_mib: 22 * GIB,
        }
    });
    alone.index_workloads();
    let w = alone.workloads[0].clone();
    assert!(!super::super::holds_share(&alone, &w, &r));
    assert!((super::super::gpu_share(&alone, &w.id, &[r]) - 1.0).abs() < 1e-9);
}
