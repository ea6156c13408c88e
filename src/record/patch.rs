//! Field-level patches between two JSON values: what a delta record holds. Objects carry only
//! the keys that changed; lists of nodes, workloads and sources are matched by name or id
//! (only changed items, and the order when it changed); a list that lost items at its front
//! and gained some at its end (events) says only that; other lists of equal length patch by
//! position. A value that is not an object replaces what was there as it is (`{"=": v}` where
//! `v` is an object). Applying checks every step: a patch that does not fit is an error.

use serde_json::{Map, Value, json};

/// Lists whose items are objects with one of these (unique) string keys are matched by it.
const KEYS: &[&str] = &["id", "name"];
/// How far into a list the first item of the new one is looked for (events: a frame drops a
/// few from the front).
const SHIFT_LOOK: usize = 64;

/// `b` in place of whatever was there.
fn replace(b: &Value) -> Value {
    if b.is_object() { json!({ "=": b }) } else { b.clone() }
}

/// The patch from `a` to `b`; `None` when they are equal. (Objects are compared by walking
/// them once, not by an equality test at every level: that would walk each subtree again.)
pub fn diff(a: &Value, b: &Value) -> Option<Value> {
    Some(match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut m = Map::new();
            for (k, vb) in y {
                match x.get(k) {
                    Some(va) => {
                        if let Some(p) = diff(va, vb) {
                            m.insert(k.clone(), p);
                        }
                    }
                    None => {
                        m.insert(k.clone(), replace(vb));
                    }
                }
            }
            for k in x.keys().filter(|k| !y.contains_key(*k)) {
                m.insert(k.clone(), json!({ "-": true }));
            }
            if m.is_empty() {
                return None;
            }
            json!({ "o": m })
        }
        (Value::Array(x), Value::Array(y)) => {
            if x == y {
                return None;
            }
            list(x, y).unwrap_or_else(|| replace(b))
        }
        _ if a == b => return None,
        _ => replace(b),
    })
}

/// The key lists `x` and `y` are matched by, if any.
fn key_of(x: &[Value], y: &[Value]) -> Option<&'static str> {
    KEYS.iter().copied().find(|k| {
        let unique = |v: &[Value]| {
            let mut seen = std::collections::HashSet::new();
            v.iter().all(|i| i.get(k).and_then(Value::as_str).is_some_and(|s| seen.insert(s)))
        };
        !(x.is_empty() && y.is_empty()) && unique(x) && unique(y)
    })
}

fn list(x: &[Value], y: &[Value]) -> Option<Value> {
    if let Some(k) = key_of(x, y) {
        let name = |v: &Value| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let old: std::collections::HashMap<String, &Value> = x.iter().map(|v| (name(v), v)).collect();
        let mut p = Map::new();
        for v in y {
            let n = name(v);
            match old.get(&n) {
                Some(o) => {
                    if let Some(d) = diff(o, v) {
                        p.insert(n, d);
                    }
                }
                None => {
                    p.insert(n, replace(v));
                }
            }
        }
        let mut out = json!({ "k": k, "p": p });
        if !x.iter().map(name).eq(y.iter().map(name)) {
            out["n"] = Value::Array(y.iter().map(|v| Value::String(name(v))).collect());
        }
        return Some(out);
    }
    // Dropped from the front, added at the end.
    if let Some(first) = y.first() {
        for k in (0..x.len().min(SHIFT_LOOK + 1)).filter(|&k| x[k] == *first) {
            let kept = &x[k..];
            if kept.len() <= y.len() && y[..kept.len()] == *kept {
                return Some(json!({ "s": k, "+": &y[kept.len()..] }));
            }
        }
    }
    if x.len() == y.len() {
        let mut m = Map::new();
        for (i, (a, b)) in x.iter().zip(y).enumerate() {
            if let Some(d) = diff(a, b) {
                m.insert(i.to_string(), d);
            }
        }
        return Some(json!({ "a": m }));
    }
    None
}

/// Why a patch does not fit the frame it is applied to: where (the keys, names and positions
/// down to it) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchError {
    /// From the top: a key, an item's name, or `[i]` for a position.
    pub at: Vec<String>,
    pub why: Misfit,
}

/// What does not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Misfit {
    #[error("an object patch on a non-object")]
    NotObject,
    #[error("a patch for a key that is not there")]
    NoKey,
    #[error("a list patch on a non-list")]
    NotList,
    #[error("a list order naming an item twice")]
    NamedTwice,
    #[error("a list order that is not names")]
    OrderNotNames,
    #[error("a list order that is not a list")]
    OrderNotList,
    #[error("a list item without its key")]
    ItemWithoutKey,
    #[error("a patch for an item that is not there")]
    NoItemToPatch,
    #[error("an item that is not there")]
    NoItem,
    #[error("drops {drops} of {len} items")]
    DropsTooMany { drops: usize, len: usize },
    #[error("no item {0}")]
    NoPosition(String),
    #[error("a patch of no known kind")]
    UnknownKind,
}

