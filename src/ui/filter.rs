//! The filter of every list: words that must all match. Plain text matches node, model, UUID,
//! holders and profiles (cards) or id, name, owner, kind, node and reason (workloads). Terms
//! are listed in `TERMS` with what each means; the help overlay shows them.

use crate::model::capacity::{free_units, usable};
use crate::model::{Card, Fleet, Node, SharingMode, Workload};

type HashSet<T> = foldhash::HashSet<T>;

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
    /// A comparison whose number does not read (`util<abc`): matches nothing, and says why.
    Bad(String),
}

/// Every filter term and what it matches, for the help overlay and the README.
pub const TERMS: &[(&str, &str)] = &[
    ("TEXT", "node, model, UUID, holder, profile; workload id, name, owner, kind, node, reason"),
    ("util<5 util>90", "activity now (cards; a workload's cards or instances)"),
    ("temp>80", "card temperature, C (workloads: on such a card)"),
    ("free>0", "usable free units: unheld instances, free slices, an idle card (workloads: theirs)"),
    ("idle", "usable and held by nobody (workloads: on such a card)"),
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
/// UUIDs: nearly all of it) is compared in place, from each place the needle's first letter
/// appears; other text is lowercased first, as before (a character such as the Kelvin sign
/// lowercases to ASCII).
fn has(hay: &str, needle: &str) -> bool {
    if hay.is_ascii() && needle.is_ascii() {
        let (h, n) = (hay.as_bytes(), needle.as_bytes());
        let Some((&first, rest)) = n.split_first() else { return true };
        if h.len() < n.len() {
            return false;
        }
        return h[..=h.len() - n.len()]
            .iter()
            .enumerate()
            .any(|(i, b)| b.to_ascii_lowercase() == first && h[i + 1..i + n.len()].eq_ignore_ascii_case(rest));
    }
    hay.to_lowercase().contains(needle)
}

impl Filter {
    pub fn parse(text: &str) -> Self {
        let mut terms: Vec<Term> = text
            .split_whitespace()
            .map(|w| {
                let lw = w.to_lowercase();
                if let Some((o, n)) = comparison(&lw, "util") {
                    Term::Util(o, n)
                } else if let Some((o, n)) = comparison(&lw, "temp") {
                    Term::Temp(o, n)
                } else if let Some((o, n)) = comparison(&lw, "free") {
                    Term::Free(o, n.max(0.0) as u32)
                } else if ["util", "temp", "free"]
                    .iter()
                    .any(|n| lw.strip_prefix(n).is_some_and(|r| r.starts_with(['<', '>', '='])))
                {
                    // A comparison that does not read is not a text search for it.
                    Term::Bad(w.to_string())
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
                        "part" | "partitioned" => Term::Mode(SharingMode::Partitioned),
                        "dra" | "dra-dynamic" => Term::Mode(SharingMode::DraDynamic),
                        "shared" => Term::Shared,
                        _ => Term::Text(lw),
                    }
                }
            })
            .collect();
        // Every word must match, so the order is free: the cheap comparisons first, the text
        // searches (through holders and their workloads) only for what is left.
        terms.sort_by_key(|t| matches!(t, Term::Text(_)));
        Self { terms }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// What the filter cannot read, in words (shown beside it; such a word matches nothing).
    pub fn problems(&self) -> Vec<String> {
        self.terms
            .iter()
            .filter_map(|t| match t {
                Term::Bad(w) => Some(format!("{w}: not a number after <, > or = (util<5, temp>80, free>0)")),
                _ => None,
            })
            .collect()
    }

    /// Whether one card matches. A list matches through [`Filter::over`], which does the work
    /// shared by every card once.
    pub fn matches(&self, fleet: &Fleet, node: &Node, card: &Card) -> bool {
        self.over(fleet).card(node, card)
    }

    /// This filter ready to run over `fleet`: for each text word, the workloads whose name or
    /// owner has it are found once, not once per card that holds them.
    pub fn over<'a>(&'a self, fleet: &'a Fleet) -> Matcher<'a> {
        let named = self
            .terms
            .iter()
            .map(|t| match t {
                Term::Text(s) => fleet
                    .workloads
                    .iter()
                    .filter(|w| has(&w.name, s) || w.owner.as_deref().is_some_and(|o| has(o, s)))
                    .map(|w| w.id.as_str())
                    .collect(),
                _ => HashSet::default(),
            })
            .collect();
        Matcher { filter: self, fleet, named }
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
            // Card terms match on the workload's cards (a pending one has none): `temp>80`
            // used to list every workload.
            Term::Temp(o, n) => on_card(&|c| c.temperature_c.is_some_and(|u| u.partial_cmp(n) == Some(*o))),
            Term::Free(o, n) => {
                w.cards.iter().any(|r| fleet.node_card(r).is_some_and(|(nd, c)| free_units(nd, c).cmp(n) == *o))
            }
            Term::Idle => {
                w.cards.iter().any(|r| fleet.node_card(r).is_some_and(|(nd, c)| c.is_idle() && usable(nd, c)))
            }
            Term::Draining => on_card(&|c| c.draining),
            Term::Unhealthy => on_card(&|c| c.health.fault().is_some()),
            Term::Xid => on_card(&|c| c.health.last_xid.is_some()),
            Term::Mode(m) => on_card(&|c| c.sharing_mode() == Some(*m)),
            Term::Shared => {
                w.request.shares.is_some() || on_card(&|c| c.sharing_mode().is_some_and(SharingMode::unisolated))
            }
            Term::Bad(_) => false,
        })
    }
}

