//! The sharing policies and placements a what-if compares, and the settings they run under.

use serde::Serialize;

/// How cards are shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Whole cards only: a fractional request holds a whole GPU (the static world).
    Exclusive,
    /// MIG layouts as they are (or as `--layout` sets them, or sized to the demand's mix);
    /// a request gets the smallest free instance that holds its compute and memory.
    Mig,
    /// Time-slicing (or MPS): `replicas` a card, fractional requests packed by compute and
    /// memory; no isolation.
    Share,
    /// The config's `[[schedule]]` windows: layouts by time of day, changed on idle cards.
    Schedule,
    /// Every interval the planner lays idle cards out for the waiting demand, and training
    /// past the minimum runtime is preempted for waiting inference.
    Adaptive,
    /// DynamicMIG as NVIDIA's DRA driver does it: a share of a card gets the smallest MIG
    /// profile that holds it, at a placement the card's counters allow, created when the job
    /// starts and destroyed when it ends; whole-card work only on cards with nothing on them.
    Dynamic,
}

impl Policy {
    pub const ALL: [Policy; 6] =
        [Policy::Exclusive, Policy::Mig, Policy::Share, Policy::Schedule, Policy::Adaptive, Policy::Dynamic];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exclusive => "exclusive",
            Self::Mig => "mig",
            Self::Share => "share",
            Self::Schedule => "schedule",
            Self::Adaptive => "adaptive",
            Self::Dynamic => "dynamic",
        }
    }

    /// Every policy's name, as a usage message lists them: `exclusive, mig, …, dynamic`.
    pub fn names() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str().eq_ignore_ascii_case(text.trim()))
    }

    /// Every request holds whole cards under this policy on `fleet`: always under
    /// `exclusive`; under a MIG policy where no card can be cut (no MIG-capable model) and
    /// none is time-sliced, which makes it `exclusive` exactly.
    pub fn whole_only(self, fleet: &super::Fleet) -> bool {
        match self {
            Self::Exclusive => true,
            Self::Share => false,
            // The models the nodes have (a fleet cut from a bigger list keeps its model list).
            Self::Mig | Self::Schedule | Self::Adaptive | Self::Dynamic => !fleet
                .nodes
                .iter()
                .any(|n| fleet.models[n.model as usize].mig.is_some() || n.replicas.is_some_and(|r| r > 1)),
        }
    }

    /// Cards are cut into MIG instances under this policy.
    pub fn uses_mig(self) -> bool {
        matches!(self, Self::Mig | Self::Schedule | Self::Adaptive | Self::Dynamic)
    }

    /// Cards start from a MIG layout (the fleet's, `--layout`'s, or one sized to the mix) and
    /// keep it until the policy changes it; `dynamic` lays cards out per job instead.
    pub fn static_layouts(self) -> bool {
        matches!(self, Self::Mig | Self::Schedule | Self::Adaptive)
    }
}

/// Which node and card a job goes to, among those it fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// The first node (in fleet order) and card that fit.
    FirstFit,
    /// The node and card left with the least free GPU capacity.
    BestFit,
    /// tessera's: the node and card whose fragmentation grows least: the expected GPU
    /// capacity the demand's mix of requests could not use (Weng et al., ATC '23, "Beware of
    /// Fragmentation"), GPU models included; in a packing, the paper's measure compared
    /// exactly, ties to the fullest node (docs/simulate.md).
    FragAware,
    /// Packing only: the paper's FGD as its simulator scores it.
    Fgd,
    /// Packing only: the paper simulator's BestFit (least CPU and GPU left on the node).
    #[serde(rename = "paper-bestfit")]
    PaperBestFit,
    /// Packing only: the paper simulator's DotProd (least free·asked).
    #[serde(rename = "paper-dotprod")]
    PaperDotProd,
}

