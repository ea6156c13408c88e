//! The Prometheus source (`--prometheus URL`): the DCGM series from the federation endpoint
//! or an instant query of the HTTP API, mapped by the same code as a direct scrape. Series are
//! grouped by the `instance` label (the exporter Prometheus scraped), so each exporter's cards
//! land on its node.

pub mod decode;
pub mod federate;
pub mod history;
pub mod queue;

pub use history::history_answer;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use tokio::sync::mpsc;

use super::http::Client;
use super::scrape::to_partial;
use super::series::NodeName;
use super::{Partial, Poll, SourceError, SourceUpdate};
use crate::config::{PrometheusApi, ScrapeNode};
use crate::model::SourceKind;
use crate::url::host;
use decode::{Options, Texts};

/// The families of [`DEFAULT_QUERY`] in two halves of about the same number of series:
/// utilisation and memory, and the rest (temperature, power, clocks, limits, health, 1.x
/// names).
macro_rules! fleet_families {
    () => {
        "DCGM_FI_DEV_GPU_UTIL|DCGM_FI_PROF_GR_ENGINE_ACTIVE|DCGM_FI_DEV_FB_(USED|FREE|RESERVED|TOTAL)"
    };
}
macro_rules! other_families {
    () => {
        "DCGM_FI_DEV_GPU_TEMP|DCGM_FI_DEV_POWER_(USAGE|MGMT_LIMIT)|DCGM_FI_DEV_(SM|MEM)_CLOCK|DCGM_FI_DEV_XID_ERRORS|DCGM_FI_DEV_ECC_DBE_VOL_TOTAL|dcgm_.*"
    };
}

