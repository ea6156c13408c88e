//! Instant-vector answers decoded as a stream, straight into exposition text per `instance`.
//!
//! A 4096-GPU answer is about 14 MB of JSON and 60,000 series. Decoding it into a tree of
//! owned maps first cost 0.38 s of CPU and a 170 MB peak; here each series is read with its
//! strings borrowed from the body (copied only where JSON escapes them), written as one
//! exposition line into its instance's text, and forgotten, so the text is the only copy. The
//! same mapping as a direct scrape then reads the texts ([`super::from_texts`]).
//!
//! An answer cannot smuggle lines in: a metric or label name the exposition grammar does not
//! allow, or a value that is not a number, drops its series (counted in [`Texts::dropped`]);
//! label values are escaped.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::AnswerError;

/// Exposition text per `instance` label ("" for series without one), built from answers.
#[derive(Debug, Default)]
pub struct Texts {
    pub by_instance: BTreeMap<String, String>,
    /// The answers' `warnings`.
    pub warnings: Vec<String>,
    /// Series left out because the exposition could not carry them faithfully.
    pub dropped: usize,
}

/// How one answer's series are written.
#[derive(Clone, Copy)]
pub struct Options<'a> {
    /// Series of these names are left out (a `[sources.promql]` field replaces them).
    pub skip: &'a [&'a str],
    /// Every series takes this name (a field's own query).
    pub rename: Option<&'a str>,
}

impl Options<'static> {
    pub const PLAIN: Options<'static> = Options { skip: &[], rename: None };
}

impl Texts {
    /// Adds an instant-vector answer's series. Errors say what the answer was, or what
    /// Prometheus said; series already added stay.
    pub fn add_vector(&mut self, body: &str, opts: Options<'_>) -> Result<(), AnswerError> {
        let mut de = serde_json::Deserializer::from_str(body);
        let head = EnvelopeSeed { texts: self, opts }.deserialize(&mut de).and_then(|h| de.end().map(|()| h));
        let start = || body.trim_start().chars().take(60).collect::<String>();
        let head = head.map_err(|source| AnswerError::NotAnswerStarting { source, start: start() })?;
        match head.status.as_deref() {
            Some("success") => {}
            Some(_) => {
                return Err(AnswerError::FailedAs {
                    kind: head.error_type.as_deref().unwrap_or("error").to_string(),
                    message: head.error.as_deref().unwrap_or("no message").to_string(),
                });
            }
            None => return Err(AnswerError::NoStatus { start: start() }),
        }
        self.warnings.extend(head.warnings);
        match head.result_type {
            None => Err(AnswerError::NoData),
            Some(t) if t != "vector" => Err(AnswerError::NotVector(t)),
            Some(_) => Ok(()),
        }
    }

