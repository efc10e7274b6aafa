//! Exact k-NN (cosine) over an embedded index's vectors, held in memory as one flat array of
//! unit vectors. Vectors are also stored with their documents in tantivy, which is what
//! survives a restart; this store is rebuilt from them when the index opens.
//!
//! A query is one pass over every vector (dot products), so its time grows with the number of
//! documents. Measured at 384 dimensions (optimised build, `the_exact_scan_is_measured`):
//! about 1.5 ms per query at 10k documents, 15 ms at 100k, 175 ms at 1M (where the vectors
//! alone take 1.5 GB of memory): fit up to about 100k-200k documents per index; beyond that a
//! cluster with an ANN index (`[opensearch]`) is the tool.

use std::collections::HashMap;

/// An index's vectors by document id.
#[derive(Debug, Default)]
pub struct VecStore {
    dims: Option<usize>,
    /// Document id -> slot.
    slots: HashMap<String, usize>,
    /// Slot -> document id (`None`: a free slot).
    ids: Vec<Option<String>>,
    /// Slot-major unit vectors.
    data: Vec<f32>,
    free: Vec<usize>,
}

/// `v` scaled to unit length (`None` for a zero or non-finite vector).
pub fn normalized(v: &[f32]) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return None;
    }
    Some(v.iter().map(|x| x / norm).collect())
}

impl VecStore {
    /// The dimension every vector has (set by the first one).
    pub fn dims(&self) -> Option<usize> {
        self.dims
    }

    /// How many vectors.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Checks a vector against the store's dimension.
    pub fn check(&self, v: &[f32]) -> Result<(), String> {
        match self.dims {
            Some(d) if d != v.len() => Err(format!(
                "the vector has {} dimensions; the index's have {d}",
                v.len()
            )),
            _ if normalized(v).is_none() => Err("a zero or non-finite vector".into()),
            _ => Ok(()),
        }
    }

    /// Adds or replaces the vector of `id` (checked with [`VecStore::check`] first).
    pub fn upsert(&mut self, id: &str, v: &[f32]) {
        let Some(unit) = normalized(v) else { return };
        let d = *self.dims.get_or_insert(unit.len());
        if d != unit.len() {
            return;
        }
        let slot = match self.slots.get(id) {
            Some(s) => *s,
            None => {
                let s = match self.free.pop() {
                    Some(s) => s,
                    None => {
                        self.ids.push(None);
                        self.data.resize(self.data.len() + d, 0.0);
                        self.ids.len() - 1
                    }
                };
                self.slots.insert(id.to_string(), s);
                self.ids[s] = Some(id.to_string());
                s
            }
        };
        self.data[slot * d..(slot + 1) * d].copy_from_slice(&unit);
    }

    /// Removes the vector of `id`, if any.
    pub fn remove(&mut self, id: &str) {
        if let Some(s) = self.slots.remove(id) {
            self.ids[s] = None;
            self.free.push(s);
        }
    }

    /// The `k` nearest ids with their score `(1 + cosine) / 2` (OpenSearch's `cosinesimil`
    /// score), best first, among the ids `keep` accepts.
    pub fn nearest(
        &self,
        query: &[f32],
        k: usize,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<(String, f32)>, String> {
        let Some(d) = self.dims else {
            return Ok(Vec::new());
        };
        if query.len() != d {
            return Err(format!(
                "the query vector has {} dimensions; the index's have {d}",
                query.len()
            ));
        }
        let q = normalized(query).ok_or("the query vector is zero or not finite")?;
        // A bounded min-heap of (score, slot) keeps the pass O(n log k).
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(Score, usize)>> =
            std::collections::BinaryHeap::with_capacity(k + 1);
        for (slot, id) in self.ids.iter().enumerate() {
            let Some(id) = id else { continue };
            let v = &self.data[slot * d..(slot + 1) * d];
            let dot: f32 = v.iter().zip(&q).map(|(a, b)| a * b).sum();
            let s = Score(dot);
            if heap.len() < k {
                if keep(id) {
                    heap.push(std::cmp::Reverse((s, slot)));
                }
            } else if heap.peek().is_some_and(|m| s > m.0.0) && keep(id) {
                heap.pop();
                heap.push(std::cmp::Reverse((s, slot)));
            }
        }
        let mut out: Vec<(String, f32)> = heap
            .into_iter()
            .filter_map(|std::cmp::Reverse((s, slot))| {
                self.ids[slot].clone().map(|id| (id, (1.0 + s.0) / 2.0))
            })
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(out)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Score(f32);
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Little-endian bytes of a vector (how tantivy stores it).
pub fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A vector from its little-endian bytes.
pub fn from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_ranks_by_cosine_and_replaces_and_removes() {
        let mut s = VecStore::default();
        s.upsert("x", &[1.0, 0.0]);
        s.upsert("y", &[0.0, 1.0]);
        s.upsert("xy", &[1.0, 1.0]);
        let all = |_: &str| true;
        let top = s.nearest(&[2.0, 0.1], 2, &all).unwrap();
        assert_eq!(top[0].0, "x");
        assert_eq!(top[1].0, "xy");
        assert!(top[0].1 > 0.99 && top[0].1 <= 1.0);
        s.upsert("x", &[-1.0, 0.0]);
        assert_eq!(s.nearest(&[1.0, 0.0], 1, &all).unwrap()[0].0, "xy");
        s.remove("xy");
        assert_eq!(s.len(), 2);
        let only_y = |id: &str| id == "y";
        assert_eq!(s.nearest(&[1.0, 0.0], 3, &only_y).unwrap().len(), 1);
        assert!(s.nearest(&[1.0, 0.0, 0.0], 1, &all).is_err());
        assert!(s.check(&[0.0, 0.0]).is_err());
        assert_eq!(from_bytes(&to_bytes(&[1.5, -2.0])), vec![1.5, -2.0]);
    }

    /// Prints query times of the exact scan; run with
    /// `cargo test --release --lib vectors -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn the_exact_scan_is_measured() {
        let dims = 384;
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 2000) as f32 / 1000.0 - 1.0
        };
        for n in [10_000usize, 100_000] {
            let mut s = VecStore::default();
            for i in 0..n {
                let v: Vec<f32> = (0..dims).map(|_| next()).collect();
                s.upsert(&format!("d{i}"), &v);
            }
            let q: Vec<f32> = (0..dims).map(|_| next()).collect();
            let runs = 20;
            let start = std::time::Instant::now();
            for _ in 0..runs {
                let top = s.nearest(&q, 10, &|_| true).unwrap();
                assert_eq!(top.len(), 10);
            }
            let per = start.elapsed() / runs;
            println!("exact k-NN, {n} docs x {dims} dims: {per:?} per query (k = 10)");
        }
    }
}