impl std::fmt::Display for PatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for step in &self.at {
            write!(f, "{step}: ")?;
        }
        write!(f, "{}", self.why)
    }
}

impl std::error::Error for PatchError {}

impl From<Misfit> for PatchError {
    fn from(why: Misfit) -> Self {
        Self { at: Vec::new(), why }
    }
}

impl PatchError {
    /// This error, one step further down from `step`.
    fn under(mut self, step: impl Into<String>) -> Self {
        self.at.insert(0, step.into());
        self
    }
}

/// `a` with `p` applied.
pub fn apply(a: &mut Value, p: &Value) -> Result<(), PatchError> {
    let Some(op) = p.as_object() else {
        *a = p.clone();
        return Ok(());
    };
    if let Some(v) = op.get("=") {
        *a = v.clone();
        return Ok(());
    }
    if let Some(Value::Object(m)) = op.get("o") {
        let Some(obj) = a.as_object_mut() else { return Err(Misfit::NotObject.into()) };
        return apply_to_keys(obj, m);
    }
    let Some(arr) = a.as_array_mut() else { return Err(Misfit::NotList.into()) };
    if let (Some(Value::String(k)), Some(Value::Object(changed))) = (op.get("k"), op.get("p")) {
        return apply_to_named(arr, k, op.get("n"), changed);
    }
    if let (Some(k), Some(Value::Array(add))) = (op.get("s").and_then(Value::as_u64), op.get("+")) {
        let k = usize::try_from(k).unwrap_or(usize::MAX);
        if k > arr.len() {
            return Err(Misfit::DropsTooMany { drops: k, len: arr.len() }.into());
        }
        arr.drain(..k);
        arr.extend(add.iter().cloned());
        return Ok(());
    }
    if let Some(Value::Object(m)) = op.get("a") {
        for (i, sub) in m {
            let v =
                i.parse::<usize>().ok().and_then(|i| arr.get_mut(i)).ok_or_else(|| Misfit::NoPosition(i.clone()))?;
            apply(v, sub).map_err(|e| e.under(format!("[{i}]")))?;
        }
        return Ok(());
    }
    Err(Misfit::UnknownKind.into())
}

/// An object's patch (`o`): each key removed, patched, or added whole.
fn apply_to_keys(obj: &mut Map<String, Value>, m: &Map<String, Value>) -> Result<(), PatchError> {
    for (k, sub) in m {
        if sub.get("-").is_some() {
            obj.remove(k);
        } else if let Some(v) = obj.get_mut(k) {
            apply(v, sub).map_err(|e| e.under(k.as_str()))?;
        } else if let Some(v) = sub.get("=") {
            obj.insert(k.clone(), v.clone());
        } else if !sub.is_object() {
            obj.insert(k.clone(), sub.clone());
        } else {
            return Err(PatchError::from(Misfit::NoKey).under(k.as_str()));
        }
    }
    Ok(())
}