    /// One series as one line of its instance's text; false when it cannot be written.
    fn write(&mut self, labels: &[(Str<'_>, Str<'_>)], value: &str, opts: Options<'_>) -> bool {
        let name = match opts.rename {
            Some(n) => n,
            None => match labels.iter().find(|(k, _)| k.0 == "__name__") {
                Some((_, v)) => v.0.as_ref(),
                // A series without a name is not DCGM's: not an error, nothing to show.
                None => return true,
            },
        };
        if opts.skip.contains(&name) {
            return true;
        }
        let value = value.trim();
        if !metric_name(name) || value.parse::<f64>().is_err() {
            return false;
        }
        if labels.iter().any(|(k, _)| k.0 != "__name__" && !label_name(&k.0)) {
            return false;
        }
        let instance = labels.iter().find(|(k, _)| k.0 == "instance").map_or("", |(_, v)| v.0.as_ref());
        let text = match self.by_instance.get_mut(instance) {
            Some(t) => t,
            None => self.by_instance.entry(instance.to_string()).or_default(),
        };
        text.push_str(name);
        text.push('{');
        let mut first = true;
        for (k, v) in labels.iter().filter(|(k, _)| k.0 != "__name__") {
            if !first {
                text.push(',');
            }
            first = false;
            text.push_str(&k.0);
            text.push_str("=\"");
            escape_into(text, &v.0);
            text.push('"');
        }
        text.push_str("} ");
        text.push_str(value);
        text.push('\n');
        true
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`, the exposition's metric names.
fn metric_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_' || c == b':')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, the exposition's label names.
fn label_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// A label value as the exposition writes it: `\`, `"` and newlines escaped.
fn escape_into(out: &mut String, v: &str) {
    if !v.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        out.push_str(v);
        return;
    }
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A JSON string borrowed from the body where it has no escapes.
struct Str<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// What the envelope said besides its data.
#[derive(Default)]
struct Head {
    status: Option<String>,
    error_type: Option<String>,
    error: Option<String>,
    warnings: Vec<String>,
    /// `data.resultType`, where there was data.
    result_type: Option<String>,
}

struct EnvelopeSeed<'t, 'o> {
    texts: &'t mut Texts,
    opts: Options<'o>,
}

impl<'de> DeserializeSeed<'de> for EnvelopeSeed<'_, '_> {
    type Value = Head;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Head, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed<'_, '_> {
    type Value = Head;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Prometheus API envelope")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Head, A::Error> {
        let mut head = Head::default();
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.0.as_ref() {
                "status" => head.status = Some(map.next_value()?),
                "errorType" => head.error_type = map.next_value()?,
                "error" => head.error = map.next_value()?,
                "warnings" => head.warnings = map.next_value::<Option<Vec<String>>>()?.unwrap_or_default(),
                "data" => {
                    let seed = DataSeed { texts: &mut *self.texts, opts: self.opts };
                    head.result_type = map.next_value_seed(seed)?.filter(|t| !t.is_empty());
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(head)
    }
}

/// `data`: its `resultType`, with `result` streamed into the texts; `null` data is none.
struct DataSeed<'t, 'o> {
    texts: &'t mut Texts,
    opts: Options<'o>,
}

impl<'de> DeserializeSeed<'de> for DataSeed<'_, '_> {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DataSeed<'_, '_> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the answer's data")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<String>, A::Error> {
        let mut result_type = String::new();
        let mut labels = Vec::new();
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.0.as_ref() {
                "resultType" => result_type = map.next_value()?,
                "result" => {
                    map.next_value_seed(ResultSeed { texts: &mut *self.texts, opts: self.opts, labels: &mut labels })?
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Some(result_type))
    }
}

/// `result`: each element a series written at once; anything else in the array (a scalar's
/// parts, a matrix's series without `value`) is passed over.
struct ResultSeed<'t, 'o, 'l, 'de> {
    texts: &'t mut Texts,
    opts: Options<'o>,
    /// One buffer for every series' labels.
    labels: &'l mut Vec<(Str<'de>, Str<'de>)>,
}

impl<'de> DeserializeSeed<'de> for ResultSeed<'_, '_, '_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ResultSeed<'_, '_, '_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the answer's result")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        loop {
            let seed = SeriesSeed { labels: &mut *self.labels };
            match seq.next_element_seed(seed)? {
                None => return Ok(()),
                Some(None) => {}
                Some(Some(value)) => {
                    if !self.texts.write(self.labels, &value.0, self.opts) {
                        self.texts.dropped += 1;
                    }
                }
            }
        }
    }
}

/// One element of `result`: its labels into the buffer, its value's string out (`None` for
/// a series without `value`, or an element that is not a series).
struct SeriesSeed<'l, 'de> {
    labels: &'l mut Vec<(Str<'de>, Str<'de>)>,
}

impl<'de> DeserializeSeed<'de> for SeriesSeed<'_, 'de> {
    type Value = Option<Str<'de>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SeriesSeed<'_, 'de> {
    type Value = Option<Str<'de>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a series")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        self.labels.clear();
        let mut value = None;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.0.as_ref() {
                "metric" => map.next_value_seed(LabelsSeed { labels: &mut *self.labels })?,
                "value" => value = Some(map.next_value::<(IgnoredAny, Str<'de>)>()?.1),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(value)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// `metric`: label name and value pairs into the buffer.
struct LabelsSeed<'l, 'de> {
    labels: &'l mut Vec<(Str<'de>, Str<'de>)>,
}

impl<'de> DeserializeSeed<'de> for LabelsSeed<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LabelsSeed<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a label set")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.labels.clear();
        while let Some((k, v)) = map.next_entry::<Str<'de>, Str<'de>>()? {
            self.labels.push((k, v));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
