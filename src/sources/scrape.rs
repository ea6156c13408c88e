//! The scrape source: exporter endpoints fetched directly (`--scrape URL`, repeatable), read
//! by the dialects registered here. Each target is a source of its own, so one target down
//! marks that target stale and no other. Fetches run concurrently under one bound; parsing and mapping run off the async
//! workers; a failing target backs off.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};

use super::allsmi::AllSmi;
use super::amd::Amd;
use super::dcgm::Dcgm;
use super::http::Client;
use super::series::{self, Dialect, Holder, MapStats, Mapped, NodeName};
use super::{Partial, Poll, SourceError, SourceUpdate};
use crate::config::ScrapeNode;
use crate::model::{Node, SourceKind, Workload, WorkloadKind, WorkloadState};
use crate::url::{host, host_port, host_str};

/// The exporters' dialects, tried in this order for each sample: the first that claims its
/// name reads it (dcgm-exporter's claims every name, so it comes last).
const DIALECTS: &[&dyn Dialect] = &[&AllSmi, &Amd, &Dcgm];

/// Map one scrape (or several concatenated) into nodes and holders, each sample read by its
/// exporter's dialect. Never panics on any input.
pub fn map(text: &str, node: &NodeName) -> Mapped {
    series::map(text, node, DIALECTS)
}

/// Fetches in flight at once across every target.
pub const MAX_CONCURRENT: usize = 32;

/// The source name of a target: `scrape:HOST:PORT`, with the path when it is not `/metrics`.
pub fn source_name(url: &str) -> String {
    let url = crate::url::redact(url);
    let url = url.as_str();
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    if path.is_empty() || path == "/metrics" {
        format!("scrape:{}", host_port(url))
    } else {
        format!("scrape:{}{path}", host_port(url))
    }
}

/// How each target's nodes are named: by the label under `scrape_node = "label"`; else by the
/// target's host, unless another target shares that host on this machine's loopback (SSH
/// tunnels: `localhost:9001`, `localhost:9002`), where the host cannot tell them apart: then by
/// the host the series name (dcgm-exporter's `Hostname`, all-smi's `instance`), else by
/// `host:port`. Two exporters on one real host (`gpu-1:9400`, `gpu-1:9401`) are one node.
pub fn node_names(urls: &[String], mode: ScrapeNode) -> Vec<NodeName> {
    let mut per_host: HashMap<&str, usize> = HashMap::new();
    for u in urls {
        *per_host.entry(host_str(u)).or_default() += 1;
    }
    let tunnelled = |u: &str| {
        let h = host_str(u);
        loopback(h) && per_host.get(h).is_some_and(|n| *n > 1)
    };
    urls.iter()
        .map(|u| match mode {
            ScrapeNode::Label => NodeName::Label,
            ScrapeNode::Target if tunnelled(u) => NodeName::Shared(host_port(u)),
            ScrapeNode::Target => NodeName::Fixed(host(u)),
        })
        .collect()
}

/// This machine, by name or address: what a tunnel's local end is.
fn loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost") || h.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback())
}

/// Answers up to this size are mapped on the task that fetched them (a 13 KB all-smi answer
/// maps in tens of µs, less than handing it to a blocking thread); larger ones on a blocking
/// thread, so that a 36 MB scrape never stalls the runtime.
const MAP_INLINE_MAX: usize = 256 << 10;

/// Map one exposition into a partial fleet: cards, and the pods or jobs on them as workloads.
pub fn to_partial(text: &str, node: &NodeName) -> (Partial, MapStats) {
    let mapped = map(text, node);
    let mut nodes = mapped.nodes;
    let workloads = holders_to_workloads(&mut nodes, &mapped.holders);
    let note = problems(&mapped.stats);
    (Partial { nodes, workloads, note, ..Partial::default() }, mapped.stats)
}

