//! Replay in time: jobs arrive at their times, wait in the queue (inference first, then by
//! priority and arrival; any waiting job that fits starts: backfilling without
//! reservations), run their durations and leave; the policy's own moves (scheduled layouts,
//! the adaptive planner and its preemptions) happen at their ticks. The metrics integrate
//! the cluster's totals between events.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::fleet::Fleet;
use super::job::{Class, Job};
use super::metrics::{JobRun, Point, Report, all_waits};
use super::place::{Chooser, Mix};
use super::policy::{Policy, Settings};
use super::state::{Cluster, Hold};
use crate::model::mig::Placed;

mod queue;

use queue::{Head, Queue};

/// Event kinds in the order they apply at one instant: ends free capacity first.
pub(super) const END: u8 = 0;
pub(super) const CARD_UP: u8 = 1;
pub(super) const TICK: u8 = 2;
/// With no arrivals left and nothing running, a queue that has not moved for this long
/// never will.
const STALE_S: i64 = 2 * 86_400;

#[derive(Debug, Clone, Default)]
pub(super) struct JobState {
    pub hold: Option<Hold>,
    /// Work left, seconds (a resumed job adds its checkpoint reload).
    pub remaining: i64,
    pub started: i64,
    pub epoch: u32,
    pub queued_since: i64,
    pub queued: bool,
    /// Its arrival came (before the run's end).
    pub arrived: bool,
    /// The checkpoint reload this run began with (counted as lost when it runs).
    pub restore: i64,
    pub run: JobRun,
}

/// The books a run keeps, as they stood at one instant: what a run whose queue never moves
/// again is measured from (its idle tail is not the policy's doing).
#[derive(Debug, Clone)]
struct Books {
    now: i64,
    held_s: f64,
    used_s: f64,
    exposed_s: f64,
    idle_s: Vec<f64>,
    timeline: Vec<Point>,
    sample_every: i64,
    next_sample: i64,
    reconfigurations: u64,
    downtime_s: f64,
}

/// One run of one policy.
pub(super) struct Run<'a> {
    pub jobs: &'a [Job],
    pub fleet: &'a Fleet,
    pub policy: Policy,
    pub s: &'a Settings,
    pub cl: Cluster,
    pub chooser: Chooser,
    pub queue: Queue,
    pub st: Vec<JobState>,
    pub heap: BinaryHeap<Reverse<(i64, u8, u32, u32)>>,
    pub now: i64,
    /// Integrals over time (value × seconds).
    held_s: f64,
    used_s: f64,
    exposed_s: f64,
    idle_s: Vec<f64>,
    peak_held: u64,
    timeline: Vec<Point>,
    sample_every: i64,
    next_sample: i64,
    pub preemptions: u64,
    pub lost_gpu_s: f64,
    pub reconfigurations: u64,
    pub downtime_s: f64,
    /// Reconfiguration times in the last hour (adaptive's budget).
    pub recent_changes: std::collections::VecDeque<i64>,
    pub cards_of_model: Vec<u32>,
    unplaceable: u64,
    /// When a job last started.
    last_start: i64,
    /// Cards a job left at this instant (adaptive looks at them before the queue does).
    freed: Vec<u32>,
    /// Training jobs running now: the only ones adaptive may preempt.
    pub training: std::collections::BTreeSet<u32>,
    /// Arrivals not yet seen.
    pub arrivals_left: usize,
    /// Something freed or arrived: try the queue.
    pub dirty: bool,
    /// `adaptive`'s ticks wait for the next arrival (nothing ran or waited at the last).
    pub tick_parked: bool,
    /// Ticks handled (a bound the tests read).
    pub ticks: u64,
    /// The books when the fleet last fell idle with nothing left to arrive (dropped when a
    /// job starts): a queue stuck from there on does not stretch the run.
    quiet: Option<Books>,
}

/// Whether `job` could ever run on an empty node of the fleet.
fn placeable(fleet: &Fleet, job: &Job) -> bool {
    fleet.nodes.iter().any(|n| {
        let m = &fleet.models[n.model as usize];
        n.gpus >= job.gpus
            && (n.cpu_milli == 0 || job.cpu_milli <= n.cpu_milli)
            && (n.mem_mib == 0 || job.host_mem_mib <= n.mem_mib)
            && (m.memory_mib == 0 || job.mem_mib <= m.memory_mib)
            && job.may_run_on(&m.name)
    })
}

