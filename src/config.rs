//! The config file: sources, simulator settings, policy thresholds, read-only mode.
//!
//! Read from `--config PATH` or `$XDG_CONFIG_HOME/tessera/config.toml`. Every error names the
//! file, the key and the bad value. `example()` is the commented example config; a test keeps
//! the committed `config.example.toml` identical to it.

pub mod actions;
pub mod advisor;
mod example;
pub mod http;
pub mod moment;
pub mod schedule;
pub mod scheduler;

pub use example::example;

pub use actions::Actions;
pub use advisor::Advisor;
pub use http::{Auth, Credentials, Http};
pub use scheduler::{Kubernetes, Slurm};

use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::{Table, Value};

use crate::units::duration;

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file this came from; `None` for built-in defaults.
    pub path: Option<PathBuf>,
    pub read_only: bool,
    pub refresh: Duration,
    pub theme: Option<String>,
    pub sources: Sources,
    pub demo: Demo,
    pub policy: Policy,
    pub slurm: Slurm,
    pub kubernetes: Kubernetes,
    pub kinds: crate::model::KindRules,
    pub advisor: Advisor,
    /// `[actions]`: where actions take their locks.
    pub actions: Actions,
    /// `[[schedule]]`: MIG layouts by time of day for groups of cards.
    pub schedules: Vec<crate::model::schedule::Schedule>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sources {
    /// Run the simulated cluster even when real sources are configured.
    pub demo: bool,
    /// `Some(None)`: NVML from the default library; `Some(Some(path))`: that library.
    pub nvml: Option<Option<String>>,
    pub prometheus: Option<String>,
    /// The instant query whose series tessera maps; `None` for the DCGM default.
    pub prometheus_query: Option<String>,
    /// Also read the queue from Prometheus (kube-state-metrics pending pods, Kueue).
    pub prometheus_queue: bool,
    /// The endpoint that gives the cards.
    pub prometheus_api: PrometheusApi,
    /// Per-field PromQL (`[sources.promql]`): field -> expression, replacing that field's
    /// series from the main query.
    pub promql: Vec<(String, String)>,
    pub scrape: Vec<String>,
    pub slurm: bool,
    /// `Some(None)`: the current kubeconfig context; `Some(Some(name))`: that context.
    pub kubernetes: Option<Option<String>>,
    /// Where a scraped card's node name comes from.
    pub scrape_node: ScrapeNode,
    pub http: Http,
    /// Credentials for one origin each (`[[sources.auth]]`): scrape targets, slurmrestd.
    pub auth: Vec<Auth>,
    /// The bytes of responses and command output in flight, for all sources together
    /// (`None`: the default, `budget::DEFAULT`).
    pub memory_budget: Option<usize>,
}

/// Fields `[sources.promql]` may set, and the DCGM metric each one stands for.
pub const PROMQL_FIELDS: &[(&str, &str)] = &[
    ("gpu_util", "DCGM_FI_DEV_GPU_UTIL"),
    ("gr_engine_active", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
    ("fb_used", "DCGM_FI_DEV_FB_USED"),
    ("fb_free", "DCGM_FI_DEV_FB_FREE"),
    ("temperature", "DCGM_FI_DEV_GPU_TEMP"),
    ("power", "DCGM_FI_DEV_POWER_USAGE"),
    ("power_limit", "DCGM_FI_DEV_POWER_MGMT_LIMIT"),
    ("sm_clock", "DCGM_FI_DEV_SM_CLOCK"),
    ("mem_clock", "DCGM_FI_DEV_MEM_CLOCK"),
    ("xid", "DCGM_FI_DEV_XID_ERRORS"),
    ("ecc_dbe", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
];

/// The DCGM metric a `[sources.promql]` field stands for.
pub fn promql_metric(field: &str) -> Option<&'static str> {
    PROMQL_FIELDS.iter().find(|(f, _)| *f == field).map(|(_, m)| *m)
}

/// Which endpoint of a Prometheus-compatible server gives the cards (`sources.prometheus_api`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PrometheusApi {
    /// The federation endpoint where the server has it and the default selector is used, else
    /// instant queries.
    #[default]
    Auto,
    /// Instant queries (`/api/v1/query`) always.
    Query,
    /// The federation endpoint (`/federate`) for the present (a past moment, which it cannot
    /// give, still uses instant queries): `prometheus_query` must be a selector.
    Federate,
}

