//! `tessera snapshot`: one collection from every source through the normal channel, printed
//! as the JSON contract or a compact table.

use chrono::{SecondsFormat, Utc};
use serde_json::{Value, json};

use crate::config::Config;
use crate::error::CmdError;
use crate::model::{Card, Fleet, Node, QueueSummary};
use crate::units::duration;

/// The merged fleet after every source answered once (or the timeout passed), and whether
/// any of it is simulated.
pub fn collect_once(cfg: &Config) -> Result<(Fleet, bool), CmdError> {
    collect_with_demand(cfg).map(|(fleet, simulated, _)| (fleet, simulated))
}

/// The same, with the demand by hour measured so far (kept by earlier runs, or the
/// simulator's previous day).
pub fn collect_with_demand(cfg: &Config) -> Result<(Fleet, bool, crate::model::demand::DemandHistory), CmdError> {
    let rt = crate::engine::runtime()?;
    rt.block_on(async {
        let mut engine = crate::engine::Engine::start(cfg)?;
        for n in &engine.notes {
            super::to_stderr(&format!("tessera: {n}"));
        }
        engine.first_answers().await;
        let (simulated, demand) = (engine.store.simulated(), engine.store.demand().clone());
        let mut fleet = engine.store.take_fleet();
        // The sources' past series have seeded the workloads' activity; nothing a one-shot
        // command prints reads them again (at 32,768 cards they are 150 MB).
        fleet.history = Vec::new();
        Ok((fleet, simulated, demand))
    })
}

/// The version of the JSON contract (docs/json.md): raised when a key changes meaning or
/// goes away; new keys do not raise it.
pub const SCHEMA_VERSION: u32 = 1;

fn time(t: Option<chrono::DateTime<Utc>>) -> Value {
    t.map_or(Value::Null, |t| Value::String(t.to_rfc3339_opts(SecondsFormat::Secs, true)))
}

/// The JSON contract: `taken_at, sources, nodes, workloads, queue` and a few more keys.
pub fn snapshot_json(pair: &(Fleet, bool)) -> String {
    let mut out = Vec::new();
    // Writing into memory fails only on what serde_json cannot write (none here).
    let _ = serde_json::to_writer_pretty(&mut out, &SnapshotJson::new(pair, None));
    String::from_utf8(out).unwrap_or_default()
}

/// The snapshot as it is written: serialised from the model as it goes out, a card at a time
/// (one card's tree at most), never the whole tree first (100,000 cards took 1.35 GB as one).
/// Every object's keys in sorted order, as the contract always had them.
#[derive(serde::Serialize)]
pub struct SnapshotJson<'a> {
    nodes: Nodes<'a>,
    queue: Value,
    /// Where a recorded moment comes from (`snapshot --at`).
    #[serde(skip_serializing_if = "Option::is_none")]
    recorded: Option<Value>,
    schema_version: u32,
    simulated: bool,
    sources: Vec<Value>,
    taken_at: Value,
    workloads: Workloads<'a>,
}

impl<'a> SnapshotJson<'a> {
    pub fn new((fleet, simulated): &'a (Fleet, bool), recorded: Option<Value>) -> Self {
        let now = fleet.taken_at.unwrap_or_else(Utc::now);
        let queue = serde_json::to_value(QueueSummary::compute(fleet, now)).unwrap_or(Value::Null);
        let sources = fleet
            .sources
            .iter()
            .map(|s| {
                json!({
                    "name": s.name, "kind": s.kind.as_str(), "state": s.health.name(),
                    "error": s.health.error(), "note": s.note,
                })
            })
            .collect();
        Self {
            nodes: Nodes(&fleet.nodes),
            queue,
            recorded,
            schema_version: SCHEMA_VERSION,
            simulated: *simulated,
            sources,
            taken_at: time(fleet.taken_at),
            workloads: Workloads(&fleet.workloads),
        }
    }
}

/// Errors of a value that is not JSON (none of the model's): said where they surface.
fn tree<T: serde::Serialize, E: serde::ser::Error>(v: &T) -> Result<Value, E> {
    serde_json::to_value(v).map_err(E::custom)
}

struct Nodes<'a>(&'a [Node]);

