//! Every parser of outside input behind one door each: bytes in; nothing may panic, loop or
//! grow without bound, and what comes out keeps the invariants the screen relies on. The fuzz
//! targets (`fuzz/fuzz_targets/`, by hand with a nightly toolchain) and the property-test
//! campaign (`tests/inputs.rs`, in CI) feed the same doors, so a crash found by one is a
//! regression test in the other. The demand inputs of `tessera simulate` (the Alibaba trace,
//! the demand CSV) return their invariants' violation as an error.

use crate::model::Node;

/// What a door made of its input, for the invariants the callers check.
#[derive(Debug, Default)]
pub struct Seen {
    pub nodes: Vec<Node>,
    pub workloads: usize,
}

/// An invariant a parser's output broke: a bug in the mapping, named with what broke it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Violation {
    #[error("{card}: memory used {used} MiB above its total {total} MiB")]
    MemoryAboveTotal { card: String, used: u64, total: u64 },
    #[error("{card}: utilisation {pct} %")]
    Utilisation { card: String, pct: f64 },
    #[error("{card}: instance {profile} at {start}+{size} past slice 8")]
    PastTheCard { card: String, profile: String, start: u8, size: u8 },
    #[error("{jobs} jobs + {without_gpu} without GPU + {skipped} skipped is not {rows} rows")]
    Rows { jobs: usize, without_gpu: u64, skipped: u64, rows: u64 },
    #[error("{kept} errors kept of {skipped} skipped")]
    Kept { kept: usize, skipped: u64 },
    /// A job outside the jobs' invariants, as it reads (`{:?}`).
    #[error("job {name}: {job}")]
    Job { name: String, job: String },
    #[error("a file with no bad line read differently with skip_bad")]
    SkipBadDiffers,
    #[error("node {name}: {gpus} GPUs of model {model}")]
    Node { name: String, gpus: u32, model: u16 },
}

/// The checks every mapped fleet fragment must pass, whatever the input: memory used never
/// above the total where both are known, utilisation a percentage, MIG slices inside the
/// card. A violation is a bug in the mapping (the input cannot be trusted; the mapping must
/// not pass it on).
pub fn check(seen: &Seen) -> Result<(), Violation> {
    for n in &seen.nodes {
        for c in &n.cards {
            let at = || format!("{}/{}", n.name, c.index);
            if let (Some(u), Some(t)) = (c.memory_used_mib, c.memory_total_mib)
                && u > t
            {
                return Err(Violation::MemoryAboveTotal { card: at(), used: u, total: t });
            }
            if let Some(u) = c.utilization_pct
                && !(0.0..=100.0).contains(&u)
            {
                return Err(Violation::Utilisation { card: at(), pct: u });
            }
            for i in &c.mig.instances {
                if u32::from(i.start) + u32::from(i.size) > 8 {
                    let (profile, start, size) = (i.profile.clone(), i.start, i.size);
                    return Err(Violation::PastTheCard { card: at(), profile, start, size });
                }
            }
        }
    }
    Ok(())
}

fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// dcgm-exporter text: the exposition parser, the DCGM mapping in both node-naming modes, the
/// scrape source's fragment (holders as workloads), and the same text as a federation answer
/// (lines sorted by `instance`).
pub fn exposition(data: &[u8]) -> Seen {
    use crate::sources::scrape::map;
    use crate::sources::series::NodeName;
    let t = text(data);
    let _ = crate::sources::exposition::parse(&t, |_| {});
    let _ = map(&t, &NodeName::Label);
    let (p, _) = crate::sources::scrape::to_partial(&t, &NodeName::Fixed("node".into()));
    let mut seen = Seen { workloads: p.workloads.len(), nodes: p.nodes };
    federation(&t, &mut seen);
    seen
}

fn federation(t: &str, seen: &mut Seen) {
    use crate::config::ScrapeNode;
    if let Ok(p) = crate::sources::prometheus::to_partial_from_federation(t, &[], ScrapeNode::Target) {
        seen.workloads += p.workloads.len();
        seen.nodes.extend(p.nodes);
    }
}

/// A Prometheus API answer: the instant query's mapping, the queue's series, Kueue's count,
/// the same body as a range answer (the history) and as a federation answer.
pub fn prometheus_api(data: &[u8]) -> Seen {
    let t = text(data);
    let _ = crate::sources::prometheus::queue::pending_workloads(&t, &t, &t);
    let _ = crate::sources::prometheus::queue::kueue_pending(&t);
    let _ = crate::sources::prometheus::history_answer(&t, 1.7e9);
    let mut seen = match crate::sources::prometheus::to_partial_from_api(&t, crate::config::ScrapeNode::Target) {
        Ok(p) => Seen { workloads: p.workloads.len(), nodes: p.nodes },
        Err(_) => Seen::default(),
    };
    federation(&t, &mut seen);
    seen
}

/// Slurm's JSON (`squeue --json`, `sinfo --json`, either dialect): jobs, nodes, the cards by
/// index; and the strings inside it read on their own (GRES, hostlists).
pub fn slurm(data: &[u8]) -> Seen {
    use crate::sources::slurm::{gres, jobs, json, nodes};
    let t = text(data);
    let _ = gres::parse(&t);
    let _ = gres::index_list(&t);
    let _ = json::hostlist(&t);
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(data) else { return Seen::default() };
    let j = jobs::map(&doc, &crate::model::KindRules::default());
    let (n, _) = nodes::map(&doc);
    let _ = nodes::card_indexes(&doc);
    Seen { workloads: j.workloads.len(), nodes: n }
}

