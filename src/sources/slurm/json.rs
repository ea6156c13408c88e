//! Reading Slurm's JSON across releases: 21.08/22.05 (`openapi/v0.0.37`, `v0.0.38`) print bare
//! numbers and state strings; 23.02+ (`data_parser/v0.0.39` and later) print
//! `{set, infinite, number}` objects and state arrays. Helpers here accept both.

use chrono::{DateTime, Utc};
use serde_json::Value;

/// Which JSON dialect a document is in, from its `meta` (`meta.plugin` before 23.02,
/// `meta.plugin.data_parser` after).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dialect {
    /// `openapi/v0.0.38`, `data_parser/v0.0.40`, …
    pub parser: String,
    /// `22.05.8`, where the document says.
    pub release: Option<String>,
}

/// The parsers tessera has been tested with. Others are read the same way, with a note.
const KNOWN: &[&str] = &[
    "openapi/v0.0.37",
    "openapi/v0.0.38",
    "data_parser/v0.0.39",
    "data_parser/v0.0.40",
    "data_parser/v0.0.41",
    "data_parser/v0.0.42",
    "data_parser/v0.0.43",
];

impl Dialect {
    pub fn of(doc: &Value) -> Option<Self> {
        let meta = doc.get("meta")?;
        let plugin = meta.get("plugin")?;
        let parser = plugin
            .get("data_parser")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .or_else(|| plugin.get("type").and_then(Value::as_str))?
            .to_string();
        let slurm = meta.get("slurm").or_else(|| meta.get("Slurm"));
        let release = slurm.and_then(|s| s.get("release")).and_then(Value::as_str).map(str::to_string);
        Some(Self { parser, release })
    }

    pub fn known(&self) -> bool {
        KNOWN.contains(&self.parser.as_str())
    }
}

