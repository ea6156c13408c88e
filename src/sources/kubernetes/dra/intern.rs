//! Names kept once: a 1,000-node DynamicMIG cluster publishes 208,000 devices whose names,
//! pools, attribute values and counter names repeat thousands of times, so the watch stores
//! hold one shared copy of each. Bounded: past `MAX` distinct names new ones are not shared.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

/// A shared, immutable name.
pub type Name = Arc<str>;

/// Distinct names kept; a hostile cluster cannot grow the table past this.
const MAX: usize = 1 << 18;

fn table() -> &'static Mutex<HashSet<Name>> {
    static TABLE: OnceLock<Mutex<HashSet<Name>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashSet::new()))
}

/// The one shared copy of `s`.
pub fn intern(s: &str) -> Name {
    let Ok(mut t) = table().lock() else { return Name::from(s) };
    if let Some(n) = t.get(s) {
        return n.clone();
    }
    let n = Name::from(s);
    if t.len() < MAX {
        t.insert(n.clone());
    }
    n
}

/// A device's capacities or a consumption's counters: (name, whole value).
pub type Amounts = Arc<[(IName, Option<u64>)]>;

/// Distinct lists of amounts kept: every node of a model publishes the same few dozen.
const MAX_AMOUNTS: usize = 1 << 16;

/// The one shared copy of `items`: under DynamicMIG 208,000 devices carry a few hundred
/// distinct capacity and counter lists, each otherwise a vector of its own.
pub fn intern_amounts(items: Vec<(IName, Option<u64>)>) -> Amounts {
    static TABLE: OnceLock<Mutex<HashSet<Amounts>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| Mutex::new(HashSet::new()));
    let Ok(mut t) = table.lock() else { return Amounts::from(items) };
    if let Some(a) = t.get(items.as_slice()) {
        return a.clone();
    }
    let a = Amounts::from(items);
    if t.len() < MAX_AMOUNTS {
        t.insert(a.clone());
    }
    a
}

/// A name read from JSON, interned as it is decoded.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IName(pub Name);

impl Default for IName {
    fn default() -> Self {
        Self(intern(""))
    }
}

impl std::ops::Deref for IName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de> serde::Deserialize<'de> for IName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = IName;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            // Borrowed or not, the text is only looked up: no copy unless it is new.
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<IName, E> {
                Ok(IName(intern(s)))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_copy_of_each_name() {
        let a = intern("gpu-0-counter-set");
        let b = intern(&String::from("gpu-0-counter-set"));
        assert!(Arc::ptr_eq(&a, &b));
        let c: IName = serde_json::from_str("\"gpu-0-counter-set\"").unwrap_or_default();
        assert!(Arc::ptr_eq(&a, &c.0));
        let list = || vec![(IName(intern("memory")), Some(1 << 30)), (IName(intern("memorySlice0")), Some(1))];
        assert!(Arc::ptr_eq(&intern_amounts(list()), &intern_amounts(list())));
        assert!(!Arc::ptr_eq(&intern_amounts(list()), &intern_amounts(list()[..1].to_vec())));
    }
}
