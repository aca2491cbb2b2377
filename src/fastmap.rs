//! The hash map of the collector's hot path. std's SipHash costs tens of
//! ns per lookup, and the drain looks up a thread, a cause and its
//! aggregates several times per event; foldhash is several times faster
//! on the small keys used here (pids, CPU numbers, causes). Its per-map
//! random seed keeps some resistance to crafted keys (task names are
//! chosen by any user), and every map it serves is capped in size anyway.

pub type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// An empty map with room for `n` entries.
pub fn with_capacity<K, V>(n: usize) -> Map<K, V> {
    Map::with_capacity_and_hasher(n, Default::default())
}
