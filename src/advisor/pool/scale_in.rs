//! Scale-in: a pool whose mean activity over the last hour is under the target, with how many
//! cards the present work needs at that target and how many could be released, less the cards
//! waiting work could use.

use std::collections::BTreeMap;

use crate::advisor::{Context, Finding, Kind, Severity, Subject, Suggestion, minutes};
use crate::model::activity::HOUR_MIN;
use crate::model::capacity::usable;
use crate::model::mig::GpuModel;
use crate::model::mig::catalog::model_key;
use crate::model::{Card, Fleet, Node, Resource, ShareUnit, WorkloadState};

/// One pool: its usable cards, their activity summed over the last hour, whether every
/// holder is covered, and what its cards serve.
struct Pool {
    cards: usize,
    sum: f64,
    known: bool,
    serves: Serves,
}

/// What a pool's usable cards serve, as free capacity counts it (`model::capacity::Free`,
/// `card_would_serve`): a card that is not MIG-enabled and not shared (or shared by a
/// scheduler that also hands it out whole) serves whole-card requests of its model or of any;
/// a card of a MIG-capable model serves that model's profiles (the layout planner lays an idle
/// card out anew); a shared card serves shares in its unit, of its model or of any.
#[derive(Default)]
struct Serves {
    whole: bool,
    mig: Option<&'static GpuModel>,
    /// The share units, with the most replicas one card of the pool has in each.
    shared: BTreeMap<ShareUnit, u32>,
}

impl Serves {
    /// The part of one card a unit of `resource` takes on this pool (a whole card: 1; a MIG
    /// instance: its memory slices over the card's; a share: one of the card's replicas), or
    /// `None` where the pool's cards do not serve it.
    fn card_share(&self, key: &str, resource: &Resource) -> Option<f64> {
        let mine = |m: &Option<String>| m.as_deref().is_none_or(|m| m == key);
        match resource {
            Resource::WholeCard { model } => (self.whole && mine(model)).then_some(1.0),
            Resource::MigInstance { profile } => {
                let m = self.mig?;
                let p = m.profile(profile)?;
                Some(f64::from(p.memory_slices) / f64::from(m.memory_slices.max(1)))
            }
            Resource::Shared { unit, model } => {
                let replicas = self.shared.get(unit).filter(|_| mine(model))?;
                Some(1.0 / f64::from((*replicas).max(1)))
            }
        }
    }
}

/// What a waiting request is for, in words (`whole cards`, `MIG 1g.10gb`, `replicas`), ranked
/// whole cards first.
fn wanted(resource: &Resource) -> (u8, String) {
    match resource {
        Resource::WholeCard { .. } => (0, "whole cards".into()),
        Resource::MigInstance { profile } => (1, format!("MIG {profile}")),
        Resource::Shared { unit, .. } => (2, unit.plural().into()),
    }
}

/// Runs after `scale_out`: a pool whose cards serve work with a scale-out finding has none,
/// and that finding says so.
pub(in crate::advisor) fn scale_in(fleet: &Fleet, cx: &Context, target_pct: f64, out: &mut Vec<Finding>) {
    let pools = pools(fleet);
    // What the queue asks for: capacity that waiting work could use is not for release.
    let pending: Vec<(Resource, u64)> =
        fleet.workloads.iter().filter(|w| w.state == WorkloadState::Pending).map(|w| w.request.asks()).collect();
    for (model, pool) in pools {
        let Some(slack) = pool.slack(target_pct) else { continue };
        let waiting = Waiting::served_by(&pool.serves, &model, &pending);
        let kept = waiting.cards_kept(slack.spare);
        let text = waiting_text(&waiting.jobs);
        // Work it serves has a scale-out: the pool has no cards to give, and the scale-out
        // says why no scale-in stands beside it.
        let withheld = withheld_for_scale_out(out, &waiting.served, slack.spare, &model, &text);
        let left = slack.spare - kept;
        if withheld || left == 0 {
            continue;
        }
        out.push(finding(cx, model, &slack, target_pct, kept, left, &text));
    }
}

