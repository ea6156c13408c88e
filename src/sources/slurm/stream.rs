//! Slurm's jobs and nodes documents (`squeue --json`, `sinfo --json`, `scontrol show nodes
//! --json`, slurmrestd `/jobs` and `/nodes`) read as they are parsed: the `jobs` or `nodes`
//! list an item at a time, each item mapped and let go before the next, and each holding only
//! the fields its mapping reads (the rest skipped unread), its lists at most `MAX_LIST` long and
//! its texts at most `MAX_TEXT` bytes. An item past a bound is unreadable, not read. As a tree,
//! a 10 MB `squeue` of jobs carrying lists of one-key objects took 553 MB, a 10 MB `sinfo` of
//! such nodes 552 MiB.

use std::cell::Cell;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::jobs::{self, Jobs};
use super::nodes::{self, Nodes};
use crate::model::KindRules;

/// The fields of a job that `jobs` reads; any other is skipped unread.
const JOB_FIELDS: &[&str] = &[
    "job_id",
    "job_state",
    "partition",
    "qos",
    "name",
    "array_job_id",
    "array_task_id",
    "array_task_string",
    "user_name",
    "requeue",
    "priority",
    "submit_time",
    "state_reason",
    "start_time",
    "nodes",
    "gres_detail",
    "node_count",
    "tasks",
    "num_tasks",
    "tres_per_job",
    "tres_per_node",
    "tres_per_task",
    "tres_req_str",
    "memory_per_node",
];

/// The fields of a node that `nodes` reads.
const NODE_FIELDS: &[&str] = &["name", "hostname", "state", "state_flags", "reason", "gres", "gres_used"];

/// The longest list or object inside a kept field (a `gres_detail` has an entry per node of
/// the job).
pub const MAX_LIST: usize = 4096;
/// The longest text kept (a hostlist, a TRES string).
pub const MAX_TEXT: usize = 64 << 10;
/// How deep a kept value may nest (the deepest Slurm writes is an object in a list).
const MAX_DEPTH: usize = 4;

/// What the document says besides its items.
#[derive(Debug, Default)]
pub struct Head {
    /// Whether it has a list of its items (`jobs`, `nodes`).
    pub listed: bool,
    /// Whether it names its items at all, a list or not.
    pub named: bool,
    /// Whether it has a `sinfo` member (23.11's per-partition summaries).
    pub sinfo: bool,
    /// Slurm's `errors` and `meta`, as small trees (bounded as a job's fields are).
    pub errors: Value,
    pub meta: Value,
}

/// Where a document's items go, one at a time.
trait Sink {
    /// The fields of an item read; any other is skipped unread.
    const FIELDS: &'static [&'static str];
    /// An item within the bounds: an object of its fields read.
    fn add(&mut self, item: &Value);
    /// An item that is no object, or past a bound.
    fn unreadable(&mut self);
}

struct JobSink<'a> {
    kinds: &'a KindRules,
    jobs: Jobs,
}

impl Sink for JobSink<'_> {
    const FIELDS: &'static [&'static str] = JOB_FIELDS;
    fn add(&mut self, item: &Value) {
        jobs::add(&mut self.jobs, item, self.kinds);
    }
    fn unreadable(&mut self) {
        self.jobs.unreadable += 1;
    }
}

impl Sink for Nodes {
    const FIELDS: &'static [&'static str] = NODE_FIELDS;
    fn add(&mut self, item: &Value) {
        nodes::add(self, item);
    }
    fn unreadable(&mut self) {
        self.unreadable += 1;
    }
}

/// Read a jobs document; an error is what serde_json says of text that is not JSON.
pub fn read(text: &str, kinds: &KindRules) -> Result<(Jobs, Head), serde_json::Error> {
    let mut sink = JobSink { kinds, jobs: Jobs::default() };
    let head = read_into(text, "jobs", &mut sink)?;
    Ok((sink.jobs, head))
}