/// dcgm-exporter's hostname label is often the exporter pod's name, so the scrape target's
/// host is the default node name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScrapeNode {
    #[default]
    Target,
    Label,
}

impl Sources {
    pub fn any_real(&self) -> bool {
        self.nvml.is_some()
            || self.prometheus.is_some()
            || !self.scrape.is_empty()
            || self.slurm
            || self.kubernetes.is_some()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Demo {
    pub seed: u64,
    pub speed: f64,
    pub size: Option<(u32, u32)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Training may be preempted only after running this long.
    pub min_runtime: Duration,
    /// Suggest scale-in when utilisation stays under this.
    pub scale_in_utilization_pct: f64,
    /// Suggest scale-out when the oldest pending workload waited longer than this.
    pub queue_wait_threshold: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            path: None,
            read_only: false,
            refresh: Duration::from_secs(1),
            theme: None,
            sources: Sources::default(),
            demo: Demo { seed: 42, speed: 1.0, size: None },
            policy: Policy {
                min_runtime: Duration::from_secs(30 * 60),
                scale_in_utilization_pct: 50.0,
                queue_wait_threshold: Duration::from_secs(15 * 60),
            },
            slurm: Slurm::default(),
            kubernetes: Kubernetes::default(),
            kinds: crate::model::KindRules::default(),
            advisor: Advisor::default(),
            actions: Actions::default(),
            schedules: Vec::new(),
        }
    }
}

/// A value as an error quotes it: short, and a URL in it (alone or in a list) without its
/// credentials or query.
fn quoted(v: &Value) -> String {
    let url = |s: &str| s.contains("://").then(|| format!("{:?}", crate::url::redact(s.trim())));
    let text = match v {
        Value::String(s) => url(s).unwrap_or_else(|| v.to_string()),
        Value::Array(items) => {
            let parts: Vec<String> =
                items.iter().map(|i| i.as_str().and_then(url).unwrap_or_else(|| i.to_string())).collect();
            format!("[{}]", parts.join(", "))
        }
        _ => v.to_string(),
    };
    shown(&text)
}

/// A bad value as an error quotes it: at most 120 characters (a pasted file or a 100 KB
/// string is not echoed whole), saying how long it was.
pub fn shown(value: &str) -> String {
    shown_at(value, 120)
}

/// `value` cut at `max` characters, saying how long it was.
pub fn shown_at(value: &str, max: usize) -> String {
    let n = value.chars().count();
    if n <= max {
        return value.to_string();
    }
    format!("{}… ({} characters)", value.chars().take(max).collect::<String>(), n)
}

/// A config problem: which file, which key, which value, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {key}{}: {why}", value.as_ref().map(|v| format!(" = {v}")).unwrap_or_default())]
pub struct ConfigError {
    pub file: String,
    pub key: String,
    pub value: Option<String>,
    pub why: String,
}

/// The default config path: `$XDG_CONFIG_HOME/tessera/config.toml`, else `~/.config/...`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("tessera").join("config.toml"))
}

/// Load `explicit` (which must exist), else the default path if it exists, else defaults.
pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
    match explicit {
        Some(p) => load_file(p),
        None => match default_path().filter(|p| p.exists()) {
            Some(p) => load_file(&p),
            None => Ok(Config::default()),
        },
    }
}

pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
    let file = path.display().to_string();
    let text = crate::files::read_text(path, crate::files::CONFIG_LIMIT).map_err(|why| ConfigError {
        file: file.clone(),
        key: "(file)".into(),
        value: None,
        why: why.to_string(),
    })?;
    let mut cfg = parse(&text, &file)?;
    cfg.path = Some(path.to_path_buf());
    Ok(cfg)
}

/// The largest `sources.memory_budget`: past it the budget bounds nothing a host has.
const MAX_MEMORY_BUDGET: u64 = 64 << 30;

