//! A tessera recording as a demand and a fleet: the workloads its frames saw, with their
//! requests, submit, start and end, and the fleet as the last frame shows it. The conversion
//! from the model's types is pure (`Walk` hears one frame at a time; `from_model::fleet` serves
//! the live and the demo fleet too, and `job` shapes the demo's arrivals as a recording's
//! workloads are); `jobs_from_recording` walks an opened recording's frames (the command opens
//! it).
//!
//! Per workload id: submit = `submitted_at` (else when it was first seen); start =
//! `started_at` (else the first frame that shows it running); end = the last frame that shows
//! it running (running at the last frame: cut there); duration = end − start. Workloads never
//! seen running have no duration: left out and counted. gpus, share and memory from its
//! `Request`: a MIG profile its compute share (`milli_of_slices`) and memory; shares of a
//! card `count/replicas` of it where the card's replicas are known (Slurm `mps` units: of
//! 100), else `UNKNOWN_SHARE_MILLI` a share; whole cards otherwise. Class from `WorkloadKind`, priority
//! as recorded; the real use from its recorded mean activity, else all of the request.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};

use crate::model::{self, Request, ShareUnit, Workload, WorkloadKind};
use crate::record::reader::Player;
use crate::simulate::fleet::Fleet;
use crate::simulate::from_model;
use crate::simulate::input::KEPT_ERRORS;
use crate::simulate::job::{Class, Job, milli_of_slices};

/// The share of a card one share is taken for where the card's replicas are unknown (a
/// quarter: the time-slicing default of four replicas).
pub const UNKNOWN_SHARE_MILLI: u32 = 250;

/// Slurm `mps` units a card has by convention, where the card does not say.
pub const MPS_UNITS_PER_CARD: u32 = 100;

/// What a recording's demand left out or guessed: the notes a run prints above its table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Notes {
    /// Frames read, and frames that could not be decoded (skipped; their errors in
    /// `first_errors`).
    pub frames: u64,
    pub unreadable_frames: u64,
    /// Workloads that never asked for or held a GPU (left out).
    pub without_gpu: u64,
    /// Workloads never seen running (pending only, or ended between frames): their duration
    /// is unknown, so they are left out.
    pub never_started: u64,
    /// Workloads still running at the last frame: cut there.
    pub cut_at_end: u64,
    /// Workloads on shares of cards whose replicas are unknown (`UNKNOWN_SHARE_MILLI` each).
    pub shares_guessed: u64,
    /// Workloads asking for more than one MIG instance or share: taken as one (the engine's
    /// shares are of one card).
    pub taken_as_one: u64,
    /// Workloads whose MIG profile no catalog model has (left out).
    pub unknown_profile: u64,
    /// The first few problems, each naming the frame or workload.
    pub first_errors: Vec<String>,
    /// The wall-clock time of second zero: the earliest submit of the jobs kept.
    pub start: Option<DateTime<Utc>>,
}

impl Notes {
    fn problem(&mut self, text: String) {
        if self.first_errors.len() < KEPT_ERRORS {
            self.first_errors.push(text);
        }
    }
}

/// One workload as the frames showed it.
#[derive(Debug, Clone)]
struct Track {
    id: String,
    kind: WorkloadKind,
    priority: Option<i64>,
    /// The last request that asked for a GPU.
    request: Option<Request>,
    submitted: Option<DateTime<Utc>>,
    first_seen: DateTime<Utc>,
    started: Option<DateTime<Utc>>,
    last_active: Option<DateTime<Utc>>,
    act_sum: f64,
    act_n: u32,
    /// The most cards it was seen holding, the replicas of a shared card and the model of a
    /// card it held.
    held: u32,
    replicas: Option<u32>,
    card_model: Option<String>,
}

/// The frames of a recording, heard one at a time, as a demand.
#[derive(Debug, Default)]
pub struct Walk {
    tracks: Vec<Track>,
    by_id: HashMap<String, usize>,
    /// Card models the frames showed, as the simulated fleet names them, and as they wrote
    /// them.
    models: BTreeSet<Box<str>>,
    raw_models: BTreeSet<String>,
    last_at: Option<DateTime<Utc>>,
    pub notes: Notes,
}

impl Walk {
    pub fn new() -> Self {
        Self::default()
    }

