//! Every parser of outside input behind one door each: bytes in; nothing may panic, loop or
//! grow without bound, and what comes out keeps the invariants the screen relies on. The fuzz
//! targets (`fuzz/fuzz_targets/`, by hand with a nightly toolchain) and the property-test
//! campaign (`tests/inputs.rs`, in CI) feed the same doors, so a crash found by one is a
//! regression test in the other.

use crate::model::Node;

/// What a door made of its input, for the invariants the callers check.
#[derive(Debug, Default)]
pub struct Seen {
    pub nodes: Vec<Node>,
    pub workloads: usize,
}

/// The checks every mapped fleet fragment must pass, whatever the input: memory used never
/// above the total where both are known, utilisation a percentage, MIG slices inside the
/// card. A violation is a bug in the mapping (the input cannot be trusted; the mapping must
/// not pass it on).
pub fn check(seen: &Seen) -> Result<(), String> {
    for n in &seen.nodes {
        for c in &n.cards {
            let at = || format!("{}/{}", n.name, c.index);
            if let (Some(u), Some(t)) = (c.memory_used_mib, c.memory_total_mib)
                && u > t
            {
                return Err(format!("{}: memory used {u} MiB above its total {t} MiB", at()));
            }
            if let Some(u) = c.utilization_pct
                && !(0.0..=100.0).contains(&u)
            {
                return Err(format!("{}: utilisation {u} %", at()));
            }
            for i in &c.mig.instances {
                if u32::from(i.start) + u32::from(i.size) > 8 {
                    return Err(format!("{}: instance {} at {}+{} past slice 8", at(), i.profile, i.start, i.size));
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

/// A recording file: opened (header, index or scan, records), then every frame read.
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
}
