//! The last two hours of every card's and MIG instance's activity and memory, fetched once
//! with the first good answer by range queries, so the sparklines and the advisor's windows
//! are right from the first second.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::query_url;
use crate::config::ScrapeNode;
use crate::sources::http::Client;
use crate::url::host;

/// History points fetched per card: the card view keeps this many samples.
pub const HISTORY_POINTS: u64 = 120;
/// How far back the history reaches: the advisor's longest window (`activity::KEEP_MIN`), so
/// that "idle for 2 h" and peak memory are right from the first second.
pub const HISTORY_SPAN_S: u64 = crate::model::activity::KEEP_MIN as u64 * 60;

/// Per-card activity in percent: whole cards' GPU_UTIL, else the mean of the card's
/// instances' GR_ENGINE_ACTIVE ratio (an approximation of the slice-weighted figure).
pub const HISTORY_UTIL: &str = "avg by (instance, gpu, Hostname, hostname) (DCGM_FI_DEV_GPU_UTIL) or \
     (avg by (instance, gpu, Hostname, hostname) (DCGM_FI_PROF_GR_ENGINE_ACTIVE) * 100)";
/// Per MIG instance activity in percent (DCGM profiling's GR_ENGINE_ACTIVE ratio).
pub const HISTORY_INSTANCE_UTIL: &str = "avg by (instance, gpu, GPU_I_ID, Hostname, hostname) \
     (DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_ID!=\"\"}) * 100";
/// Memory in use in MiB per whole card and per MIG instance (no `GPU_I_ID`: the card), for
/// the peak a workload reached.
pub const HISTORY_FB_USED: &str = "max by (instance, gpu, GPU_I_ID, Hostname, hostname) (DCGM_FI_DEV_FB_USED)";
/// Per-card memory in use, percent, summed over a MIG card's instances.
pub const HISTORY_MEM: &str = "sum by (instance, gpu, Hostname, hostname) (DCGM_FI_DEV_FB_USED) / \
     sum by (instance, gpu, Hostname, hostname) (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) * 100";

/// (node, gpu index, GPU instance id) -> points.
type Points = BTreeMap<(String, u32, Option<u32>), Vec<Option<f64>>>;

/// The most MIG instances a card has (an A100's or H100's seven 1g slices): the instance
/// series of a card past these are cut, so an answer naming 100,000 instances of one card
/// costs seven grids, not 100,000 (1.2 GB).
pub const MAX_INSTANCES: usize = 7;

/// A decoded answer: the points kept, and how many instance series were cut past
/// `MAX_INSTANCES` per card.
#[derive(Debug, Default)]
struct Decoded {
    points: Points,
    cut: usize,
}

impl Decoded {
    /// Keep a series unless it is one more instance of a card that has `MAX_INSTANCES`.
    fn keep(&mut self, key: (String, u32, Option<u32>), points: Vec<Option<f64>>) {
        if key.2.is_some() && !self.points.contains_key(&key) {
            let (lo, hi) = ((key.0.clone(), key.1, Some(0)), (key.0.clone(), key.1, Some(u32::MAX)));
            if self.points.range(lo..=hi).count() >= MAX_INSTANCES {
                self.cut += 1;
                return;
            }
        }
        self.points.insert(key, points);
    }
}

/// Whether anyone still waits for a decode: the decode runs on a blocking thread that
/// outlives a waiter that gave up (`HISTORY_WAIT`), and stops at its next series once the
/// waiter's `Waiting` is dropped.
#[derive(Debug, Clone, Default)]
struct Abandon(std::sync::Arc<std::sync::atomic::AtomicBool>);