    /// One frame: the fleet as it was at `at`.
    pub fn frame(&mut self, at: DateTime<Utc>, fleet: &model::Fleet) {
        self.notes.frames += 1;
        self.last_at = Some(at);
        for (_, c) in fleet.cards() {
            if !self.raw_models.contains(&c.model) {
                self.raw_models.insert(c.model.clone());
                self.models.insert(from_model::model_name(&c.model));
            }
        }
        for w in &fleet.workloads {
            let i = match self.by_id.get(&w.id) {
                Some(&i) => i,
                None => {
                    self.by_id.insert(w.id.clone(), self.tracks.len());
                    self.tracks.push(Track {
                        id: w.id.clone(),
                        kind: w.kind,
                        priority: None,
                        request: None,
                        submitted: None,
                        first_seen: at,
                        started: None,
                        last_active: None,
                        act_sum: 0.0,
                        act_n: 0,
                        held: 0,
                        replicas: None,
                        card_model: None,
                    });
                    self.tracks.len() - 1
                }
            };
            see(&mut self.tracks[i], w, at, fleet);
        }
    }

    /// The jobs, in the order the workloads were first seen, with times from the earliest
    /// submit; and the notes.
    pub fn finish(self) -> (Vec<Job>, Notes) {
        let Walk { tracks, models, mut notes, last_at, .. } = self;
        let mut kept: Vec<(DateTime<Utc>, Job)> = Vec::new();
        for t in tracks {
            let Some(request) = t
                .request
                .as_ref()
                .filter(|r| r.wants_gpu())
                .cloned()
                .or_else(|| (t.held > 0).then(|| Request { gpus: Some(t.held), ..Request::default() }))
            else {
                notes.without_gpu += 1;
                continue;
            };
            let (Some(start), Some(end)) = (t.started, t.last_active) else {
                notes.never_started += 1;
                continue;
            };
            if Some(end) == last_at {
                notes.cut_at_end += 1;
            }
            let on = OnCard { model: t.card_model.as_deref(), replicas: t.replicas, held: t.held };
            let Some((gpus, milli, mem_mib)) = shape(&t.id, &request, on, &mut notes) else { continue };
            let submit = t.submitted.unwrap_or(t.first_seen).min(start);
            let wanted = request.model.as_deref().map(from_model::model_name).filter(|m| models.contains(m));
            let use_milli = if t.act_n > 0 {
                (t.act_sum / f64::from(t.act_n) * 10.0).round().clamp(0.0, 1000.0) as u32
            } else {
                1000
            };
            kept.push((
                submit,
                Job {
                    name: t.id.as_str().into(),
                    submit: 0,
                    duration: (end - start).num_seconds().max(1),
                    gpus,
                    milli,
                    mem_mib,
                    class: from_model::class(t.kind),
                    priority: from_model::priority(t.priority),
                    checkpoint_s: None,
                    cpu_milli: 0,
                    host_mem_mib: request.host_memory_mib.unwrap_or(0),
                    models: wanted.into_iter().collect(),
                    use_milli,
                },
            ));
        }
        let zero = kept.iter().map(|(s, _)| *s).min();
        notes.start = zero;
        let jobs = kept
            .into_iter()
            .map(|(s, mut j)| {
                j.submit = zero.map_or(0, |z| (s - z).num_seconds());
                j
            })
            .collect();
        (jobs, notes)
    }
}

/// What one frame says of a workload.
fn see(t: &mut Track, w: &Workload, at: DateTime<Utc>, fleet: &model::Fleet) {
    t.kind = w.kind;
    if w.priority.is_some() {
        t.priority = w.priority;
    }
    if w.request.wants_gpu() {
        t.request = Some(w.request.clone());
    }
    if let Some(s) = w.submitted_at {
        t.submitted = Some(t.submitted.map_or(s, |x| x.min(s)));
    }
    if !w.state.is_active() {
        return;
    }
    let began = w.started_at.map_or(at, |s| s.min(at));
    t.started = Some(t.started.map_or(began, |x| x.min(began)));
    t.last_active = Some(at);
    if let Some(m) = w.activity.and_then(|a| a.mean_pct).filter(|m| m.is_finite()) {
        t.act_sum += m.clamp(0.0, 100.0);
        t.act_n += 1;
    }
    t.held = t.held.max(w.cards.len().min(u32::MAX as usize) as u32);
    for r in &w.cards {
        if let Some(c) = fleet.card(r) {
            t.card_model.get_or_insert_with(|| c.model.clone());
            if let Some(n) = c.sharing.replicas.filter(|&n| n > 0) {
                t.replicas = Some(n);
            }
        }
    }
}

/// What the cards a workload ran on say: their model, their replicas per card (shared
/// cards), how many it held.
#[derive(Debug, Clone, Copy, Default)]
pub struct OnCard<'a> {
    pub model: Option<&'a str>,
    pub replicas: Option<u32>,
    pub held: u32,
}

