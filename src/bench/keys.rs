//! Which key an operation touches: YCSB's generators, with its constants, so
//! that runs compare with YCSB's own.
//!
//! Keys are record numbers `0..n`; [`key_name`] turns one into the key
//! stored (`user` and a hash of the number, as YCSB's `orderedinserts=false`
//! does, so that neighbouring numbers do not land next to each other).

/// A small, fast generator (SplitMix64): each client seeds its own, so runs
/// are repeatable and clients share nothing.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// YCSB's 64-bit FNV-1a over the number's 8 bytes.
pub(crate) fn fnv64(mut n: u64) -> u64 {
    let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        hash ^= n & 0xff;
        hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
        n >>= 8;
    }
    hash
}

/// The key stored for record `n`.
pub(crate) fn key_name(n: u64) -> String {
    format!("user{}", fnv64(n))
}

/// Record `n`'s score in the sorted set YCSB's Redis binding scans by: a
/// hash of its key (YCSB's `hashCode()`), cut to the 53 bits a score holds
/// exactly.
pub(crate) fn key_score(n: u64) -> u64 {
    fnv64(n) >> 11
}

/// YCSB's Zipfian constant.
pub(crate) const ZIPF_THETA: f64 = 0.99;

/// Items `0..n` by a Zipfian law (Gray et al., "Quickly generating
/// billion-record synthetic databases"): item 0 the most popular. The item
/// count may grow (as records are inserted); zeta is extended, not
/// recomputed.
#[derive(Debug, Clone)]
pub(crate) struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta2: f64,
    zetan: f64,
    eta: f64,
}

fn zeta(from: u64, to: u64, theta: f64, start: f64) -> f64 {
    (from..to).fold(start, |sum, i| sum + 1.0 / ((i + 1) as f64).powf(theta))
}

impl Zipfian {
    pub(crate) fn new(items: u64) -> Zipfian {
        Zipfian::with_zeta(items, zeta(0, items, ZIPF_THETA, 0.0))
    }

    fn with_zeta(items: u64, zetan: f64) -> Zipfian {
        let theta = ZIPF_THETA;
        let zeta2 = zeta(0, 2, theta, 0.0);
        let mut z = Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2,
            zetan,
            eta: 0.0,
        };
        z.eta = z.eta_for();
        z
    }

    fn eta_for(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// Grows the item count to `items`.
    pub(crate) fn grow(&mut self, items: u64) {
        if items > self.items {
            self.zetan = zeta(self.items, items, self.theta, self.zetan);
            self.items = items;
            self.eta = self.eta_for();
        }
    }

    pub(crate) fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.items - 1)
    }
}

/// How keys are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Distribution {
    Uniform,
    Zipfian,
    /// The most recently inserted records most often (YCSB workload D).
    Latest,
}

/// YCSB's scrambled Zipfian: the popularity of a Zipfian over 10^10 items,
/// spread over the records by hashing, so the hot records are scattered.
const SCRAMBLED_ITEMS: u64 = 10_000_000_000;
/// zeta(10^10, 0.99), as YCSB precomputes it.
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// Chooses existing records by a distribution.
#[derive(Debug, Clone)]
pub(crate) enum KeyChooser {
    Uniform,
    Zipfian(Zipfian),
    Latest(Zipfian),
}

impl KeyChooser {
    pub(crate) fn new(distribution: Distribution, records: u64) -> KeyChooser {
        match distribution {
            Distribution::Uniform => KeyChooser::Uniform,
            Distribution::Zipfian => {
                KeyChooser::Zipfian(Zipfian::with_zeta(SCRAMBLED_ITEMS, SCRAMBLED_ZETAN))
            }
            Distribution::Latest => KeyChooser::Latest(Zipfian::new(records.max(1))),
        }
    }

    /// A record among `0..records` (`records` > 0: how many exist now).
    pub(crate) fn next(&mut self, rng: &mut Rng, records: u64) -> u64 {
        match self {
            KeyChooser::Uniform => rng.below(records),
            KeyChooser::Zipfian(z) => fnv64(z.next(rng)) % records,
            KeyChooser::Latest(z) => {
                z.grow(records);
                records - 1 - z.next(rng).min(records - 1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(mut chooser: KeyChooser, records: u64, draws: usize) -> Vec<u64> {
        let mut rng = Rng::new(7);
        let mut counts = vec![0u64; records as usize];
        for _ in 0..draws {
            counts[chooser.next(&mut rng, records) as usize] += 1;
        }
        counts
    }

    #[test]
    fn uniform_keys_are_spread_evenly() {
        let counts = counts(KeyChooser::Uniform, 100, 200_000);
        // 2,000 expected each; 5 standard deviations is ±225.
        assert!(
            counts.iter().all(|&c| (1_775..=2_225).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn zipfian_keys_follow_the_law_and_are_scattered() {
        let records = 1_000;
        let draws = 500_000;
        let mut counts = counts(
            KeyChooser::new(Distribution::Zipfian, records),
            records,
            draws,
        );
        // The hot records are not the low numbers: scrambling scatters them.
        let hottest = (0..records as usize).max_by_key(|&i| counts[i]).unwrap();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top = |k: usize| counts[..k].iter().sum::<u64>() as f64 / draws as f64;
        // The Zipfian is over 10^10 items (zeta 26.47), folded onto the
        // records: the 10 most popular items alone take H(10)/26.47 = 11%
        // of the draws, so the top 1% of records get about 12%, the top 10%
        // about a quarter; uniform keys would give them 1% and 10%.
        assert!((0.10..0.16).contains(&top(10)), "top 1%: {}", top(10));
        assert!((0.20..0.35).contains(&top(100)), "top 10%: {}", top(100));
        assert!(counts[records as usize - 1] > 0 || top(900) > 0.95);
        assert_ne!(hottest, 0, "scrambled");
    }

    #[test]
    fn plain_zipfian_ranks_item_zero_first_and_grows() {
        let mut z = Zipfian::new(100);
        let mut rng = Rng::new(1);
        let mut counts = [0u32; 200];
        for _ in 0..100_000 {
            counts[z.next(&mut rng) as usize] += 1;
        }
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[99]);
        assert!(counts[100..].iter().all(|&c| c == 0));
        z.grow(200);
        let grown = Zipfian::new(200);
        assert!(
            (z.zetan - grown.zetan).abs() < 1e-9,
            "zeta extended, not recomputed"
        );
        assert!((0..10_000).all(|_| z.next(&mut rng) < 200));
    }

    #[test]
    fn latest_favours_the_newest_records() {
        let records = 1_000;
        let counts = counts(KeyChooser::new(Distribution::Latest, 10), records, 100_000);
        let newest: u64 = counts[900..].iter().sum();
        let oldest: u64 = counts[..100].iter().sum();
        assert!(
            counts[999] > counts[998] && newest > 10 * oldest,
            "{newest} vs {oldest}"
        );
    }

    #[test]
    fn key_names_are_ycsb_hashes() {
        assert_eq!(key_name(0), format!("user{}", fnv64(0)));
        assert_ne!(fnv64(1), fnv64(2));
        let names: std::collections::HashSet<String> = (0..10_000).map(key_name).collect();
        assert_eq!(names.len(), 10_000, "no two records share a key");
    }
}
