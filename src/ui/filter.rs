//! The filter of every list: words that must all match. Plain text matches node, model, UUID,
//! holders and profiles (cards) or id, name, owner, kind, node and reason (workloads). Terms
//! are listed in `TERMS` with what each means; the help overlay shows them.

use crate::model::capacity::{free_units, usable};
use crate::model::{Card, Fleet, Node, SharingMode, Workload};

#[derive(Debug, Clone, PartialEq)]
enum Term {
    Text(String),
    Util(std::cmp::Ordering, f64),
    Temp(std::cmp::Ordering, f64),
    Free(std::cmp::Ordering, u32),
    Mig,
    Whole,
    Draining,
    Idle,
    HeldIdle,
    Unhealthy,
    Xid,
    /// Shared this way (`excl`, `ts`, `mps`); `Shared`: time-sliced or MPS.
    Mode(SharingMode),
    Shared,
}

/// Every filter term and what it matches, for the help overlay and the README.
pub const TERMS: &[(&str, &str)] = &[
    ("TEXT", "node, model, UUID, holder, profile; workload id, name, owner, kind, node, reason"),
    ("util<5 util>90", "activity now (cards; a workload's cards or instances)"),
    ("temp>80", "card temperature, C"),
    ("free>0", "usable free units: unheld instances and free slices, or an idle whole card"),
    ("idle", "usable and held by nobody"),
    ("held-idle", "held, but below 5% activity for the last 30 minutes"),
    ("health", "unhealthy: lost, XID 48/79/94/95, uncorrectable ECC"),
    ("mig whole", "MIG mode on / off"),
    ("excl ts mps", "sharing mode: exclusive, time-sliced, MPS (workloads: on such a card)"),
    ("shared", "time-sliced or MPS: no isolation (workloads: on one, or asking for a replica)"),
    ("draining", "no new work starts on it"),
    ("xid", "any XID seen"),
];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    terms: Vec<Term>,
}

fn comparison(word: &str, name: &str) -> Option<(std::cmp::Ordering, f64)> {
    let rest = word.strip_prefix(name)?;
    let (ord, num) = if let Some(n) = rest.strip_prefix('<') {
        (std::cmp::Ordering::Less, n)
    } else if let Some(n) = rest.strip_prefix('>') {
        (std::cmp::Ordering::Greater, n)
    } else if let Some(n) = rest.strip_prefix('=') {
        (std::cmp::Ordering::Equal, n)
    } else {
        return None;
    };
    num.trim_end_matches('%').parse().ok().map(|n| (ord, n))
}

/// Whether `hay` lowercased contains `needle` (lowercase already). ASCII text (names, models,
/// UUIDs: nearly all of it) is compared in place; other text is lowercased first, as before
/// (a character such as the Kelvin sign lowercases to ASCII).
fn has(hay: &str, needle: &str) -> bool {
    if hay.is_ascii() && needle.is_ascii() {
        let (h, n) = (hay.as_bytes(), needle.as_bytes());
        return n.is_empty() || h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n));
    }
    hay.to_lowercase().contains(needle)
}