/// Cards, share of each and memory per card workload `id` asked for with `r`; `None`
/// (noted) where its MIG profile is in no catalog model. Guesses are counted in `notes`.
pub fn shape(id: &str, r: &Request, on: OnCard, notes: &mut Notes) -> Option<(u32, u32, u64)> {
    if let Some(p) = &r.mig_profile {
        let on_card = on.model.and_then(crate::model::mig::lookup).and_then(|gm| {
            gm.profile(p).map(|x| (milli_of_slices(x.compute_slices, gm.compute_slices), x.planning_mib()))
        });
        let Some((milli, mem)) = on_card.or_else(|| super::csv::mig_profile(p)) else {
            notes.unknown_profile += 1;
            notes.problem(format!("workload {id}: MIG profile {p:?} is in no model of the catalog (left out)"));
            return None;
        };
        if r.gpus.is_some_and(|n| n > 1) {
            notes.taken_as_one += 1;
        }
        return Some((1, milli, mem));
    }
    if let Some(s) = r.shares {
        if s.count > 1 && on.replicas.is_none() && s.unit == ShareUnit::Replica {
            notes.taken_as_one += 1;
        }
        let of = |n: u32| (u64::from(s.count.max(1)) * 1000 / u64::from(n.max(1))).clamp(1, 1000) as u32;
        let milli = match (on.replicas, s.unit) {
            (Some(n), _) => of(n),
            (None, ShareUnit::Mps) => of(MPS_UNITS_PER_CARD),
            (None, ShareUnit::Replica) => {
                notes.shares_guessed += 1;
                UNKNOWN_SHARE_MILLI
            }
        };
        return Some((1, milli, 0));
    }
    let gpus = r.gpus.filter(|&n| n > 0).unwrap_or(on.held).clamp(1, super::openb::MAX_GPUS);
    Some((gpus, 1000, 0))
}

/// What a workload asks as a job arriving at `submit` (seconds) for `duration` seconds,
/// training checkpointing every half hour; `None` where it asks for no GPU.
pub fn job(w: &Workload, submit: i64, duration: i64, use_pct: Option<f64>) -> Option<Job> {
    if !w.request.wants_gpu() {
        return None;
    }
    let (gpus, milli, mem_mib) = shape(&w.id, &w.request, OnCard::default(), &mut Notes::default())?;
    let mut j = Job::new(&w.id, submit, duration, gpus);
    (j.milli, j.mem_mib) = (milli, mem_mib);
    if let Some(m) = &w.request.model {
        j.models = vec![from_model::model_name(m)];
    }
    j.class = from_model::class(w.kind);
    j.priority = from_model::priority(w.priority);
    j.checkpoint_s = (j.class == Class::Training).then_some(from_model::CHECKPOINT_S);
    j.use_milli = use_pct.map_or(1000, |p| (p.clamp(0.0, 100.0) * 10.0).round() as u32);
    Some(j)
}

/// The jobs of an opened recording, frame by frame; frames that cannot be decoded are
/// counted and named in the notes.
pub fn jobs_from_recording(player: &mut Player) -> (Vec<Job>, Notes) {
    let mut walk = Walk::new();
    for i in 0..player.rec.frames().len() {
        match player.frame(i) {
            Ok(f) => {
                let at = f.at;
                walk.frame(at, &f.fleet);
            }
            Err(e) => {
                walk.notes.unreadable_frames += 1;
                walk.notes.problem(format!("frame {i}: {e}"));
            }
        }
    }
    walk.finish()
}

/// Why a recording gives no fleet.
#[derive(Debug, thiserror::Error)]
pub enum NoFleet {
    #[error("the recording has no frames")]
    NoFrames,
    /// No frame could be read; the error of the first one tried (the last frame).
    #[error("frame {index}: {source}")]
    Unreadable { index: usize, source: crate::record::reader::ReplayError },
}

