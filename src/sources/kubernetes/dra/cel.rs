//! The CEL selectors tessera reads, and what they say of a device. Only the common forms, `&&`
//! of:
//! - `device.driver == 'gpu.nvidia.com'`;
//! - equality of the attributes tessera knows: `device.attributes['gpu.nvidia.com'].type ==
//!   'gpu'`, `… .productName == '…'`, `… .profile == '1g.10gb'`;
//! - capacity comparisons with Kubernetes' quantity library, as DRA's docs and drivers' examples
//!   write them: `device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0`
//!   (any of `== != >= > <= <` against an integer), `… .memory.isGreaterThan(quantity('40Gi'))`
//!   and `… .isLessThan(…)`.
//!
//! Anything else (`||`, negation, other attributes, other functions) is not read: the caller
//! says it as a selector tessera cannot read, never guesses. So is `… .memory >=
//! quantity('40Gi')`: Kubernetes' quantity type has no ordering operators (only `==`), so the
//! API server rejects such a selector and the scheduler never evaluates it.

use std::cmp::Ordering;
use std::fmt;

use super::super::objects::Qty;
use super::super::resources;
use super::objects::Device;

/// The attributes whose equality is read.
const ATTRIBUTES: [&str; 3] = ["type", "productName", "profile"];

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Ge,
    Gt,
    Le,
    Lt,
}

impl Op {
    fn apply(self, a: i64, b: i64) -> bool {
        match self {
            Self::Eq => a == b,
            Self::Ne => a != b,
            Self::Ge => a >= b,
            Self::Gt => a > b,
            Self::Le => a <= b,
            Self::Lt => a < b,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Eq => "==",
            Self::Ne => "!=",
            Self::Ge => ">=",
            Self::Gt => ">",
            Self::Le => "<=",
            Self::Lt => "<",
        }
    }

    /// The operator at the start of `s` and the rest.
    fn take(s: &str) -> Option<(Self, &str)> {
        let ops =
            [("==", Self::Eq), ("!=", Self::Ne), (">=", Self::Ge), ("<=", Self::Le), (">", Self::Gt), ("<", Self::Lt)];
        ops.iter().find_map(|(t, op)| s.strip_prefix(t).map(|rest| (*op, rest.trim_start())))
    }
}

/// One term of a selector read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term<'e> {
    /// `device.driver == '…'`.
    Driver(&'e str),
    /// `device.attributes['<domain>'].<attribute> == '<value>'`.
    Equals { domain: &'e str, attribute: &'e str, value: &'e str },
    /// `device.capacity['<domain>'].<name>` compared with `quantity('<text>')` (`bytes` its
    /// value): the comparison's sign (-1, 0, 1) `op` `against`.
    Capacity { domain: &'e str, name: &'e str, text: &'e str, value: u64, op: Op, against: i64 },
}

impl fmt::Display for Term<'_> {
    /// The term in a few words: `memory >= 40Gi`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Driver(d) => write!(f, "driver {d}"),
            Self::Equals { attribute, value, .. } => write!(f, "{attribute} {value}"),
            Self::Capacity { name, text, op, against, .. } => {
                // The sign compared with 0 reads as the quantities compared.
                let said = match (op, against) {
                    (op, 0) => Some(op.as_str()),
                    (Op::Eq | Op::Ge, 1) => Some(">"),
                    (Op::Eq | Op::Le, -1) => Some("<"),
                    (Op::Gt, -1) => Some(">="),
                    (Op::Lt, 1) => Some("<="),
                    (Op::Ne, 1) => Some("<="),
                    (Op::Ne, -1) => Some(">="),
                    _ => None,
                };
                match said {
                    Some(op) => write!(f, "{name} {op} {text}"),
                    None => write!(f, "{name}.compareTo({text}) {} {against}", op.as_str()),
                }
            }
        }
    }
}

impl Term<'_> {
    /// Whether `device`, published by `driver`, satisfies the term. A capacity or attribute
    /// the device does not have does not match (CEL would fail on it, and the scheduler
    /// allocates no device whose selector fails).
    pub fn matches(&self, driver: &str, device: &Device) -> bool {
        match self {
            Self::Driver(d) => *d == driver,
            Self::Equals { domain, attribute, value } => {
                let a = &device.attributes;
                let got = match *attribute {
                    "type" => a.kind.as_deref(),
                    "productName" => a.product.as_deref(),
                    "profile" => a.profile.as_deref(),
                    _ => None,
                };
                *domain == driver && got == Some(*value)
            }
            Self::Capacity { domain, name, value, op, against, .. } => {
                let got = device.capacity.get(name).flatten();
                *domain == driver
                    && got.is_some_and(|g| {
                        let sign = match g.cmp(value) {
                            Ordering::Less => -1,
                            Ordering::Equal => 0,
                            Ordering::Greater => 1,
                        };
                        op.apply(sign, *against)
                    })
            }
        }
    }

    /// A capacity comparison (said beside what a request asks for).
    pub fn is_capacity(&self) -> bool {
        matches!(self, Self::Capacity { .. })
    }
}

