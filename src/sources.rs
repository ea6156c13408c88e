//! Sources collect data and send whole updates to the owner loop; they never draw. This module
//! holds the message contract (`Partial`, `SourceUpdate`, `SourceError`), the backoff and the
//! polling sources' side of the channel (`Poll`); the engine spawns the sources.

mod allsmi;
mod amd;
pub mod dcgm;
pub mod exposition;
pub mod http;
pub mod kubernetes;
pub mod nvml;
pub mod prometheus;
pub mod scrape;
pub mod series;
pub mod sim;
pub mod slurm;
pub mod tls;

use chrono::{DateTime, Utc};

use crate::model::{Event, Node, SourceKind, Workload};

/// The most cards (and nodes) one source's answer may hold: the largest supported fleet
/// (`--demo-size 4096x16`). The store cuts any answer past it, saying so; the decoders that
/// can meet more (an exposition, a Prometheus answer) stop keeping cards there.
pub const MAX_CARDS: usize = 65_536;

/// What one collection of one source saw: a fragment of the fleet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Partial {
    pub nodes: Vec<Node>,
    pub workloads: Vec<Workload>,
    /// Events since the previous update.
    pub events: Vec<Event>,
    /// True when the data is simulated; the header then says SIMULATED.
    pub simulated: bool,
    /// Problems that did not stop the collection (bad lines skipped, say), for the status.
    pub note: Option<String>,
    /// History a source keeps (Prometheus), sent once; empty otherwise.
    pub history: Vec<crate::model::CardHistory>,
    /// Demand by hour a source measured before it started (the simulator's previous day),
    /// sent once: it seeds the store's.
    pub demand: Option<crate::model::demand::DemandHistory>,
    /// Nothing changed since the source's previous update (the simulator between its
    /// five-second steps): the update says only that the source is alive, and the store keeps
    /// the data it has instead of merging the same fleet again.
    pub unchanged: bool,
}

impl Partial {
    /// An update that says the source is alive and its data are as last sent.
    pub fn unchanged() -> Self {
        Partial { unchanged: true, ..Partial::default() }
    }

    /// Keep at most `max` nodes and `max` cards, in order; what was cut, in words.
    pub fn cut_to(&mut self, max: usize) -> Option<String> {
        let nodes = self.nodes.len().saturating_sub(max);
        self.nodes.truncate(max);
        let mut left = max;
        let mut cards = 0;
        for n in &mut self.nodes {
            let keep = n.cards.len().min(left);
            cards += n.cards.len() - keep;
            n.cards.truncate(keep);
            left -= keep;
        }
        (nodes + cards > 0).then(|| {
            format!(
                "{cards} cards and {nodes} nodes past {max} cut (the largest supported fleet has {MAX_CARDS} cards)"
            )
        })
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct SourceError {
    pub message: String,
    /// The source cannot work at all (no library, bad address); else it may recover.
    pub fatal: bool,
    /// No answer came at all (it could not be reached, or timed out), as against an answer
    /// with nothing usable in it.
    pub unanswered: bool,
}

/// One message from a source task to the owner loop.
#[derive(Debug, Clone)]
pub struct SourceUpdate {
    pub source: String,
    pub kind: SourceKind,
    pub at: DateTime<Utc>,
    pub result: Result<Partial, SourceError>,
}

/// A polling source's side of the channel: sends each answer and says how long to wait before
/// the next: the interval after a good answer; after failures in a row, a backoff doubling from
/// twice the interval, capped at a minute (a source that asks for it,
/// [`Poll::never_faster_than_its_interval`], is never asked more often than a working one).
pub struct Poll {
    source: String,
    kind: SourceKind,
    interval: std::time::Duration,
    tx: tokio::sync::mpsc::Sender<SourceUpdate>,
    failures: u32,
    floor: bool,
}

impl Poll {
    pub fn new(
        source: String,
        kind: SourceKind,
        interval: std::time::Duration,
        tx: tokio::sync::mpsc::Sender<SourceUpdate>,
    ) -> Self {
        Self { source, kind, interval, tx, failures: 0, floor: false }
    }

    /// The backoff's cap is at least the interval (Slurm: a failing `squeue` is never run more
    /// often than a working one, however long the interval).
    pub fn never_faster_than_its_interval(mut self) -> Self {
        self.floor = true;
        self
    }

    /// Send `result`; the wait before the next collection, or `None` when the receiver has
    /// gone (the source ends).
    pub async fn send(&mut self, result: Result<Partial, SourceError>) -> Option<std::time::Duration> {
        let ok = result.is_ok();
        let update = SourceUpdate { source: self.source.clone(), kind: self.kind, at: Utc::now(), result };
        self.tx.send(update).await.ok()?;
        self.failures = if ok { 0 } else { self.failures + 1 };
        let minute = std::time::Duration::from_secs(60);
        let max = if self.floor { minute.max(self.interval) } else { minute };
        Some(if ok { self.interval } else { backoff(self.interval, self.failures, max) })
    }
}

/// Capped exponential backoff for a failing source: base, 2×, 4×, … up to `max`.
pub fn backoff(base: std::time::Duration, failures: u32, max: std::time::Duration) -> std::time::Duration {
    let factor = 1u32.checked_shl(failures.min(16)).unwrap_or(u32::MAX);
    base.saturating_mul(factor).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn backoff_doubles_then_caps() {
        let s = Duration::from_secs;
        assert_eq!(backoff(s(1), 0, s(60)), s(1));
        assert_eq!(backoff(s(1), 3, s(60)), s(8));
        assert_eq!(backoff(s(1), 10, s(60)), s(60));
        assert_eq!(backoff(s(1), u32::MAX, s(60)), s(60));
    }

    #[test]
    fn a_poll_waits_the_interval_after_a_good_answer_and_backs_off_after_failures() {
        let s = Duration::from_secs;
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap_or_else(|e| panic!("{e}"));
        let waits = |interval: Duration, floor: bool, answers: Vec<bool>| {
            rt.block_on(async {
                let (tx, mut rx) = tokio::sync::mpsc::channel(16);
                let mut poll = Poll::new("src".into(), SourceKind::Slurm, interval, tx);
                if floor {
                    poll = poll.never_faster_than_its_interval();
                }
                let mut waits = Vec::new();
                for ok in answers {
                    let result = if ok {
                        Ok(Partial::default())
                    } else {
                        Err(SourceError { message: "no".into(), fatal: false, unanswered: false })
                    };
                    waits.push(poll.send(result).await);
                    assert!(rx.recv().await.is_some_and(|u| u.source == "src" && u.result.is_ok() == ok));
                }
                drop(rx);
                waits.push(poll.send(Ok(Partial::default())).await);
                waits
            })
        };
        let some = |v: &[u64]| v.iter().map(|&n| Some(s(n))).chain([None]).collect::<Vec<_>>();
        assert_eq!(
            waits(s(5), false, vec![true, false, false, false, false, true, false]),
            some(&[5, 10, 20, 40, 60, 5, 10])
        );
        assert_eq!(waits(s(90), false, vec![false, false]), some(&[60, 60]), "capped at a minute, as before");
        assert_eq!(waits(s(90), true, vec![false, false]), some(&[90, 90]), "never more often than the interval");
    }
}