/// Held by the waiter; dropping it (the wait gave up, or the decode is done) abandons the decode.
struct Waiting(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Abandon {
    fn waiter(&self) -> Waiting {
        Waiting(self.0.clone())
    }
    fn gone(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
    /// An error for the decoder when nobody waits any more.
    fn check<E: serde::de::Error>(&self) -> Result<(), E> {
        if self.gone() { Err(E::custom("nobody waits for the history any more: decoding stopped")) } else { Ok(()) }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The cards the main answer has, (node, gpu index): history is kept for these only.
pub type Known = std::collections::HashSet<(String, u32)>;

/// A range-query answer read as the history does (a grid of a minute from `start`, both
/// value kinds), every card known: the door the fuzz campaign feeds (`crate::inputs`). The
/// series read.
pub fn history_answer(body: &str, start: f64) -> usize {
    let awaited = Abandon::default();
    let read = |grid: Grid| matrix_points(body, &grid, None, &awaited).map_or(0, |d| d.points.len());
    let pct = read(Grid::new(ScrapeNode::Target, start, 60, true));
    let other = read(Grid::new(ScrapeNode::Label, start, 60, false));
    pct + other
}

/// How a range answer's series become points: the node label, the grid and the value kind.
#[derive(Debug, Clone, Copy)]
struct Grid {
    node: ScrapeNode,
    start: f64,
    step_s: u64,
    /// Percentages clamp to 0..100, other values to 0 and up.
    pct: bool,
}

impl Grid {
    fn new(node: ScrapeNode, start: f64, step_s: u64, pct: bool) -> Self {
        Self { node, start, step_s, pct }
    }
}

/// The labels a series is read by; the others are skipped unread.
#[derive(Debug, Default, Deserialize)]
struct Labels<'a> {
    #[serde(borrow, default)]
    gpu: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    instance: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, rename = "Hostname")]
    hostname_dcgm: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    hostname: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, rename = "GPU_I_ID")]
    gpu_i_id: Option<std::borrow::Cow<'a, str>>,
}

/// A range-query answer as (node, gpu index, GPU instance) -> points on the grid, only for
/// the `known` cards (all when `None`). Decoded as it is read: a series becomes its key and a
/// grid of `HISTORY_POINTS` as soon as it is read, a series of an unknown card is dropped
/// there, so an answer of a million series costs what the known cards' points cost, not a tree
/// of every series (it cost 6.6 GB); a card keeps at most `MAX_INSTANCES` instances. Stops
/// with an error at the next series once `gone` says nobody waits.
fn matrix_points(body: &str, grid: &Grid, known: Option<&Known>, gone: &Abandon) -> Result<Decoded, HistoryError> {
    let mut out = Decoded::default();
    let mut de = serde_json::Deserializer::from_str(body);
    let at = Ctx { grid, known, gone };
    let status = serde::de::DeserializeSeed::deserialize(Envelope { at, out: &mut out }, &mut de)
        .map_err(HistoryError::NotAnswer)?;
    match status {
        Ok(()) => Ok(out),
        Err(e) => Err(HistoryError::Failed(e)),
    }
}

/// Why the history was not read: each says `history:` first.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A range query failed.
    #[error("history: {0}")]
    Fetch(#[from] crate::sources::http::FetchError),
    /// The answer did not fit the sources' memory budget.
    #[error("history: {0}")]
    Budget(#[from] crate::budget::Exhausted),
    /// The answer is not JSON of the API's shape.
    #[error("history: not a Prometheus answer: {0}")]
    NotAnswer(#[source] serde_json::Error),
    /// Prometheus reported an error: its message.
    #[error("history: {0}")]
    Failed(String),
    /// The decoding thread ended before it did.
    #[error("history: decoding failed: {0}")]
    Decoding(#[source] tokio::task::JoinError),
}

/// What every level of the decode reads by: the grid, the cards kept, and whether anyone waits.
#[derive(Clone, Copy)]
struct Ctx<'g> {
    grid: &'g Grid,
    known: Option<&'g Known>,
    gone: &'g Abandon,
}

/// `{"status": ..., "error": ..., "data": {"result": [...]}}`: Ok, or the error it reports.
struct Envelope<'g> {
    at: Ctx<'g>,
    out: &'g mut Decoded,
}

impl<'de> DeserializeSeed<'de> for Envelope<'_> {
    type Value = Result<(), String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Envelope<'_> {
    type Value = Result<(), String>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Prometheus answer")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let (mut status, mut error) = (None::<String>, None::<String>);
        let mut found = Decoded::default();
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            match k.as_ref() {
                "status" => status = Some(m.next_value()?),
                "error" => error = m.next_value()?,
                "data" => m.next_value_seed(Data { at: self.at, out: &mut found })?,
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        if status.as_deref() != Some("success") {
            return Ok(Err(error.unwrap_or_default()));
        }
        *self.out = found;
        Ok(Ok(()))
    }
}

/// `{"resultType": ..., "result": [...]}`.
struct Data<'g> {
    at: Ctx<'g>,
    out: &'g mut Decoded,
}

