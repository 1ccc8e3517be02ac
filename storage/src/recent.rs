//! A few values kept by key, the most recently used first: the per-thread caches of the image
//! path (Huffman decoders by table, the encoder's templates by setting, the resize's taps by
//! size), each in a `thread_local!`. They hold a handful of entries, where a linear search is
//! cheaper than hashing the key.

/// A thread's cache (a `thread_local!`) of values that may fail to be made, a failure kept as
/// such: the same key would fail again.
pub(crate) type Kept<K, V> = std::cell::RefCell<Recent<K, Option<std::rc::Rc<V>>>>;

/// Up to `capacity` (key, value) pairs, the most recently used first.
pub(crate) struct Recent<K, V> {
    entries: Vec<(K, V)>,
    capacity: usize,
}

impl<K, V: Clone> Recent<K, V> {
    /// Empty, keeping at most `capacity` values (at least one).
    pub(crate) const fn new(capacity: usize) -> Self {
        Recent { entries: Vec::new(), capacity }
    }

    /// The value of the first key `is` matches, now the most recently used; else the pair `make`
    /// gives, kept first (the least recently used dropped past the capacity). `make` takes the
    /// key so that a key that is costly to own (a Huffman table) is cloned on a miss only.
    pub(crate) fn get_or_insert_with(&mut self, is: impl Fn(&K) -> bool, make: impl FnOnce() -> (K, V)) -> V {
        if let Some(at) = self.entries.iter().position(|(k, _)| is(k)) {
            let hit = self.entries.remove(at);
            let value = hit.1.clone();
            self.entries.insert(0, hit);
            return value;
        }
        let (key, value) = make();
        self.entries.truncate(self.capacity.max(1) - 1);
        self.entries.insert(0, (key, value.clone()));
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hits come back and move first; past the capacity the least recently used goes, and is
    /// made again when asked for.
    #[test]
    fn the_least_recently_used_goes_first() {
        let mut made = Vec::new();
        let mut kept = Recent::new(2);
        let mut get = |kept: &mut Recent<u32, u32>, k: u32| {
            kept.get_or_insert_with(
                |&key| key == k,
                || {
                    made.push(k);
                    (k, k * 10)
                },
            )
        };
        assert_eq!(get(&mut kept, 1), 10);
        assert_eq!(get(&mut kept, 2), 20);
        assert_eq!(get(&mut kept, 1), 10); // a hit: 1 is now the most recent
        assert_eq!(get(&mut kept, 3), 30); // drops 2, the least recently used
        assert_eq!(get(&mut kept, 1), 10);
        assert_eq!(get(&mut kept, 2), 20); // made again
        assert_eq!(made, [1, 2, 3, 2]);
    }
}
