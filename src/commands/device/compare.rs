//! tessera against nvidia-smi, card by card: each field agrees, differs (with both values),
//! or is unknown on one side. Cards are matched by UUID, else by PCI bus id, through maps
//! (a search per card took 127 s for 20,000 cards on each side). nvidia-smi may be
//! read more than once (before and after tessera): a reading that moves agrees when it is
//! within tolerance of any of nvidia-smi's reads. The tolerances are those of
//! docs/sources.md ("The device check"): exact for identities, modes and counters; a margin
//! for readings that move between the reads.

use std::collections::{HashMap, VecDeque};

use serde::Serialize;

use super::ours::{Card, Ours};
use super::smi::{SmiGpu, SmiLog};

/// How one field compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Agrees,
    Differs,
    /// Unknown on one side or both: nothing to compare.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Field {
    pub field: String,
    pub verdict: Verdict,
    pub tessera: Option<String>,
    pub nvidia_smi: Option<String>,
    /// The margin allowed, in words ("exact", "±5 C").
    pub tolerance: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardReport {
    /// `NODE/INDEX` as tessera names the card, or null for a card only nvidia-smi lists.
    pub card: Option<String>,
    pub uuid: Option<String>,
    /// `uuid`, `pci_bus_id`, or `unmatched`.
    pub matched_by: &'static str,
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub agree: usize,
    pub differ: usize,
    pub unknown: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub driver_version: Option<String>,
    pub cards: Vec<CardReport>,
    pub summary: Summary,
}

impl Report {
    pub fn differs(&self) -> bool {
        self.summary.differ > 0
    }

    /// The report as the script's text file: a block per card, then the summary.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let driver = self.driver_version.as_deref().unwrap_or("unknown");
        out.push_str(&format!("tessera against nvidia-smi -q -x (driver {driver})\n"));
        for c in &self.cards {
            let name = c.card.as_deref().unwrap_or("(not seen by tessera)");
            let uuid = c.uuid.as_deref().unwrap_or("no UUID");
            out.push_str(&format!("\n{name} {uuid} (matched by {})\n", c.matched_by.replace('_', " ")));
            for f in &c.fields {
                let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
                let verdict = match f.verdict {
                    Verdict::Agrees => "agrees ",
                    Verdict::Differs => "DIFFERS",
                    Verdict::Unknown => "unknown",
                };
                out.push_str(&format!(
                    "  {:<26} {verdict}  tessera {}, nvidia-smi {} ({})\n",
                    f.field,
                    show(&f.tessera),
                    show(&f.nvidia_smi),
                    f.tolerance
                ));
            }
        }
        let s = &self.summary;
        out.push_str(&format!(
            "\n{} {} agree, {} {} beyond tolerance, {} unknown on one side or both\n",
            s.agree,
            plural(s.agree, "field", "fields"),
            s.differ,
            if s.differ == 1 { "differs" } else { "differ" },
            s.unknown
        ));
        out
    }
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

/// A read's GPUs by UUID and by normalised bus id, each list in the file's order.
struct Index<'a> {
    log: &'a SmiLog,
    by_uuid: HashMap<&'a str, VecDeque<usize>>,
    by_bus: HashMap<String, VecDeque<usize>>,
}

impl<'a> Index<'a> {
    fn new(log: &'a SmiLog) -> Self {
        let (mut by_uuid, mut by_bus) =
            (HashMap::<&str, VecDeque<usize>>::new(), HashMap::<String, VecDeque<usize>>::new());
        for (i, g) in log.gpus.iter().enumerate() {
            if let Some(u) = g.uuid.as_deref() {
                by_uuid.entry(u).or_default().push_back(i);
            }
            if let Some(b) = g.bus_id.as_deref() {
                by_bus.entry(norm_bus(b)).or_default().push_back(i);
            }
        }
        Self { log, by_uuid, by_bus }
    }