impl<'a> Run<'a> {
    pub fn new(
        jobs: &'a [Job],
        fleet: &'a Fleet,
        policy: Policy,
        layouts: &[Option<Vec<Placed>>],
        s: &'a Settings,
    ) -> Self {
        let cl = Cluster::new(fleet, policy, s.replicas, layouts);
        // Exclusive, or a MIG policy with no card to cut or share: every request whole.
        let exclusive = policy.whole_only(fleet);
        let placement = s.placement_for(policy, fleet);
        let chooser = Chooser::new(placement, exclusive, Mix::new(jobs, exclusive), fleet.nodes.len());
        let first = jobs.first().map_or(0, |j| j.submit);
        let last = jobs.iter().map(|j| j.submit + j.duration).max().unwrap_or(first);
        let span = s.horizon_s.map_or(last - first, |h| h - first).max(1);
        let sample_every = (span / s.timeline_points.max(1) as i64).max(1);
        let mut cards_of_model = vec![0u32; fleet.models.len()];
        for n in &fleet.nodes {
            cards_of_model[n.model as usize] += n.gpus;
        }
        Self {
            jobs,
            fleet,
            policy,
            s,
            cl,
            chooser,
            queue: Queue::new(jobs, exclusive),
            st: vec![JobState::default(); jobs.len()],
            heap: BinaryHeap::new(),
            now: first,
            held_s: 0.0,
            used_s: 0.0,
            exposed_s: 0.0,
            idle_s: vec![0.0; fleet.models.len()],
            peak_held: 0,
            timeline: Vec::new(),
            sample_every,
            next_sample: first,
            preemptions: 0,
            lost_gpu_s: 0.0,
            reconfigurations: 0,
            downtime_s: 0.0,
            recent_changes: std::collections::VecDeque::new(),
            cards_of_model,
            unplaceable: 0,
            arrivals_left: jobs.len(),
            last_start: first,
            training: std::collections::BTreeSet::new(),
            freed: Vec::new(),
            dirty: false,
            tick_parked: false,
            ticks: 0,
            quiet: None,
        }
    }

    fn books(&self) -> Books {
        Books {
            now: self.now,
            held_s: self.held_s,
            used_s: self.used_s,
            exposed_s: self.exposed_s,
            idle_s: self.idle_s.clone(),
            timeline: self.timeline.clone(),
            sample_every: self.sample_every,
            next_sample: self.next_sample,
            reconfigurations: self.reconfigurations,
            downtime_s: self.downtime_s,
        }
    }

    fn restore(&mut self, b: Books) {
        self.now = b.now;
        self.held_s = b.held_s;
        self.used_s = b.used_s;
        self.exposed_s = b.exposed_s;
        self.idle_s = b.idle_s;
        self.timeline = b.timeline;
        self.sample_every = b.sample_every;
        self.next_sample = b.next_sample;
        self.reconfigurations = b.reconfigurations;
        self.downtime_s = b.downtime_s;
    }

    /// Move the clock to `t`, integrating the totals that held since the last event.
    fn advance(&mut self, t: i64) {
        if t <= self.now {
            return;
        }
        while self.next_sample < t {
            self.timeline.push(Point {
                t: self.next_sample,
                held_gpus: self.cl.held_milli as f64 / 1000.0,
                waiting: self.queue.len,
            });
            self.next_sample += self.sample_every;
            // A run far past the demand's span (a backlog on a small fleet) keeps its
            // timeline bounded: every other point goes and the step doubles.
            if self.timeline.len() >= 2 * self.s.timeline_points.max(2) {
                let kept: Vec<Point> = self.timeline.iter().step_by(2).copied().collect();
                self.timeline = kept;
                // The last point kept is one old step before the one just taken: the next at
                // the new step is where the old next was.
                self.sample_every *= 2;
            }
        }
        let dt = (t - self.now) as f64;
        self.held_s += self.cl.held_milli as f64 * dt;
        self.used_s += self.cl.used_milli as f64 * dt;
        self.exposed_s += f64::from(self.cl.exposed) * dt;
        for (m, busy) in self.cl.busy_per_model.iter().enumerate() {
            self.idle_s[m] += f64::from(self.cards_of_model[m] - busy) * dt;
        }
        self.now = t;
    }

