//! Slurm GRES strings: `gpu:h100:2(IDX:0-1),gpu:h200:4(IDX:2-5)` (a job's `gres_detail`, a
//! node's `gres_used`), `gres/gpu:h100:1` (TRES), `gpu:a100:4(S:0-3),lscratch:3200` (node
//! `Gres=`), and MIG types such as `a100_3g.20gb` or `nvidia_a100_3g.20gb`.

/// One GRES entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gres {
    /// `gpu`, `mps`, `lscratch`, …
    pub name: String,
    /// The type after the name (`h100`, `a100_3g.20gb`), if any.
    pub kind: Option<String>,
    pub count: u64,
    /// Device indexes from `(IDX:…)`; `None` where the string gives none (or `N/A`).
    pub indexes: Option<Vec<u32>>,
}

impl Gres {
    /// The MIG profile a GPU type names (`a100_3g.20gb` -> `3g.20gb`), if it names one.
    pub fn mig_profile(&self) -> Option<String> {
        self.kind.as_deref().and_then(mig_profile)
    }
}

/// The MIG profile at the end of a GRES type, as slurmd's NVML autodetect names them
/// (`<device name>_<slices>g.<GB>gb`); `+me` kept.
pub fn mig_profile(kind: &str) -> Option<String> {
    let tail = kind.rsplit('_').next()?.to_ascii_lowercase();
    let (g, rest) = tail.split_once("g.")?;
    let gb = rest.strip_suffix("+me").unwrap_or(rest).strip_suffix("gb")?;
    let ok = !g.is_empty()
        && g.bytes().all(|b| b.is_ascii_digit())
        && !gb.is_empty()
        && gb.bytes().all(|b| b.is_ascii_digit());
    ok.then_some(tail)
}

/// `0-1,4` -> [0, 1, 4]; `None` for `N/A`, an empty list, or anything unreadable.
pub fn index_list(text: &str) -> Option<Vec<u32>> {
    let text = text.trim();
    if text.is_empty() || text.eq_ignore_ascii_case("N/A") {
        return None;
    }
    let mut out = Vec::new();
    for part in text.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                // A card index list: a few thousand at most, however many parts it has.
                if b < a || b - a > 4096 || out.len() + (b - a) as usize >= 4096 {
                    return None;
                }
                out.extend(a..=b);
            }
            None if out.len() < 4096 => out.push(part.trim().parse().ok()?),
            None => return None,
        }
    }
    Some(out)
}

/// Split on commas outside brackets of the kind `open`/`close`, trimmed, empty parts dropped:
/// `gpu:a100:3(IDX:0-1,4)` and `gpu[1-2,4]` stay whole.
pub fn split_outside(text: &str, open: char, close: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
        } else if c == ',' && depth <= 0 {
            out.push(&text[start..i]);
            start = i + 1;
        }
    }
    out.push(&text[start..]);
    out.into_iter().map(str::trim).filter(|e| !e.is_empty()).collect()
}

/// Parse a GRES list. Entries that cannot be read are skipped (and counted by the caller
/// comparing lengths if it cares); `N/A`, `(null)` and empty strings give nothing.
pub fn parse(text: &str) -> Vec<Gres> {
    let text = text.trim();
    if text.is_empty() || text.eq_ignore_ascii_case("N/A") || text == "(null)" {
        return Vec::new();
    }
    split_outside(text, '(', ')').into_iter().filter_map(entry).collect()
}

