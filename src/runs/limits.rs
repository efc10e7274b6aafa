//! Admission of new runs: at most `max_concurrent_runs` on this gateway, and at most the
//! caller's own limit per API key. A permit is held for the whole life of the run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Why a run was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The gateway is full (503: another instance may take it).
    Gateway(usize),
    /// The key has its own limit's worth of runs going (429).
    Key(String, usize),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Gateway(n) => write!(
                f,
                "the gateway is running its limit of {n} concurrent runs; retry shortly"
            ),
            Refused::Key(k, n) => write!(
                f,
                "the key {k:?} has its limit of {n} concurrent runs going; retry when one ends"
            ),
        }
    }
}

/// Counts runs, globally and per key.
#[derive(Debug)]
pub struct Limiter {
    max: usize,
    active: AtomicUsize,
    per_key: Mutex<HashMap<String, usize>>,
}

/// One admitted run; dropping it frees the place.
#[derive(Debug)]
pub struct RunPermit {
    limiter: Option<Arc<Limiter>>,
    key: Option<String>,
}

impl RunPermit {
    /// A permit outside any limit (internal runs).
    pub fn unlimited() -> Self {
        Self {
            limiter: None,
            key: None,
        }
    }
}

impl Limiter {
    /// At most `max` runs at once.
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            active: AtomicUsize::new(0),
            per_key: Mutex::new(HashMap::new()),
        })
    }

    /// Admits a run for `key` (its name and own limit), or says why not.
    pub fn admit(
        self: &Arc<Self>,
        key: Option<(&str, Option<usize>)>,
    ) -> Result<RunPermit, Refused> {
        let taken = self
            .active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            });
        if taken.is_err() {
            return Err(Refused::Gateway(self.max));
        }
        let mut permit = RunPermit {
            limiter: Some(Arc::clone(self)),
            key: None,
        };
        if let Some((name, Some(limit))) = key {
            let mut map = self.per_key.lock().unwrap_or_else(|p| p.into_inner());
            let n = map.entry(name.to_string()).or_insert(0);
            if *n >= limit {
                // `permit` drops here and gives the global place back.
                return Err(Refused::Key(name.to_string(), limit));
            }
            *n += 1;
            permit.key = Some(name.to_string());
        }
        Ok(permit)
    }

    /// Runs admitted and not yet ended.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }
}

impl Drop for RunPermit {
    fn drop(&mut self) {
        let Some(limiter) = self.limiter.take() else {
            return;
        };
        limiter.active.fetch_sub(1, Ordering::AcqRel);
        if let Some(key) = self.key.take() {
            let mut map = limiter.per_key.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(n) = map.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_counted_globally_and_per_key_and_given_back() {
        let l = Limiter::new(3);
        let a1 = l.admit(Some(("a", Some(1)))).unwrap();
        assert_eq!(
            l.admit(Some(("a", Some(1)))).unwrap_err(),
            Refused::Key("a".into(), 1)
        );
        // The refused key run did not keep a global place.
        assert_eq!(l.active(), 1);
        let b = l.admit(Some(("b", None))).unwrap();
        let c = l.admit(None).unwrap();
        assert_eq!(l.admit(None).unwrap_err(), Refused::Gateway(3));
        drop(a1);
        let a2 = l.admit(Some(("a", Some(1)))).unwrap();
        drop((a2, b, c));
        assert_eq!(l.active(), 0);
        assert!(l.per_key.lock().unwrap().is_empty());
    }
}
