//! The policies that move on their own: `schedule` changes idle cards' layouts at its
//! windows' boundaries; `adaptive` every interval preempts training past its minimum runtime
//! for waiting inference, then lays idle cards out for the waiting demand (the catalog's
//! maximal layouts, or whole, whichever starts the most waiting work, then wastes the least),
//! within a budget of changes an hour.

use std::cmp::Reverse;

use super::job::Class;
use super::policy::Policy;
use super::replay::{CARD_UP, Run, TICK};
use crate::model::mig::Placed;
use crate::model::mig::layout::maximal_layouts;

/// A layout option with the jobs it starts and the compute it leaves unused.
type Choice<'a> = (usize, Reverse<u32>, Option<&'a [Placed]>);

/// Jobs the adaptive tick considers at once (the heads of the queue).
const CONSIDER: usize = 64;
/// Victims tried for one waiting inference job.
const VICTIMS: usize = 16;
/// While cards wait to change, the schedule looks again this often.
const RECHECK_S: i64 = 60;

impl Run<'_> {
    pub(super) fn first_ticks(&mut self) {
        match self.policy {
            Policy::Schedule if !self.s.windows.is_empty() => {
                // The layouts the windows hold at the start, with no downtime.
                self.apply_windows(0);
                self.push_next_boundary();
            }
            Policy::Adaptive => self.heap.push(Reverse((self.now + self.s.interval_s.max(1), TICK, 0, 0))),
            // Layouts that never change on their own: nothing ticks.
            Policy::Schedule | Policy::Exclusive | Policy::Mig | Policy::Share | Policy::Dynamic => {}
        }
    }

    pub(super) fn tick(&mut self) {
        match self.policy {
            Policy::Schedule => {
                let closing = self.apply_windows(self.s.reconfigure_s);
                if closing {
                    self.heap.push(Reverse((self.now + RECHECK_S, TICK, 1, 0)));
                } else {
                    self.push_next_boundary();
                }
            }
            Policy::Adaptive => {
                while self.recent_changes.front().is_some_and(|&t| t <= self.now - 3600) {
                    self.recent_changes.pop_front();
                }
                let acted = if self.queue.len > 0 {
                    self.preempt_for_inference() | self.relayout_for_waiting(None)
                } else {
                    false
                };
                if !acted && self.queue.len == 0 && self.cl.held_milli == 0 && self.arrivals_left > 0 {
                    // Nothing runs or waits: nothing to look at until the next arrival, which
                    // takes the ticks up again on the same grid (a demand with a gap of years
                    // ticked through all of it).
                    self.tick_parked = true;
                } else if acted || self.arrivals_left > 0 || self.cl.held_milli > 0 {
                    self.heap.push(Reverse((self.now + self.s.interval_s.max(1), TICK, 0, 0)));
                }
            }
            Policy::Exclusive | Policy::Mig | Policy::Share | Policy::Dynamic => {}
        }
    }

    fn second_of_day(&self, t: i64) -> u32 {
        (t + self.s.day_offset_s).rem_euclid(86_400) as u32
    }

    fn push_next_boundary(&mut self) {
        let sod = i64::from(self.second_of_day(self.now));
        let lead = self.s.lead_s;
        let next = self
            .s
            .windows
            .iter()
            .flat_map(|w| [i64::from(w.start_s), i64::from(w.end_s)])
            .map(|b| (b - lead - sod).rem_euclid(86_400))
            .map(|d| if d == 0 { 86_400 } else { d })
            .min();
        // Only while there is something left to serve.
        if let Some(d) = next.filter(|_| self.arrivals_left > 0 || self.cl.held_milli > 0 || self.queue.len > 0) {
            self.heap.push(Reverse((self.now + d, TICK, 0, 0)));
        }
    }

    /// The layout the windows want for model `m` on node `node` at second-of-day `s`, if one
    /// covers it (a schedule's node globs too: every card of the model was changed).
    fn wanted(&self, model: &str, node: &str, s: u32) -> Option<Option<Vec<Placed>>> {
        self.s
            .windows
            .iter()
            .find(|w| {
                w.model.as_deref().is_none_or(|x| x.eq_ignore_ascii_case(model))
                    && (w.nodes.is_empty() || w.nodes.iter().any(|g| crate::model::schedule::glob(g, node)))
                    && w.covers(s)
            })
            .map(|w| w.layout.clone())
    }

    /// Change every idle card whose window wants another layout (`lead` ahead); mark busy
    /// ones closing. Whether any card still waits to change.
    fn apply_windows(&mut self, down_s: i64) -> bool {
        let s = self.second_of_day(self.now + self.s.lead_s);
        let mut waiting = false;
        for c in 0..self.cl.cards.len() {
            let model = self.cl.cards[c].model as usize;
            // The DRA driver lays a DynamicMIG node's cards out per claim: no schedule's.
            let n = &self.fleet.nodes[self.cl.cards[c].node as usize];
            if self.fleet.models[model].mig.is_none() || n.dynamic_mig {
                continue;
            }
            let node = &n.name;
            let Some(want) = self.wanted(&self.fleet.models[model].name, node, s) else { continue };
            let have = self.cl.layout_of(self.fleet, c).filter(|l| !l.is_empty());
            let want = want.filter(|l| !l.is_empty());
            let card = &self.cl.cards[c];
            if same_layout(have.as_deref(), want.as_deref()) {
                if card.closing {
                    self.set_closing(c, false);
                }
                continue;
            }
            let held_long_enough = card.changed_at == i64::MIN || self.now - card.changed_at >= self.s.min_hold_s;
            if card.holders == 0 && held_long_enough {
                self.change(c, want.as_deref(), down_s);
            } else {
                waiting = true;
                if !card.closing {
                    self.set_closing(c, true);
                }
            }
        }
        waiting
    }

    fn set_closing(&mut self, c: usize, closing: bool) {
        self.cl.cards[c].closing = closing;
        let node = self.cl.cards[c].node;
        self.cl.recount_whole(node, self.now);
        self.chooser.changed(node);
        self.dirty = true;
    }

    /// Lay card `c` out anew; a change with downtime counts.
    fn change(&mut self, c: usize, layout: Option<&[Placed]>, down_s: i64) {
        self.cl.relayout(self.fleet, c, layout, self.now, down_s);
        let node = self.cl.cards[c].node;
        self.chooser.changed(node);
        self.dirty = true;
        if down_s > 0 {
            self.reconfigurations += 1;
            self.downtime_s += down_s as f64;
            self.recent_changes.push_back(self.now);
            self.heap.push(Reverse((self.now + down_s, CARD_UP, c as u32, 0)));
        }
    }

    /// The queue's heads that nothing free fits now.
    fn stuck(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        for id in self.queue.heads().into_iter().take(CONSIDER) {
            if self.chooser.place(&self.cl, self.fleet, &self.jobs[id as usize], self.now).is_none() {
                out.push(id);
            }
        }
        out
    }

    /// For each stuck inference job, preempt one training job past its minimum runtime whose
    /// cards would let it start (the one that loses the least work). Whether any was.
    fn preempt_for_inference(&mut self) -> bool {
        let mut acted = false;
        for id in self.stuck() {
            if self.jobs[id as usize].class != Class::Inference {
                continue;
            }
            let mut victims: Vec<(i64, u32)> = self
                .training
                .iter()
                .copied()
                .filter(|&v| self.now - self.st[v as usize].started >= self.s.min_runtime_s)
                .map(|v| (self.would_lose(v), v))
                .collect();
            victims.sort_unstable();
            for &(_, v) in victims.iter().take(VICTIMS) {
                let Some(hold) = self.st[v as usize].hold.clone() else { continue };
                let victim = &self.jobs[v as usize];
                self.cl.give_back(victim, &hold, self.now);
                self.chooser.changed(hold.node);
                let fits = self.chooser.place(&self.cl, self.fleet, &self.jobs[id as usize], self.now);
                self.cl.take(v, victim, &hold, self.now);
                self.chooser.changed(hold.node);
                if fits.is_some() {
                    self.preempt(v);
                    if let Some(h) = self.chooser.place(&self.cl, self.fleet, &self.jobs[id as usize], self.now) {
                        self.start(id, h);
                    }
                    acted = true;
                    break;
                }
            }
        }
        acted
    }

    /// Work `v` would lose if preempted now: its run since the last checkpoint.
    fn would_lose(&self, v: u32) -> i64 {
        let (j, st) = (&self.jobs[v as usize], &self.st[v as usize]);
        let ran = self.now - st.started;
        ran - saved(ran, st.restore, j.checkpoint_s)
    }

    /// Stop training job `v` and put it back in the queue with the work its checkpoints kept.
    fn preempt(&mut self, v: u32) {
        let lose = self.would_lose(v);
        let job = &self.jobs[v as usize];
        let gpu_eq = job.gpu_equivalents();
        let restore = if job.checkpoint_s.is_some() { self.s.restore_s } else { 0 };
        let ran = self.stop(v);
        let st = &mut self.st[v as usize];
        let kept = saved(ran, st.restore, job.checkpoint_s);
        st.run.lost_s += lose;
        st.run.preempted_after.push(ran);
        // This run's reload was counted in `lose` (it is not work the job keeps).
        let work_left = st.remaining - st.restore - kept;
        // A job with work kept reloads its checkpoint; one with none starts afresh.
        st.restore = if work_left < job.duration { restore } else { 0 };
        st.remaining = work_left + st.restore;
        self.preemptions += 1;
        self.lost_gpu_s += lose as f64 * gpu_eq;
        self.enqueue(v);
    }

    /// The waiting jobs the planner weighs: up to `CONSIDER`, best first.
    fn waiting(&self) -> Vec<u32> {
        let mut heads: Vec<(u8, Reverse<i32>, i64, u32, usize)> = Vec::new();
        for (shape, set) in self.queue.shapes.iter().enumerate() {
            let (rank, prio) = self.queue.order[shape];
            heads.extend(set.iter().take(CONSIDER).map(|&(t, id)| (rank, prio, t, id, shape)));
        }
        heads.sort_unstable();
        heads.into_iter().take(CONSIDER).map(|h| h.3).collect()
    }

    /// Lay idle cards out for the waiting work: per idle card, the layout (whole or a
    /// maximal one) that starts the most waiting jobs, where that is more than its present
    /// layout starts, while the hour's budget lasts. Whether any card changed.
    /// `only`: the cards to look at (those just freed); `None`: every card (the tick).
    pub(super) fn relayout_for_waiting(&mut self, only: Option<&[u32]>) -> bool {
        let mut waiting = self.waiting();
        let mut acted = false;
        let budget = self.s.max_changes_per_hour as usize;
        let all: Vec<u32>;
        let cards = match only {
            Some(c) => c,
            None => {
                all = (0..self.cl.cards.len() as u32).collect();
                &all
            }
        };
        for &c in cards {
            let c = c as usize;
            if waiting.is_empty() || self.recent_changes.len() >= budget {
                break;
            }
            let card = &self.cl.cards[c];
            let idle = card.holders == 0 && card.down_until <= self.now && !card.closing;
            let Some(gm) = self.fleet.models[card.model as usize].mig.filter(|_| idle) else { continue };
            let node = card.node as usize;
            let here: Vec<u32> = waiting
                .iter()
                .copied()
                .filter(|&id| self.cl.node_admits(node, &self.jobs[id as usize], self.fleet))
                .collect();
            if here.is_empty() {
                continue;
            }
            let have = self.cl.layout_of(self.fleet, c).filter(|l| !l.is_empty());
            let now_serves = self.serves(have.as_deref(), gm, node, &here).len();
            let mut best: Option<Choice> = None;
            let options = std::iter::once(None).chain(maximal_layouts(gm).iter().map(|l| Some(l.as_slice())));
            for option in options {
                let served = self.serves(option, gm, node, &here).len();
                let waste = option.map_or(0, |l| unused_slices(l, gm, served));
                if best.as_ref().is_none_or(|b| (served, Reverse(waste)) > (b.0, b.1)) {
                    best = Some((served, Reverse(waste), option));
                }
            }
            let Some((n, _, layout)) = best.filter(|b| b.0 > now_serves) else { continue };
            if same_layout(have.as_deref(), layout) || n == 0 {
                continue;
            }
            let served = self.serves(layout, gm, node, &here);
            self.change(c, layout, self.s.reconfigure_s);
            waiting.retain(|id| !served.contains(id));
            acted = true;
        }
        acted
    }

    /// Which of `jobs` a card of node `node` laid out as `layout` would start (or, for jobs
    /// of several cards, bring within reach: the node's whole cards and idle MIG cards
    /// together suffice): the largest first, each in the smallest instance that holds it.
    fn serves(
        &self,
        layout: Option<&[Placed]>,
        gm: &crate::model::mig::GpuModel,
        node: usize,
        jobs: &[u32],
    ) -> Vec<u32> {
        let all = gm.compute_slices;
        let Some(layout) = layout else {
            // A whole card starts one job: the first that wants a whole card, or any.
            let n = &self.cl.nodes[node];
            let idle_cut = (n.first..n.first + n.count)
                .filter(|&c| {
                    let card = &self.cl.cards[c as usize];
                    card.holders == 0 && card.mode == super::state::Mode::Mig
                })
                .count() as u32;
            let reach = n.whole_free + idle_cut;
            let whole = jobs.iter().copied().find(|&id| {
                let j = &self.jobs[id as usize];
                j.milli >= 1000 && j.gpus <= reach
            });
            return whole.or_else(|| jobs.first().copied()).into_iter().collect();
        };
        let mut free: Vec<(u8, u64)> = layout
            .iter()
            .filter_map(|p| gm.profile(&p.profile).map(|pr| (pr.compute_slices, pr.planning_mib())))
            .collect();
        let mut out = Vec::new();
        for &id in jobs {
            let j = &self.jobs[id as usize];
            if j.milli >= 1000 && j.gpus > 1 {
                continue;
            }
            let need = super::job::slices_for(j.milli, all);
            if let Some(k) = free
                .iter()
                .enumerate()
                .filter(|(_, f)| f.0 >= need && f.1 >= j.mem_mib)
                .min_by_key(|(_, f)| (f.0, f.1))
                .map(|(k, _)| k)
            {
                free.swap_remove(k);
                out.push(id);
            }
        }
        out
    }
}

/// Work a run of `ran` seconds keeps: whole checkpoint intervals after its reload.
fn saved(ran: i64, restore: i64, checkpoint_s: Option<u32>) -> i64 {
    match checkpoint_s {
        Some(ck) if ck > 0 && ran > restore => (ran - restore) / i64::from(ck) * i64::from(ck),
        _ => 0,
    }
}

/// Compute slices of `layout` beyond the instances `used` jobs take (smallest first).
fn unused_slices(layout: &[Placed], gm: &crate::model::mig::GpuModel, used: usize) -> u32 {
    let mut sizes: Vec<u32> =
        layout.iter().filter_map(|p| gm.profile(&p.profile)).map(|p| u32::from(p.compute_slices)).collect();
    sizes.sort_unstable();
    sizes.iter().skip(used).sum()
}

fn same_layout(a: Option<&[Placed]>, b: Option<&[Placed]>) -> bool {
    let norm = |l: Option<&[Placed]>| {
        let mut v: Vec<(String, u8)> = l.unwrap_or_default().iter().map(|p| (p.profile.clone(), p.start)).collect();
        v.sort();
        v
    };
    norm(a) == norm(b)
}
