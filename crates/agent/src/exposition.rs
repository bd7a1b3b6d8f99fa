//! Metric primitives and the Prometheus text exposition format (version 0.0.4) as the kubelet
//! writes it.
//!
//! The kubelet serves `/metrics` through component-base, which hands client_golang's
//! `promhttp` handler no `EnableOpenMetrics`: the body is always the 0.0.4 text format. corral
//! writes the same bytes the same way (client_golang's `expfmt`): families sorted by name and
//! left out while they have no series, series sorted by their label values, labels sorted by
//! name with `le` last, every number as Go's `strconv.FormatFloat(v, 'g', -1, 64)` (`1`,
//! `0.005`, `1.5e+06`, `+Inf`). Counters keep the exact kubelet names: OpenMetrics would force
//! a `_total` suffix on `kubelet_container_aligned_compute_resources_count`, which is why
//! corral does not offer it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The `Content-Type` of [`encode`]'s output.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a family's `# TYPE` line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Buckets, count and sum.
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A histogram's values at one instant.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HistogramSnapshot {
    /// `(upper bound, observations at or below it)`, ascending, without `+Inf`.
    pub(crate) buckets: Vec<(f64, u64)>,
    /// Every observation.
    pub(crate) count: u64,
    /// The sum of the observations.
    pub(crate) sum: f64,
}

/// One series' value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// A counter's or a gauge's value.
    Number(f64),
    /// A histogram's values.
    Histogram(HistogramSnapshot),
}

/// One labelled series of a family.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// `(name, value)` pairs, in any order.
    pub(crate) labels: Vec<(String, String)>,
    /// The value.
    pub(crate) value: Value,
}

impl Series {
    /// A series without labels.
    pub(crate) fn plain(value: Value) -> Series {
        Series {
            labels: Vec::new(),
            value,
        }
    }

    /// A number with `labels`.
    pub(crate) fn number(labels: &[(&str, &str)], value: f64) -> Series {
        Series {
            labels: labels
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
                .collect(),
            value: Value::Number(value),
        }
    }
}

/// A metric family: its name, help text, type and series.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Family {
    /// The full name (a counter's name includes its `_total`, as in client_golang).
    pub(crate) name: String,
    /// The help text as written on the `# HELP` line.
    pub(crate) help: String,
    /// The type.
    pub(crate) kind: Kind,
    /// The series; a family without series is not written.
    pub(crate) series: Vec<Series>,
}

/// The families as the 0.0.4 text format (see the module documentation for the order).
pub(crate) fn encode(families: &[Family]) -> String {
    let mut sorted: Vec<&Family> = families.iter().filter(|f| !f.series.is_empty()).collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = String::new();
    for family in sorted {
        let _ = writeln!(out, "# HELP {} {}", family.name, escape_help(&family.help));
        let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind.as_str());
        let mut series: Vec<(Vec<(&str, &str)>, &Value)> = family
            .series
            .iter()
            .map(|s| {
                let mut labels: Vec<(&str, &str)> = s
                    .labels
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect();
                labels.sort_unstable();
                (labels, &s.value)
            })
            .collect();
        series.sort_by(|a, b| a.0.iter().map(|l| l.1).cmp(b.0.iter().map(|l| l.1)));
        for (labels, value) in series {
            match value {
                Value::Number(v) => sample(&mut out, &family.name, "", &labels, None, *v),
                Value::Histogram(h) => {
                    let bucket = format!("{}_bucket", family.name);
                    for (bound, count) in &h.buckets {
                        sample(&mut out, &bucket, "", &labels, Some(*bound), *count as f64);
                    }
                    sample(
                        &mut out,
                        &bucket,
                        "",
                        &labels,
                        Some(f64::INFINITY),
                        h.count as f64,
                    );
                    sample(&mut out, &family.name, "_sum", &labels, None, h.sum);
                    sample(
                        &mut out,
                        &family.name,
                        "_count",
                        &labels,
                        None,
                        h.count as f64,
                    );
                }
            }
        }
    }
    out
}

