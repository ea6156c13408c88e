//! tessera's side of the device check: the cards of a `snapshot --json`, read into the fields
//! the check compares and nothing else. Decoded as typed values, not a JSON tree (10 MB took
//! 833 MB as one), with every count bounded: at most `MAX_CARDS` cards and nodes, at most
//! `MAX_ITEMS` cards, processes and MIG instances together, texts cut to `smi::MAX_TEXT`.

use std::cell::Cell;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::smi::cut;

/// The most cards (and nodes) read: the largest supported fleet (`--demo-size 4096x16`).
pub const MAX_CARDS: usize = 65_536;
/// The most cards, processes and MIG instances read together (a card of the largest fleet
/// may have 15 of them on average).
pub const MAX_ITEMS: usize = 1 << 20;

/// One tessera card from `snapshot --json`, as `NODE/INDEX`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ours {
    pub name: String,
    pub card: Card,
}

/// The fields of a card the check reads; an absent or null one is unknown.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Card {
    pub index: Option<u64>,
    #[serde(deserialize_with = "text")]
    pub uuid: Option<String>,
    #[serde(deserialize_with = "text")]
    pub pci_bus_id: Option<String>,
    #[serde(deserialize_with = "text")]
    pub model: Option<String>,
    pub memory_total_mib: Option<f64>,
    pub memory_used_mib: Option<f64>,
    pub utilization_pct: Option<f64>,
    pub temperature_c: Option<f64>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    #[serde(deserialize_with = "text")]
    pub compute_mode: Option<String>,
    pub health: Option<Health>,
    pub sharing: Option<Sharing>,
    pub mig: Option<Mig>,
    #[serde(deserialize_with = "capped")]
    pub processes: Option<Vec<Process>>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Health {
    pub ecc_volatile_uncorrected: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Sharing {
    /// A number when tessera could read the card's process list.
    pub contexts: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Mig {
    pub enabled: Option<bool>,
    pub pending: Option<bool>,
    /// Whether listing the instances failed (its text is not read).
    #[serde(deserialize_with = "present")]
    pub error: bool,
    #[serde(deserialize_with = "capped")]
    pub instances: Option<Vec<Instance>>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Instance {
    pub gi_id: Option<u64>,
    pub memory_total_mib: Option<f64>,
    /// Counted, not kept.
    #[serde(deserialize_with = "capped")]
    pub compute_instances: Option<Vec<IgnoredAny>>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Process {
    pub pid: Option<u64>,
    pub used_mib: Option<f64>,
}

impl Card {
    /// What the card costs against `MAX_ITEMS`: itself, its processes and its instances.
    fn items(&self) -> usize {
        1 + self.processes.as_ref().map_or(0, Vec::len)
            + self.mig.as_ref().and_then(|m| m.instances.as_ref()).map_or(0, Vec::len)
    }
}

/// A string cut to `MAX_TEXT`; any other value (a number, null) is unknown.
fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = Option::<std::borrow::Cow<'de, str>>::deserialize(d).ok().flatten();
    Ok(v.map(|s| cut(&s)))
}

/// The most processes or MIG instances of one card read (each list is refused past it
/// before it is all read).
pub const MAX_PER_CARD: usize = 4096;

/// A list of at most `MAX_PER_CARD` items, or null.
fn capped<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Vec<T>>, D::Error> {
    struct Few<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Few<T> {
        type Value = Option<Vec<T>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {MAX_PER_CARD} items, or null")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
            let mut out = Vec::new();
            while let Some(x) = seq.next_element()? {
                if out.len() == MAX_PER_CARD {
                    return Err(S::Error::custom(format!("more than {MAX_PER_CARD} items in one card's list")));
                }
                out.push(x);
            }
            Ok(Some(out))
        }
    }
    d.deserialize_any(Few(std::marker::PhantomData))
}

/// Whether the value is there and not null.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<IgnoredAny>::deserialize(d)?.is_some())
}

/// The cards of a `snapshot --json` text, in its order; an error says why it is not one.
pub fn read(text: &str) -> Result<Vec<Ours>, serde_json::Error> {
    let left = Left { nodes: Cell::new(MAX_CARDS), cards: Cell::new(MAX_CARDS), items: Cell::new(MAX_ITEMS) };
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text);
    Top { left: &left, out: &mut out }.deserialize(&mut de)?;
    de.end()?;
    Ok(out)
}

/// What may still be read.
struct Left {
    nodes: Cell<usize>,
    cards: Cell<usize>,
    items: Cell<usize>,
}

impl Left {
    /// Take one node.
    fn node<E: serde::de::Error>(&self) -> Result<(), E> {
        let n = self.nodes.get();
        if n == 0 {
            return Err(E::custom(format!("more than {MAX_CARDS} nodes (the largest supported fleet has 4096)")));
        }
        self.nodes.set(n - 1);
        Ok(())
    }
    /// Take one card of `items` items, or say which bound it passes.
    fn card<E: serde::de::Error>(&self, items: usize) -> Result<(), E> {
        let (c, i) = (self.cards.get(), self.items.get());
        if c == 0 {
            return Err(E::custom(format!("more than {MAX_CARDS} cards (the largest supported fleet)")));
        }
        if i < items {
            return Err(E::custom(format!("more than {MAX_ITEMS} cards, processes and MIG instances")));
        }
        self.cards.set(c - 1);
        self.items.set(i - items);
        Ok(())
    }
}

