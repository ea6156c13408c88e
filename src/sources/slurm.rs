//! Slurm: jobs and nodes from Slurm's own JSON, by running `squeue --json` and `sinfo --json`
//! (one at a time, each with a timeout) or by asking slurmrestd. Pending jobs with their
//! reasons form the queue; running jobs hold the cards their GRES indexes name.

pub mod gres;
pub mod jobs;
pub mod json;
pub mod nodes;
pub mod stream;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use super::{Partial, SourceError, SourceUpdate, http};
use crate::model::KindRules;
use crate::model::SourceKind;

/// slurmrestd instead of the commands.
#[derive(Debug, Clone, PartialEq)]
pub struct Rest {
    pub url: String,
    /// Sent as `X-SLURM-USER-NAME` (needed with an admin token).
    pub user: Option<String>,
    /// A file holding the JWT, sent as `X-SLURM-USER-TOKEN`.
    pub token_file: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Where `squeue`, `sinfo` and `scontrol` are; `None` looks them up on PATH.
    pub commands_dir: Option<PathBuf>,
    /// Longest one command (or one REST call) may take.
    pub timeout: Duration,
    pub rest: Option<Rest>,
    pub kinds: KindRules,
}

impl Default for Settings {
    fn default() -> Self {
        Self { commands_dir: None, timeout: Duration::from_secs(10), rest: None, kinds: KindRules::default() }
    }
}

impl Settings {
    /// The path to run for a Slurm command.
    pub fn program(&self, name: &str) -> PathBuf {
        self.commands_dir.as_ref().map_or_else(|| PathBuf::from(name), |d| d.join(name))
    }
}

fn err(message: impl Into<String>) -> SourceError {
    SourceError { message: message.into(), fatal: false, unanswered: false }
}

/// The most a Slurm command may print (as an HTTP answer may hold): 10,000 jobs are ~3 MB.
pub const OUTPUT_LIMIT: u64 = 256 << 20;