    pub fn start(&mut self, id: u32, hold: Hold) {
        let job = &self.jobs[id as usize];
        // DynamicMIG: the instances created for it take the reconfiguration time before its
        // work begins; it holds them meanwhile, and each creation counts under RECONF.
        let created: Vec<u32> = hold.parts.iter().filter(|p| p.create.is_some()).map(|p| p.milli).collect();
        let create_s = if created.is_empty() { 0 } else { self.s.reconfigure_s.max(0) };
        self.reconfigurations += created.len() as u64;
        self.downtime_s += created.iter().map(|&m| f64::from(m) / 1000.0).sum::<f64>() * create_s as f64;
        self.cl.take(id, job, &hold, self.now);
        self.chooser.changed(hold.node);
        self.peak_held = self.peak_held.max(self.cl.held_milli);
        self.last_start = self.now;
        self.quiet = None;
        if job.class == Class::Training {
            self.training.insert(id);
        }
        let st = &mut self.st[id as usize];
        st.run.waited_s += self.now - st.queued_since;
        st.run.first_start.get_or_insert(self.now);
        st.started = self.now + create_s;
        st.queued = false;
        st.epoch += 1;
        st.hold = Some(hold);
        self.queue.remove(id, job.submit);
        self.heap.push(Reverse((self.now + create_s + st.remaining, END, id, st.epoch)));
    }

    /// Take `id` off its cards; returns how long it ran this time.
    pub fn stop(&mut self, id: u32) -> i64 {
        let job = &self.jobs[id as usize];
        self.training.remove(&id);
        let st = &mut self.st[id as usize];
        let ran = self.now - st.started;
        st.run.ran_s += ran;
        if let Some(hold) = st.hold.take() {
            self.cl.give_back(job, &hold, self.now);
            self.chooser.changed(hold.node);
            if self.policy == Policy::Adaptive {
                self.freed.extend(hold.parts.iter().map(|p| p.card));
            }
        }
        self.dirty = true;
        ran
    }

    pub fn enqueue(&mut self, id: u32) {
        let st = &mut self.st[id as usize];
        st.queued = true;
        st.queued_since = self.now;
        self.queue.push(id, self.jobs[id as usize].submit);
        self.dirty = true;
    }

    /// Start what fits, best first: the best head of any shape, again and again; a shape
    /// whose head does not fit waits until something changes.
    fn pass(&mut self) {
        self.dirty = false;
        if self.queue.len == 0 {
            return;
        }
        let mut heads: BinaryHeap<Reverse<(Head, usize)>> =
            (0..self.queue.shapes.len()).filter_map(|s| self.queue.head(s).map(|h| Reverse((h, s)))).collect();
        while let Some(Reverse(((_, _, _, id), shape))) = heads.pop() {
            let Some(hold) = self.chooser.place(&self.cl, self.fleet, &self.jobs[id as usize], self.now) else {
                continue;
            };
            self.start(id, hold);
            if let Some(h) = self.queue.head(shape) {
                heads.push(Reverse((h, shape)));
            }
        }
    }

    fn on_event(&mut self, kind: u8, id: u32, epoch: u32) {
        match kind {
            END => {
                if self.st[id as usize].epoch == epoch && self.st[id as usize].hold.is_some() {
                    self.stop(id);
                    let gpu_eq = self.jobs[id as usize].gpu_equivalents();
                    let st = &mut self.st[id as usize];
                    st.run.end = Some(self.now);
                    st.run.lost_s += st.restore;
                    self.lost_gpu_s += st.restore as f64 * gpu_eq;
                }
            }
            CARD_UP => {
                let node = self.cl.cards[id as usize].node;
                self.cl.recount_whole(node, self.now);
                self.chooser.changed(node);
                self.dirty = true;
            }
            _ => {
                self.ticks += 1;
                self.tick();
            }
        }
    }

    /// Run to the end and measure to it (or to the horizon).
    pub fn run(mut self, progress: &mut dyn FnMut(f64)) -> Report {
        self.play(progress);
        let end = self.played_to();
        self.report_until(end)
    }

    /// Where the run's own measure ends: the horizon, else the last end of the work that
    /// started (a queue left stuck after it does not stretch the run).
    pub fn played_to(&self) -> i64 {
        self.s.horizon_s.map_or(self.now, |h| h.max(self.now))
    }

    /// Measure to `end` (at or after `played_to`, the same for every policy of one
    /// comparison): the fleet stays as the run left it, idle, with what waits still waiting.
    pub fn report_until(mut self, end: i64) -> Report {
        self.advance(end);
        self.report()
    }

