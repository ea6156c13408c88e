//! The check after a y/N prompt: wait until every source that was live has answered with data
//! collected after the operator said yes, so the runner re-plans on what is true now.
//!
//! What is queued is not enough. The update channel holds a bounded number of updates; a
//! source whose send finds it full waits there, holding the answer it had collected then. An
//! operator who reads a plan for a minute beside 64 exporters leaves the queue full of answers
//! from the first second of the prompt, and the held ones behind them are as old. Draining the
//! queue alone would check the plan against the cluster as it was when the prompt appeared.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use crate::model::{SourceHealth, SourceKind};
use crate::sources::SourceUpdate;
use crate::store::Store;

/// Apply every update that arrives until each source that was live has answered with data
/// collected at or after `since` (or `within` has passed), then rebuild once. Returns the
/// sources that did not answer again in time, by name.
///
/// A real source stamps its update with the wall-clock time it collected it. The simulator
/// stamps simulated time, and its clock stands still while its send waits: the first update
/// it sends once the queue is drained is its state now, so for it one arrival counts.
pub async fn answers_since(
    store: &mut Store,
    updates: &mut mpsc::Receiver<SourceUpdate>,
    since: DateTime<Utc>,
    within: Duration,
) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + within;
    let mut waiting: Vec<(String, SourceKind)> = store
        .fleet()
        .sources
        .iter()
        .filter(|s| matches!(s.health, SourceHealth::Live { .. }))
        .map(|s| (s.name.clone(), s.kind))
        .collect();
    // What is queued: applied, and it answers for a real source only if collected since.
    while let Ok(update) = updates.try_recv() {
        if update.kind != SourceKind::Simulated && update.at >= since {
            waiting.retain(|(name, _)| *name != update.source);
        }
        store.apply_deferred(update, Utc::now());
    }
    while !waiting.is_empty() {
        let update = match tokio::time::timeout_at(deadline, updates.recv()).await {
            Ok(Some(update)) => update,
            Ok(None) | Err(_) => break,
        };
        if update.kind == SourceKind::Simulated || update.at >= since {
            waiting.retain(|(name, _)| *name != update.source);
        }
        store.apply_deferred(update, Utc::now());
    }
    // A source that said nothing for three of its intervals shows as stale.
    store.check_staleness(Utc::now());
    store.rebuild();
    waiting.into_iter().map(|(name, _)| name).collect()
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
        let missing = answers_since(&mut store, &mut rx, yes, Duration::from_secs(5)).await;
        assert!(missing.is_empty(), "{missing:?}");
        let taken = store.fleet().taken_at.unwrap_or_else(|| panic!("no data"));
        assert!(taken >= yes, "checked on data from {taken}, {} ms before the yes", (yes - taken).num_milliseconds());
    }

    #[tokio::test]
    async fn the_simulator_counts_once_it_answers_after_the_drain() {
        // Simulated time is hours behind the wall clock: its stamps never pass `since`.
        let t0 = Utc::now() - chrono::Duration::hours(5);
        let mut store = Store::new();
        store.register("sim", SourceKind::Simulated, Duration::from_secs(1));
        store.apply(update("sim", SourceKind::Simulated, t0), t0);
        let (tx, mut rx) = mpsc::channel(4);
        for _ in 0..4 {
            tx.send(update("sim", SourceKind::Simulated, t0)).await.unwrap_or_else(|e| panic!("{e}"));
        }
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = tx.send(update("sim", SourceKind::Simulated, t0 + chrono::Duration::seconds(5))).await;
            // Kept open: the wait must end on the arrival, not on the channel closing.
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        let began = std::time::Instant::now();
        let missing = answers_since(&mut store, &mut rx, Utc::now(), Duration::from_secs(10)).await;
        assert!(missing.is_empty(), "{missing:?}");
        assert!(began.elapsed() < Duration::from_secs(5), "waited {:?}", began.elapsed());
        assert_eq!(store.fleet().taken_at, Some(t0 + chrono::Duration::seconds(5)));
    }

    #[tokio::test]
    async fn a_source_that_does_not_answer_again_is_named_and_the_wait_ends() {
        let mut store = live_store(&[("a", SourceKind::Scrape), ("quiet", SourceKind::Slurm)]);
        let (tx, mut rx) = mpsc::channel(4);
        collector(tx.clone(), "a");
        let missing = answers_since(&mut store, &mut rx, Utc::now(), Duration::from_millis(200)).await;
        assert_eq!(missing, vec!["quiet".to_string()]);
        drop(tx);
    }

    #[tokio::test]
    async fn a_source_not_live_when_the_plan_was_shown_is_not_waited_for() {
        let mut store = live_store(&[("a", SourceKind::Scrape)]);
        store.register_unavailable("down", SourceKind::Kubernetes, "no kubeconfig");
        let (tx, mut rx) = mpsc::channel(4);
        collector(tx, "a");
        let began = std::time::Instant::now();
        let missing = answers_since(&mut store, &mut rx, Utc::now(), Duration::from_secs(10)).await;
        assert!(missing.is_empty(), "{missing:?}");
        assert!(began.elapsed() < Duration::from_secs(2), "waited {:?}", began.elapsed());
    }
}