/// A holder becomes a running workload (`k8s:NS/POD` or `slurm:JOB`) holding its card or
/// instance. Its kind is unknown from metrics alone (`other`) until a scheduler source says.
fn holders_to_workloads(nodes: &mut [Node], holders: &[Holder]) -> Vec<Workload> {
    let mut out: Vec<Workload> = Vec::new();
    // Indexes, not searches: 512 nodes behind one Prometheus instance have 4096 holders.
    let node_at: HashMap<String, usize> = nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
    let mut workload_at: HashMap<String, usize> = HashMap::new();
    for h in holders {
        let (id, name, owner) = match (&h.pod, &h.hpc_job) {
            (Some(pod), _) => {
                let ns = h.namespace.clone().unwrap_or_else(|| "default".into());
                (format!("k8s:{ns}/{pod}"), pod.clone(), Some(ns))
            }
            (None, Some(job)) => (format!("slurm:{job}"), job.clone(), None),
            (None, None) => continue,
        };
        let r = crate::model::CardRef::new(h.node.clone(), h.index);
        if let Some(card) = node_at.get(&h.node).and_then(|&i| nodes[i].cards.iter_mut().find(|c| c.index == h.index)) {
            card.add_holder(h.gi_id, &id);
        }
        match workload_at.get(&id).map(|&i| &mut out[i]) {
            Some(w) if !w.cards.contains(&r) => w.cards.push(r),
            Some(_) => {}
            None => {
                workload_at.insert(id.clone(), out.len());
                let mut w = Workload::new(id, name, WorkloadKind::Other, WorkloadState::Running);
                w.owner = owner;
                w.node = Some(h.node.clone());
                w.cards = vec![r];
                out.push(w);
            }
        }
    }
    out
}