/// `{"nodes": [...], ...}`.
struct Top<'a> {
    left: &'a Left,
    out: &'a mut Vec<Ours>,
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
        f.write_str("a tessera snapshot (snapshot --json)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            if k == "nodes" {
                m.next_value_seed(Nodes { left: self.left, out: &mut *self.out })?;
            } else {
                m.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// The nodes list: each node's cards named `NODE/INDEX` once its name is read.
struct Nodes<'a> {
    left: &'a Left,
    out: &'a mut Vec<Ours>,
}

impl<'de> DeserializeSeed<'de> for Nodes<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Nodes<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of nodes")
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
        while let Some((name, cards)) = seq.next_element_seed(Node { left: self.left })? {
            let name = name.unwrap_or_else(|| "?".into());
            self.out.extend(
                cards.into_iter().map(|card| Ours { name: format!("{name}/{}", card.index.unwrap_or(0)), card }),
            );
        }
        Ok(())
    }
}

/// One node: its name and its cards.
struct Node<'a> {
    left: &'a Left,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = (Option<String>, Vec<Card>);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = (Option<String>, Vec<Card>);
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a node")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        self.left.node::<A::Error>()?;
        let (mut name, mut cards) = (None, Vec::new());
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            match k.as_ref() {
                "name" => name = m.next_value::<Option<std::borrow::Cow<'de, str>>>()?.map(|n| cut(&n)),
                "cards" => cards = m.next_value_seed(Cards { left: self.left })?,
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((name, cards))
    }
}

/// A node's cards, each taken from what may still be read.
struct Cards<'a> {
    left: &'a Left,
}

impl<'de> DeserializeSeed<'de> for Cards<'_> {
    type Value = Vec<Card>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Card>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Cards<'_> {
    type Value = Vec<Card>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of cards")
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Vec<Card>, S::Error> {
        let mut out = Vec::new();
        while let Some(card) = seq.next_element::<Card>()? {
            self.left.card::<S::Error>(card.items())?;
            out.push(card);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_reads_into_its_cards() {
        let text = r#"{"schema_version":1,"nodes":[{"cards":[{"index":1,"uuid":"GPU-1","temperature_c":40,
            "mig":{"enabled":true,"error":null,"instances":[{"gi_id":3,"compute_instances":[{"ci_id":0}]}]},
            "processes":[{"pid":7,"used_mib":100}],"sharing":{"contexts":1},"model":7}],"name":"gpu-01"}],"x":[1,2]}"#;
        let cards = read(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cards.len(), 1);
        let c = &cards[0];
        assert_eq!(c.name, "gpu-01/1", "the name after the cards still names them");
        assert_eq!(
            (c.card.uuid.as_deref(), c.card.temperature_c, c.card.model.as_deref()),
            (Some("GPU-1"), Some(40.0), None)
        );
        let mig = c.card.mig.clone().unwrap_or_default();
        assert!(!mig.error && mig.enabled == Some(true));
        assert_eq!(mig.instances.unwrap_or_default()[0].compute_instances.as_ref().map(Vec::len), Some(1));
        assert!(read("[1]").is_err() && read("{\"nodes\":[{}]} x").is_err());
    }

    /// The largest supported fleet reads; one card more is refused, and so is a bomb of tiny
    /// processes past `MAX_ITEMS` (each would be a value of a tree).
    #[test]
    fn counts_are_bounded_and_the_largest_fleet_reads() {
        let fleet = |n: usize| format!("{{\"nodes\":[{{\"name\":\"n\",\"cards\":[{}]}}]}}", vec!["{}"; n].join(","));
        assert_eq!(read(&fleet(MAX_CARDS)).map(|c| c.len()).ok(), Some(MAX_CARDS));
        assert!(read(&fleet(MAX_CARDS + 1)).is_err_and(|e| e.to_string().contains("65536 cards")));
        let card = format!("{{\"processes\":[{}]}}", vec!["{}"; MAX_PER_CARD].join(","));
        let procs = format!("{{\"nodes\":[{{\"cards\":[{}]}}]}}", vec![card.as_str(); 300].join(","));
        assert!(read(&procs).is_err_and(|e| e.to_string().contains("processes")), "past MAX_ITEMS together");
        let one =
            format!("{{\"nodes\":[{{\"cards\":[{{\"processes\":[{}]}}]}}]}}", vec!["{}"; MAX_PER_CARD + 1].join(","));
        assert!(read(&one).is_err_and(|e| e.to_string().contains("one card's list")));
        let long = format!("{{\"nodes\":[{{\"name\":\"{}\",\"cards\":[{{}}]}}]}}", "n".repeat(100_000));
        assert!(read(&long).is_ok_and(|c| c[0].name.len() < 300));
    }
}