impl Placement {
    pub const ALL: [Placement; 6] = [
        Placement::FirstFit,
        Placement::BestFit,
        Placement::FragAware,
        Placement::Fgd,
        Placement::PaperBestFit,
        Placement::PaperDotProd,
    ];
    /// What a replay compares.
    pub const REPLAY: [Placement; 3] = [Placement::FirstFit, Placement::BestFit, Placement::FragAware];
    /// What a packing compares by default: the paper's and tessera's.
    pub const PACKING: [Placement; 5] =
        [Placement::FirstFit, Placement::PaperBestFit, Placement::PaperDotProd, Placement::Fgd, Placement::FragAware];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::FirstFit => "first-fit",
            Self::BestFit => "best-fit",
            Self::FragAware => "frag-aware",
            Self::Fgd => "fgd",
            Self::PaperBestFit => "paper-bestfit",
            Self::PaperDotProd => "paper-dotprod",
        }
    }

    /// The paper's placements run only in a packing.
    pub fn packing_only(self) -> bool {
        matches!(self, Self::Fgd | Self::PaperBestFit | Self::PaperDotProd)
    }

    /// Every policy's name, as a usage message lists them: `exclusive, mig, …, adaptive`.
    pub fn names() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str().eq_ignore_ascii_case(text.trim()))
    }
}

/// A `[[schedule]]` window reduced to what the engine needs: from which second of the day to
/// which (end ≤ start crosses midnight, UTC offset applied by the caller), the layout for the
/// cards of one model.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub model: Option<Box<str>>,
    /// Node name globs (`*`, `?`) the window covers; empty: every node.
    pub nodes: Vec<String>,
    pub start_s: u32,
    pub end_s: u32,
    /// `None`: whole cards (MIG off).
    pub layout: Option<Vec<crate::model::mig::Placed>>,
}

impl Window {
    /// Whether second-of-day `s` lies in the window.
    pub fn covers(&self, s: u32) -> bool {
        if self.start_s < self.end_s {
            (self.start_s..self.end_s).contains(&s)
        } else {
            s >= self.start_s || s < self.end_s
        }
    }
}

/// What a run is told beyond its demand and fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub placement: Placement,
    /// `dynamic`'s placement: first-fit, as the Kubernetes scheduler allocates a claim (no
    /// scoring), unless `--placement` names one (then every policy takes it). Where no card
    /// of the fleet can do MIG, `dynamic` is `exclusive` and takes `placement`.
    pub dynamic_placement: Placement,
    /// Replicas per card under `share` where the fleet does not say.
    pub replicas: u32,
    /// `[policy] min_runtime`: training is not preempted before it has run this long.
    pub min_runtime_s: i64,
    /// How long a MIG change keeps a card out of service.
    pub reconfigure_s: i64,
    /// `adaptive`: how often the planner looks, and the most changes it makes an hour.
    pub interval_s: i64,
    pub max_changes_per_hour: u32,
    /// Reloading a checkpoint after a preemption: added to the job's run.
    pub restore_s: i64,
    /// `schedule`: the windows; their lead (no new work on a card this long before its
    /// change) and the least time between two changes of one card.
    pub windows: Vec<Window>,
    pub lead_s: i64,
    pub min_hold_s: i64,
    /// Where the demand's second 0 falls in the day (UTC seconds), for the windows.
    pub day_offset_s: i64,
    /// Stop here (seconds of demand time); jobs still waiting never started.
    pub horizon_s: Option<i64>,
    /// Price of one card-hour per model name (`[advisor.prices]`).
    pub prices: Vec<(String, f64)>,
    /// Points of the timeline kept for the JSON and the picture.
    pub timeline_points: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            placement: Placement::BestFit,
            dynamic_placement: Placement::FirstFit,
            replicas: 4,
            min_runtime_s: 30 * 60,
            reconfigure_s: 60,
            interval_s: 5 * 60,
            max_changes_per_hour: 30,
            restore_s: 120,
            windows: Vec::new(),
            lead_s: 0,
            min_hold_s: 0,
            day_offset_s: 0,
            horizon_s: None,
            prices: Vec::new(),
            timeline_points: 400,
        }
    }
}

impl Settings {
    /// The placement `policy` runs with on `fleet`.
    pub fn placement_for(&self, policy: Policy, fleet: &super::Fleet) -> Placement {
        if policy == Policy::Dynamic && !policy.whole_only(fleet) { self.dynamic_placement } else { self.placement }
    }

    pub fn price(&self, model: &str) -> Option<f64> {
        self.prices.iter().find(|(m, _)| m.eq_ignore_ascii_case(model)).map(|(_, p)| *p)
    }
}