impl serde::Serialize for Nodes<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(NodeJson))
    }
}

struct NodeJson<'a>(&'a Node);

impl serde::Serialize for NodeJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let n = self.0;
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("capacity", &tree::<_, S::Error>(&n.capacity)?)?;
        m.serialize_entry("cards", &Cards(&n.cards))?;
        m.serialize_entry("name", &n.name)?;
        m.serialize_entry("reason", &n.reason)?;
        m.serialize_entry("schedulable", &n.schedulable)?;
        m.serialize_entry("sources", &tree::<_, S::Error>(&n.sources)?)?;
        m.end()
    }
}

struct Cards<'a>(&'a [Card]);

impl serde::Serialize for Cards<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for c in self.0 {
            let mut v = tree::<_, S::Error>(c)?;
            if let Value::Object(m) = &mut v {
                m.insert("gpu_model".into(), c.gpu_model().map_or(Value::Null, |g| Value::String(g.name.clone())));
                m.insert("sharing_mode".into(), tree::<_, S::Error>(&c.sharing_mode())?);
                m.insert("layout".into(), Value::String(c.layout_text()));
                // Who hands the card out: `device_plugin`, `dra`, or null where no scheduler says.
                m.insert("allocation".into(), c.allocation.map_or(Value::Null, |a| Value::String(a.as_str().into())));
            }
            seq.serialize_element(&v)?;
        }
        seq.end()
    }
}

struct Workloads<'a>(&'a [crate::model::Workload]);

impl serde::Serialize for Workloads<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for w in self.0 {
            let mut v = tree::<_, S::Error>(w)?;
            if let Value::Object(m) = &mut v {
                m.insert("submitted_at".into(), time(w.submitted_at));
                m.insert("started_at".into(), time(w.started_at));
            }
            seq.serialize_element(&v)?;
        }
        seq.end()
    }
}

fn gib(mib: Option<u64>) -> String {
    mib.map_or_else(|| "-".into(), |m| format!("{:.1}", m as f64 / 1024.0))
}

fn opt(v: Option<f64>, unit: &str) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.0}{unit}"))
}

/// A compact table: one line per card, then the queue.
pub fn snapshot_table(pair: &(Fleet, bool)) -> String {
    snapshot_table_at(pair, Utc::now())
}

/// The table with source ages counted to `wall` (a recorded moment's own time).
pub fn snapshot_table_at((fleet, simulated): &(Fleet, bool), wall: chrono::DateTime<Utc>) -> String {
    let now = fleet.taken_at.unwrap_or_else(Utc::now);
    let mut out = String::new();
    let taken = time(fleet.taken_at);
    out.push_str(&format!(
        "tessera snapshot {}{}\n",
        taken.as_str().unwrap_or("-"),
        if *simulated { "  SIMULATED" } else { "" }
    ));
    let health: Vec<String> = fleet.sources.iter().map(|s| s.summary(wall)).collect();
    out.push_str(&format!("sources: {}\n\n", health.join(", ")));
    card_lines(&mut out, fleet);
    queue_lines(&mut out, fleet, now);
    out
}

/// A card's model as the table names it: the catalog's, the short name of a known card
/// without MIG, else the reported name marked unknown.
fn model_of(c: &Card) -> String {
    match (c.gpu_model(), c.short_model()) {
        (Some(m), _) => m.name.clone(),
        (None, Some(short)) => short,
        (None, None) => format!("{} (unknown)", c.model),
    }
}