/// A [`Filter`] over one fleet (see [`Filter::over`]).
pub struct Matcher<'a> {
    filter: &'a Filter,
    fleet: &'a Fleet,
    /// Per term: for a text word, the ids of the workloads whose name or owner has it.
    named: Vec<HashSet<&'a str>>,
}

impl Matcher<'_> {
    /// Whether a card on `node` matches every word.
    pub fn card(&self, node: &Node, card: &Card) -> bool {
        self.filter.terms.iter().zip(&self.named).all(|(t, named)| match t {
            Term::Text(s) => {
                has(&node.name, s)
                    || has(&card.model, s)
                    || card.gpu_model().is_some_and(|m| has(&m.name, s))
                    || card.uuid.as_deref().is_some_and(|u| has(u, s))
                    || card.holders().any(|h| has(h, s) || named.contains(h))
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
                        .all(|h| self.fleet.workload(h).is_some_and(|w| w.activity.is_some_and(|a| a.held_idle())))
            }
            Term::Unhealthy => card.health.fault().is_some(),
            Term::Xid => card.health.last_xid.is_some(),
            Term::Mode(m) => card.sharing_mode() == Some(*m),
            Term::Shared => card.sharing_mode().is_some_and(SharingMode::unisolated),
            Term::Bad(_) => false,
        })
    }

    /// Whether a workload matches every word (see [`Filter::matches_workload`]).
    pub fn workload(&self, w: &Workload) -> bool {
        self.filter.matches_workload(self.fleet, w)
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

    /// The text search as it was before [`Matcher`]: each holder's workload looked up for each
    /// card, words in the order typed.
    fn reference(words: &str, fleet: &Fleet, node: &Node, card: &Card) -> bool {
        words.split_whitespace().all(|w| {
            let one = Filter::parse(w);
            match &one.terms[..] {
                [Term::Text(s)] => {
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
                _ => one.over(fleet).card(node, card),
            }
        })
    }

    #[test]
    fn a_list_matches_as_each_card_did_alone() {
        use crate::sources::sim::{Sim, SimConfig};
        use chrono::TimeZone;
        let t = chrono::Utc.with_ymd_and_hms(2026, 3, 2, 14, 0, 0).single().unwrap_or_default();
        let mut store = crate::store::Store::new();
        store.register("sim", crate::model::SourceKind::Simulated, std::time::Duration::from_secs(1));
        let update = crate::sources::SourceUpdate {
            source: "sim".into(),
            kind: crate::model::SourceKind::Simulated,
            at: t,
            result: Ok(Sim::new(SimConfig::new(7, t)).snapshot()),
        };
        store.apply(update, t);
        let fleet = store.fleet();
        let owners: Vec<&str> = fleet.workloads.iter().filter_map(|w| w.owner.as_deref()).take(3).collect();
        let names: Vec<&str> =
            fleet.workloads.iter().filter(|w| w.state.is_active()).map(|w| w.name.as_str()).take(3).collect();
        let mut words: Vec<String> =
            ["h100", "util>50 a100", "A100 util>50", "1g", "node-0 mig", "nobody-at-all", "idle h100"]
                .iter()
                .map(|w| w.to_string())
                .collect();
        words.extend(owners.iter().chain(&names).map(|w| w.to_uppercase()));
        words.extend(names.iter().map(|w| format!("{w} util<101")));
        let mut some = 0;
        for w in &words {
            let f = Filter::parse(w);
            let m = f.over(fleet);
            for n in &fleet.nodes {
                for c in &n.cards {
                    let want = reference(w, fleet, n, c);
                    assert_eq!(m.card(n, c), want, "{w:?} on {} #{}", n.name, c.index);
                    some += usize::from(want);
                }
            }
        }
        assert!(some > 0, "the words match some cards");
        for w in names.iter().chain(&owners) {
            let f = Filter::parse(w);
            let m = f.over(fleet);
            assert!(fleet.nodes.iter().any(|n| n.cards.iter().any(|c| m.card(n, c))), "{w} is on a card");
        }
    }

    #[test]
    fn terms_combine() {
        let fleet = Fleet::default();
        let node = Node::new("gpu-h100-01");
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

    /// Card terms in the workload lists match on the workload's cards: no card above 80 C
    /// lists no workload (`temp>80` listed them all), a workload's held card is neither idle
    /// nor free.
    #[test]
    fn card_terms_match_workloads_through_their_cards() {
        use crate::model::{CardRef, WorkloadKind, WorkloadState};
        let card = Card {
            model: "NVIDIA H100 80GB HBM3".into(),
            temperature_c: Some(71.0),
            workloads: vec!["w1".into()],
            ..Card::default()
        };
        let node = Node { cards: vec![card], ..Node::new("gpu-h100-01") };
        let mut running = Workload::new("w1", "train", WorkloadKind::Training, WorkloadState::Running);
        running.cards = vec![CardRef::new("gpu-h100-01", 0)];
        let pending = Workload::new("w2", "wait", WorkloadKind::Inference, WorkloadState::Pending);
        let mut fleet = Fleet { nodes: vec![node], workloads: vec![running, pending], ..Fleet::default() };
        fleet.index_workloads();
        let listed = |words: &str| -> Vec<String> {
            let f = Filter::parse(words);
            fleet.workloads.iter().filter(|w| f.matches_workload(&fleet, w)).map(|w| w.id.clone()).collect()
        };
        assert!(listed("temp>80").is_empty(), "no card is above 80 C");
        assert_eq!(listed("temp>70"), ["w1"]);
        assert!(listed("idle").is_empty() && listed("free>0").is_empty(), "the card is held");
        assert_eq!(listed("free=0"), ["w1"]);
    }

    /// A comparison whose number does not read matches nothing and says so (`util<abc` was a
    /// text search for "util<abc").
    #[test]
    fn a_comparison_that_does_not_read_is_said_not_searched() {
        let f = Filter::parse("util<abc h100");
        assert_eq!(f.problems(), ["util<abc: not a number after <, > or = (util<5, temp>80, free>0)"]);
        let node = Node::new("util<abc");
        assert!(!f.matches(&Fleet::default(), &node, &Card::default()));
        assert!(Filter::parse("util<5 utilities").problems().is_empty(), "a number, and a word");
    }

    #[test]
    fn a_term_for_each_sharing_mode() {
        use crate::model::Sharing;
        let fleet = Fleet::default();
        let node = Node::new("gpu-l4-01");
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
            (SharingMode::Partitioned, "part", true),
            (SharingMode::Partitioned, "shared", false),
        ];
        for (mode, words, expect) in cases {
            assert_eq!(Filter::parse(words).matches(&fleet, &node, &card(mode)), expect, "{mode:?} {words}");
        }
    }
}
