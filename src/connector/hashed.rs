//! The offline embedding model behind `scripted` connectors: hashed word, word-pair and
//! character-trigram features, signed and L2-normalised. No network and no weights, so the
//! embedded defaults can run a `VectorDBTool`; texts sharing words and word pieces land close,
//! which is lexical similarity, not a semantic model's.

use serde_json::{Map, Value};

/// The dimension when the connector's `parameters.dimension` names none (that of the small
/// sentence-transformers models ml-commons users often start with).
pub const DEFAULT_DIMENSION: usize = 384;

/// The largest dimension a scripted connector may ask for.
pub const MAX_DIMENSION: usize = 8192;

/// The dimension a scripted connector's parameters ask for (`dimension` or `dimensions`).
pub fn dimension(params: &Map<String, Value>) -> Result<usize, String> {
    let Some(v) = params.get("dimension").or_else(|| params.get("dimensions")) else {
        return Ok(DEFAULT_DIMENSION);
    };
    match v
        .as_u64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    {
        Some(n) if (8..=MAX_DIMENSION as u64).contains(&n) => Ok(n as usize),
        _ => Err(format!("must be a whole number from 8 to {MAX_DIMENSION}")),
    }
}

// FNV-1a: stable across Rust versions and platforms, unlike std's hasher, so stored vectors
// stay comparable with those computed after an upgrade.
fn fnv(bytes: &[u8], seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn add(v: &mut [f32], feature: &str, seed: u64, weight: f32) {
    let h = fnv(feature.as_bytes(), seed);
    let i = (h % v.len() as u64) as usize;
    let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
    v[i] += sign * weight;
}

/// The vector of `text` in `dim` dimensions (all zeros for a text with no word).
pub fn embed(text: &str, dim: usize) -> Vec<f32> {
    let mut v = vec![0f32; dim.max(1)];
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    for w in &words {
        add(&mut v, w, 1, 1.0);
        let padded: Vec<char> = format!(" {w} ").chars().collect();
        let grams = padded.len().saturating_sub(2).max(1) as f32;
        for g in padded.windows(3) {
            let g: String = g.iter().collect();
            add(&mut v, &g, 2, 1.0 / grams.sqrt());
        }
    }
    for pair in words.windows(2) {
        add(&mut v, &format!("{} {}", pair[0], pair[1]), 3, 0.5);
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn similar_texts_are_closer_than_unrelated_ones() {
        let q = embed("What is the population of Seattle?", 384);
        let near = embed("Seattle population in 2023 was about 750,000", 384);
        let far = embed("Recipes for chocolate cake with berries", 384);
        assert!(cos(&q, &near) > cos(&q, &far) + 0.1);
        assert!((cos(&q, &q) - 1.0).abs() < 1e-5);
        assert_eq!(q, embed("What is the population of Seattle?", 384));
        assert!(embed("", 16).iter().all(|x| *x == 0.0));
    }

    #[test]
    fn dimension_is_checked() {
        let mut p = Map::new();
        assert_eq!(dimension(&p), Ok(384));
        p.insert("dimension".into(), Value::from("768"));
        assert_eq!(dimension(&p), Ok(768));
        p.insert("dimension".into(), Value::from(0));
        assert!(dimension(&p).is_err());
    }
}