/// Per model: cards, activity summed over the last hour (a whole card: its holder's mean; a
/// MIG card: its instances' holders' means weighted by slices; idle parts add 0), and
/// whether every holder is covered, its hour or at least 30 minutes of it (else: no
/// activity data, no finding).
fn pools(fleet: &Fleet) -> BTreeMap<String, Pool> {
    let mut pools: BTreeMap<String, Pool> = BTreeMap::new();
    for (n, c) in fleet.cards().filter(|(n, c)| usable(n, c)) {
        let e = pools.entry(model_key(&c.model)).or_insert_with(|| Pool {
            cards: 0,
            sum: 0.0,
            known: true,
            serves: Serves::default(),
        });
        e.add(fleet, n, c);
    }
    pools
}

/// The mean activity of workload `id` over the last hour; work younger than an hour counts its
/// covered 30-minute mean.
fn hour_mean(fleet: &Fleet, id: &str) -> Option<f64> {
    let a = fleet.workload(id).and_then(|w| w.activity)?;
    a.mean_1h_pct.or(a.mean_pct.filter(|_| a.window_covered()))
}

impl Pool {
    /// Counts card `c` of node `n` in the pool: what it serves, and its holders' activity.
    fn add(&mut self, fleet: &Fleet, n: &Node, c: &Card) {
        self.cards += 1;
        self.serves.add(n, c);
        // Busy with nobody to ask: the pool's activity is unknown.
        if c.in_use_by_unknown() {
            self.known = false;
            return;
        }
        if c.mig.enabled {
            self.add_instances(fleet, c);
            return;
        }
        let holders: Vec<&str> = c.holders().collect();
        if holders.is_empty() {
            return;
        }
        self.known &= holders.iter().all(|h| hour_mean(fleet, h).is_some());
        self.sum += holders.iter().filter_map(|h| hour_mean(fleet, h)).fold(0.0, f64::max);
    }

    /// Adds the activity of MIG card `c`'s held instances, each weighing its share of the
    /// card's compute (a 1g of seven is 1/7).
    fn add_instances(&mut self, fleet: &Fleet, c: &Card) {
        let Some(model) = c.gpu_model() else {
            self.known = false;
            return;
        };
        let compute = f64::from(model.profiles.iter().map(|p| p.compute_slices).max().unwrap_or(1).max(1));
        for i in c.mig.instances.iter().filter(|i| !i.workloads.is_empty()) {
            let share = model.profile(&i.profile).map_or(0.0, |p| f64::from(p.compute_slices)) / compute;
            let means: Vec<Option<f64>> = i.workloads.iter().map(|h| hour_mean(fleet, h)).collect();
            if means.iter().any(Option::is_none) {
                self.known = false;
            }
            self.sum += means.into_iter().flatten().fold(0.0, f64::max) * share;
        }
    }

    /// The pool's activity against `target_pct`, where it has cards to spare; `None` where its
    /// activity is unknown, it has fewer than two cards, it is busy enough, or its work needs
    /// every card.
    fn slack(&self, target_pct: f64) -> Option<Slack> {
        let Self { cards, sum, known, .. } = *self;
        if !known || cards < 2 {
            return None;
        }
        let mean = sum / cards as f64;
        if mean >= target_pct {
            return None;
        }
        let needed = ((sum / target_pct.max(1.0)).ceil() as usize).max(1);
        let spare = cards.saturating_sub(needed);
        (spare > 0).then_some(Slack { cards, mean, needed, spare })
    }
}

impl Serves {
    /// Adds what card `c` of node `n` serves, busy or not: as `Free::compute` counts a card.
    fn add(&mut self, n: &Node, c: &Card) {
        let shared = c.sharing.replicas.is_some() && (n.capacity.is_empty() || c.sharing.replicas_used.is_none());
        self.whole |= !c.mig.enabled && (!shared || n.capacity.iter().any(|x| x.whole_requests));
        self.mig = self.mig.or(c.gpu_model());
        if let (Some(unit), Some(replicas)) = (c.sharing.unit, c.sharing.replicas) {
            let most = self.shared.entry(unit).or_default();
            *most = (*most).max(replicas);
        }
    }
}