impl Filter {
    pub fn parse(text: &str) -> Self {
        let terms = text
            .split_whitespace()
            .map(|w| {
                let lw = w.to_lowercase();
                if let Some((o, n)) = comparison(&lw, "util") {
                    Term::Util(o, n)
                } else if let Some((o, n)) = comparison(&lw, "temp") {
                    Term::Temp(o, n)
                } else if let Some((o, n)) = comparison(&lw, "free") {
                    Term::Free(o, n.max(0.0) as u32)
                } else {
                    match lw.as_str() {
                        "mig" => Term::Mig,
                        "whole" => Term::Whole,
                        "draining" | "drained" => Term::Draining,
                        "idle" => Term::Idle,
                        "held-idle" | "heldidle" => Term::HeldIdle,
                        "health" | "unhealthy" => Term::Unhealthy,
                        "xid" => Term::Xid,
                        "excl" | "exclusive" => Term::Mode(SharingMode::Exclusive),
                        "ts" | "time-sliced" | "timesliced" => Term::Mode(SharingMode::TimeSliced),
                        "mps" => Term::Mode(SharingMode::Mps),
                        "shared" => Term::Shared,
                        _ => Term::Text(lw),
                    }
                }
            })
            .collect();
        Self { terms }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn matches(&self, fleet: &Fleet, node: &Node, card: &Card) -> bool {
        self.terms.iter().all(|t| match t {
            Term::Text(s) => {
                has(&node.name, s)
                    || has(&card.model, s)
                    || card.gpu_model().is_some_and(|m| has(&m.name, s))
                    || card.uuid.as_deref().is_some_and(|u| has(u, s))
                    || card.holders().any(|h| {
                        has(h, s)
                            || fleet
                                .workload(h)
                                .is_some_and(|w| has(&w.name, s) || w.owner.as_deref().is_some_and(|o| has(o, s)))
                    })
                    || card.mig.instances.iter().any(|i| i.profile.contains(s.as_str()))
            }
            Term::Util(o, n) => card.activity_pct().is_some_and(|u| u.partial_cmp(n) == Some(*o)),
            Term::Temp(o, n) => card.temperature_c.is_some_and(|u| u.partial_cmp(n) == Some(*o)),
            Term::Free(o, n) => free_units(node, card).cmp(n) == *o,
            Term::Mig => card.mig.enabled,
            Term::Whole => !card.mig.enabled,
            Term::Draining => card.draining,
            Term::Idle => card.is_idle() && usable(node, card),
            Term::HeldIdle => {
                card.holders().next().is_some()
                    && card
                        .holders()
                        .all(|h| fleet.workload(h).is_some_and(|w| w.activity.is_some_and(|a| a.held_idle())))
            }
            Term::Unhealthy => card.health.fault().is_some(),
            Term::Xid => card.health.last_xid.is_some(),
            Term::Mode(m) => card.sharing_mode() == Some(*m),
            Term::Shared => card.sharing_mode().is_some_and(SharingMode::unisolated),
        })
    }

    /// The same words over a workload (the queue and workloads views).
    pub fn matches_workload(&self, fleet: &Fleet, w: &Workload) -> bool {
        let on_card = |f: &dyn Fn(&Card) -> bool| w.cards.iter().any(|r| fleet.card(r).is_some_and(f));
        self.terms.iter().all(|t| match t {
            Term::Text(s) => {
                let has = |v: &str| has(v, s);
                has(&w.id)
                    || has(&w.name)
                    || w.owner.as_deref().is_some_and(has)
                    || has(w.kind.as_str())
                    || w.node.as_deref().is_some_and(has)
                    || w.reason.as_deref().is_some_and(has)
                    || w.request.mig_profile.as_deref().is_some_and(has)
                    || w.request.model.as_deref().is_some_and(has)
            }
            Term::Util(o, n) => w.activity.and_then(|a| a.now_pct).is_some_and(|u| u.partial_cmp(n) == Some(*o)),
            Term::HeldIdle => w.activity.is_some_and(|a| a.held_idle()),
            Term::Mig => w.request.mig_profile.is_some(),
            Term::Whole => w.request.mig_profile.is_none(),
            // Card terms say nothing about a workload: they leave its lists alone.
            Term::Temp(..) | Term::Free(..) | Term::Idle => true,
            Term::Draining => on_card(&|c| c.draining),
            Term::Unhealthy => on_card(&|c| c.health.fault().is_some()),
            Term::Xid => on_card(&|c| c.health.last_xid.is_some()),
            Term::Mode(m) => on_card(&|c| c.sharing_mode() == Some(*m)),
            Term::Shared => {
                w.request.shares.is_some() || on_card(&|c| c.sharing_mode().is_some_and(SharingMode::unisolated))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MigInstance;

    #[test]
    fn text_matches_whatever_its_case() {
        for (hay, needle, want) in [
            ("NVIDIA H100 80GB HBM3", "h100", true),
            ("gpu-node-007", "node-0", true),
            ("A100", "h100", false),
            ("ab", "abc", false),
            ("anything", "", true),
            ("Ärzte-Cluster", "ärzte", true),
            ("\u{212A}elvin", "kelvin", true),
        ] {
            assert_eq!(has(hay, needle), want, "{hay} {needle}");
        }
    }

    #[test]
    fn terms_combine() {
        let fleet = Fleet::default();
        let node = Node { name: "gpu-h100-01".into(), schedulable: true, ..Node::default() };
        let mut card = Card { model: "NVIDIA H100 80GB HBM3".into(), utilization_pct: Some(3.0), ..Card::default() };
        assert!(Filter::parse("h100 util<5 whole idle").matches(&fleet, &node, &card));
        assert!(!Filter::parse("util>5").matches(&fleet, &node, &card));
        assert!(!Filter::parse("a100").matches(&fleet, &node, &card));
        assert!(Filter::parse("free>0").matches(&fleet, &node, &card));
        card.mig.enabled = true;
        card.mig.instances.push(MigInstance { profile: "3g.40gb".into(), start: 0, size: 4, ..MigInstance::default() });
        card.utilization_pct = None;
        assert!(Filter::parse("mig 3g.40gb").matches(&fleet, &node, &card));
        assert!(!Filter::parse("util<5").matches(&fleet, &node, &card), "unknown utilisation matches no comparison");
        assert!(Filter::parse("").is_empty());
        assert!(!Filter::parse("ts").matches(&fleet, &node, &card), "a MIG card is not time-sliced");
    }

    #[test]
    fn a_term_for_each_sharing_mode() {
        use crate::model::Sharing;
        let fleet = Fleet::default();
        let node = Node { name: "gpu-l4-01".into(), schedulable: true, ..Node::default() };
        let card = |mode| Card {
            model: "NVIDIA L4".into(),
            sharing: Sharing { mode: Some(mode), ..Sharing::default() },
            ..Card::default()
        };
        let cases = [
            (SharingMode::TimeSliced, "ts", true),
            (SharingMode::TimeSliced, "shared", true),
            (SharingMode::TimeSliced, "mps", false),
            (SharingMode::Mps, "mps shared", true),
            (SharingMode::Exclusive, "excl", true),
            (SharingMode::Exclusive, "shared", false),
        ];
        for (mode, words, expect) in cases {
            assert_eq!(Filter::parse(words).matches(&fleet, &node, &card(mode)), expect, "{mode:?} {words}");
        }
    }
}