    /// The first GPU that is the card with `uuid`, else with `bus`, not yet `taken` (taken
    /// ones are dropped from the lists as they are met: each is met once).
    fn find(&mut self, uuid: Option<&str>, bus: Option<&str>, taken: &[bool]) -> Option<(usize, &'static str)> {
        let free = |i: &usize| taken.get(*i).is_none_or(|t| !t);
        let first_free = |q: &mut VecDeque<usize>| {
            while q.front().is_some_and(|i| !free(i)) {
                q.pop_front();
            }
            q.front().copied()
        };
        let by_uuid = uuid.and_then(|u| self.by_uuid.get_mut(u)).and_then(first_free);
        by_uuid.map(|i| (i, "uuid")).or_else(|| {
            bus.and_then(|b| self.by_bus.get_mut(&norm_bus(b))).and_then(first_free).map(|i| (i, "pci_bus_id"))
        })
    }
}

/// Compare every card of the snapshot with nvidia-smi's reads (the first decides which cards
/// nvidia-smi lists; the others add readings).
pub fn compare(ours: &[Ours], reads: &[SmiLog]) -> Report {
    let empty = SmiLog::default();
    let first = reads.first().unwrap_or(&empty);
    let mut index = Index::new(first);
    let mut others: Vec<Index> = reads.iter().skip(1).map(Index::new).collect();
    let mut taken = vec![false; first.gpus.len()];
    let mut cards = Vec::new();
    for o in ours {
        let uuid = o.card.uuid.as_deref();
        let bus = o.card.pci_bus_id.as_deref();
        let (fields, how) = match index.find(uuid, bus, &taken) {
            Some((i, how)) => {
                taken[i] = true;
                let g = &index.log.gpus[i];
                let (u, b) = (g.uuid.as_deref().or(uuid), g.bus_id.as_deref().or(bus));
                let same: Vec<&SmiGpu> = std::iter::once(g)
                    .chain(others.iter_mut().filter_map(|r| r.find(u, b, &[]).map(|(j, _)| &r.log.gpus[j])))
                    .collect();
                (fields(&o.card, &same), how)
            }
            None => (vec![missing("the card", "listed by tessera", None)], "unmatched"),
        };
        cards.push(CardReport { card: Some(o.name.clone()), uuid: uuid.map(str::to_string), matched_by: how, fields });
    }
    for (_, g) in first.gpus.iter().enumerate().filter(|(i, _)| !taken[*i]) {
        cards.push(CardReport {
            card: None,
            uuid: g.uuid.clone(),
            matched_by: "unmatched",
            fields: vec![missing("the card", "not listed by tessera", g.bus_id.clone())],
        });
    }
    let mut summary = Summary::default();
    for f in cards.iter().flat_map(|c| &c.fields) {
        match f.verdict {
            Verdict::Agrees => summary.agree += 1,
            Verdict::Differs => summary.differ += 1,
            Verdict::Unknown => summary.unknown += 1,
        }
    }
    Report { schema_version: 1, driver_version: first.driver_version.clone(), cards, summary }
}

/// A bus id as one form: nvidia-smi writes an 8-digit PCI domain, NVML's legacy form a
/// 4-digit one.
fn norm_bus(s: &str) -> String {
    let s = s.to_ascii_lowercase();
    match s.split_once(':') {
        Some((domain, rest)) => format!("{:0>8}:{rest}", domain.trim_start_matches('0')),
        None => s,
    }
}

fn missing(field: &str, why: &str, smi: Option<String>) -> Field {
    Field {
        field: field.into(),
        verdict: Verdict::Differs,
        tessera: (smi.is_none()).then(|| why.into()),
        nvidia_smi: smi.map(|b| format!("{why} ({b})")).or_else(|| Some("not listed".into())),
        tolerance: "every card on both sides".into(),
    }
}

/// A margin for a number: an absolute amount, or a share of `of` (whichever is larger).
#[derive(Debug, Clone, Copy)]
struct Margin {
    abs: f64,
    share: f64,
    unit: &'static str,
}

const EXACT: Margin = Margin { abs: 0.0, share: 0.0, unit: "" };

impl Margin {
    fn allows(self, a: f64, b: f64, of: f64) -> bool {
        (a - b).abs() <= self.abs.max(self.share * of.abs()) + 1e-9
    }

