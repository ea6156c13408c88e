//! The check after a y/N prompt: wait until every source live once the queue is drained has
//! answered with data collected after the operator said yes, so the runner re-plans on what is
//! true now.
//!
//! What is queued is not enough. The update channel holds a bounded number of updates; a
//! source whose send finds it full waits there, holding the answer it had collected then. An
//! operator who reads a plan for a minute beside 64 exporters leaves the queue full of answers
//! from the first second of the prompt, and the held ones behind them are as old. Draining the
//! queue alone would check the plan against the cluster as it was when the prompt appeared.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use crate::model::SourceKind;
use crate::sources::SourceUpdate;
use crate::store::Store;

/// What the wait after a yes heard: the sources that failed since the plan was shown (their
/// data is now shown stale, so the plan's guards see it) and those that said nothing new in
/// time.
#[derive(Debug, Default, PartialEq)]
pub struct Heard {
    pub failed: Vec<String>,
    pub silent: Vec<String>,
}

/// Apply every update that arrives until each source that is live has answered with good data
/// collected at or after `since` (or failed, or `within` has passed), then rebuild once.
///
/// Who is waited for is decided after what was queued is applied: a source that failed during
/// the prompt is not waited for, one that came back during it is.
///
/// A real source stamps its update with the wall-clock time its collection ended (one under
/// way at the yes counts). The simulator stamps simulated time, so for it arrivals are
/// counted: the first after the queue is drained may be one its send held since the queue
/// filled; the second is stepped to now (its next step catches up the time it waited).
pub async fn answers_since(
    store: &mut Store,
    updates: &mut mpsc::Receiver<SourceUpdate>,
    since: DateTime<Utc>,
    within: Duration,
) -> Heard {
    let deadline = tokio::time::Instant::now() + within;
    // Live when the plan was shown: nothing has been applied since.
    let was_live = store.live_sources();
    // What is queued: applied; it answers for a real source only if collected since.
    let mut answered: Vec<String> = Vec::new();
    while let Ok(update) = updates.try_recv() {
        if update.kind != SourceKind::Simulated && update.at >= since && update.result.is_ok() {
            answered.push(update.source.clone());
        }
        store.apply_deferred(update, Utc::now());
    }
    let live = store.live_sources();
    let mut heard =
        Heard { failed: was_live.into_iter().filter(|name| !live.contains(name)).collect(), silent: Vec::new() };
    let mut waiting: Vec<String> = live.into_iter().filter(|name| !answered.contains(name)).collect();
    let mut sim_arrivals: HashMap<String, u32> = HashMap::new();
    while !waiting.is_empty() {
        let update = match tokio::time::timeout_at(deadline, updates.recv()).await {
            Ok(Some(update)) => update,
            Ok(None) | Err(_) => break,
        };
        let fresh = if update.kind == SourceKind::Simulated {
            let n = sim_arrivals.entry(update.source.clone()).or_default();
            *n += 1;
            *n >= 2
        } else {
            update.at >= since
        };
        if waiting.contains(&update.source) && (fresh || update.result.is_err()) {
            if update.result.is_err() {
                heard.failed.push(update.source.clone());
            }
            waiting.retain(|name| *name != update.source);
        }
        store.apply_deferred(update, Utc::now());
    }
    heard.silent = waiting;
    // A source that said nothing for three of its intervals shows as stale.
    store.check_staleness(Utc::now());
    store.rebuild();
    heard
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::Partial;

    fn update(source: &str, kind: SourceKind, at: DateTime<Utc>) -> SourceUpdate {
        SourceUpdate { source: source.into(), kind, at, result: Ok(Partial::default()) }
    }

    /// A source that collects every 5 ms and sends each answer, waiting when the channel is
    /// full (as every collector does).
    fn collector(tx: mpsc::Sender<SourceUpdate>, name: &'static str) {
        tokio::spawn(async move {
            loop {
                if tx.send(update(name, SourceKind::Scrape, Utc::now())).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
    }

    fn live_store(sources: &[(&str, SourceKind)]) -> Store {
        let mut store = Store::new();
        let t0 = Utc::now() - chrono::Duration::seconds(1);
        for (name, kind) in sources {
            store.register(*name, *kind, Duration::from_secs(1));
            store.apply(update(name, *kind, t0), t0);
        }
        store
    }

    #[tokio::test]
    async fn the_plan_is_checked_on_answers_collected_after_the_yes() {
        let mut store = live_store(&[("a", SourceKind::Scrape)]);
        let (tx, mut rx) = mpsc::channel(4);
        collector(tx, "a");
        // The operator reads the plan: the channel fills and the collector waits, holding an
        // answer from the start of the prompt.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let yes = Utc::now();
        let heard = answers_since(&mut store, &mut rx, yes, Duration::from_secs(5)).await;
        assert_eq!(heard, Heard::default());
        let taken = store.fleet().taken_at.unwrap_or_else(|| panic!("no data"));
        assert!(taken >= yes, "checked on data from {taken}, {} ms before the yes", (yes - taken).num_milliseconds());
    }

    #[tokio::test]
    async fn the_simulator_counts_from_its_second_answer_after_the_drain() {
        // Simulated time is the simulator's own: its stamps say nothing of the wall clock.
        let t0 = Utc::now() + chrono::Duration::hours(5);
        let mut store = Store::new();
        store.register("sim", SourceKind::Simulated, Duration::from_secs(1));
        store.apply(update("sim", SourceKind::Simulated, t0), t0);
        let (tx, mut rx) = mpsc::channel(4);
        for _ in 0..4 {
            tx.send(update("sim", SourceKind::Simulated, t0)).await.unwrap_or_else(|e| panic!("{e}"));
        }
        tokio::spawn(async move {
            // Held while the queue is full: the state when the prompt filled it.
            let _ = tx.send(update("sim", SourceKind::Simulated, t0)).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            // Its next step: caught up to now.
            let _ = tx.send(update("sim", SourceKind::Simulated, t0 + chrono::Duration::minutes(10))).await;
            // Kept open: the wait must end on the arrival, not on the channel closing.
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        tokio::task::yield_now().await;
        let began = std::time::Instant::now();
        let heard = answers_since(&mut store, &mut rx, Utc::now(), Duration::from_secs(10)).await;
        assert_eq!(heard, Heard::default());
        assert!(began.elapsed() < Duration::from_secs(5), "waited {:?}", began.elapsed());
        assert_eq!(store.fleet().taken_at, Some(t0 + chrono::Duration::minutes(10)), "checked on the held update");
    }

    #[tokio::test]
    async fn a_source_that_fails_after_the_yes_is_named_and_not_waited_for() {
        let mut store = live_store(&[("a", SourceKind::Slurm)]);
        let (tx, mut rx) = mpsc::channel(4);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let err =
                crate::sources::SourceError { message: "sinfo timed out".into(), fatal: false, unanswered: false };
            let _ = tx
                .send(SourceUpdate { source: "a".into(), kind: SourceKind::Slurm, at: Utc::now(), result: Err(err) })
                .await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        let began = std::time::Instant::now();
        let heard = answers_since(&mut store, &mut rx, Utc::now(), Duration::from_secs(10)).await;
        assert_eq!(heard, Heard { failed: vec!["a".into()], silent: vec![] });
        assert!(began.elapsed() < Duration::from_secs(5), "waited {:?}", began.elapsed());
    }

    #[tokio::test]
    async fn a_source_back_during_the_prompt_is_waited_for() {
        let mut store = live_store(&[("a", SourceKind::Scrape)]);
        store.register("b", SourceKind::Scrape, Duration::from_secs(1));
        let (tx, mut rx) = mpsc::channel(8);
        let prompt = Utc::now();
        // b answered for the first time during the prompt ...
        tx.send(update("b", SourceKind::Scrape, prompt)).await.unwrap_or_else(|e| panic!("{e}"));
        let yes = prompt + chrono::Duration::milliseconds(1);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            // ... and a, then b, again after the yes.
            let _ = tx.send(update("a", SourceKind::Scrape, Utc::now())).await;
            tokio::time::sleep(Duration::from_millis(30)).await;
            let node = crate::model::Node { name: "b-fresh".into(), ..crate::model::Node::default() };
            let fresh = Partial { nodes: vec![node], ..Partial::default() };
            let _ = tx
                .send(SourceUpdate { source: "b".into(), kind: SourceKind::Scrape, at: Utc::now(), result: Ok(fresh) })
                .await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        let heard = answers_since(&mut store, &mut rx, yes, Duration::from_secs(5)).await;
        assert_eq!(heard, Heard::default());
        assert!(
            store.fleet().nodes.iter().any(|n| n.name == "b-fresh"),
            "b's answer from the prompt was taken for fresh"
        );
    }

    #[tokio::test]
    async fn a_source_that_does_not_answer_again_is_named_and_the_wait_ends() {
        let mut store = live_store(&[("a", SourceKind::Scrape), ("quiet", SourceKind::Slurm)]);
        let (tx, mut rx) = mpsc::channel(4);
        collector(tx.clone(), "a");
        let heard = answers_since(&mut store, &mut rx, Utc::now(), Duration::from_millis(200)).await;
        assert_eq!(heard, Heard { failed: vec![], silent: vec!["quiet".into()] });
        drop(tx);
    }

    #[tokio::test]
    async fn a_source_not_live_when_the_plan_was_shown_is_not_waited_for() {
        let mut store = live_store(&[("a", SourceKind::Scrape)]);
        store.register_unavailable("down", SourceKind::Kubernetes, "no kubeconfig");
        let (tx, mut rx) = mpsc::channel(4);
        collector(tx, "a");
        let began = std::time::Instant::now();
        let heard = answers_since(&mut store, &mut rx, Utc::now(), Duration::from_secs(10)).await;
        assert_eq!(heard, Heard::default());
        assert!(began.elapsed() < Duration::from_secs(2), "waited {:?}", began.elapsed());
    }
}