/// A pool with cards to spare: its usable cards, their mean activity, the cards its work needs
/// at the target and those beyond them.
struct Slack {
    cards: usize,
    mean: f64,
    needed: usize,
    spare: usize,
}

/// The waiting work a pool's cards serve: the jobs by what they want, the requests as findings
/// name them, and the cards they could use.
struct Waiting {
    jobs: BTreeMap<(u8, String), usize>,
    served: Vec<String>,
    could_use: f64,
}

impl Waiting {
    /// The requests of `pending` that a pool of `model` serving `serves` could take.
    fn served_by(serves: &Serves, model: &str, pending: &[(Resource, u64)]) -> Self {
        let mut w = Self { jobs: BTreeMap::new(), served: Vec::new(), could_use: 0.0 };
        for (r, n) in pending {
            let Some(share) = serves.card_share(model, r) else { continue };
            w.could_use += share * *n as f64;
            *w.jobs.entry(wanted(r)).or_default() += 1;
            w.served.push(r.to_string());
        }
        w
    }

    /// The cards kept for this work, at most `spare` (a hair under a whole card is a card:
    /// float sums of slices and replicas).
    fn cards_kept(&self, spare: usize) -> usize {
        ((self.could_use - 1e-9).ceil().max(0.0) as usize).min(spare)
    }
}

/// Says on each scale-out for work in `served` that the scale-in of `spare` cards of `model`
/// is withheld; whether any was.
fn withheld_for_scale_out(out: &mut [Finding], served: &[String], spare: usize, model: &str, waiting: &str) -> bool {
    let mut withheld = false;
    for f in out.iter_mut().filter(|f| f.kind == Kind::ScaleOut) {
        if matches!(&f.subject, Subject::Resource { resource } if served.contains(resource)) {
            f.evidence.push(format!("scale-in of {spare} {model} withheld: {waiting}"));
            withheld = true;
        }
    }
    withheld
}

/// The scale-in finding for the pool of `model`: `left` cards to release, `kept` kept for the
/// waiting work `waiting` says.
fn finding(
    cx: &Context,
    model: String,
    slack: &Slack,
    target_pct: f64,
    kept: usize,
    left: usize,
    waiting: &str,
) -> Finding {
    let Slack { cards, mean, needed, .. } = *slack;
    let mut evidence = vec![format!(
        "mean activity {mean:.0} % over the last {} (30m for work younger than that) across {cards} usable cards, MIG instances weighted by their share of compute (target {target_pct:.0} %)",
        minutes((HOUR_MIN * 60) as u64)
    )];
    if kept > 0 {
        evidence
            .push(format!("{} kept for waiting work: {waiting}", crate::units::count(kept as u64, "card", "cards")));
    }
    let gpu_hours = left as f64 * 24.0;
    Finding {
        kind: Kind::ScaleIn,
        severity: Severity::Info,
        subject: Subject::Pool { model: model.clone() },
        title: format!("{model} cards average {mean:.0} %: {needed} of {cards} would carry the work"),
        evidence,
        gpu_hours_per_day: gpu_hours,
        cost_per_day: cx.money(Some(&model), gpu_hours),
        suggestion: Suggestion::Words {
            text: format!(
                "release or lend {}, or pack the work onto {needed} (scale-in)",
                crate::units::count(left as u64, &format!("{model} card"), &format!("{model} cards"))
            ),
        },
        cards: Vec::new(),
    }
}

/// Waiting jobs by what they want: `2 jobs wait for whole cards, 1 for MIG 1g.10gb`.
fn waiting_text(jobs: &BTreeMap<(u8, String), usize>) -> String {
    let mut parts = jobs.iter().enumerate().map(|(i, ((_, what), n))| {
        if i == 0 {
            format!("{} for {what}", crate::units::count(*n as u64, "job waits", "jobs wait"))
        } else {
            format!("{n} for {what}")
        }
    });
    let first = parts.next().unwrap_or_default();
    parts.fold(first, |acc, p| acc + ", " + &p)
}