fn entry(e: &str) -> Option<Gres> {
    // Detail in parentheses: IDX for devices, S for sockets (ignored).
    let (head, detail) = match e.split_once('(') {
        Some((h, d)) => (h, Some(d.trim_end_matches(')'))),
        None => (e, None),
    };
    // `gres/gpu:1` in TRES strings; 22.05's tres_per_node says `gres:gpu:1`.
    let head = head.strip_prefix("gres/").or_else(|| head.strip_prefix("gres:")).unwrap_or(head);
    // TRES writes `gres/gpu:h100=4` in some places.
    let head = head.replace('=', ":");
    let parts: Vec<&str> = head.split(':').collect();
    let (name, kind, count) = match parts.as_slice() {
        [name] => (*name, None, 1),
        [name, last] => match last.parse::<u64>() {
            Ok(n) => (*name, None, n),
            Err(_) => (*name, Some(*last), 1),
        },
        [name, kind, count, ..] => (*name, Some(*kind), count.parse().ok()?),
        [] => return None,
    };
    if name.is_empty() {
        return None;
    }
    let indexes = detail.and_then(|d| d.strip_prefix("IDX:")).and_then(index_list);
    Some(Gres { name: name.to_string(), kind: kind.map(str::to_string), count, indexes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(name: &str, kind: Option<&str>, count: u64, idx: Option<Vec<u32>>) -> Gres {
        Gres { name: name.into(), kind: kind.map(Into::into), count, indexes: idx }
    }

    #[test]
    fn job_and_node_detail_from_real_outputs() {
        // slurmrestd 23.11 gres_detail and gres_used (reference samples).
        assert_eq!(
            parse("gpu:h100:2(IDX:0-1),gpu:h200:4(IDX:2-5)"),
            vec![g("gpu", Some("h100"), 2, Some(vec![0, 1])), g("gpu", Some("h200"), 4, Some(vec![2, 3, 4, 5]))]
        );
        assert_eq!(parse("gpu:h200:0(IDX:)"), vec![g("gpu", Some("h200"), 0, None)]);
        assert_eq!(
            parse("gpu:h100:1(IDX:0),gpu:h200:0(IDX:N/A)"),
            vec![g("gpu", Some("h100"), 1, Some(vec![0])), g("gpu", Some("h200"), 0, None)]
        );
        assert_eq!(parse("gpu:a100:3(IDX:0-1,3)")[0].indexes, Some(vec![0, 1, 3]), "commas inside IDX");
    }

    #[test]
    fn tres_node_gres_and_mig_types() {
        assert_eq!(parse("gres/gpu:6"), vec![g("gpu", None, 6, None)]);
        assert_eq!(parse("gres:gpu:a100_3g.20gb:1"), vec![g("gpu", Some("a100_3g.20gb"), 1, None)]);
        assert_eq!(parse("gres/gpu:h100:1,gres/gpu:h200:1").len(), 2);
        assert_eq!(parse("gres/gpu:a100=4"), vec![g("gpu", Some("a100"), 4, None)]);
        assert_eq!(
            parse("gpu:a100:4(S:0-3),lscratch:3200"),
            vec![g("gpu", Some("a100"), 4, None), g("lscratch", None, 3200, None)]
        );
        assert_eq!(parse("gpu:a100:1,gpu:a100_3g.20gb:2")[1].mig_profile().as_deref(), Some("3g.20gb"));
        assert_eq!(mig_profile("nvidia_a100_3g.20gb").as_deref(), Some("3g.20gb"));
        assert_eq!(mig_profile("a100_1g.10gb+me").as_deref(), Some("1g.10gb+me"));
        assert_eq!(mig_profile("h100"), None);
        assert_eq!(parse("gpu"), vec![g("gpu", None, 1, None)]);
    }

    #[test]
    fn nonsense_gives_nothing_and_never_panics() {
        for s in ["", "N/A", "(null)", ",,,", "gpu:h100:x(IDX:0)", ":::", "((((", "gpu:h100:2(IDX:9-1)"] {
            let _ = parse(s);
        }
        assert!(parse("N/A").is_empty());
        assert_eq!(parse("gpu:h100:x(IDX:0)"), vec![]);
        assert_eq!(parse("gpu:h100:2(IDX:9-1)")[0].indexes, None, "a backwards range is unreadable");
        assert_eq!(index_list("0-100000"), None, "absurd ranges are refused");
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_without_panic(s in ".{0,64}") {
            let _ = parse(&s);
        }
    }
}