/// The cards' header and one line per card, in columns as wide as their widest value, so
/// long node names and layouts stay aligned.
fn card_lines(out: &mut String, fleet: &Fleet) {
    let width = |f: &dyn Fn(&Node, &Card) -> usize, head: &str| {
        fleet.cards().map(|(n, c)| f(n, c)).max().unwrap_or(0).max(head.len())
    };
    let (node_w, model_w, layout_w, share_w) = (
        width(&|n, _| n.name.chars().count(), "NODE"),
        width(&|_, c| model_of(c).chars().count(), "MODEL"),
        width(&|_, c| c.layout_text().len(), "MIG LAYOUT"),
        width(&|_, c| c.sharing_text(true).len(), "SHARE"),
    );
    out.push_str(&format!(
        "{:<node_w$} {:>3} {:<model_w$} {:<layout_w$} {:<share_w$} {:>3} {:>5} {:>13} {:>5} {:>6}  {}\n",
        "NODE", "GPU", "MODEL", "MIG LAYOUT", "SHARE", "CTX", "UTIL", "MEM GiB", "TEMP", "POWER", "HOLDERS"
    ));
    for (n, c) in fleet.cards() {
        let mut holders: Vec<&str> = c.holders().collect();
        holders.dedup();
        let util = match (c.utilization_pct, c.mig.enabled) {
            (Some(u), _) => format!("{}%", crate::units::whole(u)),
            (None, true) => "mig".into(),
            (None, false) => "-".into(),
        };
        let flags = match (c.health.fault(), c.draining) {
            (Some(f), true) => format!(" UNHEALTHY ({f}) DRAINING"),
            (Some(f), false) => format!(" UNHEALTHY ({f})"),
            (None, true) => " DRAINING".into(),
            (None, false) => String::new(),
        };
        out.push_str(&format!(
            "{:<node_w$} {:>3} {:<model_w$} {:<layout_w$} {:<share_w$} {:>3} {:>5} {:>13} {:>5} {:>6}  {}{}\n",
            n.name,
            c.index,
            model_of(c),
            c.layout_text(),
            c.sharing_text(true),
            c.contexts_text(),
            util,
            format!("{}/{}", gib(c.memory_used_mib), gib(c.memory_total_mib)),
            opt(c.temperature_c, "C"),
            opt(c.power_w, "W"),
            holders.join(","),
            flags
        ));
    }
}

/// The queue at `now`: how many wait and for how long, then one line per resource waited for.
fn queue_lines(out: &mut String, fleet: &Fleet, now: chrono::DateTime<Utc>) {
    let q = QueueSummary::compute(fleet, now);
    let oldest = q.oldest_wait_s.map_or_else(|| "-".into(), duration::short);
    let pending = q.known.count_text(q.pending);
    let why = match &q.known {
        crate::model::QueueKnown::Unknown { reason } => format!(" (queue unknown: {reason})"),
        crate::model::QueueKnown::NoScheduler => " (no queue source configured)".into(),
        crate::model::QueueKnown::Known => String::new(),
    };
    out.push_str(&format!("\nqueue: {pending} pending, oldest wait {oldest}{why}\n"));
    for d in &q.demand {
        let scattered = if d.scattered() {
            format!(" (at most {} on one node; a job wants {} together)", d.largest_block, d.largest_request)
        } else {
            String::new()
        };
        let replicas = if d.replicas > 0 && !matches!(d.resource, crate::model::Resource::Shared { .. }) {
            format!(
                " ({} of them {} of shared cards)",
                d.replicas,
                if d.replicas == 1 { "a replica" } else { "replicas" }
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {:<24} {:>3} waiting for {:>3}, {:>3} free{replicas}{scattered}\n",
            d.resource.to_string(),
            d.pending,
            d.wanted,
            d.free
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_keeps_its_columns_aligned_whatever_the_layouts() {
        let at = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 3, 2, 14, 0, 0).single().unwrap_or_default();
        let fleet = crate::engine::simulated_store(42, at).fleet().clone();
        let table = snapshot_table(&(fleet, true));
        let lines: Vec<&str> = table.lines().collect();
        let head = lines.iter().position(|l| l.starts_with("NODE")).unwrap_or_else(|| panic!("{table}"));
        let col = lines[head].find("MIG LAYOUT").unwrap_or_default();
        let util = lines[head].find(" UTIL").unwrap_or_default();
        let rows: Vec<&str> = lines[head + 1..].iter().copied().take_while(|l| !l.is_empty()).collect();
        assert!(rows.len() >= 32, "{table}");
        for row in rows {
            let chars: Vec<char> = row.chars().collect();
            assert!(chars[col - 1] == ' ' && chars[col] != ' ', "layout column moved: {row}");
            assert_eq!(chars[util], ' ', "the utilisation column moved: {row}");
        }
    }
}