/// The default query: the DCGM families tessera maps (current and 1.x names). Asking for
/// these alone, not every `DCGM_FI_.*`, halves what Prometheus encodes and sends.
pub const DEFAULT_QUERY: &str = concat!(r#"{__name__=~""#, fleet_families!(), "|", other_families!(), r#""}"#);

/// The default query's series as two federation requests asked at once. Prometheus answers
/// each request on its own thread, so the two halves come back sooner than the whole where it
/// has a core to spare (4,096 cards on two cores: `docs/benchmarks.md`).
pub const DEFAULT_FEDERATION: [&str; 2] =
    [concat!(r#"{__name__=~""#, fleet_families!(), r#""}"#), concat!(r#"{__name__=~""#, other_families!(), r#""}"#)];

/// A small answer read whole (the queue's): the cards' answers are streamed ([`decode`]).
#[derive(Debug, Deserialize)]
pub(super) struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Data {
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

/// Why a Prometheus API answer gave no instant vector.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// Not JSON of the API's shape.
    #[error("not a Prometheus API answer ({0})")]
    NotAnswer(#[source] serde_json::Error),
    /// Not JSON of the API's shape; `start` is how the body begins.
    #[error("not a Prometheus API answer ({source}); it starts with {start:?}")]
    NotAnswerStarting { source: serde_json::Error, start: String },
    /// JSON without a `status`; `start` is how the body begins.
    #[error("not a Prometheus API answer (no status); it starts with {start:?}")]
    NoStatus { start: String },
    /// Prometheus reported an error: its message.
    #[error("Prometheus: {0}")]
    Failed(String),
    /// Prometheus reported an error: its type (`bad_data`, `timeout`...) and message.
    #[error("Prometheus: {kind}: {message}")]
    FailedAs { kind: String, message: String },
    #[error("Prometheus answered success without data")]
    NoData,
    /// Another type of result (`matrix`, `scalar`...).
    #[error("expected an instant vector, got {0}")]
    NotVector(String),
}

/// An instant-vector answer as (labels, value) pairs; NaN and unparsable values dropped.
/// Labels and value of each series of an instant vector.
pub(super) type Labeled = Vec<(BTreeMap<String, String>, f64)>;

pub(super) fn vector(body: &str) -> Result<Labeled, AnswerError> {
    let env: Envelope = serde_json::from_str(body).map_err(AnswerError::NotAnswer)?;
    if env.status != "success" {
        return Err(AnswerError::Failed(env.error.unwrap_or_default()));
    }
    Ok(env
        .data
        .map(|d| d.result)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|s| {
            let v = s.value.as_ref()?.1.parse::<f64>().ok().filter(|v| v.is_finite())?;
            Some((s.metric, v))
        })
        .collect())
}

/// Pending GPU pods and Kueue's count, when `prometheus_queue` is on. Failures become a note:
/// the cards still show.
async fn queue_into(client: &Client, base: &str, p: &mut Partial, at: Option<DateTime<Utc>>) {
    let (a, b, c, k) = (
        at_time(query_url(base, queue::PENDING_PODS), at),
        at_time(query_url(base, queue::GPU_REQUESTS), at),
        at_time(query_url(base, queue::POD_CREATED), at),
        at_time(query_url(base, queue::KUEUE_PENDING), at),
    );
    let (pending, requests, created) = (client.get(&a).await, client.get(&b).await, client.get(&c).await);
    let mut notes = Vec::new();
    match (pending, requests, created) {
        (Ok(a), Ok(b), Ok(c)) => match queue::pending_workloads(&a, &b, &c) {
            Ok(w) => p.workloads.extend(w),
            Err(e) => notes.push(format!("queue: {e}")),
        },
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => notes.push(format!("queue: {e}")),
    }
    match client.get(&k).await {
        Ok(body) => {
            if let Some(n) = queue::kueue_pending(&body) {
                notes.push(format!("kueue: {n} pending"));
            }
        }
        Err(e) => notes.push(format!("kueue: {e}")),
    }
    if !notes.is_empty() {
        let mut all: Vec<String> = p.note.take().into_iter().collect();
        all.extend(notes);
        p.note = Some(all.join("; "));
    }
}

fn source_error(message: String) -> SourceError {
    SourceError { message, fatal: false, unanswered: false }
}

/// Each `[sources.promql]` field's answer under its DCGM name.
fn add_fields(t: &mut Texts, fields: &[(&str, String)]) -> Result<(), SourceError> {
    for (metric, body) in fields {
        let opts = Options { skip: &[], rename: Some(metric) };
        t.add_vector(body, opts).map_err(|e| source_error(format!("{metric}: {e}")))?;
    }
    Ok(())
}

/// The main answer (an instant vector, or with `federation` the federation endpoint's text)
/// with the fields' answers: per-instance texts. A field's series replace the main answer's
/// series of its DCGM name.
fn texts_of(main: &[&str], federation: bool, fields: &[(&str, String)]) -> Result<Texts, SourceError> {
    let skip: Vec<&str> = fields.iter().map(|(m, _)| *m).collect();
    let mut t = Texts::default();
    for body in main {
        if federation {
            federate::split(body, &skip, &mut t);
        } else {
            t.add_vector(body, Options { skip: &skip, rename: None }).map_err(|e| source_error(e.to_string()))?;
        }
    }
    add_fields(&mut t, fields)?;
    Ok(t)
}

/// The main answer with some fields replaced by their own queries' answers (`[sources.promql]`):
/// each override's series take the field's DCGM name, and the main answer's series of that
/// name are dropped.
pub fn to_partial_with_fields(main: &str, fields: &[(&str, String)], node: ScrapeNode) -> Result<Partial, SourceError> {
    from_texts(texts_of(&[main], false, fields)?, node)
}

/// One collection: the query answered by Prometheus, as a partial fleet.
pub fn to_partial_from_api(body: &str, node: ScrapeNode) -> Result<Partial, SourceError> {
    to_partial_with_fields(body, &[], node)
}

/// One collection from the federation endpoint's text, with the fields' own answers.
pub fn to_partial_from_federation(
    text: &str,
    fields: &[(&str, String)],
    node: ScrapeNode,
) -> Result<Partial, SourceError> {
    from_texts(texts_of(&[text], true, fields)?, node)
}

fn from_texts(texts: Texts, node: ScrapeNode) -> Result<Partial, SourceError> {
    let mut out = Partial::default();
    let mut notes: Vec<String> = texts.warnings;
    if texts.dropped > 0 {
        notes.push(format!(
            "{} series the exposition cannot carry (a metric or label name it does not allow, a value that is not a number) left out",
            texts.dropped
        ));
    }
    // Each text is dropped once mapped: the answer is never held twice. Past the largest
    // fleet's cards the rest are counted, not kept (each instance's map is bounded alone).
    let (mut kept, mut cut) = (0usize, 0usize);
    for (instance, text) in texts.by_instance {
        let name = match node {
            ScrapeNode::Target if !instance.is_empty() => NodeName::Fixed(host(&instance)),
            _ => NodeName::Label,
        };
        let (p, _) = to_partial(&text, &name);
        if let Some(n) = p.note {
            notes.push(format!("{instance}: {n}"));
        }
        let cards: usize = p.nodes.iter().map(|n| n.cards.len()).sum();
        if kept + cards > super::MAX_CARDS {
            cut += cards;
            continue;
        }
        kept += cards;
        out.nodes.extend(p.nodes);
        out.workloads.extend(p.workloads);
    }
    if cut > 0 {
        notes.push(format!("{cut} cards past {} cut (the largest supported fleet)", super::MAX_CARDS));
    }
    if out.nodes.is_empty() {
        return Err(source_error("the query returned no GPU series".into()));
    }
    out.note = (!notes.is_empty()).then(|| notes.join("; "));
    Ok(out)
}

/// The instant-query URL for `query` at `base` (a proxy's own parameters kept after it).
pub fn query_url(base: &str, query: &str) -> String {
    let mut enc = String::new();
    for b in query.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => enc.push(b as char),
            _ => {
                let _ = write!(enc, "%{b:02X}");
            }
        }
    }
    // A base URL's own query (a proxy's parameter) goes after the API's, never into its path.
    let base = base.split('#').next().unwrap_or_default();
    let (path, extra) = base.split_once('?').unwrap_or((base, ""));
    let extra = if extra.is_empty() { String::new() } else { format!("&{extra}") };
    format!("{}/api/v1/query?query={enc}{extra}", path.trim_end_matches('/'))
}

/// What the Prometheus source asks for.
#[derive(Debug, Clone)]
pub struct Settings {
    pub base: String,
    /// The main selector; `None` for `DEFAULT_QUERY`.
    pub query: Option<String>,
    /// `[sources.promql]`: field -> expression.
    pub fields: Vec<(String, String)>,
    pub with_queue: bool,
    pub node: ScrapeNode,
    pub api: PrometheusApi,
    /// Set once `auto` found no federation endpoint: instant queries from then on.
    pub no_federation: Arc<AtomicBool>,
}

impl Settings {
    /// Whether a collection at `at` reads the federation endpoint: never for a past moment
    /// (it has no `time`), and in `auto` only for the default selector (a custom query may be
    /// any expression) on a server that has the endpoint.
    fn federation(&self, at: Option<DateTime<Utc>>) -> bool {
        at.is_none()
            && match self.api {
                PrometheusApi::Federate => true,
                PrometheusApi::Query => false,
                PrometheusApi::Auto => self.query.is_none() && !self.no_federation.load(Ordering::Relaxed),
            }
    }
}

/// Why an `auto` federation answer means the server has no federation endpoint, if it does:
/// Thanos Query and Mimir answer 404; a proxy may answer a page of HTML, or JSON.
fn not_served(answer: &Result<String, super::http::FetchError>) -> Option<String> {
    match answer {
        Err(super::http::FetchError::Status { status: status @ (404 | 405 | 501), .. }) => {
            Some(format!("HTTP {status}"))
        }
        Ok(body) => match body.trim_start().as_bytes().first() {
            Some(b'<') => Some("it answered HTML".into()),
            Some(b'{' | b'[') => Some("it answered JSON".into()),
            _ => None,
        },
        Err(_) => None,
    }
}

/// `url` evaluated at `at` (Prometheus's `time` parameter), or now.
fn at_time(url: String, at: Option<DateTime<Utc>>) -> String {
    match at {
        Some(t) => format!("{url}&time={:.3}", t.timestamp_millis() as f64 / 1000.0),
        None => url,
    }
}

/// How long a collection waits for the history before it answers without it (the history is
/// asked again with the next answer): a hung range query delayed the first answer by the
/// whole HTTP timeout.
pub const HISTORY_WAIT: Duration = Duration::from_secs(3);

/// One collection: every query answered at `at` (`None`: now), as a partial fleet; while
/// `history_wanted`, the span before it too (for the sparklines and the advisor's windows),
/// waited for at most `HISTORY_WAIT`; `history_wanted` is cleared once the history answered.
pub async fn collect(
    s: &Settings,
    client: &Client,
    at: Option<DateTime<Utc>>,
    history_wanted: &mut bool,
) -> Result<Partial, SourceError> {
    let with_history = *history_wanted;
    let (base, node) = (&s.base, s.node);
    let selector = s.query.as_deref().unwrap_or(DEFAULT_QUERY);
    let (answers, field_error) = ask_fields(s, client, at).await;
    let main = ask_main(s, client, selector, at).await;
    let mut result = read_answers(client, main.answer, main.federation, answers, field_error, node).await;
    if let (Some(why), Ok(p)) = (main.fell_back, &mut result) {
        p.note = Some(p.note.take().map_or(why.clone(), |n| format!("{why}; {n}")));
    }
    if s.with_queue
        && let Ok(p) = &mut result
    {
        queue_into(client, base, p, at).await;
    }
    if with_history && let Ok(p) = &mut result {
        history::into_partial(client, base, node, at, p, history_wanted).await;
    }
    // Errors and notes can quote an answer: never a credential it echoed.
    match &mut result {
        Ok(p) => p.note = p.note.take().map(|n| client.scrub(&n)),
        Err(e) => e.message = client.scrub(&e.message),
    }
    result
}

/// Each `[sources.promql]` field's query, asked in turn at `at`: the answers under their DCGM
/// names, and the last field that failed.
async fn ask_fields(
    s: &Settings,
    client: &Client,
    at: Option<DateTime<Utc>>,
) -> (Vec<(&'static str, String)>, Option<String>) {
    let mut answers: Vec<(&'static str, String)> = Vec::new();
    let mut field_error = None;
    for (field, expr) in &s.fields {
        let Some(metric) = crate::config::promql_metric(field) else { continue };
        match client.get(&at_time(query_url(&s.base, expr), at)).await {
            Ok(body) => answers.push((metric, body)),
            Err(e) => field_error = Some(format!("promql.{field}: {e}")),
        }
    }
    (answers, field_error)
}

/// The main query's answer, and how it was asked.
struct MainAnswer {
    /// The federation endpoint's text (else an instant vector).
    federation: bool,
    /// Why this collection fell back from federation to instant queries, where it did.
    fell_back: Option<String>,
    answer: Result<Vec<String>, super::http::FetchError>,
}

/// The main query (`selector`) asked at `at`: from the federation endpoint where it is used
/// (falling back to instant queries for good under `api = "auto"` where it is not served),
/// else as an instant query.
async fn ask_main(s: &Settings, client: &Client, selector: &str, at: Option<DateTime<Utc>>) -> MainAnswer {
    let base = &s.base;
    let mut federation = s.federation(at);
    let mut fell_back = None;
    let mut answer = None;
    if federation {
        // The default selector in halves asked at once (Prometheus answers each on its own
        // thread); a custom one whole.
        let selectors: Vec<&str> = if s.query.is_none() { DEFAULT_FEDERATION.to_vec() } else { vec![selector] };
        let urls: Vec<String> = selectors.iter().map(|q| federate::url(base, q)).collect();
        let got = futures_util::future::join_all(urls.iter().map(|u| client.get(u))).await;
        // The first answer that is no federation answer speaks for them all.
        match urls.iter().zip(&got).find_map(|(u, a)| not_served(a).map(|why| (u, why))) {
            Some((url, why)) if s.api == PrometheusApi::Auto => {
                s.no_federation.store(true, Ordering::Relaxed);
                federation = false;
                fell_back = Some(format!(
                    "{}: no federation endpoint ({why}): instant queries from now on",
                    crate::url::redact(url)
                ));
            }
            // `federate` keeps its answer; a page of HTML or JSON is said for what it is.
            Some((url, why)) => {
                let url = crate::url::redact(url);
                answer =
                    Some(Err(super::http::FetchError::Other { url, why: format!("no federation endpoint ({why})") }));
            }
            None => answer = Some(got.into_iter().collect::<Result<Vec<String>, _>>()),
        }
    }
    let answer = match answer {
        Some(a) => a,
        None => client.get(&at_time(query_url(base, selector), at)).await.map(|b| vec![b]),
    };
    MainAnswer { federation, fell_back, answer }
}

/// The main answer (`federation`: the federation endpoint's text) and the fields' answers
/// mapped into a partial fleet, off the async threads; a field that failed, or a main answer
/// that did, is the collection's error.
async fn read_answers(
    client: &Client,
    answer: Result<Vec<String>, super::http::FetchError>,
    federation: bool,
    answers: Vec<(&'static str, String)>,
    mut field_error: Option<String>,
    node: ScrapeNode,
) -> Result<Partial, SourceError> {
    match answer {
        Ok(_) if field_error.is_some() => Err(source_error(field_error.take().unwrap_or_default())),
        Ok(mut bodies) => {
            // A message quoting the answer is cut before it reaches `scrub` below: the body is
            // scrubbed whole first (only where there is a secret to hide).
            if client.has_secrets() {
                bodies = bodies.into_iter().map(|b| client.scrub(&b)).collect();
            }
            tokio::task::spawn_blocking(move || {
                let main: Vec<&str> = bodies.iter().map(String::as_str).collect();
                let texts = texts_of(&main, federation, &answers)?;
                drop(main);
                drop(bodies);
                from_texts(texts, node)
            })
            .await
            .unwrap_or_else(|e| Err(source_error(format!("mapping failed: {e}"))))
        }
        Err(super::http::FetchError::Status { status, body: Some(b), url }) if b.starts_with('{') => {
            // Prometheus error envelopes come with 4xx/5xx; say what it said.
            let msg = Texts::default()
                .add_vector(&b, Options::PLAIN)
                .err()
                .map_or_else(|| format!("HTTP {status}"), |e| e.to_string());
            Err(source_error(format!("{url}: {msg}")))
        }
        Err(e) => Err(SourceError { unanswered: e.unanswered(), ..source_error(e.to_string()) }),
    }
}

/// Poll Prometheus until the receiver goes away; failures back off, capped at a minute.
pub fn spawn(settings: Settings, client: Client, interval: Duration, tx: mpsc::Sender<SourceUpdate>) {
    tokio::spawn(async move {
        let mut poll = Poll::new("prometheus".into(), SourceKind::Prometheus, interval, tx);
        let mut history_wanted = true;
        loop {
            // With the first good answer, the last hour for the sparklines (once it answered:
            // after that the console keeps its own).
            let result = collect(&settings, &client, None, &mut history_wanted).await;
            let Some(wait) = poll.send(result).await else { return };
            tokio::time::sleep(wait).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_past_moment_always_uses_instant_queries() {
        let s = |api, query: Option<&str>| Settings {
            base: "http://p:9090".into(),
            query: query.map(str::to_string),
            fields: Vec::new(),
            with_queue: false,
            node: ScrapeNode::Target,
            api,
            no_federation: Arc::default(),
        };
        let past = Some(Utc::now());
        for api in [PrometheusApi::Auto, PrometheusApi::Federate, PrometheusApi::Query] {
            assert!(!s(api, None).federation(past), "{api:?}");
        }
        assert!(s(PrometheusApi::Auto, None).federation(None));
        assert!(!s(PrometheusApi::Auto, Some("up")).federation(None), "a custom query may be any expression");
        assert!(s(PrometheusApi::Federate, Some("{job=\"dcgm\"}")).federation(None));
        let gone = s(PrometheusApi::Auto, None);
        gone.no_federation.store(true, Ordering::Relaxed);
        assert!(!gone.federation(None), "after the fallback");
    }

    #[test]
    fn the_federation_halves_are_the_default_query_without_overlap() {
        let inner = |q: &'static str| q.strip_prefix("{__name__=~\"").and_then(|r| r.strip_suffix("\"}"));
        let [a, b] = DEFAULT_FEDERATION.map(|q| inner(q).unwrap_or_default());
        assert!(!a.is_empty() && !b.is_empty());
        assert_eq!(inner(DEFAULT_QUERY), Some(format!("{a}|{b}").as_str()));
        // The alternatives at the top level of each half: a family in both would be read twice.
        let alternatives = |re: &'static str| {
            let (mut out, mut depth, mut from) = (Vec::new(), 0i32, 0);
            for (i, c) in re.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    '|' if depth == 0 => {
                        out.push(&re[from..i]);
                        from = i + 1;
                    }
                    _ => {}
                }
            }
            out.push(&re[from..]);
            out
        };
        let (a, b) = (alternatives(a), alternatives(b));
        assert!(a.iter().all(|x| !b.contains(x)), "{a:?} and {b:?} share a family");
        assert!(a.iter().chain(&b).all(|x| !x.is_empty()), "an empty alternative matches nothing useful");
    }

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
    fn a_field_query_replaces_its_series() {
        let temp = r#"{"status":"success","data":{"resultType":"vector","result":[
          {"metric":{"gpu":"0","UUID":"GPU-a","instance":"10.0.0.7:9400"},"value":[1700000000.1,"70"]}]}}"#;
        let p = to_partial_with_fields(VECTOR, &[("DCGM_FI_DEV_GPU_TEMP", temp.to_string())], ScrapeNode::Target)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.nodes[0].cards[0].temperature_c, Some(70.0), "the field's own query wins");
        assert_eq!(p.nodes[0].cards[0].utilization_pct, Some(87.0), "other fields from the main query");
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
            query_url("http://p:9090/", r#"{__name__=~"DCGM_FI_.*|dcgm_.*"}"#),
            "http://p:9090/api/v1/query?query=%7B__name__%3D~%22DCGM_FI_.%2A%7Cdcgm_.%2A%22%7D"
        );
    }
}