    /// Play every arrival and event, to the horizon or until nothing can change.
    pub fn play(&mut self, progress: &mut dyn FnMut(f64)) {
        let mut next = 0usize;
        let horizon = self.s.horizon_s.unwrap_or(i64::MAX);
        self.first_ticks();
        loop {
            let t_arrive = self.jobs.get(next).map_or(i64::MAX, |j| j.submit);
            let t_event = self.heap.peek().map_or(i64::MAX, |e| e.0.0);
            let t = t_arrive.min(t_event);
            if t == i64::MAX || t > horizon {
                break;
            }
            if t_arrive == i64::MAX && self.nothing_can_start(t) {
                break;
            }
            self.advance(t);
            self.events_at(t, CARD_UP);
            let arrived = self.arrive(&mut next, t, progress);
            if arrived && self.tick_parked {
                self.resume_ticks(t);
            }
            self.events_at(t, u8::MAX);
            if self.dirty {
                self.relayout_and_pass(arrived);
            }
            #[cfg(test)]
            self.check();
            // Arrivals may still come: one that starts drops these books, one that never does
            // leaves the run measured from here.
            if self.quiet.is_none() && self.cl.held_milli == 0 {
                self.quiet = Some(self.books());
            }
        }
        // Nothing started since the fleet fell idle: measure from there.
        if let Some(b) = self.quiet.take().filter(|b| b.now <= horizon) {
            self.restore(b);
        }
        progress(1.0);
    }

    /// With no arrival left: only ticks left, nothing runs, and nothing has started for two
    /// days (every window of a schedule has come round): what still waits never will.
    fn nothing_can_start(&self, t: i64) -> bool {
        self.cl.held_milli == 0 && (self.queue.len == 0 || t - self.last_start > STALE_S) && self.only_ticks()
    }

    /// Handle the events due at `t` of a kind up to `through` (ends, then cards back up, then
    /// ticks: the heap's order), one at a time.
    fn events_at(&mut self, t: i64, through: u8) {
        while let Some(&Reverse((te, kind, id, epoch))) = self.heap.peek() {
            if te != t || kind > through {
                break;
            }
            self.heap.pop();
            self.on_event(kind, id, epoch);
        }
    }

    /// The jobs arriving at `t`, from `next` on: each queued, or counted unplaceable where no
    /// node of the fleet could ever host it. Whether any arrived.
    fn arrive(&mut self, next: &mut usize, t: i64, progress: &mut dyn FnMut(f64)) -> bool {
        let n = self.jobs.len();
        let mut arrived = false;
        while *next < n && self.jobs[*next].submit == t {
            arrived = true;
            let id = *next as u32;
            *next += 1;
            self.arrivals_left -= 1;
            self.st[id as usize].remaining = self.jobs[id as usize].duration;
            self.st[id as usize].arrived = true;
            if placeable(self.fleet, &self.jobs[id as usize]) {
                self.enqueue(id);
            } else {
                self.unplaceable += 1;
            }
            if next.is_multiple_of(4096) {
                progress(*next as f64 / n as f64);
            }
        }
        arrived
    }

    /// Parked ticks start again at the next point of their grid (first arrival + k intervals)
    /// at or after `t`.
    fn resume_ticks(&mut self, t: i64) {
        self.tick_parked = false;
        let (step, first) = (self.s.interval_s.max(1), self.jobs.first().map_or(0, |j| j.submit));
        let k = (t - first + step - 1).div_euclid(step).max(1);
        self.heap.push(Reverse((first + k * step, TICK, 0, 0)));
    }

    /// Something changed: Adaptive looks at cards the moment they are idle, before the queue
    /// takes them as they are (the cards just freed, and every idle card when new work that a
    /// cut card could serve, a share of a card, waits: whole-card work needs no cut, and a
    /// scan of every card per arrival would cost the run its speed); then the queue's pass.
    fn relayout_and_pass(&mut self, arrived: bool) {
        let freed = std::mem::take(&mut self.freed);
        if self.policy == Policy::Adaptive && self.queue.len > 0 {
            if !freed.is_empty() {
                self.relayout_for_waiting(Some(&freed));
            }
            if arrived && self.queue.heads().iter().any(|&id| self.jobs[id as usize].milli < 1000) {
                self.relayout_for_waiting(None);
            }
        }
        self.pass();
    }

    fn only_ticks(&self) -> bool {
        self.heap.iter().all(|e| e.0.1 == TICK)
    }

