//! Usage metering, the arithmetic of it: pure, no I/O (the control plane
//! collects samples from the data nodes and keeps them in its store).
//!
//! Every interval the control plane samples each database: its memory (a
//! gauge, in bytes) and its counters since its data node started (request
//! units, throttled requests, quota rejections). What is stored per sample
//! is the memory, the memory integrated over the time since the previous
//! sample (byte-seconds: what GiB-hours are made of), and the counters'
//! growth since the previous sample — never negative, even when a node
//! restarts and its counters start again from zero.
//!
//! Samples are kept raw for a day, then as per-minute and per-hour rollups,
//! which are sums of what they cover (and the average and peak memory).

use serde::{Deserialize, Serialize};

/// Milliseconds in a minute and an hour.
pub const MINUTE_MS: i64 = 60_000;
pub const HOUR_MS: i64 = 60 * MINUTE_MS;
pub const DAY_MS: i64 = 24 * HOUR_MS;

/// How finely a series is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Resolution {
    /// Every sample.
    Raw,
    Minute,
    Hour,
}

impl Resolution {
    pub const ALL: [Resolution; 3] = [Resolution::Raw, Resolution::Minute, Resolution::Hour];

    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::Raw => "raw",
            Resolution::Minute => "minute",
            Resolution::Hour => "hour",
        }
    }

    pub fn parse(s: &str) -> Option<Resolution> {
        Resolution::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The width of a bucket; raw samples have none.
    pub fn bucket_ms(self) -> Option<i64> {
        match self {
            Resolution::Raw => None,
            Resolution::Minute => Some(MINUTE_MS),
            Resolution::Hour => Some(HOUR_MS),
        }
    }

    /// What this resolution is rolled up from.
    pub fn finer(self) -> Option<Resolution> {
        match self {
            Resolution::Raw => None,
            Resolution::Minute => Some(Resolution::Raw),
            Resolution::Hour => Some(Resolution::Minute),
        }
    }

    /// The start of the bucket `at` (ms since the epoch) falls in.
    pub fn bucket(self, at: i64) -> i64 {
        match self.bucket_ms() {
            Some(width) => at.div_euclid(width) * width,
            None => at,
        }
    }
}

/// How long each resolution is kept, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub raw_ms: i64,
    pub minute_ms: i64,
    pub hour_ms: i64,
}

impl Default for Retention {
    /// Raw for 24 hours, minutes for 7 days, hours for 90 days.
    fn default() -> Retention {
        Retention {
            raw_ms: DAY_MS,
            minute_ms: 7 * DAY_MS,
            hour_ms: 90 * DAY_MS,
        }
    }
}

impl Retention {
    pub fn of(&self, resolution: Resolution) -> i64 {
        match resolution {
            Resolution::Raw => self.raw_ms,
            Resolution::Minute => self.minute_ms,
            Resolution::Hour => self.hour_ms,
        }
    }

    /// Rows of `resolution` older than this (ms) are dropped at `now`, when
    /// samples are taken every `interval_ms`: what the retention says, but
    /// never a row that a rollup still being made from it needs (the
    /// buckets of now and of the previous round).
    pub fn cutoff(&self, resolution: Resolution, now: i64, interval_ms: i64) -> i64 {
        let kept = now - self.of(resolution);
        let coarser = match resolution {
            Resolution::Raw => Some(Resolution::Minute),
            Resolution::Minute => Some(Resolution::Hour),
            Resolution::Hour => None,
        };
        match coarser {
            Some(c) => kept.min(c.bucket(now - interval_ms.max(1) - 1)),
            None => kept,
        }
    }
}

/// A data node's counters for one database since the node started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub read_units: u64,
    pub write_units: u64,
    pub throttled_reads: u64,
    pub throttled_writes: u64,
    pub quota_rejections: u64,
}

impl Counters {
    /// Both together: a database's counters over the nodes it is on (each
    /// counts what it admitted).
    pub fn plus(self, other: Counters) -> Counters {
        let (a, b) = (self.fields(), other.fields());
        Counters::from_fields(std::array::from_fn(|i| a[i].saturating_add(b[i])))
    }