/// Read a nodes document, as `read` does a jobs document.
pub fn read_nodes(text: &str) -> Result<(Nodes, Head), serde_json::Error> {
    let mut nodes = Nodes::default();
    let head = read_into(text, "nodes", &mut nodes)?;
    Ok((nodes, head))
}

fn read_into<S: Sink>(text: &str, key: &str, sink: &mut S) -> Result<Head, serde_json::Error> {
    let mut head = Head::default();
    let mut de = serde_json::Deserializer::from_str(text);
    Top { key, sink, head: &mut head }.deserialize(&mut de)?;
    de.end()?;
    Ok(head)
}

struct Top<'a, S> {
    key: &'a str,
    sink: &'a mut S,
    head: &'a mut Head,
}

impl<'de, S: Sink> DeserializeSeed<'de> for Top<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, S: Sink> Visitor<'de> for Top<'_, S> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a Slurm {} document", self.key)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            let over = Cell::new(false);
            // Depth 1: every field kept (depth 0 is an item's, which keeps those read).
            let all = Bounded { over: &over, depth: 1, fields: &[] };
            match k.as_ref() {
                k if k == self.key => {
                    self.head.named = true;
                    self.head.listed = m.next_value_seed(List { sink: &mut *self.sink })?;
                }
                "errors" => self.head.errors = m.next_value_seed(all)?,
                "meta" => self.head.meta = m.next_value_seed(all)?,
                "sinfo" => {
                    self.head.sinfo = true;
                    m.next_value::<IgnoredAny>()?;
                }
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The list's value: true when it is a list, each item mapped as it is read.
struct List<'a, S> {
    sink: &'a mut S,
}

impl<'de, S: Sink> DeserializeSeed<'de> for List<'_, S> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, S: Sink> Visitor<'de> for List<'_, S> {
    type Value = bool;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list")
    }
    fn visit_seq<Q: SeqAccess<'de>>(self, mut seq: Q) -> Result<bool, Q::Error> {
        loop {
            let over = Cell::new(false);
            let Some(item) = seq.next_element_seed(Item { over: &over, fields: S::FIELDS })? else { break };
            if over.get() || !item.is_object() {
                self.sink.unreadable();
            } else {
                self.sink.add(&item);
            }
        }
        Ok(true)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<bool, A::Error> {
        while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
}

/// One item: an object of the fields read (anything else is null: unreadable).
struct Item<'a> {
    over: &'a Cell<bool>,
    fields: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for Item<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        let seed = Bounded { over: self.over, depth: 0, fields: self.fields };
        match seed.deserialize(d)? {
            v @ Value::Object(_) => Ok(v),
            _ => Ok(Value::Null),
        }
    }
}

/// A value as a tree, within `MAX_LIST`, `MAX_TEXT` and `MAX_DEPTH`; past one, null and `over`
/// set (the rest read through). At depth 0 an object keeps only `fields`.
#[derive(Clone, Copy)]
struct Bounded<'a> {
    over: &'a Cell<bool>,
    depth: usize,
    fields: &'static [&'static str],
}

