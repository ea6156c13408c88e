//! The Prometheus source (`--prometheus URL`): instant queries of the HTTP API for the DCGM
//! series, mapped by the same code as a direct scrape. Series are grouped by the `instance`
//! label (the exporter Prometheus scraped), so each exporter's cards land on its node.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use chrono::Utc;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::dcgm::NodeName;
use super::http::Client;
use super::scrape::{host, to_partial};
use super::{Partial, SourceError, SourceUpdate, backoff};
use crate::config::ScrapeNode;
use crate::model::SourceKind;

/// The default query: every DCGM family, current and 1.x names.
pub const DEFAULT_QUERY: &str = r#"{__name__=~"DCGM_FI_.*|dcgm_.*"}"#;

#[derive(Debug, Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    #[serde(default)]
    result: Vec<Series>,
}

#[derive(Debug, Deserialize)]
struct Series {
    metric: BTreeMap<String, String>,
    /// `[unix seconds, "value"]`; absent for native histograms, which tessera skips.
    #[serde(default)]
    value: Option<(f64, String)>,
}

/// Rebuild exposition text per `instance` from an instant-vector answer. Label values are
/// escaped so the parser reads them back exactly, commas and quotes included.
fn by_instance(body: &str) -> Result<(BTreeMap<String, String>, Vec<String>), String> {
    let env: Envelope = serde_json::from_str(body).map_err(|e| {
        let start: String = body.trim_start().chars().take(60).collect();
        format!("not a Prometheus API answer ({e}); it starts with {start:?}")
    })?;
    if env.status != "success" {
        return Err(format!(
            "Prometheus: {}: {}",
            env.error_type.as_deref().unwrap_or("error"),
            env.error.as_deref().unwrap_or("no message")
        ));
    }
    let data = env.data.ok_or("Prometheus answered success without data")?;
    if data.result_type != "vector" {
        return Err(format!("expected an instant vector, got {}", data.result_type));
    }
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    for s in data.result {
        let (Some(name), Some((_, value))) = (s.metric.get("__name__"), s.value.as_ref()) else { continue };
        let instance = s.metric.get("instance").cloned().unwrap_or_default();
        let text = texts.entry(instance).or_default();
        let labels: Vec<String> = s
            .metric
            .iter()
            .filter(|(k, _)| k.as_str() != "__name__")
            .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")))
            .collect();
        let _ = writeln!(text, "{name}{{{}}} {value}", labels.join(","));
    }
    Ok((texts, env.warnings))
}

/// One collection: the query answered by Prometheus, as a partial fleet.
pub fn to_partial_from_api(body: &str, node: ScrapeNode) -> Result<Partial, SourceError> {
    let (texts, warnings) = by_instance(body).map_err(|message| SourceError { message, fatal: false })?;
    let mut out = Partial::default();
    let mut notes: Vec<String> = warnings;
    for (instance, text) in texts {
        let name = match node {
            ScrapeNode::Target if !instance.is_empty() => NodeName::Fixed(host(&instance)),
            _ => NodeName::Label,
        };
        let (p, _) = to_partial(&text, &name);
        if let Some(n) = p.note {
            notes.push(format!("{instance}: {n}"));
        }
        out.nodes.extend(p.nodes);
        out.workloads.extend(p.workloads);
    }
    if out.nodes.is_empty() {
        return Err(SourceError { message: "the query returned no GPU series".into(), fatal: false });
    }
    out.note = (!notes.is_empty()).then(|| notes.join("; "));
    Ok(out)
}

fn query_url(base: &str, query: &str) -> String {
    let mut enc = String::new();
    for b in query.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => enc.push(b as char),
            _ => {
                let _ = write!(enc, "%{b:02X}");
            }
        }
    }
    format!("{}/api/v1/query?query={enc}", base.trim_end_matches('/'))
}