    fn fields(&self) -> [u64; 5] {
        [
            self.read_units,
            self.write_units,
            self.throttled_reads,
            self.throttled_writes,
            self.quota_rejections,
        ]
    }

    fn from_fields(f: [u64; 5]) -> Counters {
        Counters {
            read_units: f[0],
            write_units: f[1],
            throttled_reads: f[2],
            throttled_writes: f[3],
            quota_rejections: f[4],
        }
    }
}

/// What the counters grew by since `previous` was read — the node's boot
/// then and now told apart. After a restart (a new boot, or a counter that
/// went down) the counters started from zero, so all of `now` is new. So is
/// all of it at the first reading: a database is read first soon after it
/// is made, when its counters started (the readings are kept in the store,
/// so a restart of the control plane does not make a first reading again).
pub fn growth(previous: Option<(&str, Counters)>, now: (&str, Counters)) -> Counters {
    let Some((boot, before)) = previous else {
        return now.1;
    };
    let (now_boot, after) = now;
    let restarted = boot != now_boot
        || before
            .fields()
            .iter()
            .zip(after.fields())
            .any(|(b, a)| a < *b);
    if restarted {
        return after;
    }
    let mut grown = [0; 5];
    for (i, (b, a)) in before.fields().iter().zip(after.fields()).enumerate() {
        grown[i] = a - b;
    }
    Counters::from_fields(grown)
}

/// Memory integrated over time: `bytes` held for `ms` milliseconds, in
/// byte-seconds.
pub fn byte_seconds(bytes: u64, ms: i64) -> u64 {
    let product = u128::from(bytes) * u128::try_from(ms.max(0)).unwrap_or(0) / 1000;
    u64::try_from(product).unwrap_or(u64::MAX)
}

/// Byte-seconds as GiB-hours.
pub fn gib_hours(byte_seconds: u64) -> f64 {
    byte_seconds as f64 / (1u64 << 30) as f64 / 3600.0
}

/// One stored row of a series: what a sample, or a bucket of them, says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Average memory over the samples it covers, and the peak.
    pub memory_bytes: u64,
    pub memory_max_bytes: u64,
    /// Memory integrated over time, in byte-seconds.
    pub memory_byte_seconds: u64,
    pub counters: Counters,
    /// Samples it covers.
    pub samples: u64,
}

impl Usage {
    /// A single sample.
    pub fn sample(memory: u64, since_previous_ms: i64, counters: Counters) -> Usage {
        Usage {
            memory_bytes: memory,
            memory_max_bytes: memory,
            memory_byte_seconds: byte_seconds(memory, since_previous_ms),
            counters,
            samples: 1,
        }
    }

    /// The rollup of `parts`: sums, the sample-weighted average of memory,
    /// and its peak.
    pub fn rollup<'a>(parts: impl IntoIterator<Item = &'a Usage>) -> Usage {
        let mut total = Usage::default();
        let mut weighted: u128 = 0;
        let mut fields = [0u64; 5];
        for part in parts {
            weighted += u128::from(part.memory_bytes) * u128::from(part.samples);
            total.memory_max_bytes = total.memory_max_bytes.max(part.memory_max_bytes);
            total.memory_byte_seconds = total
                .memory_byte_seconds
                .saturating_add(part.memory_byte_seconds);
            total.samples += part.samples;
            for (sum, add) in fields.iter_mut().zip(part.counters.fields()) {
                *sum = sum.saturating_add(add);
            }
        }
        total.counters = Counters::from_fields(fields);
        if total.samples > 0 {
            total.memory_bytes =
                u64::try_from(weighted / u128::from(total.samples)).unwrap_or(u64::MAX);
        }
        total
    }

    /// Several databases' usage at the same instant, as one (a tenant's):
    /// memory adds up.
    pub fn combine<'a>(parts: impl IntoIterator<Item = &'a Usage>) -> Usage {
        let mut total = Usage::default();
        let mut fields = [0u64; 5];
        for part in parts {
            total.memory_bytes = total.memory_bytes.saturating_add(part.memory_bytes);
            total.memory_max_bytes = total.memory_max_bytes.saturating_add(part.memory_max_bytes);
            total.memory_byte_seconds = total
                .memory_byte_seconds
                .saturating_add(part.memory_byte_seconds);
            total.samples = total.samples.max(part.samples);
            for (sum, add) in fields.iter_mut().zip(part.counters.fields()) {
                *sum = sum.saturating_add(add);
            }
        }
        total.counters = Counters::from_fields(fields);
        total
    }
}