impl<'de> DeserializeSeed<'de> for Data<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Data<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("the answer's data")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            if k == "result" {
                m.next_value_seed(Series { at: self.at, out: &mut *self.out })?;
            } else {
                m.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// The result array: each series read and kept (or dropped) before the next.
struct Series<'g> {
    at: Ctx<'g>,
    out: &'g mut Decoded,
}

impl<'de> DeserializeSeed<'de> for Series<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Series<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of series")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let at = self.at;
        at.gone.check()?;
        while let Some(one) = seq.next_element_seed(One { grid: at.grid })? {
            at.gone.check()?;
            let Some((name, gpu, gi, points)) = one else { continue };
            if at.known.is_some_and(|k| !k.contains(&(name.clone(), gpu))) {
                continue;
            }
            self.out.keep((name, gpu, gi), points);
        }
        Ok(())
    }
}

/// One series: its key (None when it names no card) and its points on the grid.
struct One<'g> {
    grid: &'g Grid,
}

type Read = Option<(String, u32, Option<u32>, Vec<Option<f64>>)>;

impl<'de> DeserializeSeed<'de> for One<'_> {
    type Value = Read;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Read, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for One<'_> {
    type Value = Read;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a series")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Read, A::Error> {
        let g = self.grid;
        let mut labels: Option<Labels<'de>> = None;
        let mut points: Vec<Option<f64>> = Vec::new();
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            match k.as_ref() {
                "metric" => labels = Some(m.next_value()?),
                "values" => points = m.next_value_seed(Values { grid: g })?,
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        let Some(l) = labels else { return Ok(None) };
        let Some(gpu) = l.gpu.as_deref().and_then(|g| g.parse::<u32>().ok()) else { return Ok(None) };
        let name = match g.node {
            ScrapeNode::Target => l.instance.as_deref().map(host),
            ScrapeNode::Label => l.hostname_dcgm.or(l.hostname).map(std::borrow::Cow::into_owned),
        };
        let Some(name) = name else { return Ok(None) };
        let gi = l.gpu_i_id.as_deref().and_then(|g| g.parse::<u32>().ok());
        if points.is_empty() {
            points = vec![None; HISTORY_POINTS as usize];
        }
        Ok(Some((name, gpu, gi, points)))
    }
}

/// `[[t, "v"], ...]` straight onto the grid: at most `HISTORY_POINTS` slots, however many
/// pairs the answer holds.
struct Values<'g> {
    grid: &'g Grid,
}

#[derive(Deserialize)]
struct Sample<'a>(f64, #[serde(borrow)] std::borrow::Cow<'a, str>);

impl<'de> DeserializeSeed<'de> for Values<'_> {
    type Value = Vec<Option<f64>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Values<'_> {
    type Value = Vec<Option<f64>>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of [time, \"value\"]")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let g = self.grid;
        let mut points = vec![None; HISTORY_POINTS as usize];
        while let Some(Sample(t, v)) = seq.next_element::<Sample<'de>>()? {
            let i = ((t - g.start) / g.step_s as f64).round();
            if (0.0..HISTORY_POINTS as f64).contains(&i)
                && let Ok(x) = v.parse::<f64>()
                && x.is_finite()
            {
                points[i as usize] = Some(if g.pct { x.clamp(0.0, 100.0) } else { x.max(0.0) });
            }
        }
        Ok(points)
    }
}