/// The fleet as the recording's last readable frame shows it.
pub fn fleet_from_recording(player: &mut Player) -> Result<Fleet, NoFleet> {
    let n = player.rec.frames().len();
    let mut last = NoFleet::NoFrames;
    for i in (0..n).rev() {
        match player.frame(i) {
            Ok(f) => return Ok(crate::simulate::from_model::fleet(&f.fleet)),
            Err(source) => last = NoFleet::Unreadable { index: i, source },
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Card, CardRef, Shares, SharingMode, WorkloadState};
    use crate::simulate::Class;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_780_000_000 + s, 0).single().unwrap_or_default()
    }

    fn card(index: u32, model: &str) -> Card {
        Card { index, model: model.into(), ..Card::default() }
    }

    fn fleet(workloads: Vec<Workload>) -> model::Fleet {
        let mut n = model::Node::new("n1");
        n.cards = (0..4).map(|i| card(i, "NVIDIA A100-SXM4-80GB")).collect();
        n.cards[3].sharing.mode = Some(SharingMode::TimeSliced);
        n.cards[3].sharing.replicas = Some(4);
        let mut f = model::Fleet { nodes: vec![n], workloads, ..model::Fleet::default() };
        f.index_workloads();
        f
    }

    fn w(id: &str, kind: WorkloadKind, state: WorkloadState) -> Workload {
        let mut w = Workload::new(id, id, kind, state);
        w.submitted_at = Some(t(0));
        w
    }

    #[test]
    fn workloads_become_jobs_from_submit_to_the_last_frame_they_ran() {
        let mut train = w("sim:1", WorkloadKind::Training, WorkloadState::Running);
        train.request.gpus = Some(2);
        train.started_at = Some(t(60));
        train.priority = Some(7);
        let mut serve = w("sim:2", WorkloadKind::Inference, WorkloadState::Running);
        serve.submitted_at = Some(t(100));
        serve.request.shares = Some(Shares { unit: ShareUnit::Replica, count: 1 });
        serve.cards = vec![CardRef::new("n1", 3)];
        serve.started_at = Some(t(120));
        let mut mig = w("sim:3", WorkloadKind::Other, WorkloadState::Running);
        mig.request.mig_profile = Some("3g.40gb".into());
        mig.started_at = Some(t(0));
        let waiting = {
            let mut x = w("sim:4", WorkloadKind::Training, WorkloadState::Pending);
            x.request.gpus = Some(1);
            x
        };
        let cpu = w("sim:5", WorkloadKind::Other, WorkloadState::Running);

        let mut walk = Walk::new();
        walk.frame(t(120), &fleet(vec![train.clone(), serve.clone(), mig.clone(), waiting.clone(), cpu.clone()]));
        let mut done = train.clone();
        done.state = WorkloadState::Completed;
        walk.frame(t(600), &fleet(vec![train, serve.clone(), mig, waiting.clone(), cpu.clone()]));
        walk.frame(t(900), &fleet(vec![done, serve, waiting, cpu]));
        let (jobs, notes) = walk.finish();

        assert_eq!((notes.frames, notes.never_started, notes.without_gpu, notes.cut_at_end), (3, 1, 1, 1));
        assert_eq!(notes.start, Some(t(0)));
        let by: Vec<(&str, i64, i64, u32, u32, Class)> =
            jobs.iter().map(|j| (&*j.name, j.submit, j.duration, j.gpus, j.milli, j.class)).collect();
        assert_eq!(
            by,
            vec![
                ("sim:1", 0, 540, 2, 1000, Class::Training),
                ("sim:2", 100, 780, 1, 250, Class::Inference),
                ("sim:3", 0, 600, 1, 428, Class::Other),
            ]
        );
        assert_eq!(jobs[0].priority, 7);
        assert!(jobs[2].mem_mib >= 39 * 1024, "{}", jobs[2].mem_mib);
        assert_eq!(notes.shares_guessed, 0, "the card said four replicas");
    }

    #[test]
    fn the_model_fleet_keeps_layouts_replicas_and_splits_mixed_nodes() {
        let mut f = fleet(Vec::new());
        f.nodes[0].cards[0].mig = model::MigState::from_layout("A100-80GB", "3g.40gb,3g.40gb");
        let mut other = model::Node::new("n2");
        other.cards = vec![card(0, "NVIDIA L4"), card(1, "NVIDIA L4"), card(2, "Tesla T4")];
        f.nodes.push(other);
        f.nodes.push(model::Node::new("empty"));
        let s = crate::simulate::from_model::fleet(&f);
        let names: Vec<&str> = s.nodes.iter().map(|n| &*n.name).collect();
        assert_eq!(names, vec!["n1", "n2/L4", "n2/T4"]);
        assert_eq!(s.gpus(), 7);
        let models: Vec<&str> = s.models.iter().map(|m| &*m.name).collect();
        assert_eq!(models, vec!["A100-80GB", "L4", "T4"]);
        let n1 = &s.nodes[0];
        assert_eq!(n1.layouts.len(), 4);
        assert_eq!(n1.layouts[0].as_ref().map(Vec::len), Some(2));
        assert!(n1.layouts[1].is_none());
        assert_eq!(n1.replicas, Some(4));
        assert!(s.nodes[1].layouts.is_empty() && s.nodes[1].replicas.is_none());
    }
}