/// One line of the billing export: a tenant's use on one UTC day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BillingLine {
    pub tenant_id: String,
    pub tenant_name: String,
    /// `YYYY-MM-DD`.
    pub day: String,
    pub memory_gib_hours: f64,
    pub read_units: u64,
    pub write_units: u64,
    pub throttled_requests: u64,
}

/// The UTC date (`YYYY-MM-DD`) of `at` (ms since the epoch).
pub fn day_of(at: i64) -> String {
    utc(at)[..10].to_owned()
}

/// `at` (ms since the epoch) as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc(at: i64) -> String {
    let secs = at.div_euclid(1000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// The billing lines as CSV, with a header, quoted where needed.
pub fn billing_csv(lines: &[BillingLine]) -> String {
    let quote = |s: &str| {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_owned()
        }
    };
    let mut out = String::from(
        "tenant_id,tenant_name,day,memory_gib_hours,read_units,write_units,throttled_requests\n",
    );
    for l in lines {
        out.push_str(&format!(
            "{},{},{},{:.6},{},{},{}\n",
            quote(&l.tenant_id),
            quote(&l.tenant_name),
            l.day,
            l.memory_gib_hours,
            l.read_units,
            l.write_units,
            l.throttled_requests
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn counters(n: [u64; 5]) -> Counters {
        Counters::from_fields(n)
    }

    #[test]
    fn growth_handles_first_readings_and_restarts() {
        let a = counters([10, 5, 1, 0, 2]);
        let b = counters([15, 9, 1, 3, 2]);
        assert_eq!(growth(None, ("boot1", a)), a);
        assert_eq!(
            growth(Some(("boot1", a)), ("boot1", b)),
            counters([5, 4, 0, 3, 0])
        );
        // A new boot: the node counts from zero again; all of it is new.
        let after_restart = counters([3, 1, 0, 0, 0]);
        assert_eq!(
            growth(Some(("boot1", b)), ("boot2", after_restart)),
            after_restart
        );
        // The same boot id but a counter went down: a restart all the same.
        assert_eq!(
            growth(Some(("boot1", b)), ("boot1", after_restart)),
            after_restart
        );
    }

    #[test]
    fn buckets_and_days() {
        assert_eq!(Resolution::Minute.bucket(125_000), 120_000);
        assert_eq!(Resolution::Hour.bucket(HOUR_MS + 5), HOUR_MS);
        assert_eq!(Resolution::Raw.bucket(125_001), 125_001);
        assert_eq!(Resolution::Minute.bucket(-1), -MINUTE_MS);
        assert_eq!(day_of(0), "1970-01-01");
        assert_eq!(day_of(951_782_400_000), "2000-02-29");
        assert_eq!(day_of(1_796_000_000_000), "2026-11-30");
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1_796_017_069_802), "2026-11-30T05:37:49Z");
        assert_eq!(Resolution::parse("minute"), Some(Resolution::Minute));
        assert_eq!(Resolution::parse("second"), None);
    }

    #[test]
    fn retention_never_drops_what_a_rollup_still_needs() {
        let keep_little = Retention {
            raw_ms: 1_000,
            minute_ms: 1_000,
            hour_ms: 1_000,
        };
        let now = 10 * HOUR_MS + 30 * MINUTE_MS + 20_000;
        // Raw rows of the previous and current minute stay, whatever the retention.
        assert_eq!(
            keep_little.cutoff(Resolution::Raw, now, 10_000),
            10 * HOUR_MS + 30 * MINUTE_MS
        );
        assert_eq!(
            keep_little.cutoff(Resolution::Minute, now, 10_000),
            10 * HOUR_MS
        );
        assert_eq!(
            keep_little.cutoff(Resolution::Hour, now, 10_000),
            now - 1_000
        );
        // A long retention is what it says.
        let default = Retention::default();
        assert_eq!(default.cutoff(Resolution::Raw, now, 10_000), now - DAY_MS);
    }

    #[test]
    fn gib_hours_of_a_gib_for_an_hour_is_one() {
        assert!((gib_hours(byte_seconds(1 << 30, HOUR_MS)) - 1.0).abs() < 1e-12);
        assert_eq!(byte_seconds(100, -5), 0);
        assert_eq!(byte_seconds(u64::MAX, i64::MAX), u64::MAX);
    }

    #[test]
    fn billing_csv_quotes_what_needs_it() {
        let line = BillingLine {
            tenant_id: "t_1".into(),
            tenant_name: "a,b \"c\"".into(),
            day: "2026-11-30".into(),
            memory_gib_hours: 0.5,
            read_units: 10,
            write_units: 2,
            throttled_requests: 1,
        };
        assert_eq!(
            billing_csv(&[line]),
            "tenant_id,tenant_name,day,memory_gib_hours,read_units,write_units,throttled_requests\n\
             t_1,\"a,b \"\"c\"\"\",2026-11-30,0.500000,10,2,1\n"
        );
    }

    proptest! {
        /// Summed over any run of readings with restarts in it, growth is
        /// never negative, and without restarts it is exactly the last
        /// reading less the first.
        #[test]
        fn growth_adds_up(steps in proptest::collection::vec((0u64..1000, any::<bool>()), 1..50)) {
            let mut boot = 0;
            let mut value = 0u64;
            let mut readings = Vec::new();
            for (add, restart) in steps {
                if restart {
                    boot += 1;
                    value = 0;
                }
                value += add;
                readings.push((format!("b{boot}"), counters([value, 0, 0, 0, 0])));
            }
            let mut total = 0u64;
            for pair in readings.windows(2) {
                let (b0, c0) = &pair[0];
                let (b1, c1) = &pair[1];
                total += growth(Some((b0, *c0)), (b1, *c1)).read_units;
            }
            if boot == 0 {
                prop_assert_eq!(total, readings.last().unwrap().1.read_units - readings[0].1.read_units);
            }
            prop_assert!(total <= readings.iter().map(|r| r.1.read_units).sum::<u64>());
        }

        /// Rolling up minutes into an hour gives what rolling up every
        /// sample into the hour at once gives.
        #[test]
        fn rollups_compose(samples in proptest::collection::vec((0u64..1 << 40, 0i64..20_000, 0u64..1000), 1..200)) {
            let usages: Vec<(i64, Usage)> = samples
                .iter()
                .enumerate()
                .map(|(i, (mem, ms, reads))| {
                    (i as i64 * 7_000, Usage::sample(*mem, *ms, counters([*reads, 1, 0, 0, 0])))
                })
                .collect();
            let all = Usage::rollup(usages.iter().map(|(_, u)| u));
            let mut minutes = std::collections::BTreeMap::<i64, Vec<Usage>>::new();
            for (at, u) in &usages {
                minutes.entry(Resolution::Minute.bucket(*at)).or_default().push(*u);
            }
            let rolled: Vec<Usage> = minutes.values().map(Usage::rollup).collect();
            let twice = Usage::rollup(&rolled);
            prop_assert_eq!(twice.counters, all.counters);
            prop_assert_eq!(twice.memory_byte_seconds, all.memory_byte_seconds);
            prop_assert_eq!(twice.samples, all.samples);
            prop_assert_eq!(twice.memory_max_bytes, all.memory_max_bytes);
            // Averages of averages, weighted by samples, agree to rounding.
            let diff = twice.memory_bytes.abs_diff(all.memory_bytes);
            prop_assert!(diff <= rolled.len() as u64, "{} vs {}", twice.memory_bytes, all.memory_bytes);
        }
    }
}
