//! Deltas between two frames: the nodes and workloads that changed (whole, by name and id),
//! the order when it changed, new events, and sources and demand when they changed.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Frame;
use crate::model::demand::DemandHistory;
use crate::model::{Event, Node, SourceStatus, Workload};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    pub at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<Option<DateTime<Utc>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<SourceStatus>>,
    /// Nodes new or changed since the previous frame.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Node>,
    /// Every node's name in order, when the names or their order changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_order: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<Workload>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_order: Option<Vec<String>>,
    /// Events dropped from the front (the store keeps the last few hundred), then added.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub events_dropped: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<DemandHistory>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What changed from `prev` to `cur`.
pub fn diff(prev: &Frame, cur: &Frame) -> Delta {
    let (p, c) = (&prev.fleet, &cur.fleet);
    let mut d = Delta { at: cur.at, ..Delta::default() };
    if p.taken_at != c.taken_at {
        d.taken_at = Some(c.taken_at);
    }
    if prev.simulated != cur.simulated {
        d.simulated = Some(cur.simulated);
    }
    if p.sources != c.sources {
        d.sources = Some(c.sources.clone());
    }
    let old: HashMap<&str, &Node> = p.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    d.nodes = c.nodes.iter().filter(|n| old.get(n.name.as_str()) != Some(n)).cloned().collect();
    if !p.nodes.iter().map(|n| &n.name).eq(c.nodes.iter().map(|n| &n.name)) {
        d.node_order = Some(c.nodes.iter().map(|n| n.name.clone()).collect());
    }
    let old: HashMap<&str, &Workload> = p.workloads.iter().map(|w| (w.id.as_str(), w)).collect();
    d.workloads = c.workloads.iter().filter(|w| old.get(w.id.as_str()) != Some(w)).cloned().collect();
    if !p.workloads.iter().map(|w| &w.id).eq(c.workloads.iter().map(|w| &w.id)) {
        d.workload_order = Some(c.workloads.iter().map(|w| w.id.clone()).collect());
    }
    let (dropped, added) = events_since(&p.events, &c.events);
    d.events_dropped = dropped;
    d.events = added.to_vec();
    if prev.demand != cur.demand {
        d.demand = cur.demand.clone();
    }
    d
}

/// `cur` is `prev` with some events dropped from the front and some appended: how many and
/// which. Where it is not (a source restarted), every old one is dropped.
fn events_since<'a>(prev: &[Event], cur: &'a [Event]) -> (usize, &'a [Event]) {
    for k in 0..=prev.len() {
        let kept = &prev[k..];
        if cur.len() >= kept.len() && cur[..kept.len()] == *kept {
            return (k, &cur[kept.len()..]);
        }
    }
    (prev.len(), cur)
}

/// `prev` with `d` applied; `Err` when the delta names a node or workload it does not carry
/// and `prev` lacks (it belongs to another frame).
pub fn apply(prev: &Frame, d: Delta) -> Result<Frame, String> {
    let mut f = Frame { at: d.at, simulated: d.simulated.unwrap_or(prev.simulated), ..Frame::default() };
    f.fleet.taken_at = d.taken_at.unwrap_or(prev.fleet.taken_at);
    f.fleet.sources = d.sources.unwrap_or_else(|| prev.fleet.sources.clone());
    f.fleet.nodes = merge(&prev.fleet.nodes, d.nodes, d.node_order, |n| &n.name).map_err(|n| format!("node {n}"))?;
    f.fleet.workloads =
        merge(&prev.fleet.workloads, d.workloads, d.workload_order, |w| &w.id).map_err(|w| format!("workload {w}"))?;
    let dropped = d.events_dropped.min(prev.fleet.events.len());
    f.fleet.events = prev.fleet.events[dropped..].to_vec();
    f.fleet.events.extend(d.events);
    f.demand = d.demand.or_else(|| prev.demand.clone());
    f.fleet.index_workloads();
    Ok(f)
}

/// The items in `order` (else `prev`'s order, with new ones after), each from `changed` or
/// else from `prev`. `Err(name)` for one neither has.
fn merge<T: Clone>(
    prev: &[T],
    changed: Vec<T>,
    order: Option<Vec<String>>,
    key: impl Fn(&T) -> &String,
) -> Result<Vec<T>, String> {
    let old: HashMap<&str, &T> = prev.iter().map(|x| (key(x).as_str(), x)).collect();
    let order = order.unwrap_or_else(|| {
        let mut o: Vec<String> = prev.iter().map(|x| key(x).clone()).collect();
        o.extend(changed.iter().filter(|x| !old.contains_key(key(x).as_str())).map(|x| key(x).clone()));
        o
    });
    let mut new: HashMap<String, T> = changed.into_iter().map(|x| (key(&x).clone(), x)).collect();
    order
        .into_iter()
        .map(|name| match new.remove(&name) {
            Some(x) => Ok(x),
            None => old.get(name.as_str()).map(|x| (*x).clone()).ok_or(name),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Card, Severity};

    fn event(n: i64) -> Event {
        Event {
            at: DateTime::from_timestamp(n, 0).unwrap_or_default(),
            card: None,
            severity: Severity::Info,
            text: format!("e{n}"),
        }
    }

    fn frame(nodes: &[(&str, f64)], events: &[i64]) -> Frame {
        let mut f = Frame::default();
        f.fleet.nodes = nodes
            .iter()
            .map(|(n, u)| Node {
                name: n.to_string(),
                cards: vec![Card { utilization_pct: Some(*u), ..Card::default() }],
                ..Node::default()
            })
            .collect();
        f.fleet.events = events.iter().map(|&e| event(e)).collect();
        f
    }

    fn json(f: &Frame) -> String {
        serde_json::to_string(f).unwrap_or_default()
    }

    #[test]
    fn a_delta_carries_only_what_changed_and_applies_back() {
        let a = frame(&[("a", 1.0), ("b", 2.0), ("c", 3.0)], &[1, 2, 3]);
        let b = frame(&[("a", 1.0), ("b", 5.0), ("c", 3.0)], &[2, 3, 4]);
        let d = diff(&a, &b);
        assert_eq!(d.nodes.len(), 1);
        assert_eq!(d.node_order, None);
        assert_eq!((d.events_dropped, d.events.len()), (1, 1));
        assert_eq!(json(&apply(&a, d).unwrap_or_default()), json(&b));
    }

    #[test]
    fn removed_reordered_and_new_nodes_come_back_in_order() {
        let a = frame(&[("a", 1.0), ("b", 2.0), ("c", 3.0)], &[]);
        let b = frame(&[("c", 3.0), ("d", 4.0), ("a", 1.0)], &[9]);
        let d = diff(&a, &b);
        assert_eq!(d.nodes.len(), 1, "only d is new");
        assert_eq!(json(&apply(&a, d).unwrap_or_default()), json(&b));
        // Events from a restarted source: every old one goes.
        let c = frame(&[("c", 3.0)], &[1]);
        assert_eq!(json(&apply(&b, diff(&b, &c)).unwrap_or_default()), json(&c));
    }

    #[test]
    fn a_delta_naming_a_node_its_frame_lacks_is_an_error() {
        let a = frame(&[("a", 1.0)], &[]);
        let d = Delta { node_order: Some(vec!["zz".into()]), ..Delta::default() };
        assert_eq!(apply(&a, d).err().as_deref(), Some("node zz"));
    }
}
