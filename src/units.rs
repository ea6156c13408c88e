//! Words for numbers, the same everywhere: a count with its noun in the right number
//! ("1 card", "3 cards").

/// `n` and the noun for it: `one` for exactly one, `many` otherwise ("0 cards").
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1u32, "workload", "workloads"), "1 workload");
        assert_eq!(count(0u32, "card", "cards"), "0 cards");
        assert_eq!(count(7u64, "memory slice", "memory slices"), "7 memory slices");
    }
}