/// Parse config text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
    let table: Table = text.parse().map_err(|e: toml::de::Error| {
        let why = e.message().to_string();
        // Where, as an editor counts: line and column (1-based, in characters).
        let at = e
            .span()
            .map(|s| {
                let before = &text[..s.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                format!("line {line}, column {column}")
            })
            .unwrap_or_else(|| "(syntax)".into());
        ConfigError { file: file.into(), key: at, value: None, why: format!("not valid TOML: {why}") }
    })?;
    let r = Reader { file };
    let mut cfg = Config::default();
    for (key, value) in &table {
        match key.as_str() {
            "read_only" => cfg.read_only = r.boolean(key, value)?,
            "refresh" => cfg.refresh = r.duration(key, value)?,
            "theme" => cfg.theme = Some(r.string(key, value)?),
            "sources" => read_sources(&r, r.table(key, value)?, &mut cfg.sources)?,
            "demo" => read_demo(&r, r.table(key, value)?, &mut cfg.demo)?,
            "policy" => read_policy(&r, r.table(key, value)?, &mut cfg.policy)?,
            "slurm" => scheduler::read_slurm(&r, r.table(key, value)?, &mut cfg.slurm)?,
            "kubernetes" => scheduler::read_kubernetes(&r, r.table(key, value)?, &mut cfg.kubernetes)?,
            "kinds" => scheduler::read_kinds(&r, r.table(key, value)?, &mut cfg.kinds)?,
            "advisor" => advisor::read_advisor(&r, r.table(key, value)?, &mut cfg.advisor)?,
            "actions" => actions::read_actions(&r, r.table(key, value)?, &mut cfg.actions)?,
            "schedule" => schedule::read_schedules(&r, value, &mut cfg.schedules)?,
            _ => {
                return Err(r.unknown(
                    key,
                    &[
                        "read_only",
                        "refresh",
                        "theme",
                        "sources",
                        "demo",
                        "policy",
                        "slurm",
                        "kubernetes",
                        "kinds",
                        "advisor",
                        "actions",
                        "schedule",
                    ],
                ));
            }
        }
    }
    if let Some(v) = table.get("refresh")
        && let Err(why) = check_refresh(cfg.refresh)
    {
        return Err(r.bad("refresh", v, why));
    }
    Ok(cfg)
}

fn read_sources(r: &Reader, t: &Table, s: &mut Sources) -> Result<(), ConfigError> {
    for (k, v) in t {
        let key = format!("sources.{k}");
        match k.as_str() {
            "demo" => s.demo = r.boolean(&key, v)?,
            "nvml" => s.nvml = r.flag_or_string(&key, v)?,
            "prometheus" => s.prometheus = Some(r.url(&key, v)?),
            "prometheus_query" => s.prometheus_query = Some(r.string(&key, v)?),
            "prometheus_queue" => s.prometheus_queue = r.boolean(&key, v)?,
            "prometheus_api" => {
                s.prometheus_api = match r.string(&key, v)?.as_str() {
                    "auto" => PrometheusApi::Auto,
                    "query" => PrometheusApi::Query,
                    "federate" => PrometheusApi::Federate,
                    _ => return Err(r.bad(&key, v, "expected \"auto\", \"query\" or \"federate\"")),
                }
            }
            "scrape" => {
                let Value::Array(items) = v else { return Err(r.bad(&key, v, "expected a list of URLs")) };
                s.scrape = items.iter().map(|i| r.url(&key, i)).collect::<Result<_, _>>()?;
            }
            "slurm" => s.slurm = r.boolean(&key, v)?,
            "kubernetes" => s.kubernetes = r.flag_or_string(&key, v)?,
            "scrape_node" => {
                s.scrape_node = match r.string(&key, v)?.as_str() {
                    "target" => ScrapeNode::Target,
                    "label" => ScrapeNode::Label,
                    _ => return Err(r.bad(&key, v, "expected \"target\" or \"label\"")),
                }
            }
            "http" => http::read_http(r, r.table(&key, v)?, &mut s.http)?,
            "auth" => s.auth = http::read_auth(r, &key, v)?,
            "memory_budget" => s.memory_budget = Some(read_memory_budget(r, &key, v)?),
            "promql" => read_promql(r, &key, v, &mut s.promql)?,
            _ => return Err(r.unknown(&key, SOURCES_KEYS)),
        }
    }
    Ok(())
}