/// A number in either dialect: `5`, `null`, or `{"set": true, "infinite": false, "number": 5}`.
/// Unset and infinite numbers are `None`.
pub fn num(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::Object(o) => {
            let set = o.get("set").and_then(Value::as_bool).unwrap_or(true);
            let infinite = o.get("infinite").and_then(Value::as_bool).unwrap_or(false);
            if !set || infinite { None } else { num(o.get("number")) }
        }
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A Unix time; 0 means unset in Slurm.
pub fn time(v: Option<&Value>) -> Option<DateTime<Utc>> {
    num(v).filter(|&t| t > 0).and_then(|t| DateTime::from_timestamp(t, 0))
}

/// A string field; empty strings are `None`.
pub fn text(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

/// A state in either dialect, upper case: `"mixed"` + `state_flags ["DRAIN"]`, or
/// `["MIXED", "DRAIN"]`. The base state comes first.
pub fn states(state: Option<&Value>, flags: Option<&Value>) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |v: &Value| {
        if let Some(s) = v.as_str() {
            // 22.05 can print compound states such as "idle+drain" in some fields.
            out.extend(s.split('+').map(|x| x.trim().to_ascii_uppercase()).filter(|x| !x.is_empty()));
        }
    };
    for v in [state, flags].into_iter().flatten() {
        match v {
            Value::Array(a) => a.iter().for_each(&mut push),
            other => push(other),
        }
    }
    out
}

/// More nodes than any cluster has: expansion stops here.
const MAX_HOSTS: usize = 100_000;

/// The longest hostlist part expanded (a host name is at most 255 bytes).
const MAX_NAME: usize = 255;

/// Expand a Slurm hostlist: `gpu[01-03,7],cpu1` -> gpu01 gpu02 gpu03 gpu7 cpu1. Leading zeros
/// are kept. Unreadable ranges are kept literally rather than dropped. Nonsense input never
/// expands past `MAX_HOSTS` names, however its ranges multiply (`a[0-99999]b[0-99999]`).
pub fn hostlist(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in super::gres::split_outside(text, '[', ']') {
        let room = MAX_HOSTS - out.len();
        out.extend(expand(part, room));
        if out.len() >= MAX_HOSTS {
            break;
        }
    }
    out
}

/// The names of one part, at most `room` of them. A part longer than any host name is kept
/// literally: its expansion would repeat the whole of it per name.
fn expand(part: &str, room: usize) -> Vec<String> {
    if part.len() > MAX_NAME {
        return vec![part.to_string()];
    }
    let (Some(open), Some(close)) = (part.find('['), part.find(']')) else {
        return vec![part.to_string()];
    };
    if close < open {
        return vec![part.to_string()];
    }
    let (prefix, ranges, suffix) = (&part[..open], &part[open + 1..close], &part[close + 1..]);
    // A suffix may hold another bracket (`a[1-2]b[1-2]`): its names follow each head.
    let tails = if suffix.contains('[') { expand(suffix, room) } else { vec![suffix.to_string()] };
    let mut out = Vec::new();
    let mut push = |head: String| -> bool {
        for t in &tails {
            if out.len() >= room {
                return false;
            }
            out.push(format!("{head}{t}"));
        }
        true
    };
    for r in ranges.split(',') {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        let width = a.len();
        match (a.parse::<u64>(), b.parse::<u64>()) {
            (Ok(x), Ok(y)) if x <= y && y - x <= 100_000 => {
                for n in x..=y {
                    if !push(format!("{prefix}{n:0width$}")) {
                        return out;
                    }
                }
            }
            _ => {
                if !push(format!("{prefix}[{r}]")) {
                    return out;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hostlists_that_multiply_stop_at_the_bound() {
        assert_eq!(hostlist("gpu[01-03,7],cpu1"), ["gpu01", "gpu02", "gpu03", "gpu7", "cpu1"]);
        assert_eq!(hostlist("a[1-2]b[1-2]"), ["a1b1", "a1b2", "a2b1", "a2b2"]);
        // 10^10 names before: the campaign's Slurm input took the machine's memory.
        assert_eq!(hostlist("a[0-99999]b[0-99999]").len(), MAX_HOSTS);
        assert_eq!(hostlist("a[0-99999,0-99999,0-99999],b[0-9]").len(), MAX_HOSTS);
        assert_eq!(super::super::gres::index_list(&"0-4000,".repeat(1000)), None);
    }

    #[test]
    fn numbers_in_both_dialects() {
        assert_eq!(num(Some(&json!(5))), Some(5));
        assert_eq!(num(Some(&json!(null))), None);
        assert_eq!(num(Some(&json!({"set": true, "infinite": false, "number": 181}))), Some(181));
        assert_eq!(num(Some(&json!({"set": false, "infinite": false, "number": 0}))), None);
        assert_eq!(num(Some(&json!({"set": true, "infinite": true, "number": 0}))), None);
        assert_eq!(num(Some(&json!("12"))), Some(12));
        assert_eq!(num(None), None);
        assert_eq!(time(Some(&json!(0))), None, "0 is unset");
        assert_eq!(time(Some(&json!(1_700_000_000))).map(|t| t.timestamp()), Some(1_700_000_000));
    }

    #[test]
    fn states_in_both_dialects() {
        assert_eq!(states(Some(&json!("mixed")), Some(&json!(["DRAIN"]))), vec!["MIXED", "DRAIN"]);
        assert_eq!(states(Some(&json!(["IDLE", "DRAIN"])), Some(&json!(null))), vec!["IDLE", "DRAIN"]);
        assert_eq!(states(Some(&json!("idle+drain")), None), vec!["IDLE", "DRAIN"]);
        assert!(states(Some(&json!(42)), None).is_empty());
    }

    #[test]
    fn hostlists() {
        assert_eq!(hostlist("ia[1-2]"), vec!["ia1", "ia2"]);
        assert_eq!(hostlist("gpu[01-03,7],cpu1"), vec!["gpu01", "gpu02", "gpu03", "gpu7", "cpu1"]);
        assert_eq!(hostlist("cs75"), vec!["cs75"]);
        assert_eq!(hostlist(""), Vec::<String>::new());
        assert_eq!(hostlist("r[1-2]n[1-2]"), vec!["r1n1", "r1n2", "r2n1", "r2n2"]);
        assert_eq!(hostlist("bad[x-y]"), vec!["bad[x-y]"]);
        assert_eq!(hostlist("huge[1-99999999999]"), vec!["huge[1-99999999999]"]);
        assert_eq!(hostlist("a[1-90000],b[1-90000]").len(), 100_000, "the total is capped");
    }

    #[test]
    fn dialects_of_the_real_samples() {
        let old = json!({"meta": {"plugin": {"type": "openapi/v0.0.37", "name": "x"},
            "Slurm": {"version": {"major": 21, "micro": 5, "minor": 8}, "release": "21.08.5"}}});
        let d = Dialect::of(&old).unwrap_or_else(|| panic!("dialect"));
        assert_eq!((d.parser.as_str(), d.release.as_deref(), d.known()), ("openapi/v0.0.37", Some("21.08.5"), true));
        let new = json!({"meta": {"plugin": {"type": "openapi/slurmctld", "data_parser": "data_parser/v0.0.43"},
            "slurm": {"version": {"major": "25", "micro": "4", "minor": "05"}, "release": "25.05.4"}}});
        let d = Dialect::of(&new).unwrap_or_else(|| panic!("dialect"));
        assert_eq!(d.parser, "data_parser/v0.0.43");
        assert_eq!(Dialect::of(&json!({"jobs": []})), None);
        assert!(!Dialect { parser: "data_parser/v0.0.99".into(), release: None }.known());
    }
}