/// The last `HISTORY_SPAN_S` of every card's and MIG instance's activity and memory,
/// `HISTORY_POINTS` points each, the step fitted so that the card view's sparkline history is
/// full from the start. Range queries of the same series the live view reads: the advisor's
/// windows (mean activity, idle streak, peak memory) are computed from them as from live data.
pub(super) async fn fetch(
    client: &Client,
    base: &str,
    node: ScrapeNode,
    end: DateTime<Utc>,
    known: Known,
) -> Result<(Vec<crate::model::CardHistory>, usize), HistoryError> {
    let known = std::sync::Arc::new(known);
    let step = HISTORY_SPAN_S / HISTORY_POINTS;
    let end = end.timestamp() as f64;
    let start = end - (step * (HISTORY_POINTS - 1)) as f64;
    let range = |q: &str| {
        let url = query_url(base, q).replacen("/api/v1/query?", "/api/v1/query_range?", 1);
        format!("{url}&start={start}&end={end}&step={step}")
    };
    let get = |q: &'static str, pct: bool| {
        let url = range(q);
        let known = known.clone();
        async move {
            let body = client.get(&url).await?;
            // Decoded off the async threads, the answer held against the sources' memory
            // budget while it is (the client gave its own hold back with the text).
            let mut held = crate::budget::Budget::global().hold();
            held.grow(body.capacity())?;
            let grid = Grid::new(node, start, step, pct);
            // Dropped with this future when the wait gives up: the decode stops there.
            let gone = Abandon::default();
            let _waiting = gone.waiter();
            let decoded = tokio::task::spawn_blocking(move || matrix_points(&body, &grid, Some(&known), &gone)).await;
            drop(held);
            decoded.unwrap_or_else(|e| Err(HistoryError::Decoding(e)))
        }
    };
    let (util, instances, mem, fb) = (
        get(HISTORY_UTIL, true).await?,
        get(HISTORY_INSTANCE_UTIL, true).await?,
        get(HISTORY_MEM, true).await?,
        get(HISTORY_FB_USED, false).await?,
    );
    let cut = instances.cut.max(fb.cut);
    let (mut util, mut mem, mut fb) = (util.points, mem.points, fb.points);
    util.extend(instances.points);
    let mut keys: Vec<(String, u32, Option<u32>)> = util.keys().chain(mem.keys()).chain(fb.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let rows = keys
        .into_iter()
        .map(|k| crate::model::CardHistory {
            util: narrow(util.remove(&k).unwrap_or_default()),
            mem_pct: narrow(mem.remove(&k).unwrap_or_default()),
            mem_mib: narrow(fb.remove(&k).unwrap_or_default()),
            card: crate::model::CardRef::new(k.0, k.1),
            gi: k.2,
            step_s: step,
        })
        .collect();
    Ok((rows, cut))
}

/// The span before `at` for the cards of `p`, waited for at most [`super::HISTORY_WAIT`]:
/// kept in `p`, with a note where it failed or was cut; `history_wanted` is cleared once it
/// answered.
pub(super) async fn into_partial(
    client: &Client,
    base: &str,
    node: ScrapeNode,
    at: Option<DateTime<Utc>>,
    p: &mut crate::sources::Partial,
    history_wanted: &mut bool,
) {
    let known: Known = p.nodes.iter().flat_map(|n| n.cards.iter().map(move |c| (n.name.clone(), c.index))).collect();
    let fetched =
        tokio::time::timeout(super::HISTORY_WAIT, fetch(client, base, node, at.unwrap_or_else(Utc::now), known)).await;
    let failed = match fetched {
        Ok(Ok((h, cut))) => {
            p.history = h;
            *history_wanted = false;
            (cut > 0).then(|| format!("history: {cut} series of instances past {} per card cut", MAX_INSTANCES))
        }
        Ok(Err(e)) => {
            *history_wanted = false;
            Some(e.to_string())
        }
        Err(_) => Some(format!(
            "history: no answer within {}s: the sparklines fill as the console runs; asked again with the next answer",
            super::HISTORY_WAIT.as_secs()
        )),
    };
    if let Some(e) = failed {
        p.note = Some(p.note.take().map_or(e.clone(), |n| format!("{n}; {e}")));
    }
}