/// The keys `[sources]` takes.
const SOURCES_KEYS: &[&str] = &[
    "demo",
    "nvml",
    "prometheus",
    "prometheus_query",
    "prometheus_queue",
    "prometheus_api",
    "scrape",
    "scrape_node",
    "slurm",
    "kubernetes",
    "http",
    "auth",
    "memory_budget",
    "promql",
];

/// `sources.memory_budget`: a size from 1MiB to `MAX_MEMORY_BUDGET`, in bytes.
fn read_memory_budget(r: &Reader, key: &str, v: &Value) -> Result<usize, ConfigError> {
    let text = r.string(key, v)?;
    let bytes = crate::units::parse_size(&text).map_err(|why| r.bad(key, v, &why))?;
    if bytes < 1 << 20 {
        return Err(r.bad(key, v, "expected at least 1MiB"));
    }
    if bytes > MAX_MEMORY_BUDGET {
        return Err(r.bad(key, v, "expected at most 64GiB (the sources' reads together; the default is 192MiB)"));
    }
    Ok(usize::try_from(bytes).unwrap_or(usize::MAX))
}

/// `[sources.promql]`: one PromQL expression per known field, added to `promql` in order.
fn read_promql(r: &Reader, key: &str, v: &Value, promql: &mut Vec<(String, String)>) -> Result<(), ConfigError> {
    for (field, expr) in r.table(key, v)? {
        let fkey = format!("sources.promql.{field}");
        if promql_metric(field).is_none() {
            let known: Vec<&str> = PROMQL_FIELDS.iter().map(|(f, _)| *f).collect();
            return Err(r.unknown(&fkey, &known));
        }
        promql.push((field.clone(), r.string(&fkey, expr)?));
    }
    Ok(())
}

fn read_demo(r: &Reader, t: &Table, d: &mut Demo) -> Result<(), ConfigError> {
    for (k, v) in t {
        let key = format!("demo.{k}");
        match k.as_str() {
            "seed" => match v {
                Value::Integer(i) if *i >= 0 => d.seed = *i as u64,
                _ => return Err(r.bad(&key, v, "expected a whole number >= 0")),
            },
            "speed" => {
                let s = r.number(&key, v)?;
                if !(s > 0.0 && s <= 10_000.0) {
                    return Err(r.bad(&key, v, "expected a number above 0 and at most 10000"));
                }
                d.speed = s;
            }
            "size" => d.size = Some(parse_size(&r.string(&key, v)?).map_err(|why| r.bad(&key, v, &why))?),
            _ => return Err(r.unknown(&key, &["seed", "speed", "size"])),
        }
    }
    Ok(())
}

fn read_policy(r: &Reader, t: &Table, p: &mut Policy) -> Result<(), ConfigError> {
    for (k, v) in t {
        let key = format!("policy.{k}");
        match k.as_str() {
            "min_runtime" => p.min_runtime = r.duration(&key, v)?,
            "queue_wait_threshold" => p.queue_wait_threshold = r.duration(&key, v)?,
            "scale_in_utilization_pct" => {
                let x = r.number(&key, v)?;
                if !(0.0..=100.0).contains(&x) {
                    return Err(r.bad(&key, v, "expected a percentage from 0 to 100"));
                }
                p.scale_in_utilization_pct = x;
            }
            _ => return Err(r.unknown(&key, &["min_runtime", "scale_in_utilization_pct", "queue_wait_threshold"])),
        }
    }
    Ok(())
}

/// Refresh intervals tessera accepts: from 100 ms to one hour.
pub fn check_refresh(d: Duration) -> Result<(), RefreshError> {
    if d < Duration::from_millis(100) {
        Err(RefreshError::TooOften)
    } else if d > Duration::from_secs(3600) {
        Err(RefreshError::TooRarely)
    } else {
        Ok(())
    }
}

