//! The federation endpoint (`/federate?match[]=SELECTOR`): the same series as the instant
//! query, as exposition text. Prometheus writes it faster than the JSON of the same series and
//! tessera reads it without a JSON decode; each line goes to its `instance` label's text, as
//! the instant query's series do ([`super::decode`]).
//!
//! Not every Prometheus-compatible server has it (Thanos Query and Mimir answer 404); `auto`
//! falls back to instant queries then, and says so.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::decode::Texts;

/// The federation URL for one selector, with a proxy's own query parameters after it.
pub fn url(base: &str, selector: &str) -> String {
    let query = super::query_url(base, selector);
    query.replacen("/api/v1/query?query=", "/federate?match%5B%5D=", 1)
}

/// The lines of a federation answer sorted into per-`instance` texts (comments dropped, a line
/// whose labels cannot be read kept under "" so the parser counts it). Never panics.
pub fn split(text: &str, skip: &[&str], out: &mut Texts) {
    for raw in text.split('\n') {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let name_end = trimmed.bytes().position(|b| matches!(b, b'{' | b' ' | b'\t')).unwrap_or(trimmed.len());
        if skip.contains(&&trimmed[..name_end]) {
            continue;
        }
        let instance = instance_of(&trimmed[name_end..]);
        push(&mut out.by_instance, instance.as_deref().unwrap_or(""), trimmed);
    }
}

fn push(texts: &mut BTreeMap<String, String>, instance: &str, line: &str) {
    let text = match texts.get_mut(instance) {
        Some(t) => t,
        None => texts.entry(instance.to_string()).or_default(),
    };
    text.push_str(line);
    text.push('\n');
}

/// The `instance` label's value in `{k="v",...}` (escapes read back), or `None` where there
/// is none or the label set does not read.
///
/// The common line (no escapes before the label, `instance="` written as Prometheus writes
/// it) is a substring search: a match outside every value has an even number of quotes
/// before it and a label boundary just before. Anything else is read label by label.
fn instance_of(rest: &str) -> Option<Cow<'_, str>> {
    const KEY: &str = "instance=\"";
    let set = rest.trim_start().strip_prefix('{')?;
    let mut from = 0;
    while let Some(k) = set.get(from..)?.find(KEY) {
        let at = from + k;
        let before = &set.as_bytes()[..at];
        // An escape, or a `}` (the set may have ended: an exemplar's labels follow), is read
        // label by label.
        if before.iter().any(|&b| b == b'\\' || b == b'}') {
            break;
        }
        let outside = before.iter().filter(|&&b| b == b'"').count() % 2 == 0;
        if outside && before.last().is_none_or(|b| matches!(b, b',' | b' ' | b'\t')) {
            let value = &set[at + KEY.len()..];
            let end = value.find('"')?;
            if value[..end].contains('\\') {
                break;
            }
            return Some(Cow::Borrowed(&value[..end]));
        }
        from = at + 1;
    }
    instance_scan(rest)
}

/// [`instance_of`] label by label: values before it are skipped, not copied.
fn instance_scan(rest: &str) -> Option<Cow<'_, str>> {
    let mut s = rest.trim_start().strip_prefix('{')?;
    loop {
        s = s.trim_start_matches([' ', '\t', ',']);
        if s.starts_with('}') {
            return None;
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim();
        s = s[eq + 1..].trim_start().strip_prefix('"')?;
        // The value runs to the first quote not escaped.
        let b = s.as_bytes();
        let (mut i, mut escaped) = (0, false);
        while *b.get(i)? != b'"' {
            if b[i] == b'\\' {
                escaped = true;
                i += 1;
            }
            i += 1;
        }
        let value = &s[..i];
        if key == "instance" {
            return Some(if escaped { Cow::Owned(unescape(value)) } else { Cow::Borrowed(value) });
        }
        s = &s[i + 1..];
    }
}