/// Kubernetes objects (nodes, pods, priority classes, Kueue Workloads) as one update.
pub fn kubernetes(data: &[u8]) -> Seen {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(data) else { return Seen::default() };
    let p = crate::sources::kubernetes::from_json(&doc);
    Seen { workloads: p.workloads.len(), nodes: p.nodes }
}

/// A config file, the same text as a theme file, and as a moment (`--at`, `--from`).
pub fn config(data: &[u8]) {
    let t = text(data);
    let now = chrono::DateTime::<chrono::Utc>::from_timestamp(1_764_547_200, 0).unwrap_or_default();
    let _ = crate::config::moment::parse(&t, now, Some((now - chrono::Duration::days(2), now)));
    let _ = crate::config::parse(&t, "fuzz.toml");
    let mut colors = crate::ui::theme::Theme::default_theme().c;
    let _ = crate::ui::theme::layer(&mut colors, &t, "fuzz-theme.toml");
}

/// A layout string (`3g.40gb@0,2g.20gb@4`, `whole`) against every model of the catalog.
pub fn layout(data: &[u8]) {
    let t = text(data);
    for m in &crate::model::mig::catalog::catalog().models {
        let _ = crate::model::mig::layout::parse_layout(m, &t);
    }
}

/// A recording file: opened (header, index or scan, records), then every frame read, and (of
/// up to 64 frames) its workloads and fleet as a what-if's demand.
pub fn recording(data: &[u8], scratch: &std::path::Path) {
    if std::fs::write(scratch, data).is_err() {
        return;
    }
    let Ok(rec) = crate::record::reader::Recording::open(&[scratch.to_path_buf()]) else { return };
    let n = rec.frames().len();
    let mut player = crate::record::reader::Player::new(rec);
    for i in 0..n.min(64) {
        let _ = player.frame(i);
    }
    if n <= 64 {
        let _ = crate::simulate::input::jobs_from_recording(&mut player);
        let _ = crate::simulate::input::recording::fleet_from_recording(&mut player);
    }
}

/// The invariants every demand a parser reads keeps, whatever the input: each row counted
/// once (jobs, rows without a GPU, bad lines skipped), each job at least a second long, of one
/// or more cards, a share from 1 to 1000 thousandths of a card (a share only of one card),
/// real use at most its request; at most `KEPT_ERRORS` errors kept.
pub fn check_demand(p: &crate::simulate::input::Parsed) -> Result<(), Violation> {
    use crate::simulate::input::KEPT_ERRORS;
    let counted = p.jobs.len() as u64 + p.without_gpu + p.skipped;
    if counted != p.rows {
        return Err(Violation::Rows {
            jobs: p.jobs.len(),
            without_gpu: p.without_gpu,
            skipped: p.skipped,
            rows: p.rows,
        });
    }
    if p.first_errors.len() > KEPT_ERRORS || p.first_errors.len() as u64 > p.skipped {
        return Err(Violation::Kept { kept: p.first_errors.len(), skipped: p.skipped });
    }
    for j in &p.jobs {
        let share_of_many = j.milli < 1000 && j.gpus > 1;
        if j.duration < 1 || j.gpus == 0 || !(1..=1000).contains(&j.milli) || j.use_milli > 1000 || share_of_many {
            return Err(Violation::Job { name: j.name.to_string(), job: format!("{j:?}") });
        }
    }
    Ok(())
}

/// A demand parser strict and with `skip_bad`: a file with no bad line reads the same both
/// ways, and what it reads keeps the jobs' invariants.
fn demand_both_ways(
    data: &[u8],
    parse: impl Fn(&str, &[u8], bool) -> Result<crate::simulate::input::Parsed, crate::simulate::input::LineError>,
) -> Result<(), Violation> {
    let strict = parse("fuzz.csv", data, false);
    let lenient = parse("fuzz.csv", data, true);
    if let (Ok(a), Ok(b)) = (&strict, &lenient)
        && a != b
    {
        return Err(Violation::SkipBadDiffers);
    }
    match lenient {
        Ok(p) => check_demand(&p),
        Err(_) => Ok(()),
    }
}

/// The Alibaba trace's pod list (strict and with `skip_bad`).
pub fn openb_pods(data: &[u8]) -> Result<(), Violation> {
    demand_both_ways(data, |f, d, skip| crate::simulate::input::openb_pods(f, d, skip))
}

/// The Alibaba trace's node list: every node of the fleet has cards of a model it holds.
pub fn openb_nodes(data: &[u8]) -> Result<(), Violation> {
    let Ok(f) = crate::simulate::input::openb_nodes("fuzz.csv", data) else { return Ok(()) };
    match f.nodes.iter().find(|n| n.gpus == 0 || n.model as usize >= f.models.len()) {
        Some(n) => Err(Violation::Node { name: n.name.to_string(), gpus: n.gpus, model: n.model }),
        None => Ok(()),
    }
}

/// The project's demand CSV (strict and with `skip_bad`).
pub fn demand_csv(data: &[u8]) -> Result<(), Violation> {
    demand_both_ways(data, |f, d, skip| crate::simulate::input::demand_csv(f, d, skip))
}