/// Problems worth showing in the source's status, or `None` for a clean scrape.
fn problems(stats: &MapStats) -> Option<String> {
    let p = &stats.parse;
    let mut parts = Vec::new();
    if p.bad_lines > 0 {
        parts.push(format!("{} bad lines", p.bad_lines));
    }
    if p.bad_values > 0 {
        parts.push(format!("{} non-numeric values", p.bad_values));
    }
    if stats.blank_sentinels > 0 {
        parts.push(format!("{} blank values", stats.blank_sentinels));
    }
    if stats.duplicates > 0 {
        parts.push(format!("{} duplicate series", stats.duplicates));
    }
    if stats.hosts_behind_target > 0 {
        parts.push(format!(
            "{} Hostnames behind one target: nodes named by Hostname (sources.scrape_node = \"label\" always does)",
            stats.hosts_behind_target
        ));
    }
    if stats.cut_cards > 0 {
        parts.push(format!("{} cards past {} cut (the largest supported fleet)", stats.cut_cards, series::MAX_CARDS));
    }
    if stats.shared_index > 0 {
        parts.push(format!(
            "{} cards share a node and index with another UUID: no Hostname label tells their hosts apart",
            stats.shared_index
        ));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The first tick of the shared clock after `now` (`epoch` itself before it): every target started with the same
/// `epoch` polls at `epoch + k × interval`, so a hundred targets wake the process once a
/// refresh, not a hundred times, and their answers arrive together (the console's clock ticks
/// a little after the poll and merges and draws what came with it, once). A fetch longer than
/// the interval skips the ticks it covered. An interval of no nanoseconds or too many for a `u64` (never a configured refresh) waits
/// the interval, at least a millisecond, from `now`: never a busy loop.
pub fn next_tick(epoch: tokio::time::Instant, interval: Duration, now: tokio::time::Instant) -> tokio::time::Instant {
    let Some(ns) = u64::try_from(interval.as_nanos()).ok().filter(|n| *n > 0) else {
        return now + interval.max(Duration::from_millis(1));
    };
    if now < epoch {
        return epoch;
    }
    let since = u64::try_from(now.duration_since(epoch).as_nanos()).unwrap_or(u64::MAX);
    let ticks = (since / ns).saturating_add(1);
    epoch + Duration::from_nanos(ticks.saturating_mul(ns))
}

/// Run one target until the receiver goes away, polling on the clock `epoch` starts (shared
/// by the targets of one run: [`next_tick`]).
pub fn spawn(
    url: String,
    node: NodeName,
    client: Client,
    limit: Arc<Semaphore>,
    (epoch, interval): (tokio::time::Instant, Duration),
    tx: mpsc::Sender<SourceUpdate>,
) {
    let name = source_name(&url);
    tokio::spawn(async move {
        let mut poll = Poll::new(name, SourceKind::Scrape, interval, tx);
        loop {
            let fetched = {
                let Ok(_permit) = limit.acquire().await else { return };
                client.get(&url).await
            };
            let result = match fetched {
                Ok(text) => {
                    let mapped = if text.len() <= MAP_INLINE_MAX {
                        Ok(to_partial(&text, &node))
                    } else {
                        let node = node.clone();
                        tokio::task::spawn_blocking(move || to_partial(&text, &node)).await
                    };
                    match mapped {
                        Ok((partial, stats)) if partial.nodes.is_empty() => Err(SourceError {
                            message: format!(
                                "no GPU metrics in the response{}",
                                problems(&stats).map(|p| format!(" ({p})")).unwrap_or_default()
                            ),
                            fatal: false,
                            unanswered: false,
                        }),
                        Ok((mut partial, stats)) => {
                            partial.note = problems(&stats);
                            Ok(partial)
                        }
                        Err(e) => Err(SourceError {
                            message: format!("mapping failed: {e}"),
                            fatal: false,
                            unanswered: false,
                        }),
                    }
                }
                Err(e) => Err(SourceError { message: e.to_string(), fatal: false, unanswered: e.unanswered() }),
            };
            // Errors and notes can quote the answer: never a credential it echoed.
            let result = match result {
                Ok(mut p) => {
                    p.note = p.note.map(|n| client.scrub(&n));
                    Ok(p)
                }
                Err(mut e) => {
                    e.message = client.scrub(&e.message);
                    Err(e)
                }
            };
            let ok = result.is_ok();
            let Some(wait) = poll.send(result).await else { return };
            if ok {
                tokio::time::sleep_until(next_tick(epoch, interval, tokio::time::Instant::now())).await;
            } else {
                tokio::time::sleep(wait).await;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_urls() {
        assert_eq!(source_name("http://gpu-1:9400/metrics"), "scrape:gpu-1:9400");
        assert_eq!(source_name("http://gpu-1:9400/other"), "scrape:gpu-1:9400/other");
    }

    #[test]
    fn targets_on_one_host_are_named_by_label_or_port() {
        let urls: Vec<String> =
            ["http://localhost:9001/metrics", "http://localhost:9002/metrics", "http://gpu-3:9400/metrics"]
                .map(String::from)
                .to_vec();
        assert_eq!(
            node_names(&urls, ScrapeNode::Target),
            vec![
                NodeName::Shared("localhost:9001".into()),
                NodeName::Shared("localhost:9002".into()),
                NodeName::Fixed("gpu-3".into())
            ]
        );
        assert_eq!(node_names(&urls, ScrapeNode::Label), vec![NodeName::Label; 3]);
        // Two exporters on one real host (dcgm-exporter and all-smi side by side) are one node.
        let side_by_side: Vec<String> =
            ["http://gpu-1:9400/metrics", "http://gpu-1:9401/metrics"].map(String::from).to_vec();
        assert_eq!(node_names(&side_by_side, ScrapeNode::Target), vec![NodeName::Fixed("gpu-1".into()); 2]);
        let tunnels: Vec<String> =
            ["http://127.0.0.1:9001/", "http://[::1]:9002/", "http://[::1]:9003/"].map(String::from).to_vec();
        assert_eq!(
            node_names(&tunnels, ScrapeNode::Target),
            vec![
                NodeName::Fixed("127.0.0.1".into()),
                NodeName::Shared("[::1]:9002".into()),
                NodeName::Shared("[::1]:9003".into())
            ]
        );
        // Named by the series' host where they name one, else by the target's host and port.
        let row = |host: &str| format!("DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"GPU-{host}\",Hostname=\"{host}\"}} 5\n");
        let named = |text: &str, node: &NodeName| -> Vec<String> {
            map(text, node).nodes.into_iter().map(|n| n.name).collect()
        };
        assert_eq!(named(&row("gpu-7"), &NodeName::Shared("localhost:9001".into())), ["gpu-7"]);
        assert_eq!(
            named("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 5\n", &NodeName::Shared("localhost:9001".into())),
            ["localhost:9001"]
        );
        assert_eq!(
            named(&row("gpu-7"), &NodeName::Fixed("localhost".into())),
            ["localhost"],
            "alone: the target's host"
        );
    }

    #[test]
    fn targets_poll_on_one_clock() {
        let epoch = tokio::time::Instant::now();
        let s = Duration::from_secs(1);
        let at = |ms: u64| epoch + Duration::from_millis(ms);
        // Two targets answering at different moments wake at the same next tick.
        assert_eq!(next_tick(epoch, s, at(30)), at(1000));
        assert_eq!(next_tick(epoch, s, at(870)), at(1000));
        // Exactly on a tick: the next one, never now (no busy loop).
        assert_eq!(next_tick(epoch, s, at(1000)), at(2000));
        // A fetch that took longer than the refresh skips the ticks it covered.
        assert_eq!(next_tick(epoch, s, at(3500)), at(4000));
        assert_eq!(next_tick(epoch, Duration::ZERO, at(10)), at(11), "no interval: a millisecond, not a busy loop");
        // Before the clock's start: its start is the first tick.
        assert_eq!(next_tick(at(500), s, at(30)), at(500));
    }
}
