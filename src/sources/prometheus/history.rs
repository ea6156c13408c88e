//! The last two hours of every card's and MIG instance's activity and memory, fetched once
//! with the first good answer by range queries, so the sparklines and the advisor's windows
//! are right from the first second.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::query_url;
use crate::config::ScrapeNode;
use crate::sources::http::Client;
use crate::sources::scrape::host;

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

#[derive(Debug, Deserialize)]
struct MatrixEnvelope {
    status: String,
    #[serde(default)]
    data: Option<MatrixData>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct MatrixData {
    #[serde(default)]
    result: Vec<MatrixSeries>,
}

#[derive(Debug, Deserialize)]
struct MatrixSeries {
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

/// (node, gpu index, GPU instance id) -> points.
type Points = BTreeMap<(String, u32, Option<u32>), Vec<Option<f64>>>;

/// A range-query answer read as the history does (a grid of a minute from `start`, both
/// value kinds): the door the fuzz campaign feeds (`crate::inputs`). The series read.
pub fn history_answer(body: &str, start: f64) -> usize {
    let pct = matrix_points(body, ScrapeNode::Target, start, 60, true).map_or(0, |p| p.len());
    let other = matrix_points(body, ScrapeNode::Label, start, 60, false).map_or(0, |p| p.len());
    pct + other
}

/// A range-query answer as (node, gpu index, GPU instance) -> points on the grid from `start`,
/// `step_s` apart; percentages (`pct`) clamp to 0..100, other values to 0 and up.
fn matrix_points(body: &str, node: ScrapeNode, start: f64, step_s: u64, pct: bool) -> Result<Points, String> {
    let env: MatrixEnvelope =
        serde_json::from_str(body).map_err(|e| format!("history: not a Prometheus answer: {e}"))?;
    if env.status != "success" {
        return Err(format!("history: {}", env.error.unwrap_or_default()));
    }
    let mut out = BTreeMap::new();
    for s in env.data.map(|d| d.result).unwrap_or_default() {
        let Some(gpu) = s.metric.get("gpu").and_then(|g| g.parse::<u32>().ok()) else { continue };
        let name = match node {
            ScrapeNode::Target => s.metric.get("instance").map(|i| host(i)),
            ScrapeNode::Label => s.metric.get("Hostname").or_else(|| s.metric.get("hostname")).cloned(),
        };
        let Some(name) = name else { continue };
        let gi = s.metric.get("GPU_I_ID").and_then(|g| g.parse::<u32>().ok());
        let mut points = vec![None; HISTORY_POINTS as usize];
        for (t, v) in &s.values {
            let i = ((t - start) / step_s as f64).round();
            if (0.0..HISTORY_POINTS as f64).contains(&i)
                && let Ok(x) = v.parse::<f64>()
                && x.is_finite()
            {
                points[i as usize] = Some(if pct { x.clamp(0.0, 100.0) } else { x.max(0.0) });
            }
        }
        out.insert((name, gpu, gi), points);
    }
    Ok(out)
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
) -> Result<Vec<crate::model::CardHistory>, String> {
    let step = HISTORY_SPAN_S / HISTORY_POINTS;
    let end = end.timestamp() as f64;
    let start = end - (step * (HISTORY_POINTS - 1)) as f64;
    let range = |q: &str| {
        let url = query_url(base, q).replacen("/api/v1/query?", "/api/v1/query_range?", 1);
        format!("{url}&start={start}&end={end}&step={step}")
    };
    let get = |q: &'static str, pct: bool| {
        let url = range(q);
        async move {
            let body = client.get(&url).await.map_err(|e| format!("history: {e}"))?;
            matrix_points(&body, node, start, step, pct)
        }
    };
    let mut util = get(HISTORY_UTIL, true).await?;
    util.extend(get(HISTORY_INSTANCE_UTIL, true).await?);
    let mut mem = get(HISTORY_MEM, true).await?;
    let mut fb = get(HISTORY_FB_USED, false).await?;
    let mut keys: Vec<(String, u32, Option<u32>)> = util.keys().chain(mem.keys()).chain(fb.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    Ok(keys
        .into_iter()
        .map(|k| crate::model::CardHistory {
            util: util.remove(&k).unwrap_or_default(),
            mem_pct: mem.remove(&k).unwrap_or_default(),
            mem_mib: fb.remove(&k).unwrap_or_default(),
            card: crate::model::CardRef::new(k.0, k.1),
            gi: k.2,
            step_s: step,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_answers_land_on_the_grid() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
          {"metric":{"instance":"10.0.0.7:9400","gpu":"3"},"values":[[1000,"50"],[1030,"NaN"],[1060,"250"]]}]}}"#;
        let m = matrix_points(body, ScrapeNode::Target, 1000.0, 30, true).unwrap_or_else(|e| panic!("{e}"));
        let p = &m[&("10.0.0.7".to_string(), 3, None)];
        assert_eq!(p.len(), HISTORY_POINTS as usize);
        assert_eq!(&p[..4], &[Some(50.0), None, Some(100.0), None], "NaN is a gap; values clamp to 100");
    }

    #[test]
    fn instance_series_and_memory_in_mib_keep_their_instance_and_size() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
          {"metric":{"instance":"10.0.0.7:9400","gpu":"0","GPU_I_ID":"13"},"values":[[1000,"30720"]]},
          {"metric":{"instance":"10.0.0.7:9400","gpu":"0"},"values":[[1000,"512"]]}]}}"#;
        let m = matrix_points(body, ScrapeNode::Target, 1000.0, 60, false).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m[&("10.0.0.7".to_string(), 0, Some(13))][0], Some(30720.0), "MiB are not clamped to 100");
        assert_eq!(m[&("10.0.0.7".to_string(), 0, None)][0], Some(512.0), "no GPU_I_ID: the card");
        assert_eq!(HISTORY_SPAN_S, 7200, "the advisor's longest window");
    }
}