/// Run a Slurm command with a timeout; its stdout, or an error naming the command and what
/// went wrong (stderr's first line, the exit code, or the timeout).
pub async fn run(settings: &Settings, name: &str, args: &[&str]) -> Result<String, SourceError> {
    let shown = format!("{name} {}", args.join(" "));
    let program = settings.program(name);
    let out = match crate::process::run(
        &program.to_string_lossy(),
        args,
        settings.timeout,
        OUTPUT_LIMIT,
        Some(&crate::budget::Budget::global()),
    )
    .await
    {
        Err(crate::process::RunError::NotFound) => {
            return Err(err(format!("{name}: not found (is Slurm's client installed? see slurm.commands_dir)")));
        }
        Err(e) => return Err(err(format!("{shown}: {e}"))),
        Ok(out) => out,
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let line = stderr.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("no message");
        let code = out.status.code().map_or_else(|| "a signal".to_string(), |c| format!("code {c}"));
        return Err(err(format!("{shown} exited with {code}: {line}")));
    }
    // Without a copy when it is UTF-8, as it should be (the budget no longer holds it).
    Ok(String::from_utf8(out.stdout).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// A nodes document, read a node at a time (`stream.rs`), checked as `checked` does, with
/// what was cut said.
fn nodes_document(
    (found, head): (nodes::Nodes, stream::Head),
    what: &str,
    notes: &mut Vec<String>,
) -> Result<nodes::Nodes, SourceError> {
    let doc = serde_json::json!({ "errors": head.errors, "meta": head.meta });
    checked(&doc, head.listed, what, "nodes", notes)?;
    if found.cut_nodes > 0 {
        let n = crate::units::count(found.cut_nodes as u64, "node", "nodes");
        notes.push(format!("{n} past {} not read (the largest supported fleet)", nodes::MAX_NODES));
    }
    if found.cut_cards > 0 {
        let n = crate::units::count(found.cut_cards as u64, "card", "cards");
        notes.push(format!("{n} past {} cut (the largest supported fleet)", nodes::MAX_CARDS));
    }
    Ok(found)
}

/// Read a nodes document, or say it is not JSON.
fn read_nodes(text: &str, what: &str) -> Result<(nodes::Nodes, stream::Head), SourceError> {
    stream::read_nodes(text).map_err(|e| err(format!("{what}: not JSON ({e})")))
}

/// A jobs document, read a job at a time (`stream.rs`), checked as `checked` does.
fn jobs_document(
    text: &str,
    what: &str,
    kinds: &KindRules,
    notes: &mut Vec<String>,
) -> Result<jobs::Jobs, SourceError> {
    let (jobs, head) = stream::read(text, kinds).map_err(|e| err(format!("{what}: not JSON ({e})")))?;
    let doc = serde_json::json!({ "errors": head.errors, "meta": head.meta });
    checked(&doc, head.listed, what, "jobs", notes)?;
    if jobs.cut > 0 {
        notes.push(format!(
            "{} past {} not read",
            crate::units::count(jobs.cut as u64, "GPU job", "GPU jobs"),
            jobs::MAX_JOBS
        ));
    }
    Ok(jobs)
}

/// Slurm's own `errors` as the error when `listed` is false (the document carries no `key`
/// list); an unknown dialect noted.
fn checked(doc: &Value, listed: bool, what: &str, key: &str, notes: &mut Vec<String>) -> Result<(), SourceError> {
    let errors: Vec<String> = doc
        .get("errors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let text = |k| e.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
            match (text("error"), text("description")) {
                (Some(e), Some(d)) => Some(format!("{e} ({d})")),
                (e, d) => e.or(d).map(str::to_string),
            }
        })
        .collect();
    if !listed {
        let why = errors.first().cloned().unwrap_or_else(|| format!("no \"{key}\" list"));
        return Err(err(format!("{what}: {why}")));
    }
    match json::Dialect::of(doc) {
        Some(d) if !d.known() => notes.push(format!("unknown Slurm JSON {}: read as the nearest known", d.parser)),
        Some(_) => {}
        None => notes.push("Slurm JSON without meta: version unknown".into()),
    }
    Ok(())
}

/// Versions of slurmrestd's API, newest first; the first one the server has is used.
const REST_VERSIONS: &[&str] = &["v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40", "v0.0.39", "v0.0.38"];

async fn rest_get(client: &http::Client, rest: &Rest, path: &str, version: &mut usize) -> Result<String, SourceError> {
    let token = rest.token_file.as_deref().map(http::read_secret).transpose().map_err(|e| err(e.to_string()))?;
    // An answer quoted in an error never carries the JWT back.
    let scrub = |mut e: SourceError| {
        if let Some(t) = token.as_deref().filter(|t| t.len() >= 4) {
            e.message = e.message.replace(t, "<redacted>");
        }
        e
    };
    rest_get_with(client, rest, path, version, token.as_deref()).await.map_err(scrub)
}

async fn rest_get_with(
    client: &http::Client,
    rest: &Rest,
    path: &str,
    version: &mut usize,
    token: Option<&str>,
) -> Result<String, SourceError> {
    let mut headers = Vec::new();
    if let Some(u) = &rest.user {
        headers.push(("X-SLURM-USER-NAME", u.as_str()));
    }
    if let Some(t) = token {
        headers.push(("X-SLURM-USER-TOKEN", t));
    }
    let (base, extra) = split_query(&rest.url);
    loop {
        let Some(v) = REST_VERSIONS.get(*version) else {
            return Err(err(format!(
                "{}: no supported slurmrestd API version (tried v0.0.38 to v0.0.43)",
                crate::url::redact(base)
            )));
        };
        match client.get_with(&format!("{base}/slurm/{v}/{path}{extra}"), &headers).await {
            Err(http::FetchError::Status { status: 404, .. }) => *version += 1,
            Err(e) => return Err(err(e.to_string())),
            Ok(body) => return Ok(body),
        }
    }
}

/// A base URL's path (without its trailing `/`) and its own query (`?` and all, or empty): the
/// API path goes before the query, never after it (`http://h/?x=1/slurm/...` was asked).
fn split_query(url: &str) -> (&str, &str) {
    let url = url.split('#').next().unwrap_or_default();
    match url.find('?') {
        Some(i) => (url[..i].trim_end_matches('/'), &url[i..]),
        None => (url.trim_end_matches('/'), ""),
    }
}

/// One collection: jobs then nodes.
pub async fn collect(
    settings: &Settings,
    client: Option<&http::Client>,
    version: &mut usize,
) -> Result<Partial, SourceError> {
    let mut notes = Vec::new();
    let (mut found, nodes_found) = match (&settings.rest, client) {
        (Some(rest), Some(client)) => ask_rest(settings, rest, client, version, &mut notes).await?,
        _ => ask_commands(settings, &mut notes).await?,
    };
    notes.dedup();
    let nodes::Nodes { mut nodes, unreadable: bad_nodes, indexes, .. } = nodes_found;
    number_cards(&mut found, &indexes);
    hold_cards(&mut nodes, &found);
    if found.unreadable + bad_nodes > 0 {
        notes.push(format!("{} unreadable jobs, {bad_nodes} unreadable nodes", found.unreadable));
    }
    if found.without_gpu > 0 {
        notes.push(format!("{} jobs without GPUs not shown", found.without_gpu));
    }
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    Ok(Partial { nodes, workloads: found.workloads, note, ..Partial::default() })
}

/// Jobs then nodes from slurmrestd, each waited for at most the source's timeout.
async fn ask_rest(
    settings: &Settings,
    rest: &Rest,
    client: &http::Client,
    version: &mut usize,
    notes: &mut Vec<String>,
) -> Result<(jobs::Jobs, nodes::Nodes), SourceError> {
    let kinds = &settings.kinds;
    let late = || err(format!("slurmrestd: no answer within {:?}", settings.timeout));
    let t = settings.timeout;
    let jobs = tokio::time::timeout(t, rest_get(client, rest, "jobs", version)).await.map_err(|_| late())??;
    let jobs = jobs_document(&jobs, "slurmrestd jobs", kinds, notes)?;
    let nodes = tokio::time::timeout(t, rest_get(client, rest, "nodes", version)).await.map_err(|_| late())??;
    let what = "slurmrestd nodes";
    Ok((jobs, nodes_document(read_nodes(&nodes, what)?, what, notes)?))
}

/// Jobs then nodes from the commands: `squeue --json`, then `sinfo --json` (or `scontrol show
/// nodes --json` where sinfo prints no nodes).
async fn ask_commands(settings: &Settings, notes: &mut Vec<String>) -> Result<(jobs::Jobs, nodes::Nodes), SourceError> {
    let kinds = &settings.kinds;
    let jobs = jobs_document(&run(settings, "squeue", &["--json"]).await?, "squeue --json", kinds, notes)?;
    let text = run(settings, "sinfo", &["--json"]).await?;
    let read = read_nodes(&text, "sinfo --json")?;
    drop(text);
    // Since 23.11 `sinfo --json` prints per-partition summaries under "sinfo" instead of
    // nodes; `scontrol show nodes --json` (23.02 and later) has the node objects.
    let nodes = if !read.1.named && read.1.sinfo {
        let what = "scontrol show nodes --json";
        let text = run(settings, "scontrol", &["show", "nodes", "--json"]).await?;
        nodes_document(read_nodes(&text, what)?, what, notes)?
    } else {
        nodes_document(read, "sinfo --json", notes)?
    };
    Ok((jobs, nodes))
}

/// Jobs name GRES device indexes; cards are numbered among whole-GPU devices only: the jobs'
/// cards and shares renumbered by the nodes' `indexes`.
fn number_cards(found: &mut jobs::Jobs, indexes: &HashMap<String, HashMap<u32, u32>>) {
    for w in &mut found.workloads {
        w.cards.retain_mut(|c| match indexes.get(&c.node).and_then(|m| m.get(&c.index)) {
            Some(&i) => {
                c.index = i;
                true
            }
            // A node sinfo did not list keeps the GRES index as the best guess.
            None => !indexes.contains_key(&c.node),
        });
    }
    for (c, _, _) in &mut found.shares {
        if let Some(&i) = indexes.get(&c.node).and_then(|m| m.get(&c.index)) {
            c.index = i;
        }
    }
}

/// The cards running jobs hold: their shares in use, and each job as a holder of its cards.
fn hold_cards(nodes: &mut [crate::model::Node], found: &jobs::Jobs) {
    // Cards a running job holds as a whole GPU (not through a share of it).
    let whole: Vec<crate::model::CardRef> = found
        .workloads
        .iter()
        .filter(|w| w.state.is_active() && w.request.shares.is_none())
        .flat_map(|w| w.cards.iter().cloned())
        .collect();
    // An unreadable job, or shares no gres_detail places, leave what is in use unknown.
    let unreadable = found.unreadable > 0;
    let unplaced = found.unplaced.clone();
    nodes::apply_shares(nodes, &found.shares, &whole, &|n| unreadable || unplaced.iter().any(|u| u == n));
    for w in found.workloads.iter().filter(|w| w.state.is_active()) {
        for c in &w.cards {
            let card = nodes
                .iter_mut()
                .find(|n| n.name == c.node)
                .and_then(|n| n.cards.iter_mut().find(|x| x.index == c.index));
            if let Some(card) = card {
                card.add_holder(None, &w.id);
            }
        }
    }
}

/// Collect every `interval` until the receiver goes away, backing off while Slurm fails.
pub fn spawn(
    name: String,
    settings: Settings,
    client: Option<http::Client>,
    interval: Duration,
    tx: mpsc::Sender<SourceUpdate>,
) {
    tokio::spawn(async move {
        let mut poll = super::Poll::new(name, SourceKind::Slurm, interval, tx).never_faster_than_its_interval();
        let mut version = 0usize;
        loop {
            let result = collect(&settings, client.as_ref(), &mut version).await;
            let Some(wait) = poll.send(result).await else { return };
            tokio::time::sleep(wait).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::{Settings, collect, split_query};

    /// A nodes document past the largest supported fleet: the nodes past it are not read,
    /// and the source's note says how many.
    #[test]
    fn nodes_past_the_largest_fleet_are_cut_and_said() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("tessera-slurm-cut-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let nodes: Vec<String> = (0..65_536 + 2).map(|i| format!(r#"{{"name":"n{i}","state":"idle"}}"#)).collect();
        let doc = dir.join("sinfo.json");
        std::fs::write(&doc, format!(r#"{{"nodes":[{}]}}"#, nodes.join(","))).unwrap_or_else(|e| panic!("{e}"));
        for (name, body) in [("sinfo", format!("cat '{}'", doc.display())), ("squeue", "echo '{\"jobs\":[]}'".into())] {
            let p = dir.join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap_or_else(|e| panic!("{e}"));
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
        }
        let settings = Settings { commands_dir: Some(dir.clone()), ..Settings::default() };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
        let got = rt.block_on(collect(&settings, None, &mut 0));
        let _ = std::fs::remove_dir_all(&dir);
        let p = got.unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(p.nodes.len(), 65_536);
        let note = p.note.unwrap_or_default();
        assert!(note.contains("2 nodes past 65536 not read"), "{note}");
    }

    /// The API path goes before a base URL's own query (a proxy's parameter).
    #[test]
    fn the_api_path_goes_before_the_base_query() {
        assert_eq!(split_query("https://h:6820"), ("https://h:6820", ""));
        assert_eq!(split_query("https://h:6820/"), ("https://h:6820", ""));
        assert_eq!(split_query("https://h/rest/?tenant=a#x"), ("https://h/rest", "?tenant=a"));
        let (base, extra) = split_query("https://h/?tenant=a");
        assert_eq!(format!("{base}/slurm/v0.0.40/jobs{extra}"), "https://h/slurm/v0.0.40/jobs?tenant=a");
    }
}
