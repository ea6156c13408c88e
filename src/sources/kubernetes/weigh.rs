//! What an API server's JSON will cost once decoded, weighed byte by byte as it arrives,
//! before the client decodes it: an estimate of the memory its values take (a container 128
//! bytes, a member or element 48, a string its length) and the number of objects in a list's
//! `items` (objects directly inside an array of the top-level object). Nothing is kept but
//! counters, and no input makes it panic; JSON that is not valid is left for the decoder to
//! refuse.

/// What a `{` or `[` is estimated to take decoded (a struct or a map, a vector's header and
/// its doubling slack); calibrated on real nodes and pods (a GKE node with its managed fields:
/// 11 KB of JSON, 41 KB estimated).
const CONTAINER: u64 = 128;
/// What a `,` or a `:` is estimated to take: one more element, or one more member (a map's
/// key and value, or a field).
const MEMBER: u64 = 48;

/// The running weight of one JSON text.
#[derive(Debug, Default, Clone)]
pub struct Weigh {
    in_string: bool,
    escape: bool,
    depth: u32,
    /// The container at depth 2 (a member of the top-level object) is an array.
    array_at_2: bool,
    /// Objects seen directly inside an array at depth 2: a list's items.
    pub items: u64,
    /// The estimated cost, in bytes.
    pub cost: u64,
}

impl Weigh {
    pub fn new() -> Self {
        Self::default()
    }

    /// Weigh more bytes of the text.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        if self.in_string {
            match (self.escape, b) {
                (true, _) => self.escape = false,
                (false, b'\\') => self.escape = true,
                (false, b'"') => self.in_string = false,
                (false, _) => self.cost += 1,
            }
            return;
        }
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => {
                if b == b'{' && self.depth == 2 && self.array_at_2 {
                    self.items += 1;
                }
                if self.depth == 1 {
                    self.array_at_2 = b == b'[';
                }
                self.depth = self.depth.saturating_add(1);
                self.cost += CONTAINER;
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' | b':' => self.cost += MEMBER,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weigh(text: &str) -> Weigh {
        let mut w = Weigh::new();
        // Byte by byte and in one piece weigh the same.
        for piece in text.as_bytes().chunks(3) {
            w.feed(piece);
        }
        w
    }

    #[test]
    fn a_list_counts_its_items_and_nothing_inside_them() {
        let list = r#"{"kind":"PodList","metadata":{"continue":"x"},"items":[{"metadata":{"name":"a","ownerReferences":[{"k":1}]}},{"spec":{}}, {}]}"#;
        assert_eq!(weigh(list).items, 3);
        // Objects in other arrays, deeper, or strings that look like JSON count for nothing.
        assert_eq!(weigh(r#"{"a":{"b":[{},{}]},"c":"[{},{}]","d":[1,{"x":[{}]}]}"#).items, 1);
        assert_eq!(weigh(r#"[{},{}]"#).items, 0);
        assert_eq!(weigh(r#"{"s":"\"[{\\","items":[{}]}"#).items, 1, "escapes end no string early");
    }

    #[test]
    fn bulk_of_small_values_weighs_more_than_its_bytes() {
        let empties = format!("{{\"items\":[{{\"spec\":{{\"containers\":[{}]}}}}]}}", vec!["{}"; 1000].join(","));
        let w = weigh(&empties);
        assert!(w.cost > 50 * empties.len() as u64, "{} for {} bytes", w.cost, empties.len());
        let text = format!("{{\"name\":\"{}\"}}", "x".repeat(10_000));
        let w = weigh(&text);
        assert!(w.cost >= 10_000 && w.cost < 10_300, "a string weighs about its length: {}", w.cost);
    }

    #[test]
    fn garbage_never_panics() {
        let mut w = Weigh::new();
        w.feed(b"]]]}}}\"\\");
        w.feed(&[0xff, b'{', b'[', 0]);
        w.feed(&vec![b'['; 100_000]);
        assert!(w.cost > 0);
    }
}