/// The terms of `expression`, or `None` where any part of it is not a form tessera reads.
pub fn read(expression: &str) -> Option<Vec<Term<'_>>> {
    conjuncts(expression)?.into_iter().map(term).collect()
}

/// The parts of `e` joined by `&&` outside quotes, each without enclosing parentheses.
fn conjuncts(e: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    let (mut start, mut quote, mut depth) = (0usize, None::<u8>, 0i32);
    let b = e.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match (quote, b[i]) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), b'\\') => i += 1,
            (Some(_), _) => {}
            (None, c @ (b'\'' | b'"')) => quote = Some(c),
            (None, b'(') => depth += 1,
            (None, b')') => depth -= 1,
            (None, b'&') if depth == 0 && b.get(i + 1) == Some(&b'&') => {
                out.push(e.get(start..i)?);
                start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    if quote.is_some() || depth != 0 {
        return None;
    }
    out.push(e.get(start..)?);
    out.into_iter().map(unwrap_parens).collect()
}

/// `((x))` → `x`, trimmed; `None` for an empty term.
fn unwrap_parens(t: &str) -> Option<&str> {
    let mut t = t.trim();
    while let Some(inner) = t.strip_prefix('(').and_then(|s| s.strip_suffix(')')) {
        // Only where the outer pair encloses the whole term: `(a) == (b)` is not `a) == (b`.
        if conjuncts_balanced(inner) {
            t = inner.trim();
        } else {
            break;
        }
    }
    (!t.is_empty()).then_some(t)
}

/// Whether the parentheses of `s` (outside quotes) never close more than they opened.
fn conjuncts_balanced(s: &str) -> bool {
    let mut depth = 0i32;
    let mut quote = None::<char>;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

/// A quoted string at the start of `s`: its text and the rest.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let q = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let body = &s[1..];
    let end = body.find(q)?;
    let text = &body[..end];
    // Escapes are not read: a value with one is not guessed at.
    (!text.contains('\\')).then(|| (text, body[end + 1..].trim_start()))
}

/// `['<domain>']` at the start of `s`.
fn domain(s: &str) -> Option<(&str, &str)> {
    let s = s.strip_prefix('[')?.trim_start();
    let (d, rest) = quoted(s)?;
    Some((d, rest.strip_prefix(']')?))
}

/// An identifier at the start of `s`.
fn ident(s: &str) -> Option<(&str, &str)> {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    (end > 0).then(|| (&s[..end], &s[end..]))
}

/// `quantity('<text>')` at the start of `s`: the text, its value and the rest.
fn quantity(s: &str) -> Option<(&str, u64, &str)> {
    let s = s.strip_prefix("quantity")?.trim_start().strip_prefix('(')?.trim_start();
    let (text, rest) = quoted(s)?;
    let value = resources::count(&Qty(text.to_string()))?;
    Some((text, value, rest.strip_prefix(')')?.trim_start()))
}

/// An integer (optionally signed) that is all of `s`.
fn integer(s: &str) -> Option<i64> {
    let s = s.trim();
    let digits = s.strip_prefix('-').unwrap_or(s);
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

/// One term, or `None` where it is not a form tessera reads.
fn term(t: &str) -> Option<Term<'_>> {
    if let Some(rest) = t.strip_prefix("device.driver") {
        let (op, rest) = Op::take(rest.trim_start())?;
        let (value, rest) = quoted(rest)?;
        return (op == Op::Eq && rest.is_empty()).then_some(Term::Driver(value));
    }
    if let Some(rest) = t.strip_prefix("device.attributes") {
        let (domain, rest) = domain(rest.trim_start())?;
        let (attribute, rest) = ident(rest.strip_prefix('.')?)?;
        let (op, rest) = Op::take(rest.trim_start())?;
        let (value, rest) = quoted(rest)?;
        let known = ATTRIBUTES.contains(&attribute);
        return (known && op == Op::Eq && rest.is_empty()).then_some(Term::Equals { domain, attribute, value });
    }
    let rest = t.strip_prefix("device.capacity")?;
    let (domain, rest) = domain(rest.trim_start())?;
    let (name, rest) = ident(rest.strip_prefix('.')?)?;
    let rest = rest.strip_prefix('.')?;
    let (function, rest) = ident(rest)?;
    let rest = rest.trim_start().strip_prefix('(')?.trim_start();
    let (text, value, rest) = quantity(rest)?;
    let rest = rest.strip_prefix(')')?.trim_start();
    let (op, against) = match function {
        "compareTo" => {
            let (op, rest) = Op::take(rest)?;
            (op, integer(rest)?)
        }
        "isGreaterThan" if rest.is_empty() => (Op::Eq, 1),
        "isLessThan" if rest.is_empty() => (Op::Eq, -1),
        _ => return None,
    };
    Some(Term::Capacity { domain, name, text, value, op, against })
}

#[cfg(test)]
#[path = "cel_tests.rs"]
mod tests;