/// A label value with `\\`, `\"` and `\n` read back (other escapes kept as written, as the
/// exposition parser keeps them).
fn unescape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(c @ ('\\' | '"')) => out.push(c),
            Some(c) => {
                out.push('\\');
                out.push(c);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_go_to_their_instance_and_comments_go() {
        let text = "# TYPE DCGM_FI_DEV_GPU_UTIL untyped\n\
            DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",instance=\"10.0.0.7:9400\",job=\"dcgm\"} 87 1700000000000\n\
            DCGM_FI_DEV_GPU_UTIL{pod=\"a,instance=\",gpu=\"1\",instance=\"10.0.0.8:9400\"} 5 1700000000000\r\n\
            DCGM_FI_DEV_GPU_TEMP{exported_instance=\"x\",gpu=\"0\",instance=\"10.0.0.7:9400\"} 64\n\
            DCGM_FI_DEV_FB_FREE{gpu=\"0\",instance=\"10.0.0.7:9400\"} 100\n\
            broken{gpu=\"0\n\
            up 1\n";
        let mut t = Texts::default();
        split(text, &["DCGM_FI_DEV_FB_FREE"], &mut t);
        let keys: Vec<&str> = t.by_instance.keys().map(String::as_str).collect();
        assert_eq!(keys, ["", "10.0.0.7:9400", "10.0.0.8:9400"]);
        assert_eq!(t.by_instance["10.0.0.7:9400"].lines().count(), 2, "the skipped family left out");
        assert!(t.by_instance["10.0.0.8:9400"].contains("pod=\"a,instance=\""), "a value that looks like a label");
        assert_eq!(t.by_instance[""], "broken{gpu=\"0\nup 1\n", "unreadable and label-less lines kept for the parser");
    }

    #[test]
    fn an_escaped_instance_reads_back() {
        assert_eq!(instance_of(r#"{instance="a\"b\\c",gpu="0"}"#).as_deref(), Some("a\"b\\c"));
        assert_eq!(instance_of(r#"{ gpu = "0" , instance = "h:1" }"#).as_deref(), Some("h:1"));
        assert_eq!(instance_of(r#"{gpu="0"}"#), None);
        assert_eq!(instance_of(" 5"), None);
        assert_eq!(instance_of(r#"{gpu="0"#), None);
        // The substring search and the label-by-label reading agree.
        for set in [
            r#"{pod="a,instance=",instance="real"}"#,
            r#"{exported_instance="no",instance="yes"}"#,
            r#"{pod="x\"instance=\"no",instance="yes"}"#,
            r#"{instance="a\\b"}"#,
            r#"{pod="instance=\"q\"",gpu="1"}"#,
            r#"{ instance="spaced" }"#,
            r#"{instance="unterminated}"#,
        ] {
            assert_eq!(instance_of(set), instance_scan(set), "{set}");
        }
        assert_eq!(instance_of(r#"{pod="a,instance=",instance="real"}"#).as_deref(), Some("real"));
        assert_eq!(instance_of(r#"{pod="instance=\"q\"",gpu="1"}"#), None);
    }

    fn key() -> impl proptest::strategy::Strategy<Value = &'static str> {
        proptest::sample::select(vec!["instance", "exported_instance", "pod", "xinstance", "gpu"])
    }

    proptest::proptest! {
        /// On every well-formed label set (values with any quotes, backslashes, newlines and
        /// `instance="` inside, escaped as the exposition escapes them) the substring search
        /// reads what reading label by label reads.
        #[test]
        fn the_fast_reading_is_the_exact_one(
            labels in proptest::collection::vec((key(), "([a-z,={} \"\\\\\n]|instance=\"){0,6}"), 0..5),
            trailing in proptest::bool::ANY,
            tail in proptest::sample::select(vec!["", " 1", " 1 # {instance=\"z\"} 2", " 1 # {a=\"}\",instance=\"z\"}"]),
        ) {
            let written: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")))
                .collect();
            let set = format!("{{{}{}}}{tail}", written.join(","), if trailing { "," } else { "" });
            let want = labels.iter().find(|(k, _)| *k == "instance").map(|(_, v)| v.as_str());
            let (exact, fast) = (instance_scan(&set), instance_of(&set));
            proptest::prop_assert_eq!(exact.as_deref(), want, "{}", &set);
            proptest::prop_assert_eq!(fast.as_deref(), want, "{}", &set);
        }
    }

    #[test]
    fn the_url_keeps_a_proxys_parameters() {
        assert_eq!(
            url("http://p:9090/prom/?tenant=a", "{__name__=\"up\"}"),
            "http://p:9090/prom/federate?match%5B%5D=%7B__name__%3D%22up%22%7D&tenant=a"
        );
    }
}