    fn words(self, of_what: &str) -> String {
        match (self.abs > 0.0, self.share > 0.0) {
            (false, false) => "exact".into(),
            (true, false) => format!("±{}{}", trim(self.abs), self.unit),
            (false, true) => format!("±{}% of {of_what}", trim(self.share * 100.0)),
            (true, true) => format!("±{}{} or {}% of {of_what}", trim(self.abs), self.unit, trim(self.share * 100.0)),
        }
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn show_all(values: &[String]) -> Option<String> {
    let mut v: Vec<String> = Vec::new();
    for x in values {
        if !v.contains(x) {
            v.push(x.clone());
        }
    }
    (!v.is_empty()).then(|| v.join(" / "))
}

/// A number against nvidia-smi's readings of it: agrees when within the margin of any.
fn number_field(
    field: &str,
    ours: Option<f64>,
    theirs: &[Option<f64>],
    m: Margin,
    of: Option<f64>,
    of_what: &str,
) -> Field {
    let theirs: Vec<f64> = theirs.iter().flatten().copied().collect();
    let verdict = match ours {
        Some(a) if !theirs.is_empty() => {
            if theirs.iter().any(|&b| m.allows(a, b, of.unwrap_or(b))) {
                Verdict::Agrees
            } else {
                Verdict::Differs
            }
        }
        _ => Verdict::Unknown,
    };
    Field {
        field: field.into(),
        verdict,
        tessera: ours.map(trim),
        nvidia_smi: show_all(&theirs.iter().map(|v| trim(*v)).collect::<Vec<_>>()),
        tolerance: m.words(of_what),
    }
}

/// A text against nvidia-smi's readings of it: agrees when equal to any.
fn text_field(field: &str, ours: Option<String>, theirs: &[Option<String>]) -> Field {
    let theirs: Vec<String> = theirs.iter().flatten().cloned().collect();
    let verdict = match &ours {
        Some(a) if theirs.contains(a) => Verdict::Agrees,
        Some(_) if !theirs.is_empty() => Verdict::Differs,
        _ => Verdict::Unknown,
    };
    Field { field: field.into(), verdict, tessera: ours, nvidia_smi: show_all(&theirs), tolerance: "exact".into() }
}

fn fields(c: &Card, gs: &[&SmiGpu]) -> Vec<Field> {
    let f = |k: &str| match k {
        "memory_total_mib" => c.memory_total_mib,
        "memory_used_mib" => c.memory_used_mib,
        "utilization_pct" => c.utilization_pct,
        "temperature_c" => c.temperature_c,
        "power_w" => c.power_w,
        "power_limit_w" => c.power_limit_w,
        _ => None,
    };
    let all = |get: &dyn Fn(&SmiGpu) -> Option<f64>| gs.iter().map(|g| get(g)).collect::<Vec<_>>();
    let text = |get: &dyn Fn(&SmiGpu) -> Option<String>| gs.iter().map(|g| get(g)).collect::<Vec<_>>();
    let total = f("memory_total_mib").or(gs.first().and_then(|g| g.memory_total_mib));
    let mig = c.mig.clone().unwrap_or_default();
    let mig_on = mig.enabled;
    let bool_text = |b: Option<bool>| b.map(|b| b.to_string());
    // NVML's power reading is an average on newer cards and instantaneous on GA100 and
    // older: either of nvidia-smi's may be the one it matches.
    let power: Vec<Option<f64>> = gs.iter().flat_map(|g| [g.power_w, g.power_instant_w]).collect();
    // A reading under the same name on both sides, within an absolute margin.
    let reading = |name: &str, get: &dyn Fn(&SmiGpu) -> Option<f64>, abs: f64, unit: &'static str| {
        number_field(name, f(name), &all(get), Margin { abs, share: 0.0, unit }, None, "")
    };
    let mut out = vec![
        text_field("name", c.model.clone(), &text(&|g| g.name.clone())),
        text_field("uuid", c.uuid.clone(), &text(&|g| g.uuid.clone())),
        reading("memory_total_mib", &|g| g.memory_total_mib, 1.0, " MiB"),
        number_field(
            "memory_used_mib",
            f("memory_used_mib"),
            &all(&|g| g.memory_used_mib),
            Margin { abs: 64.0, share: 0.02, unit: " MiB" },
            total,
            "total",
        ),
        reading("utilization_pct", &|g| g.utilization_pct, 25.0, " points"),
        reading("temperature_c", &|g| g.temperature_c, 5.0, " C"),
        number_field(
            "power_w",
            f("power_w"),
            &power,
            Margin { abs: 15.0, share: 0.15, unit: " W" },
            None,
            "the reading",
        ),
        reading("power_limit_w", &|g| g.power_limit_w, 1.0, " W"),
        number_field(
            "ecc_volatile_uncorrected",
            c.health.as_ref().and_then(|h| h.ecc_volatile_uncorrected),
            &all(&|g| g.ecc_volatile_uncorrected),
            EXACT,
            None,
            "",
        ),
        text_field("compute_mode", c.compute_mode.clone(), &text(&|g| g.compute_mode.clone())),
        text_field("mig_enabled", bool_text(mig_on), &text(&|g| bool_text(g.mig_enabled))),
        text_field("mig_pending", bool_text(mig.pending), &text(&|g| bool_text(g.mig_pending))),
    ];
    if mig_on == Some(true) || gs.iter().any(|g| g.mig_enabled == Some(true)) {
        out.extend(mig_fields(&mig, gs));
    }
    out.extend(process_fields(c, gs));
    out
}

fn mig_fields(mig: &super::ours::Mig, gs: &[&SmiGpu]) -> Vec<Field> {
    // nvidia-smi lists MIG devices, one per compute instance: a GPU instance without one is
    // not there to compare.
    let ours: Vec<(u32, Option<f64>)> = mig
        .instances
        .iter()
        .flatten()
        .filter(|i| i.compute_instances.as_ref().is_none_or(|v| !v.is_empty()))
        .filter_map(|i| Some((u32::try_from(i.gi_id?).ok()?, i.memory_total_mib)))
        .collect();
    let ids = |v: &[(u32, Option<f64>)]| v.iter().map(|(i, _)| i.to_string()).collect::<Vec<_>>().join(",");
    // An error listing instances (no root) is unknown, not "none".
    let listed = !mig.error;
    let theirs: Vec<Option<String>> = gs.iter().map(|g| Some(ids(&g.mig_instances))).collect();
    let mut out = vec![text_field("mig_instances (GI ids)", listed.then(|| ids(&ours)), &theirs)];
    let first = gs.first().map(|g| g.mig_instances.clone()).unwrap_or_default();
    for (id, _) in &first {
        let mine = ours.iter().find(|(i, _)| i == id).and_then(|(_, t)| *t);
        let readings: Vec<Option<f64>> =
            gs.iter().map(|g| g.mig_instances.iter().find(|(i, _)| i == id).and_then(|(_, t)| *t)).collect();
        let m = Margin { abs: 0.0, share: 0.02, unit: "" };
        out.push(number_field(&format!("mig_gi{id}_memory_total_mib"), mine, &readings, m, None, "the reading"));
    }
    out
}

fn process_fields(c: &Card, gs: &[&SmiGpu]) -> Vec<Field> {
    // Whether tessera could read the card's process list at all (its contexts are counted
    // from it): an unreadable list is unknown, not "no processes".
    let readable = c.sharing.as_ref().is_some_and(|s| s.contexts.is_some());
    let mut ours: Vec<(u32, Option<f64>)> =
        c.processes.iter().flatten().filter_map(|p| Some((u32::try_from(p.pid?).ok()?, p.used_mib))).collect();
    ours.sort_by_key(|(p, _)| *p);
    ours.dedup_by_key(|(p, _)| *p);
    let pids = |v: &[(u32, Option<f64>)]| v.iter().map(|(p, _)| p.to_string()).collect::<Vec<_>>().join(",");
    let theirs: Vec<Option<String>> = gs.iter().map(|g| Some(pids(&g.processes))).collect();
    let mut out = vec![text_field("processes (compute pids)", readable.then(|| pids(&ours)), &theirs)];
    let first = gs.first().map(|g| g.processes.clone()).unwrap_or_default();
    for (pid, _) in &first {
        let Some((_, mine)) = ours.iter().find(|(p, _)| p == pid) else { continue };
        let readings: Vec<Option<f64>> =
            gs.iter().map(|g| g.processes.iter().find(|(p, _)| p == pid).and_then(|(_, u)| *u)).collect();
        let m = Margin { abs: 64.0, share: 0.05, unit: " MiB" };
        out.push(number_field(&format!("process_{pid}_used_mib"), *mine, &readings, m, None, "the reading"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn smi_gpu() -> SmiGpu {
        SmiGpu {
            bus_id: Some("00000000:07:00.0".into()),
            name: Some("NVIDIA A100-SXM4-80GB".into()),
            uuid: Some("GPU-1".into()),
            memory_total_mib: Some(81920.0),
            memory_used_mib: Some(31200.0),
            utilization_pct: None,
            temperature_c: Some(43.0),
            power_w: Some(95.5),
            power_instant_w: None,
            power_limit_w: Some(400.0),
            ecc_volatile_uncorrected: Some(0.0),
            compute_mode: Some("default".into()),
            mig_enabled: Some(true),
            mig_pending: Some(true),
            mig_instances: vec![(1, Some(40960.0)), (2, Some(20480.0))],
            processes: vec![(4242, Some(30000.0))],
        }
    }

    fn snapshot(card: Value) -> Vec<Ours> {
        super::super::ours::read(&json!({"nodes": [{"name": "vm", "cards": [card]}]}).to_string())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn card() -> Value {
        json!({
            "index": 0, "uuid": "GPU-1", "pci_bus_id": "00000000:07:00.0", "model": "NVIDIA A100-SXM4-80GB",
            "memory_total_mib": 81920, "memory_used_mib": 31200, "utilization_pct": null,
            "temperature_c": 41.0, "power_w": 92.0, "power_limit_w": 400.0, "compute_mode": "default",
            "health": {"ecc_volatile_uncorrected": 0}, "sharing": {"contexts": 1},
            "mig": {"enabled": true, "pending": true, "error": null, "instances": [
                {"gi_id": 1, "memory_total_mib": 40960, "compute_instances": [{"ci_id": 0}]},
                {"gi_id": 2, "memory_total_mib": 20480, "compute_instances": [{"ci_id": 0}]},
                {"gi_id": 4, "memory_total_mib": 10240, "compute_instances": []}]},
            "processes": [{"pid": 4242, "used_mib": 30000}]
        })
    }

    fn verdict(r: &Report, field: &str) -> Option<Verdict> {
        r.cards.iter().flat_map(|c| &c.fields).find(|f| f.field == field).map(|f| f.verdict)
    }

    #[test]
    fn the_same_card_agrees_within_the_margins() {
        let r = compare(&snapshot(card()), &[SmiLog { driver_version: None, gpus: vec![smi_gpu()] }]);
        assert_eq!(r.summary.differ, 0, "{}", r.text());
        assert_eq!(r.cards[0].matched_by, "uuid");
        assert_eq!(verdict(&r, "temperature_c"), Some(Verdict::Agrees), "2 C apart, ±5 C");
        assert_eq!(verdict(&r, "utilization_pct"), Some(Verdict::Unknown), "MIG: unknown on both sides");
        assert_eq!(verdict(&r, "mig_gi2_memory_total_mib"), Some(Verdict::Agrees));
        assert!(r.text().contains("fields agree, 0 differ beyond tolerance"), "{}", r.text());
    }

    #[test]
    fn each_kind_of_difference_is_named_with_both_values() {
        let mut g = smi_gpu();
        g.temperature_c = Some(60.0);
        g.compute_mode = Some("prohibited".into());
        g.mig_instances.push((3, Some(10240.0)));
        g.processes.push((7, Some(100.0)));
        g.memory_used_mib = Some(40000.0);
        let r = compare(&snapshot(card()), &[SmiLog { driver_version: None, gpus: vec![g] }]);
        for f in
            ["temperature_c", "compute_mode", "mig_instances (GI ids)", "processes (compute pids)", "memory_used_mib"]
        {
            assert_eq!(verdict(&r, f), Some(Verdict::Differs), "{f}: {}", r.text());
        }
        assert_eq!(verdict(&r, "mig_gi3_memory_total_mib"), Some(Verdict::Unknown), "tessera has no GI 3");
        assert!(r.differs());
        assert!(
            r.text().contains("temperature_c              DIFFERS  tessera 41, nvidia-smi 60 (±5 C)"),
            "{}",
            r.text()
        );
    }

    /// What a healthy real card does that must not fail the check: a GPU instance without a
    /// compute instance (nvidia-smi lists no MIG device for it), a process list tessera could
    /// not read (unknown, not "none"), a reading that moved between nvidia-smi's two reads, and
    /// an instantaneous power reading where NVML gives one.
    #[test]
    fn what_a_healthy_card_does_is_not_a_difference() {
        let mut c = card();
        c["sharing"]["contexts"] = Value::Null;
        c["processes"] = json!([]);
        c["temperature_c"] = json!(52.0);
        c["power_w"] = json!(210.0);
        let mut before = smi_gpu();
        before.temperature_c = Some(40.0);
        before.power_instant_w = Some(205.0);
        let mut after = smi_gpu();
        after.temperature_c = Some(55.0);
        let reads =
            [SmiLog { driver_version: None, gpus: vec![before] }, SmiLog { driver_version: None, gpus: vec![after] }];
        let r = compare(&snapshot(c), &reads);
        assert_eq!(r.summary.differ, 0, "{}", r.text());
        assert_eq!(verdict(&r, "mig_instances (GI ids)"), Some(Verdict::Agrees), "GI 4 has no compute instance");
        assert_eq!(verdict(&r, "processes (compute pids)"), Some(Verdict::Unknown));
        assert_eq!(verdict(&r, "temperature_c"), Some(Verdict::Agrees), "52 is within 5 C of the second read");
        assert_eq!(verdict(&r, "power_w"), Some(Verdict::Agrees), "the instantaneous reading");
        assert!(r.text().contains("tessera 52, nvidia-smi 40 / 55"), "{}", r.text());
    }

    #[test]
    fn cards_match_by_bus_id_without_uuid_and_a_card_on_one_side_differs() {
        let mut c = card();
        c["uuid"] = Value::Null;
        c["pci_bus_id"] = json!("0000:07:00.0");
        let mut other = smi_gpu();
        other.uuid = Some("GPU-2".into());
        other.bus_id = Some("00000000:08:00.0".into());
        let r = compare(&snapshot(c), &[SmiLog { driver_version: None, gpus: vec![smi_gpu(), other] }]);
        assert_eq!(r.cards[0].matched_by, "pci_bus_id");
        assert_eq!(r.cards[1].matched_by, "unmatched");
        assert!(r.differs());
        assert_eq!(verdict(&r, "uuid"), Some(Verdict::Unknown));
    }

    /// 20,000 cards on each side match through the maps in a moment (a search per card took
    /// 127 s), each by its own UUID or bus id.
    #[test]
    fn many_cards_match_in_linear_time() {
        let n = 20_000;
        let cards: Vec<Value> = (0..n)
            .map(|i| {
                let uuid = if i % 2 == 0 { json!(format!("GPU-{i}")) } else { Value::Null };
                json!({"index": i, "uuid": uuid, "pci_bus_id": format!("0000:{:02x}:{:02x}.0", i / 256, i % 256)})
            })
            .collect();
        let ours = super::super::ours::read(&json!({"nodes": [{"name": "n", "cards": cards}]}).to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        let gpus: Vec<SmiGpu> = (0..n)
            .rev()
            .map(|i| SmiGpu {
                uuid: Some(format!("GPU-{i}")),
                bus_id: Some(format!("00000000:{:02x}:{:02x}.0", i / 256, i % 256)),
                ..SmiGpu::default()
            })
            .collect();
        let log = SmiLog { driver_version: None, gpus };
        let started = std::time::Instant::now();
        let r = compare(&ours, &[log.clone(), log]);
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
        assert_eq!(r.cards.len(), n, "every card matched, none left over");
        assert_eq!(r.cards.iter().filter(|c| c.matched_by == "pci_bus_id").count(), n / 2);
        assert_eq!(r.cards[3].uuid, None);
        assert!(r.cards[3].fields.iter().any(|f| f.field == "uuid" && f.nvidia_smi.as_deref() == Some("GPU-3")));
    }
}