/// Poll Prometheus until the receiver goes away; failures back off, capped at a minute.
pub fn spawn(base: String, node: ScrapeNode, client: Client, interval: Duration, tx: mpsc::Sender<SourceUpdate>) {
    tokio::spawn(async move {
        let url = query_url(&base, DEFAULT_QUERY);
        let mut failures = 0u32;
        loop {
            let result = match client.get(&url).await {
                Ok(body) => tokio::task::spawn_blocking(move || to_partial_from_api(&body, node))
                    .await
                    .unwrap_or_else(|e| Err(SourceError { message: format!("mapping failed: {e}"), fatal: false })),
                Err(super::http::FetchError::Status { status, body: Some(b), url }) if b.starts_with('{') => {
                    // Prometheus error envelopes come with 4xx/5xx; say what it said.
                    let msg = by_instance(&b).err().unwrap_or_else(|| format!("HTTP {status}"));
                    Err(SourceError { message: format!("{url}: {msg}"), fatal: false })
                }
                Err(e) => Err(SourceError { message: e.to_string(), fatal: false }),
            };
            let ok = result.is_ok();
            let update =
                SourceUpdate { source: "prometheus".into(), kind: SourceKind::Prometheus, at: Utc::now(), result };
            if tx.send(update).await.is_err() {
                return;
            }
            failures = if ok { 0 } else { failures + 1 };
            tokio::time::sleep(if ok { interval } else { backoff(interval, failures, Duration::from_secs(60)) }).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTOR: &str = r#"{"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"0","UUID":"GPU-a","modelName":"NVIDIA H100 80GB HBM3","Hostname":"dcgm-exporter-x1","instance":"10.0.0.7:9400","exported_pod":"train, \"big\"=1","exported_namespace":"ml"},"value":[1700000000.1,"87"]},
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","UUID":"GPU-a","modelName":"NVIDIA H100 80GB HBM3","instance":"10.0.0.7:9400"},"value":[1700000000.1,"64"]},
      {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"1","UUID":"GPU-b","modelName":"NVIDIA H100 80GB HBM3","instance":"10.0.0.8:9400"},"value":[1700000000.1,"NaN"]}
    ]}}"#;

    #[test]
    fn series_group_by_instance_and_labels_survive() {
        let p = to_partial_from_api(VECTOR, ScrapeNode::Target).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = p.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, vec!["10.0.0.7", "10.0.0.8"]);
        let c = &p.nodes[0].cards[0];
        assert_eq!((c.utilization_pct, c.temperature_c), (Some(87.0), Some(64.0)));
        assert_eq!(c.workloads, vec!["k8s:ml/train, \"big\"=1".to_string()], "commas, equals and quotes kept");
        assert_eq!(p.nodes[1].cards[0].utilization_pct, None, "NaN is unknown, never 0");
        let by_label = to_partial_from_api(VECTOR, ScrapeNode::Label).unwrap_or_else(|e| panic!("{e}"));
        assert!(by_label.nodes.iter().any(|n| n.name == "dcgm-exporter-x1"));
    }

    #[test]
    fn errors_say_what_prometheus_said() {
        let e = to_partial_from_api(
            r#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#,
            ScrapeNode::Target,
        );
        assert_eq!(e.map_err(|e| e.message), Err("Prometheus: bad_data: parse error at char 3".into()));
        let e = to_partial_from_api("<html>502 Bad Gateway</html>", ScrapeNode::Target).map_err(|e| e.message);
        assert!(e.is_err_and(|m| m.contains("not a Prometheus API answer")));
        let e = to_partial_from_api(
            r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
            ScrapeNode::Target,
        );
        assert!(e.is_err());
        let e = to_partial_from_api("", ScrapeNode::Target);
        assert!(e.is_err());
        assert_eq!(
            query_url("http://p:9090/", DEFAULT_QUERY),
            "http://p:9090/api/v1/query?query=%7B__name__%3D~%22DCGM_FI_.%2A%7Cdcgm_.%2A%22%7D"
        );
    }
}