fn sample(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(&str, &str)],
    le: Option<f64>,
    value: f64,
) {
    out.push_str(name);
    out.push_str(suffix);
    if !labels.is_empty() || le.is_some() {
        out.push('{');
        let mut first = true;
        for (label, v) in labels {
            if !first {
                out.push(',');
            }
            first = false;
            let _ = write!(out, "{label}=\"{}\"", escape_label_value(v));
        }
        if let Some(bound) = le {
            if !first {
                out.push(',');
            }
            let _ = write!(out, "le=\"{}\"", go_float(bound));
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(&go_float(value));
    out.push('\n');
}

/// `# HELP` escaping: backslash and newline.
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Label value escaping: backslash, double quote and newline.
fn escape_label_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `v` as client_golang writes it: Go's `strconv.FormatFloat(v, 'g', -1, 64)` — the
/// shortest digits that read back as `v`, in exponent form when the decimal exponent is
/// below -4 or at least 6 (`1e+06`, `1.5e-05`) — with `+Inf`, `-Inf` and `NaN` spelled out.
pub(crate) fn go_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_owned();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if v == 0.0 {
        return "0".to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, as Go's shortest formatting.
    let scientific = format!("{v:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("`{:e}` of a finite float has an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` writes a decimal exponent");
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    } else {
        // `{}` writes the same shortest digits in positional notation.
        format!("{v}")
    }
}

/// client_golang's `ExponentialBucketsRange(min, max, count)`: `min · g^i` for
/// `g = (max/min)^(1/(count-1))`, the powers computed as Go's `math.Pow` computes integer
/// powers (repeated squaring of the binary mantissa), so the bounds — and the `le` labels
/// printed from them — are the kubelet's.
pub(crate) fn exponential_buckets_range(min: f64, max: f64, count: usize) -> Vec<f64> {
    if count < 2 {
        return vec![min];
    }
    // Go: math.Pow(max/min, 1/(count-1)) = Exp(yf·Log(x)) for a fractional y < 0.5.
    let growth = (1.0 / (count - 1) as f64 * (max / min).ln()).exp();
    (0..count as u64)
        .map(|i| min * go_integer_pow(growth, i))
        .collect()
}

/// Go's `math.Pow(x, n)` for a non-negative integer `n` and a normal positive `x`.
fn go_integer_pow(x: f64, n: u64) -> f64 {
    let (mut x1, mut xe) = frexp(x);
    let (mut a1, mut ae) = (1.0_f64, 0_i64);
    let mut i = n;
    while i != 0 {
        if !(-(1 << 12)..=(1 << 12)).contains(&xe) {
            ae += xe;
            break;
        }
        if i & 1 == 1 {
            a1 *= x1;
            ae += xe;
        }
        x1 *= x1;
        xe <<= 1;
        if x1 < 0.5 {
            x1 += x1;
            xe -= 1;
        }
        i >>= 1;
    }
    ldexp(a1, ae)
}

/// `x = m · 2^e` with `m` in [0.5, 1), for a normal positive `x`.
fn frexp(x: f64) -> (f64, i64) {
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64;
    let mantissa = f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52));
    (mantissa, exponent - 1022)
}

/// `m · 2^e`, exact while the result is a normal number.
fn ldexp(m: f64, e: i64) -> f64 {
    let mut result = m;
    let mut e = e;
    // Scale in steps that stay within f64's exponent range.
    while e > 1000 {
        result *= 2f64.powi(1000);
        e -= 1000;
    }
    while e < -1000 {
        result *= 2f64.powi(-1000);
        e += 1000;
    }
    result * 2f64.powi(e as i32)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update leaves the data consistent, so a poisoned lock is usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug, Clone, Default)]
struct HistogramData {
    /// Observations per bucket (not cumulative); one more than the bounds, for `+Inf`.
    counts: Vec<u64>,
    sum: f64,
}

impl HistogramData {
    fn new(buckets: usize) -> Self {
        HistogramData {
            counts: vec![0; buckets + 1],
            sum: 0.0,
        }
    }

    fn observe(&mut self, bounds: &[f64], value: f64) {
        // The first bound at or above `value` (Go's `sort.SearchFloat64s`; NaN: `+Inf`).
        let bucket = bounds.partition_point(|bound| {
            bound.partial_cmp(&value) == Some(std::cmp::Ordering::Less) || value.is_nan()
        });
        self.counts[bucket] += 1;
        self.sum += value;
    }

    fn snapshot(&self, bounds: &[f64]) -> HistogramSnapshot {
        let mut cumulative = 0;
        let buckets = bounds
            .iter()
            .zip(&self.counts)
            .map(|(bound, count)| {
                cumulative += count;
                (*bound, cumulative)
            })
            .collect();
        HistogramSnapshot {
            buckets,
            count: self.counts.iter().sum(),
            sum: self.sum,
        }
    }
}

/// A histogram with one series per combination of label values (client_golang's
/// `HistogramVec`). Clones share the series.
#[derive(Debug, Clone)]
pub(crate) struct HistogramVec {
    label_names: &'static [&'static str],
    bounds: Arc<[f64]>,
    series: Arc<Mutex<BTreeMap<Vec<String>, HistogramData>>>,
}

impl HistogramVec {
    /// A histogram labelled `label_names` with the upper bounds `bounds` (ascending).
    pub(crate) fn new(label_names: &'static [&'static str], bounds: &[f64]) -> Self {
        HistogramVec {
            label_names,
            bounds: bounds.into(),
            series: Arc::default(),
        }
    }

    /// Record `value` in the series of `label_values` (one per label name, in order).
    pub(crate) fn observe(&self, label_values: &[&str], value: f64) {
        debug_assert_eq!(label_values.len(), self.label_names.len());
        let key: Vec<String> = label_values.iter().map(|v| (*v).to_owned()).collect();
        lock(&self.series)
            .entry(key)
            .or_insert_with(|| HistogramData::new(self.bounds.len()))
            .observe(&self.bounds, value);
    }

    /// Every series observed so far.
    pub(crate) fn series(&self) -> Vec<Series> {
        lock(&self.series)
            .iter()
            .map(|(values, data)| Series {
                labels: labelled(self.label_names, values),
                value: Value::Histogram(data.snapshot(&self.bounds)),
            })
            .collect()
    }
}

/// A counter with one series per combination of label values (client_golang's
/// `CounterVec`). Clones share the series.
#[derive(Debug, Clone)]
pub(crate) struct CounterVec {
    label_names: &'static [&'static str],
    series: Arc<Mutex<BTreeMap<Vec<String>, u64>>>,
}

impl CounterVec {
    /// A counter labelled `label_names`.
    pub(crate) fn new(label_names: &'static [&'static str]) -> Self {
        CounterVec {
            label_names,
            series: Arc::default(),
        }
    }

    /// Add one to the series of `label_values` (one per label name, in order).
    pub(crate) fn inc(&self, label_values: &[&str]) {
        debug_assert_eq!(label_values.len(), self.label_names.len());
        let key: Vec<String> = label_values.iter().map(|v| (*v).to_owned()).collect();
        *lock(&self.series).entry(key).or_default() += 1;
    }

    /// Every series counted so far.
    pub(crate) fn series(&self) -> Vec<Series> {
        lock(&self.series)
            .iter()
            .map(|(values, count)| Series {
                labels: labelled(self.label_names, values),
                value: Value::Number(*count as f64),
            })
            .collect()
    }
}

fn labelled(names: &[&str], values: &[String]) -> Vec<(String, String)> {
    names
        .iter()
        .zip(values)
        .map(|(name, value)| ((*name).to_owned(), value.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_go_formats_them() {
        // strconv.FormatFloat(v, 'g', -1, 64), as client_golang's writeFloat.
        for (v, go) in [
            (0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (2.0, "2"),
            (0.005, "0.005"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (2.5, "2.5"),
            (819.2, "819.2"),
            (15000.0, "15000"),
            (100_000.0, "100000"),
            (999_999.0, "999999"),
            (1_000_000.0, "1e+06"),
            (1_024_000.0, "1.024e+06"),
            (1.25e21, "1.25e+21"),
            (1e100, "1e+100"),
            (1e-100, "1e-100"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(go_float(v), go, "{v:e}");
        }
    }

    #[test]
    fn buckets_are_client_golangs() {
        // metrics.ExponentialBuckets(.05, 2, 15): topology_manager_admission_duration_ms.
        let tm: Vec<String> = corral_topology::topologymanager::ADMISSION_DURATION_MS_BUCKETS
            .into_iter()
            .map(go_float)
            .collect();
        assert_eq!(
            tm,
            [
                "0.05", "0.1", "0.2", "0.4", "0.8", "1.6", "3.2", "6.4", "12.8", "25.6", "51.2",
                "102.4", "204.8", "409.6", "819.2"
            ]
        );
        // metrics.ExponentialBucketsRange(.1, 40, 15): DRADurationBuckets (Go's math.Pow).
        let dra: Vec<String> = exponential_buckets_range(0.1, 40.0, 15)
            .into_iter()
            .map(go_float)
            .collect();
        assert_eq!(
            dra,
            [
                "0.1",
                "0.1534127404634391",
                "0.23535468936502524",
                "0.36106407876409946",
                "0.5539182980610752",
                "0.849781240983936",
                "1.303672689737678",
                "1.9999999999999993",
                "3.0682548092687805",
                "4.7070937873005025",
                "7.221281575281985",
                "11.078365961221499",
                "16.995624819678714",
                "26.07345379475354",
                "39.99999999999997"
            ]
        );
    }

    #[test]
    fn frexp_and_ldexp_round_trip() {
        for x in [1.0, 0.5, 3.0, 1.534127404634391, 400.0, 1e-300, 1e300] {
            let (m, e) = frexp(x);
            assert!((0.5..1.0).contains(&m), "{x}: {m}");
            assert_eq!(ldexp(m, e), x);
        }
    }

    #[test]
    fn encoding_sorts_escapes_and_skips_empty_families() {
        let histogram = HistogramVec::new(&["resource_name"], &[0.5, 1.0]);
        histogram.observe(&["b"], 0.5);
        histogram.observe(&["b"], 3.0);
        histogram.observe(&["a\"\\\n"], 1.0);
        let counter = CounterVec::new(&["scope", "boundary"]);
        counter.inc(&["pod", "numa_node"]);
        counter.inc(&["container", "numa_node"]);
        counter.inc(&["container", "numa_node"]);
        let families = [
            Family {
                name: "z_histogram".into(),
                help: "h\\ist\nogram".into(),
                kind: Kind::Histogram,
                series: histogram.series(),
            },
            Family {
                name: "empty".into(),
                help: "never written".into(),
                kind: Kind::Gauge,
                series: Vec::new(),
            },
            Family {
                name: "a_count".into(),
                help: "[ALPHA] counts".into(),
                kind: Kind::Counter,
                series: counter.series(),
            },
            Family {
                name: "m_gauge".into(),
                help: "gauge".into(),
                kind: Kind::Gauge,
                series: vec![Series::plain(Value::Number(1_500_000.0))],
            },
        ];
        assert_eq!(
            encode(&families),
            "# HELP a_count [ALPHA] counts\n\
             # TYPE a_count counter\n\
             a_count{boundary=\"numa_node\",scope=\"container\"} 2\n\
             a_count{boundary=\"numa_node\",scope=\"pod\"} 1\n\
             # HELP m_gauge gauge\n\
             # TYPE m_gauge gauge\n\
             m_gauge 1.5e+06\n\
             # HELP z_histogram h\\\\ist\\nogram\n\
             # TYPE z_histogram histogram\n\
             z_histogram_bucket{resource_name=\"a\\\"\\\\\\n\",le=\"0.5\"} 0\n\
             z_histogram_bucket{resource_name=\"a\\\"\\\\\\n\",le=\"1\"} 1\n\
             z_histogram_bucket{resource_name=\"a\\\"\\\\\\n\",le=\"+Inf\"} 1\n\
             z_histogram_sum{resource_name=\"a\\\"\\\\\\n\"} 1\n\
             z_histogram_count{resource_name=\"a\\\"\\\\\\n\"} 1\n\
             z_histogram_bucket{resource_name=\"b\",le=\"0.5\"} 1\n\
             z_histogram_bucket{resource_name=\"b\",le=\"1\"} 1\n\
             z_histogram_bucket{resource_name=\"b\",le=\"+Inf\"} 2\n\
             z_histogram_sum{resource_name=\"b\"} 3.5\n\
             z_histogram_count{resource_name=\"b\"} 2\n"
        );
    }
}