/// A series as the model keeps it (`f32` points).
fn narrow(points: Vec<Option<f64>>) -> Vec<Option<f32>> {
    points.into_iter().map(|p| p.map(|v| v as f32)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_answers_land_on_the_grid() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
          {"metric":{"instance":"10.0.0.7:9400","gpu":"3"},"values":[[1000,"50"],[1030,"NaN"],[1060,"250"]]}]}}"#;
        let m = matrix_points(body, &Grid::new(ScrapeNode::Target, 1000.0, 30, true), None, &Abandon::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let p = &m.points[&("10.0.0.7".to_string(), 3, None)];
        assert_eq!(p.len(), HISTORY_POINTS as usize);
        assert_eq!(&p[..4], &[Some(50.0), None, Some(100.0), None], "NaN is a gap; values clamp to 100");
    }

    #[test]
    fn instance_series_and_memory_in_mib_keep_their_instance_and_size() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
          {"metric":{"instance":"10.0.0.7:9400","gpu":"0","GPU_I_ID":"13"},"values":[[1000,"30720"]]},
          {"metric":{"instance":"10.0.0.7:9400","gpu":"0"},"values":[[1000,"512"]]}]}}"#;
        let m = matrix_points(body, &Grid::new(ScrapeNode::Target, 1000.0, 60, false), None, &Abandon::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.points[&("10.0.0.7".to_string(), 0, Some(13))][0], Some(30720.0), "MiB are not clamped to 100");
        assert_eq!(m.points[&("10.0.0.7".to_string(), 0, None)][0], Some(512.0), "no GPU_I_ID: the card");
        assert_eq!(HISTORY_SPAN_S, 7200, "the advisor's longest window");
    }

    /// Only the cards the main answer has are kept, and an answer of many series of other
    /// cards is read through without keeping them (it became 120 points each before any cap).
    #[test]
    fn only_known_cards_are_kept_and_the_rest_is_read_through() {
        let mut body = String::from(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
        for i in 0..50_000 {
            body.push_str(&format!(r#"{{"metric":{{"instance":"ghost-{i}:9400","gpu":"0","x":"y"}},"values":[]}},"#));
        }
        body.push_str(r#"{"values":[[1000,"7"]],"metric":{"instance":"gpu-01:9400","gpu":"1","__name__":"u"}}]}}"#);
        let known: Known = [("gpu-01".to_string(), 1)].into_iter().collect();
        let m =
            matrix_points(&body, &Grid::new(ScrapeNode::Target, 1000.0, 60, true), Some(&known), &Abandon::default())
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.points.len(), 1, "only the known card");
        assert_eq!(m.points[&("gpu-01".to_string(), 1, None)][0], Some(7.0), "values before the labels are read too");
        let err = matrix_points(
            r#"{"status":"error","error":"bad query"}"#,
            &Grid::new(ScrapeNode::Target, 0.0, 60, true),
            None,
            &Abandon::default(),
        );
        assert_eq!(err.err().map(|e| e.to_string()).as_deref(), Some("history: bad query"));
        assert!(
            matrix_points("[1,2]", &Grid::new(ScrapeNode::Target, 0.0, 60, true), None, &Abandon::default()).is_err()
        );
    }

    /// A known card answering 100,000 distinct `GPU_I_ID`s keeps at most `MAX_INSTANCES` of
    /// them (a card has at most 7 MIG instances) and counts the rest: 1.2 GB before.
    #[test]
    fn a_known_card_keeps_at_most_seven_instances() {
        let mut body = String::from(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
        for i in 0..100_000 {
            body.push_str(&format!(
                r#"{{"metric":{{"instance":"gpu-01:9400","gpu":"0","GPU_I_ID":"{i}"}},"values":[]}},"#
            ));
        }
        body.push_str(r#"{"metric":{"instance":"gpu-01:9400","gpu":"0"},"values":[[1000,"7"]]}]}}"#);
        let known: Known = [("gpu-01".to_string(), 0)].into_iter().collect();
        let m =
            matrix_points(&body, &Grid::new(ScrapeNode::Target, 1000.0, 60, true), Some(&known), &Abandon::default())
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.points.len(), MAX_INSTANCES + 1, "seven instances and the card");
        assert_eq!(m.cut, 100_000 - MAX_INSTANCES);
        assert_eq!(m.points[&("gpu-01".to_string(), 0, None)][0], Some(7.0), "the card is kept after the cut");
    }

    /// A decode whose waiter gave up stops at the next series instead of reading on.
    #[test]
    fn a_decode_nobody_waits_for_stops() {
        let mut body = String::from(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
        for i in 0..10 {
            body.push_str(&format!(r#"{{"metric":{{"instance":"gpu-{i}:9400","gpu":"0"}},"values":[]}},"#));
        }
        body.push_str(r#"{"metric":{"instance":"gpu-x:9400","gpu":"0"},"values":[]}]}}"#);
        let gone = Abandon::default();
        drop(gone.waiter());
        let r = matrix_points(&body, &Grid::new(ScrapeNode::Target, 1000.0, 60, true), None, &gone);
        assert!(matches!(r, Err(HistoryError::NotAnswer(_))), "{r:?}");
        assert!(r.err().map(|e| e.to_string()).unwrap_or_default().contains("nobody waits"));
    }
}
