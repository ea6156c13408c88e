//! A jobs document (`squeue --json`, slurmrestd `/jobs`) read as it is parsed: the `jobs` list
//! a job at a time, each job mapped and let go before the next, and each holding only the
//! fields `jobs` reads (the rest skipped unread), its lists at most `MAX_LIST` long and its
//! texts at most `MAX_TEXT` bytes. A job past a bound is unreadable, not read. A 10 MB
//! `squeue` of jobs carrying lists of one-key objects took 553 MB as a tree of the document.

use std::cell::Cell;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::jobs::{self, Jobs};
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

/// The longest list or object inside a kept field (a `gres_detail` has an entry per node of
/// the job).
pub const MAX_LIST: usize = 4096;
/// The longest text kept (a hostlist, a TRES string).
pub const MAX_TEXT: usize = 64 << 10;
/// How deep a kept value may nest (the deepest Slurm writes is an object in a list).
const MAX_DEPTH: usize = 4;

/// What the document says besides its jobs.
#[derive(Debug, Default)]
pub struct Head {
    /// Whether it has a `jobs` list.
    pub listed: bool,
    /// Slurm's `errors` and `meta`, as small trees (bounded as a job's fields are).
    pub errors: Value,
    pub meta: Value,
}

/// Read a jobs document; an error is what serde_json says of text that is not JSON.
pub fn read(text: &str, kinds: &KindRules) -> Result<(Jobs, Head), serde_json::Error> {
    let mut jobs = Jobs::default();
    let mut head = Head::default();
    let mut de = serde_json::Deserializer::from_str(text);
    Top { kinds, jobs: &mut jobs, head: &mut head }.deserialize(&mut de)?;
    de.end()?;
    Ok((jobs, head))
}

struct Top<'a> {
    kinds: &'a KindRules,
    jobs: &'a mut Jobs,
    head: &'a mut Head,
}

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Slurm jobs document")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            let over = Cell::new(false);
            match k.as_ref() {
                "jobs" => self.head.listed = m.next_value_seed(List { kinds: self.kinds, jobs: &mut *self.jobs })?,
                // Depth 1: every field kept (depth 0 is a job's, which keeps those read).
                "errors" => self.head.errors = m.next_value_seed(Bounded { over: &over, depth: 1 })?,
                "meta" => self.head.meta = m.next_value_seed(Bounded { over: &over, depth: 1 })?,
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The `jobs` value: true when it is a list, each job mapped as it is read.
struct List<'a> {
    kinds: &'a KindRules,
    jobs: &'a mut Jobs,
}

impl<'de> DeserializeSeed<'de> for List<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for List<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of jobs")
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<bool, S::Error> {
        loop {
            let over = Cell::new(false);
            let Some(job) = seq.next_element_seed(Job { over: &over })? else { break };
            if over.get() {
                self.jobs.unreadable += 1;
            } else {
                jobs::add(self.jobs, &job, self.kinds);
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

/// One job: an object of the fields read (anything else is null: unreadable).
struct Job<'a> {
    over: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for Job<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        let seed = Bounded { over: self.over, depth: 0 };
        match seed.deserialize(d)? {
            v @ Value::Object(_) => Ok(v),
            _ => Ok(Value::Null),
        }
    }
}

/// A value as a tree, within `MAX_LIST`, `MAX_TEXT` and `MAX_DEPTH`; past one, null and `over`
/// set (the rest read through). At depth 0 an object keeps only `JOB_FIELDS`.
struct Bounded<'a> {
    over: &'a Cell<bool>,
    depth: usize,
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
            match seq.next_element_seed(Bounded { over: self.over, depth: self.depth + 1 })? {
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
            let skip = (self.depth == 0 && !JOB_FIELDS.contains(&k.as_ref())) || out.len() >= MAX_LIST;
            if skip {
                self.over.set(self.over.get() || out.len() >= MAX_LIST);
                m.next_value::<IgnoredAny>()?;
                continue;
            }
            let v = m.next_value_seed(Bounded { over: self.over, depth: self.depth + 1 })?;
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

    #[test]
    fn a_document_without_a_list_of_jobs_says_so() {
        let (_, head) = read_ok(r#"{"errors":[{"error":"denied"}],"jobs":{}}"#);
        assert!(!head.listed);
        assert_eq!(head.errors[0]["error"], "denied");
        assert!(read("[1]", &KindRules::default()).is_err());
    }
}
