//! The planner's search over a `Problem`: exhaustive when the combinations of useful options
//! are few, else a lazy greedy construction polished one and two cards at a time.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use super::{OPEN, Problem, Score, Tally};

/// Problems with at most this many combinations of useful options are searched exhaustively.
pub const EXACT_COMBINATIONS: u64 = 100_000;

/// Choices the two-card polish may score at most (about 1 µs each).
const PAIR_EVALS: u64 = 10_000;

impl Problem {
    /// The best choice found: one option index per candidate card. Small problems (up to
    /// `EXACT_COMBINATIONS` combinations of the options that supply anything waited for) are
    /// searched exhaustively; larger ones greedily.
    pub(crate) fn search(&self) -> Vec<usize> {
        if self.groups.is_empty() {
            return self.cards.iter().map(|c| c.2).collect();
        }
        let present: Vec<usize> = self.cards.iter().map(|c| c.2).collect();
        let found = self.exhaustive(EXACT_COMBINATIONS).unwrap_or_else(|| self.greedy());
        // The greedy path starts from nothing decided: never return worse than no change.
        if self.score(&found) >= self.score(&present) { found } else { present }
    }

    /// Options of card `i` worth trying: its present one, and one of each kind of option that
    /// supplies something waited for. Two options that supply the same waited-for units and
    /// the same memory of other units score the same, so one stands for both.
    fn useful(&self, i: usize) -> Vec<usize> {
        let (_, m, now) = self.cards[i];
        let mut wanted = vec![false; self.units.len()];
        for g in &self.groups {
            for &u in &g.0 {
                wanted[u] = true;
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        let key = |o: usize| {
            let s = &self.models[m].1[o].1;
            let w: Vec<u32> = (0..s.len()).filter(|&u| wanted[u]).map(|u| s[u]).collect();
            let other: u64 = (0..s.len()).filter(|&u| !wanted[u]).map(|u| u64::from(s[u]) * self.unit_mib[u]).sum();
            (w, other)
        };
        seen.insert(key(now));
        let mut out = vec![now];
        for o in (0..self.options(i)).filter(|&o| o != now && self.allowed(i, o)) {
            let k = key(o);
            if k.0.iter().any(|&n| n > 0) && seen.insert(k) {
                out.push(o);
            }
        }
        out
    }

    /// Every combination of useful options, when there are at most `limit`. An option that
    /// supplies nothing waited for never beats the present one (it serves no more and touches
    /// a card), so leaving those out loses nothing.
    pub(crate) fn exhaustive(&self, limit: u64) -> Option<Vec<usize>> {
        let mut memo: BTreeMap<(usize, usize, bool), Vec<usize>> = BTreeMap::new();
        let opts: Vec<Vec<usize>> = (0..self.cards.len())
            .map(|i| memo.entry(self.class(i)).or_insert_with(|| self.useful(i)).clone())
            .collect();
        let mut n: u64 = 1;
        for o in &opts {
            n = n.checked_mul(o.len() as u64).filter(|&n| n <= limit)?;
        }
        // Cards with one useful option stay as they are; only the others vary.
        let vary: Vec<usize> = (0..opts.len()).filter(|&i| opts[i].len() > 1).collect();
        let mut choice: Vec<usize> = self.cards.iter().map(|c| c.2).collect();
        let base = {
            let (touched, n) = self.touched(&choice);
            let mut t = Tally { supply: self.supply(&choice), touched, n };
            for &i in &vary {
                t = self.moved(&t, i, choice[i], false);
            }
            t
        };
        let mut best: Option<(Score, Vec<usize>)> = None;
        let mut digits = vec![0usize; vary.len()];
        'all: loop {
            let mut t = base.clone();
            for (k, &i) in vary.iter().enumerate() {
                choice[i] = opts[i][digits[k]];
                t = self.moved(&t, i, choice[i], true);
            }
            let s = self.eval(&t);
            if best.as_ref().is_none_or(|(b, _)| s > *b) {
                best = Some((s, choice.clone()));
            }
            for d in digits.iter_mut().zip(&vary) {
                *d.0 += 1;
                if *d.0 < opts[*d.1].len() {
                    continue 'all;
                }
                *d.0 = 0;
            }
            break;
        }
        best.map(|b| b.1)
    }

    /// Greedy construction: from no card decided (each adds nothing), take the decision
    /// (one card of a class, one option, its present one included) that serves the most
    /// added weight, until none adds any; undecided cards keep their layout. Then polish.
    pub(crate) fn greedy(&self) -> Vec<usize> {
        let mut choice = vec![OPEN; self.cards.len()];
        // Classes: (model, option now) -> the cards still undecided.
        let mut classes: BTreeMap<(usize, usize, bool), Vec<usize>> = BTreeMap::new();
        for i in 0..self.cards.len() {
            classes.entry(self.class(i)).or_default().push(i);
        }
        for v in classes.values_mut() {
            v.reverse(); // pop() takes the first card
        }
        let mut tally = Tally { supply: self.fixed.clone(), touched: vec![0; self.units.len()], n: 0 };
        let mut best = self.eval(&tally);
        // Lazy greedy: a move's gain only shrinks as supply grows (the heaviest waiting work is
        // served first), so a gain computed earlier bounds it; recompute the top one, take it
        // when it still leads. `version` says which state a gain was computed in. Equal gains go
        // to the first class and the first option, the tie-break exhaustive search keeps.
        let gain = |s: Score, best: Score| (s.weight - best.weight, s);
        let mut heap = std::collections::BinaryHeap::new();
        for (&class, cards) in &classes {
            let Some(&card) = cards.last() else { continue };
            for o in (0..self.options(card)).filter(|&o| self.allowed(card, o)) {
                let s = self.eval(&self.moved(&tally, card, o, true));
                if s.weight > best.weight {
                    heap.push((gain(s, best), 0u32, Reverse(class), Reverse(o)));
                }
            }
        }
        let mut version = 0u32;
        while let Some((_, at, Reverse(class), Reverse(o))) = heap.pop() {
            let Some(&card) = classes.get(&class).and_then(|c| c.last()) else { continue };
            let t = self.moved(&tally, card, o, true);
            let s = self.eval(&t);
            if s.weight <= best.weight {
                continue;
            }
            let g = gain(s, best);
            if at != version && heap.peek().is_some_and(|top| top.0 > g) {
                heap.push((g, version, Reverse(class), Reverse(o)));
                continue;
            }
            if let Some(c) = classes.get_mut(&class) {
                c.pop();
            }
            choice[card] = o;
            tally = t;
            best = s;
            version += 1;
            heap.push((g, version - 1, Reverse(class), Reverse(o))); // the same move again, recomputed when it leads
        }
        for (i, card) in self.cards.iter().enumerate() {
            if choice[i] == OPEN {
                choice[i] = card.2;
                tally = self.moved(&tally, i, card.2, true);
            }
        }
        let tally = self.polish(&mut choice, tally);
        self.polish_pairs(&mut choice, tally, PAIR_EVALS);
        choice
    }

    /// Re-choose two cards at once (changed cards, and one unchanged card of each class), over
    /// their useful options, while that scores better and at most `budget` choices are scored:
    /// the move one card at a time cannot make (the only idle whole card of a model keeps a
    /// waiting whole-card job while another model's card could take it).
    fn polish_pairs(&self, choice: &mut [usize], mut tally: Tally, mut budget: u64) {
        let mut best = self.eval(&tally);
        let mut memo: BTreeMap<(usize, usize, bool), Vec<usize>> = BTreeMap::new();
        loop {
            let mut seen = std::collections::BTreeSet::new();
            let reps: Vec<usize> =
                (0..self.cards.len()).filter(|&c| choice[c] != self.cards[c].2 || seen.insert(self.class(c))).collect();
            let mut better = false;
            for (k, &a) in reps.iter().enumerate() {
                for &b in &reps[k + 1..] {
                    let oa = memo.entry(self.class(a)).or_insert_with(|| self.useful(a)).clone();
                    let ob = memo.entry(self.class(b)).or_insert_with(|| self.useful(b)).clone();
                    let cost = (oa.len() * ob.len()) as u64;
                    if cost > budget {
                        return;
                    }
                    budget -= cost;
                    let without = self.moved(&self.moved(&tally, a, choice[a], false), b, choice[b], false);
                    for &x in &oa {
                        let with_a = self.moved(&without, a, x, true);
                        for &y in &ob {
                            let t = self.moved(&with_a, b, y, true);
                            let s = self.eval(&t);
                            if s > best {
                                (best, tally, choice[a], choice[b], better) = (s, t, x, y, true);
                            }
                        }
                    }
                }
            }
            if !better {
                return;
            }
        }
    }

    /// Re-choose each changed card's option (its present layout included) while that scores
    /// better: a later step can make an earlier change needless or a worse fit.
    fn polish(&self, choice: &mut [usize], mut tally: Tally) -> Tally {
        let mut best = self.eval(&tally);
        loop {
            let mut better = false;
            // Changed cards, and one unchanged card of each class (the rest are the same to it).
            let mut seen = std::collections::BTreeSet::new();
            let changed: Vec<usize> =
                (0..self.cards.len()).filter(|&c| choice[c] != self.cards[c].2 || seen.insert(self.class(c))).collect();
            for card in changed {
                let without = self.moved(&tally, card, choice[card], false);
                for o in (0..self.options(card)).filter(|&o| self.allowed(card, o)) {
                    let t = self.moved(&without, card, o, true);
                    let s = self.eval(&t);
                    if s > best {
                        best = s;
                        choice[card] = o;
                        tally = t;
                        better = true;
                    }
                }
            }
            if !better {
                return tally;
            }
        }
    }
}
