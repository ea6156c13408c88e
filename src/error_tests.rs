//! The crate's error rule, checked over its source: an error that can leave its module is a
//! type, never a bare `String` (docs/architecture.md, "Errors").

use std::path::Path;

/// `text` without whitespace, the `std::`/`core::` paths of `Result` and `String` shortened.
fn squeeze(text: &str) -> String {
    let s: String = text.split_whitespace().collect();
    s.replace("std::result::", "").replace("core::result::", "").replace("std::string::", "")
}

/// Whether a squeezed type text holds a `Result<_, String>` anywhere (inside a future, a box, a
/// closure's return).
fn has_string_result(sig: &str) -> bool {
    let b = sig.as_bytes();
    let mut from = 0;
    while let Some(at) = sig[from..].find("Result<").map(|i| i + from) {
        let word_start = at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_');
        from = at + "Result<".len();
        if !word_start {
            continue;
        }
        // The generic arguments up to the matching `>` (an arrow's `>` is not one), and the
        // last of them at depth 0.
        let (mut depth, mut last) = (1, from);
        let mut i = from;
        while i < b.len() && depth > 0 {
            match b[i] {
                b'<' | b'(' | b'[' => depth += 1,
                b'>' if b[i - 1] != b'-' => depth -= 1,
                b')' | b']' => depth -= 1,
                b',' if depth == 1 => last = i + 1,
                _ => {}
            }
            i += 1;
        }
        if depth == 0 && &sig[last..i - 1] == "String" {
            return true;
        }
    }
    false
}

/// The text from `at` to the first `{` or `;` outside brackets: a signature or a type alias.
fn item_head(code: &str, at: usize) -> &str {
    let mut depth = 0i32;
    for (i, c) in code[at..].char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '{' | ';' if depth <= 0 => return &code[at..at + i],
            _ => {}
        }
    }
    &code[at..]
}

/// The byte offsets of public items in `code`: each `pub`/`pub(...)` function or type alias,
/// and every function declared in a public trait (its methods have no `pub` of their own).
fn public_items(code: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("pub") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let mut rest = &code[at + 3..];
        if rest.starts_with('(') {
            rest = rest.split_once(')').map_or("", |(_, r)| r);
        }
        let words: Vec<&str> = rest.split_whitespace().take(5).collect();
        let kind = words.iter().find(|w| !matches!(**w, "const" | "async" | "unsafe" | "extern" | "\"C\""));
        match kind.copied() {
            Some("fn") | Some("type") => out.push(at),
            Some("trait") => {
                let body_at = at + code[at..].find('{').unwrap_or(0);
                let mut depth = 0;
                for (i, c) in code[body_at..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        let body = &code[body_at..body_at + i];
                        out.extend(body.match_indices("fn ").map(|(j, _)| body_at + j));
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// `FILE: ITEM` for each public item of the `.rs` files under `dir` (test code left out:
/// `*_tests.rs`, a trailing `mod tests`) whose signature or alias holds a `Result<_, String>`.
fn string_errors(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            string_errors(root, &path, out);
            continue;
        }
        let name = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
        if !name.ends_with(".rs") || name.ends_with("_tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        for at in public_items(code) {
            let head = item_head(code, at);
            if has_string_result(&squeeze(head)) {
                out.push(format!("{name}: {}", head.split_whitespace().collect::<Vec<_>>().join(" ")));
            }
        }
    }
}

#[test]
fn the_rule_finds_a_string_error_however_it_is_written() {
    let found = |code: &str| public_items(code).iter().any(|&at| has_string_result(&squeeze(item_head(code, at))));
    for bad in [
        "pub fn f() -> Result<(), String> {}",
        "pub(crate) fn f(x: u8)\n    -> Result<Vec<u8>, String> {}",
        "pub(super) fn f() -> std::result::Result<u8, std::string::String> {}",
        "pub(in crate::a) async fn f() -> Result<u8, String> where u8: Copy {}",
        "pub type Ran = Result<Outcome, String>;",
        "pub fn f(g: &dyn Fn(u8) -> Result<u8, String>) {}",
        "pub fn f(b: [u8; 4]) -> BoxFuture<'static, Result<HashMap<String, u8>, String>> {}",
        "pub trait T {\n    fn run(&self) -> Result<(), String>;\n}",
    ] {
        assert!(found(bad), "missed: {bad}");
    }
    for good in [
        "fn private() -> Result<(), String> {}",
        "pub fn f() -> Result<String, Error> {}",
        "pub fn f() -> Result<HashMap<u8, String>, Error> {}",
        "pub fn f() -> MyResult<(), String> {}",
        "pub fn f() -> Option<String> {}",
        "pub struct S { pub why: String }",
    ] {
        assert!(!found(good), "flagged: {good}");
    }
}

#[test]
fn no_public_item_fails_with_a_bare_string() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    string_errors(root, &root.join("src"), &mut found);
    assert!(found.is_empty(), "a Result<_, String> that can leave its module:\n{}", found.join("\n"));
}