impl Bounded<'_> {
    fn deeper(self) -> Self {
        Self { depth: self.depth + 1, ..self }
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        if self.depth > MAX_DEPTH {
            self.over.set(true);
            d.deserialize_ignored_any(IgnoredAny)?;
            return Ok(Value::Null);
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Value, E> {
        if s.len() > MAX_TEXT {
            self.over.set(true);
            return Ok(Value::Null);
        }
        Ok(Value::String(s.to_string()))
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Value, S::Error> {
        let mut out = Vec::new();
        while out.len() < MAX_LIST {
            match seq.next_element_seed(self.deeper())? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
        if seq.next_element::<IgnoredAny>()?.is_some() {
            self.over.set(true);
            while seq.next_element::<IgnoredAny>()?.is_some() {}
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            let skip = (self.depth == 0 && !self.fields.contains(&k.as_ref())) || out.len() >= MAX_LIST;
            if skip {
                self.over.set(self.over.get() || out.len() >= MAX_LIST);
                m.next_value::<IgnoredAny>()?;
                continue;
            }
            let v = m.next_value_seed(self.deeper())?;
            out.insert(k.into_owned(), v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_ok(text: &str) -> (Jobs, Head) {
        read(text, &KindRules::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The same jobs as the tree reader, with bulk and unknown fields skipped, and a job past
    /// a bound counted unreadable.
    #[test]
    fn jobs_read_as_they_stream_keep_the_fields_read() {
        let text = r#"{"meta":{"plugin":{"type":"openapi/v0.0.38"}},"junk":[{"a":1}],"jobs":[
            {"job_id":1,"job_state":"PENDING","partition":"gpu","tres_per_node":"gres/gpu:2","junk":[{"abcdef":0},{"abcdef":0}]},
            {"job_id":2,"job_state":"RUNNING","nodes":"n1","gres_detail":["gpu:a100:1(IDX:3)"],"tres_per_node":"gres/gpu:1"},
            7,
            {"job_id":3,"job_state":"PENDING","tres_per_node":"gres/gpu:1","gres_detail":[LIST]}]}"#
            .replace("LIST", &vec!["\"x\""; MAX_LIST + 1].join(","));
        let (jobs, head) = read_ok(&text);
        assert!(head.listed);
        assert_eq!(head.meta["plugin"]["type"], "openapi/v0.0.38");
        let doc: Value = serde_json::from_str(&text).unwrap_or_default();
        let tree = jobs::map(&doc, &KindRules::default());
        assert_eq!(jobs.workloads[..2], tree.workloads[..2], "read as the tree reader reads them");
        assert_eq!(jobs.workloads.len(), 2, "the job with too long a list is not read");
        assert_eq!(jobs.unreadable, 2, "a job that is no object, and the one past the bound");
        assert_eq!(jobs.workloads[1].cards.len(), 1);
    }

    /// Nodes as the tree reader maps them, with bulk skipped; a node past a bound unreadable;
    /// 23.11's summary `sinfo` said.
    #[test]
    fn nodes_read_as_they_stream_are_the_tree_readers() {
        let text = r#"{"nodes":[
            {"name":"a","state":["IDLE"],"gres":"gpu:h100:2,gpu:a100_3g.20gb:1","junk":[{"abcdef":0}]},
            {"name":"b","state":"idle","state_flags":["DRAIN"],"reason":"fan","gres":"gpu:4","gres_used":"gpu:1"},
            {"name":"a","state":"down"}, 7, {"hostname":"c","reason":"LONG"}]}"#
            .replace("LONG", &"x".repeat(MAX_TEXT + 1));
        let (found, head) = read_nodes(&text).unwrap_or_else(|e| panic!("{e}"));
        assert!(head.listed && head.named && !head.sinfo);
        let doc: Value = serde_json::from_str(&text).unwrap_or_default();
        let (tree, _) = nodes::map(&doc);
        assert_eq!(found.nodes, tree[..2], "read as the tree reader reads them");
        let mut indexes = nodes::card_indexes(&doc);
        indexes.remove("c");
        assert_eq!(found.indexes, indexes);
        assert_eq!(found.unreadable, 2, "a node that is no object, and the one past the bound");
        let (_, head) = read_nodes(r#"{"sinfo":[{"x":1}]}"#).unwrap_or_else(|e| panic!("{e}"));
        assert!(head.sinfo && !head.named && !head.listed);
    }

    #[test]
    fn a_document_without_a_list_of_jobs_says_so() {
        let (_, head) = read_ok(r#"{"errors":[{"error":"denied"}],"jobs":{}}"#);
        assert!(!head.listed);
        assert_eq!(head.errors[0]["error"], "denied");
        assert!(read("[1]", &KindRules::default()).is_err());
    }
}