    fn report(mut self) -> Report {
        let gpus = self.fleet.gpus();
        let first = self.jobs.first().map_or(0, |j| j.submit);
        let span = (self.now - first).max(0) as f64;
        let mut per_class: [Vec<i64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
        let (mut started, mut never) = (0u64, 0u64);
        for (j, st) in self.jobs.iter().zip(&mut self.st) {
            let class = Class::ALL.iter().position(|c| *c == j.class).unwrap_or(2);
            if st.run.first_start.is_some() {
                started += 1;
            } else if st.queued {
                never += 1;
            } else {
                continue;
            }
            let mut waited = st.run.waited_s;
            if st.queued {
                // A job that arrived after the run's measure ended waited none of it.
                waited += (self.now - st.queued_since).max(0);
                st.run.waited_s = waited;
            }
            per_class[class].push(waited);
        }
        let (waits, wait) = all_waits(per_class);
        let (mut unplaced, mut waiting) = (Vec::new(), Vec::new());
        for (j, st) in self.jobs.iter().zip(&self.st).filter(|(_, st)| st.run.first_start.is_none() && st.arrived) {
            if st.queued {
                waiting.push(j);
            } else if !placeable(self.fleet, j) {
                unplaced.push(j);
            }
        }
        let not_run = super::not_run::explain(self.fleet, &self.cl, self.policy, &unplaced, &waiting);
        let idle_cost = self
            .fleet
            .models
            .iter()
            .zip(&self.idle_s)
            .map(|(m, s)| self.s.price(&m.name).map(|p| p * s / 3600.0))
            .try_fold(0.0, |acc, c| c.map(|c| acc + c));
        Report {
            policy: self.policy,
            placement: self.chooser.placement,
            gpus,
            jobs: self.jobs.len() as u64,
            started,
            never_started: never,
            unplaceable: self.unplaceable,
            not_run,
            demand_gpu_hours: self.jobs.iter().map(Job::gpu_seconds).sum::<f64>() / 3600.0,
            span_hours: span / 3600.0,
            window_end_s: self.now,
            held_mean: if span > 0.0 && gpus > 0 { self.held_s / 1000.0 / span / gpus as f64 } else { 0.0 },
            held_peak_gpus: self.peak_held as f64 / 1000.0,
            used_of_held: (self.held_s > 0.0).then(|| self.used_s / self.held_s),
            waits,
            wait,
            preemptions: self.preemptions,
            lost_gpu_hours: self.lost_gpu_s / 3600.0,
            reconfigurations: self.reconfigurations,
            downtime_gpu_hours: self.downtime_s / 3600.0,
            interference_hours: self.exposed_s / 3600.0,
            idle_gpu_hours: self.idle_s.iter().sum::<f64>() / 3600.0,
            idle_cost: if self.s.prices.is_empty() { None } else { idle_cost },
            timeline: std::mem::take(&mut self.timeline),
            job_runs: self.st.into_iter().map(|s| s.run).collect(),
        }
    }

    /// The invariants, after every instant (tests): nothing holds more than a card has, no
    /// node gives more host resources than it has.
    #[cfg(test)]
    fn check(&self) {
        use super::state::Mode;
        let mut held = 0u64;
        for c in &self.cl.cards {
            assert!(c.held_milli <= 1000, "card holds {} thousandths", c.held_milli);
            held += u64::from(c.held_milli);
            if let Mode::Shared(r) = c.mode {
                assert!(c.holders <= r);
            }
            if c.mode == Mode::Whole {
                assert!(c.holders <= 1);
            }
            let mem = self.cl.card_mem[c.model as usize];
            assert!(mem == 0 || c.used_mem <= mem, "card memory {} of {mem}", c.used_mem);
            let inst_holders = c.insts.iter().filter(|i| i.holder.is_some()).count();
            if c.mode == super::state::Mode::Mig {
                assert_eq!(inst_holders, usize::from(c.holders));
            }
            if c.mode == Mode::Dynamic {
                // Every instance is one a job holds; a card without any is held whole or idle.
                assert_eq!(inst_holders, c.insts.len());
                assert!(c.insts.len() == usize::from(c.holders) || (c.insts.is_empty() && c.holders <= 1));
                if let Some(gm) = self.fleet.models[c.model as usize].mig {
                    let l = super::state::placed(gm, &c.insts);
                    assert!(crate::model::mig::validate(gm, &l).is_ok(), "{l:?}");
                }
            }
        }
        assert_eq!(held, self.cl.held_milli);
        assert!(held <= self.fleet.gpus() * 1000);
        for n in &self.cl.nodes {
            assert!(n.cpu_free >= 0 && n.mem_free >= 0);
        }
    }
}