/// A list of items named by key `k` (`k`, `p`, `n`): the items in the order `n` names them
/// (else as they are), those in `changed` patched or added.
fn apply_to_named(
    arr: &mut Vec<Value>,
    k: &str,
    n: Option<&Value>,
    changed: &Map<String, Value>,
) -> Result<(), PatchError> {
    let name = |v: &Value| v.get(k).and_then(Value::as_str).map(str::to_string);
    let order: Vec<String> = match n {
        // Each name once: a hostile list naming one item over and over would copy it as
        // often.
        Some(Value::Array(n))
            if {
                let mut seen = std::collections::HashSet::new();
                !n.iter().all(|x| seen.insert(x))
            } =>
        {
            return Err(Misfit::NamedTwice.into());
        }
        Some(Value::Array(n)) => {
            n.iter().map(|s| s.as_str().map(str::to_string)).collect::<Option<_>>().ok_or(Misfit::OrderNotNames)?
        }
        Some(_) => return Err(Misfit::OrderNotList.into()),
        None => arr.iter().map(name).collect::<Option<_>>().ok_or(Misfit::ItemWithoutKey)?,
    };
    let mut old: std::collections::HashMap<String, Value> =
        std::mem::take(arr).into_iter().filter_map(|v| Some((name(&v)?, v))).collect();
    for n in order {
        let v = match (old.remove(&n), changed.get(&n)) {
            (Some(mut v), Some(sub)) => {
                apply(&mut v, sub).map_err(|e| e.under(n.as_str()))?;
                v
            }
            (Some(v), None) => v,
            (None, Some(sub)) => match sub.get("=") {
                Some(v) => v.clone(),
                None if !sub.is_object() => sub.clone(),
                None => return Err(PatchError::from(Misfit::NoItemToPatch).under(n)),
            },
            (None, None) => return Err(PatchError::from(Misfit::NoItem).under(n)),
        };
        arr.push(v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(a: Value, b: Value) -> Value {
        let mut x = a.clone();
        if let Some(p) = diff(&a, &b) {
            apply(&mut x, &p).unwrap_or_else(|e| panic!("{e}: {p}"));
        }
        assert_eq!(x, b);
        diff(&a, &b).unwrap_or(Value::Null)
    }

    #[test]
    fn objects_carry_only_what_changed_nulls_included() {
        let p =
            round(json!({"a": 1, "b": {"c": 2, "d": 3}, "e": 4}), json!({"a": 1, "b": {"c": 2, "d": null}, "f": 5}));
        assert_eq!(p, json!({"o": {"b": {"o": {"d": null}}, "e": {"-": true}, "f": 5}}));
        // An object put in place of a number says so.
        let p = round(json!({"a": 1}), json!({"a": {"b": 2}}));
        assert_eq!(p, json!({"o": {"a": {"=": {"b": 2}}}}));
    }

    #[test]
    fn named_lists_match_by_name_and_keep_their_order() {
        let a = json!([{"name": "a", "u": 1}, {"name": "b", "u": 2}, {"name": "c", "u": 3}]);
        let b = json!([{"name": "c", "u": 3}, {"name": "a", "u": 9}, {"name": "d", "u": 4}]);
        let p = round(a, b);
        assert_eq!(p["p"].as_object().map(|m| m.len()), Some(2), "{p}");
        // Same names, same order: no order sent.
        let p = round(json!([{"id": "x", "v": 1}]), json!([{"id": "x", "v": 2}]));
        assert!(p.get("n").is_none(), "{p}");
    }

    #[test]
    fn events_dropped_at_the_front_and_added_at_the_end_are_said_as_such() {
        let a = json!([{"t": 1}, {"t": 2}, {"t": 3}]);
        let p = round(a.clone(), json!([{"t": 2}, {"t": 3}, {"t": 4}]));
        assert_eq!(p, json!({"s": 1, "+": [{"t": 4}]}));
        round(a.clone(), json!([{"t": 9}]));
        round(a, json!([]));
        // Equal length, changed in place: by position.
        let p = round(json!([1, 2, 3]), json!([1, 5, 3]));
        assert_eq!(p, json!({"a": {"1": 5}}));
    }

    /// Small JSON values: objects and lists of them, named items (`name`, `id`) and repeats
    /// among them, so keyed lists, shifts and position patches all come up.
    fn value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..3).prop_map(|n| json!(n)),
            (-2.0f64..2.0).prop_map(|f| json!(f)),
            prop::sample::select(vec!["a", "b", "c", "=", "o", "-"]).prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop::sample::select(vec!["name", "id", "x", "=", "o", "-", "s"]),
                    inner.clone(),
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
                // Named items, sometimes with the same name twice.
                prop::collection::vec((prop::sample::select(vec!["n1", "n2", "n3", "n4"]), inner), 0..5)
                    .prop_map(|v| { Value::Array(v.into_iter().map(|(n, x)| json!({"name": n, "v": x})).collect()) }),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn applying_the_diff_gives_the_new_value(a in value(), b in value()) {
            let mut x = a.clone();
            if let Some(p) = diff(&a, &b) {
                proptest::prop_assert!(apply(&mut x, &p).is_ok(), "{} -> {}: {}", a, b, p);
            }
            proptest::prop_assert_eq!(x, b);
        }

        #[test]
        fn a_value_and_its_edit_round_trip(a in value(), b in value(), at in 0usize..8) {
            // b put somewhere inside a: the close pairs a recording's frames are.
            let mut edited = a.clone();
            let mut n = 0;
            fn place(v: &mut Value, b: &Value, at: usize, n: &mut usize) {
                *n += 1;
                if *n == at {
                    *v = b.clone();
                    return;
                }
                match v {
                    Value::Array(xs) => xs.iter_mut().for_each(|x| place(x, b, at, n)),
                    Value::Object(m) => m.values_mut().for_each(|x| place(x, b, at, n)),
                    _ => {}
                }
            }
            place(&mut edited, &b, at, &mut n);
            let mut x = a.clone();
            if let Some(p) = diff(&a, &edited) {
                proptest::prop_assert!(apply(&mut x, &p).is_ok());
            }
            proptest::prop_assert_eq!(x, edited);
        }
    }

    #[test]
    fn a_patch_that_does_not_fit_is_an_error_not_a_panic() {
        let mut v = json!({"a": [1, 2]});
        for p in [
            json!({"o": {"a": {"a": {"7": {"=": 1}}}}}),
            json!({"o": {"a": {"s": 9, "+": []}}}),
            json!({"o": {"zz": {"o": {}}}}),
            json!({"o": {"a": {"o": {}}}}),
            json!({"k": "id", "p": {}, "n": ["ghost"]}),
            json!({"k": "id", "p": {"x": {"=": {"id": "x"}}}, "n": ["x", "x"]}),
            json!({"what": 1}),
        ] {
            assert!(apply(&mut v, &p).is_err(), "{p}");
        }
    }
}
