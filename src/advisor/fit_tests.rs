//! `:fit` on small fleets: free now, after a repartition, after a preemption, nowhere.

use chrono::TimeZone;

use super::*;
use crate::model::{MigState, Workload};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 14, 0, 0).single().unwrap_or_default()
}

const MIN: Duration = Duration::from_secs(1800);

/// Node `n`: card 0 an A100 in 3g.40gb@0 (held by training `t`, run `ran` minutes) with free
/// slices 4-7; card 1 an idle whole A100; card 2 a whole A100 held by `t`.
fn fleet(ran: i64) -> Fleet {
    let model = "NVIDIA A100-SXM4-80GB";
    let mut mig = Card { index: 0, model: model.into(), ..Card::default() };
    mig.mig = MigState::from_layout(model, "3g.40gb@0");
    mig.mig.instances[0].workloads.push("t".into());
    let idle = Card { index: 1, model: model.into(), ..Card::default() };
    let held = Card { index: 2, model: model.into(), workloads: vec!["t".into()], ..Card::default() };
    let node = Node { cards: vec![mig, idle, held], ..Node::new("n") };
    let mut t = Workload::new("t", "train", WorkloadKind::Training, WorkloadState::Running);
    t.started_at = Some(now() - chrono::Duration::minutes(ran));
    t.cards = vec![CardRef::new("n", 0), CardRef::new("n", 2)];
    let mut f = Fleet { nodes: vec![node], workloads: vec![t], taken_at: Some(now()), ..Fleet::default() };
    f.index_workloads();
    f
}

fn answer(f: &Fleet, q: &str) -> Answer {
    let want = parse(f, q).unwrap_or_else(|e| panic!("{e}"));
    fit(f, &want, now(), MIN)
}

#[test]
fn a_profile_fits_in_free_slices_on_an_idle_card_and_after_a_preemption() {
    let a = answer(&fleet(120), "3g.40gb");
    assert_eq!(a.now, vec!["n/0: free slices 4-7, create 3g.40gb@4".to_string()], "{a:?}");
    assert_eq!(a.after_repartition.len(), 1, "{a:?}");
    // The planner's layout (#36: `:fit` had its own): the least memory set aside beside it,
    // a stranded slice counted as set aside (#47: 1g.20gb@4,1g.10gb@6 left slice 7 to nobody
    // for the same 40 GB a second 3g.40gb sets aside).
    assert_eq!(a.after_repartition[0], "n/1 whole to 3g.40gb@0,3g.40gb@4", "{a:?}");
    assert_eq!(a.after_preempt.len(), 1, "{a:?}");
    assert!(a.nowhere.is_none());
    // Young training is not preempted.
    assert!(answer(&fleet(10), "3g.40gb").after_preempt.is_empty());
}

#[test]
fn gpus_fit_on_one_node_or_say_why_not() {
    let f = fleet(120);
    assert_eq!(answer(&f, "1").now, vec!["n: idle whole cards 1".to_string()]);
    let two = answer(&f, "2");
    assert!(two.now.is_empty() && two.after_repartition.is_empty(), "{two:?}");
    assert_eq!(two.after_preempt, vec!["n: preempt t (training past its minimum runtime)".to_string()]);
    let four = answer(&f, "4");
    assert_eq!(four.nowhere.as_deref(), Some("no node has 4 cards (the largest has 3)"));
}

#[test]
fn a_workload_is_read_as_its_request_and_bad_queries_say_so() {
    let mut f = fleet(120);
    let mut w = Workload::new("p", "svc", WorkloadKind::Inference, WorkloadState::Pending);
    w.request.mig_profile = Some("1g.10gb".into());
    f.workloads.push(w);
    f.index_workloads();
    assert_eq!(parse(&f, "svc"), Ok(Want::Profile { profile: "1g.10gb".into() }));
    assert_eq!(parse(&f, "p"), Ok(Want::Profile { profile: "1g.10gb".into() }));
    assert!(parse(&f, "9g.1tb").is_err());
    assert!(parse(&f, "0").is_err());
    let h200 = answer(&f, "2g.35gb");
    assert!(h200.nowhere.as_deref().is_some_and(|w| w.starts_with("no card here is a model with 2g.35gb")), "{h200:?}");
    assert_eq!(lines(&h200).len(), 1);
}

/// `:fit` on the fixtures' pending DRA pod says what the queue says: the blocker tessera sees
/// by replaying its claim against the slices, before where 8 GPUs could go.
#[test]
fn a_pending_dra_pod_is_explained_as_in_the_queue() {
    let f = crate::sources::kubernetes::dra_fixture::fleet(now());
    let why = "wants 8 whole H100 on one node (matchAttribute productName): h100-dyn-01 has 5 (gpu-0 carved into \
               MIG, gpu-1 held, gpu-7 tainted NoExecute); h100-mig-01 publishes no whole GPUs (MIG on)";
    for q in ["k8s:training/pretrain-8gpu-0", "pretrain-8gpu-0"] {
        let a = super::answer(&f, q, now(), MIN).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.wants, "8 whole GPUs on one node", "{a:?}");
        let waits = a.waits.clone().unwrap_or_default();
        assert!(waits.starts_with(why), "{waits}");
        let shown = lines(&a);
        assert_eq!(shown.first(), Some(&format!("waits: {waits}")), "{shown:?}");
        assert!(a.now.is_empty(), "no node has 8 whole H100 free: {a:?}");
    }
    // A running pod, a profile or a count is not said to wait.
    assert!(super::answer(&f, "8", now(), MIN).is_ok_and(|a| a.waits.is_none()));
}
