//! Each card's sparkline samples, kept for the card view: one per second of data time.

use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, Utc};

/// Recent samples per card for the card view's sparklines.
pub const HISTORY: usize = 120;

/// One second of a card's sparklines: utilisation and memory in use, in hundredths of a
/// percent, in 4 bytes (32,768 cards keep `HISTORY` each: two `Option<f64>` made 130 MB).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    util: u16,
    mem_pct: u16,
}

/// `f` on a node's cards' samples, found by name without copying it (once per node per
/// second): the name is copied only for a node seen the first time.
pub(super) fn on_node_samples(
    history: &mut HashMap<String, HashMap<u32, VecDeque<Sample>>>,
    node: &str,
    f: impl FnOnce(&mut HashMap<u32, VecDeque<Sample>>),
) {
    if let Some(cards) = history.get_mut(node) {
        return f(cards);
    }
    f(history.entry(node.to_string()).or_default());
}

/// Unknown, in a sample.
const NO_PCT: u16 = u16::MAX;

fn pct_cell(v: Option<f64>) -> u16 {
    match v {
        Some(v) if v.is_finite() => (v * 100.0).round().clamp(0.0, f64::from(NO_PCT - 1)) as u16,
        _ => NO_PCT,
    }
}

fn pct_of(c: u16) -> Option<f64> {
    (c != NO_PCT).then(|| f64::from(c) / 100.0)
}

impl Sample {
    /// Percentages beyond 655.34 are kept as 655.34; not a number is unknown.
    pub fn new(util: Option<f64>, mem_pct: Option<f64>) -> Self {
        Self { util: pct_cell(util), mem_pct: pct_cell(mem_pct) }
    }

    pub fn util(&self) -> Option<f64> {
        pct_of(self.util)
    }

    pub fn mem_pct(&self) -> Option<f64> {
        pct_of(self.mem_pct)
    }
}

/// Each card's sparkline samples, by node name then card index: sampled every second, so
/// looked up by the node's name without building a `CardRef` per card (see `samples`).
#[derive(Debug, Default)]
pub struct History {
    pub(super) by_node: HashMap<String, HashMap<u32, VecDeque<Sample>>>,
    /// Data time of the last sparkline sample.
    pub(super) last_sample: Option<DateTime<Utc>>,
}

impl History {
    /// Sample every card of `fleet` at data time `now` (once per second of it), after seeding
    /// sparklines from the history a source sent.
    pub fn record(&mut self, fleet: &crate::model::Fleet, now: DateTime<Utc>) {
        // History from a source (Prometheus) seeds a card's sparklines once, before its own samples.
        // Card sparklines: the whole-card series (instance series seed workload activity).
        for h in fleet.history.iter().filter(|h| h.gi.is_none()) {
            on_node_samples(&mut self.by_node, &h.card.node, |cards| {
                let mine = cards.entry(h.card.index).or_default();
                if mine.len() <= 1 {
                    let mem = h.mem_pct.iter().copied().chain(std::iter::repeat(None));
                    let seeded: Vec<Sample> =
                        h.util.iter().zip(mem).map(|(u, m)| Sample::new(u.map(f64::from), m.map(f64::from))).collect();
                    let own: Vec<Sample> = mine.drain(..).collect();
                    mine.extend(seeded);
                    mine.extend(own);
                    while mine.len() > HISTORY {
                        mine.pop_front();
                    }
                }
            });
        }
        // One sample per second of data time, however often sources merge.
        let sample = self.last_sample.is_none_or(|t| now - t >= chrono::Duration::seconds(1));
        if sample {
            self.last_sample = Some(now);
        }
        for n in fleet.nodes.iter().filter(|_| sample) {
            on_node_samples(&mut self.by_node, &n.name, |cards| {
                for c in &n.cards {
                    let h = cards.entry(c.index).or_default();
                    let mem_pct = match (c.memory_used_mib, c.memory_total_mib) {
                        (Some(u), Some(t)) if t > 0 => Some(u as f64 * 100.0 / t as f64),
                        _ => None,
                    };
                    h.push_back(Sample::new(c.activity_pct(), mem_pct));
                    if h.len() > HISTORY {
                        h.pop_front();
                    }
                }
            });
        }
    }

    /// The sparkline samples of card `r`, oldest first.
    pub fn samples(&self, r: &crate::model::CardRef) -> Option<&VecDeque<Sample>> {
        self.by_node.get(r.node.as_str())?.get(&r.index)
    }

    /// Drop every sample.
    pub fn forget(&mut self) {
        self.by_node.clear();
        self.last_sample = None;
    }
}