/// A refresh interval out of its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RefreshError {
    #[error("must be at least 100ms")]
    TooOften,
    #[error("must be at most 1h")]
    TooRarely,
}

/// Why a `NODESxGPUS` size did not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DemoSizeError {
    #[error("expected NODESxGPUS such as 512x8, got {0:?}")]
    Form(String),
    #[error("{0:?}: nodes must be 1..=4096 and GPUs per node 1..=16")]
    OutOfRange(String),
}

/// `NODESxGPUS`, as `--demo-size 512x8`.
pub fn parse_size(text: &str) -> Result<(u32, u32), DemoSizeError> {
    let bad = || DemoSizeError::Form(text.into());
    let (n, g) = text.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let n: u32 = n.trim().parse().map_err(|_| bad())?;
    let g: u32 = g.trim().parse().map_err(|_| bad())?;
    if !(1..=4096).contains(&n) || !(1..=16).contains(&g) {
        return Err(DemoSizeError::OutOfRange(text.into()));
    }
    Ok((n, g))
}

struct Reader<'a> {
    file: &'a str,
}

impl Reader<'_> {
    fn bad(&self, key: &str, v: &Value, why: impl std::fmt::Display) -> ConfigError {
        // A reason that quotes the value (a duration's parser does) quotes it short too.
        let why = why.to_string();
        let why = match v.as_str() {
            Some(raw) if raw.chars().count() > 120 => why.replace(raw, &shown(raw)),
            _ => why,
        };
        // Whatever else it quotes (a unit, a trimmed or escaped form of the value): short.
        let why = if why.chars().count() > 400 { shown_at(&why, 400) } else { why };
        ConfigError { file: self.file.into(), key: key.into(), value: Some(quoted(v)), why }
    }

    fn unknown(&self, key: &str, known: &[&str]) -> ConfigError {
        ConfigError {
            file: self.file.into(),
            key: key.into(),
            value: None,
            why: format!("unknown key; known keys here: {}", known.join(", ")),
        }
    }

    fn missing(&self, key: &str, why: &str) -> ConfigError {
        ConfigError { file: self.file.into(), key: key.into(), value: None, why: why.into() }
    }

    fn table<'v>(&self, key: &str, v: &'v Value) -> Result<&'v Table, ConfigError> {
        v.as_table().ok_or_else(|| self.bad(key, v, "expected a [section]"))
    }

    fn boolean(&self, key: &str, v: &Value) -> Result<bool, ConfigError> {
        v.as_bool().ok_or_else(|| self.bad(key, v, "expected true or false"))
    }

    fn string(&self, key: &str, v: &Value) -> Result<String, ConfigError> {
        v.as_str().map(str::to_string).ok_or_else(|| self.bad(key, v, "expected a string in quotes"))
    }

    fn number(&self, key: &str, v: &Value) -> Result<f64, ConfigError> {
        match v {
            Value::Integer(i) => Ok(*i as f64),
            Value::Float(f) if f.is_finite() => Ok(*f),
            _ => Err(self.bad(key, v, "expected a number")),
        }
    }

    fn duration(&self, key: &str, v: &Value) -> Result<Duration, ConfigError> {
        let s = v.as_str().ok_or_else(|| self.bad(key, v, "expected a duration in quotes, like \"30m\""))?;
        duration::parse(s).map_err(|why| self.bad(key, v, &why))
    }

    fn url(&self, key: &str, v: &Value) -> Result<String, ConfigError> {
        let s = self.string(key, v)?;
        crate::url::check_url(&s).map_err(|why| {
            // The value as a URL is shown: never its credentials or query.
            self.bad(key, v, format!("expected an http:// or https:// URL ({why})"))
        })?;
        Ok(s)
    }

    fn flag_or_string(&self, key: &str, v: &Value) -> Result<Option<Option<String>>, ConfigError> {
        match v {
            Value::Boolean(true) => Ok(Some(None)),
            Value::Boolean(false) => Ok(None),
            Value::String(s) if !s.is_empty() => Ok(Some(Some(s.clone()))),
            _ => Err(self.bad(key, v, "expected true, false or a non-empty string")),
        }
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
