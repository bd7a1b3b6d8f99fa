//! Log set-up: `tracing` to stderr, as text or as the Kubernetes components' JSON lines,
//! filtered by `RUST_LOG`, corral's `-v`/`-vv` or the kubelet's `-v=N`.
//!
//! # Verbosity
//!
//! klog's `-v=N` (`--v=N`) shows every message of verbosity N or lower; corral's messages
//! have tracing levels, mapped to klog verbosities (the `v` of a JSON line) as follows:
//!
//! | tracing level  | klog `v`        | shown from |
//! |----------------|-----------------|------------|
//! | ERROR          | (none, an error)| always     |
//! | WARN, INFO     | 0               | `-v=0`     |
//! | DEBUG          | 2               | `-v=2`     |
//! | TRACE          | 4               | `-v=4`     |
//!
//! So `-v=0` and `-v=1` show INFO and above, `-v=2` and `-v=3` add DEBUG, `-v=4` and more
//! add TRACE. corral's own `-v` (DEBUG) and `-vv` (TRACE) keep working; with both spellings
//! the more verbose wins. `RUST_LOG`, when set, overrides both.
//!
//! # JSON lines
//!
//! `--logging-format=json` (or `--log-format json`) writes what the kubelet's
//! `--logging-format=json` writes (`k8s.io/component-base/logs/json`: zap through zapr),
//! one object per line, keys in this order:
//!
//! - `ts`: milliseconds since the Unix epoch as a float (upstream's `epochMillisTimeEncoder`);
//! - `caller`: `dir/file.rs:line` (zap's short caller);
//! - `msg`: the message;
//! - `v`: the verbosity above — absent on errors, as zapr writes errors;
//! - the fields of the enclosing spans, then the event's own, each flattened at top level
//!   (numbers and booleans as JSON numbers and booleans, everything else as its text);
//! - `err`: the error (a field named `err` or `error`), last, as zapr's `ErrorKey("err")`.
//!
//! A field named `pod` whose text is `namespace/name` is written as klog's `KObj` is:
//! `"pod":{"name":"…","namespace":"…"}` (the text format shows `pod="namespace/name"`).

use std::fmt::Write as _;
use std::io::IsTerminal as _;

use anyhow::Result;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use crate::cli::LogFormat;

/// The default filter for corral's `-v` count and the kubelet's `-v=N`.
pub(crate) fn default_filter(verbose: u8, klog_v: Option<u32>) -> &'static str {
    let from_count = match verbose {
        0 => 0,
        1 => 2,
        _ => 4,
    };
    match from_count.max(klog_v.unwrap_or(0)) {
        0..=1 => "info",
        2..=3 => "debug",
        _ => "trace",
    }
}

/// klog's verbosity of a message at `level`, `None` for errors (see the module docs).
pub(crate) fn klog_verbosity(level: Level) -> Option<u32> {
    match level {
        Level::ERROR => None,
        Level::WARN | Level::INFO => Some(0),
        Level::DEBUG => Some(2),
        Level::TRACE => Some(4),
    }
}

/// Install the global subscriber.
pub(crate) fn init(format: LogFormat, verbose: u8, klog_v: Option<u32>) -> Result<()> {
    let default = default_filter(verbose, klog_v);
    let filter = EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new(default))?;
    let result = match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .try_init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .fmt_fields(JsonFields::new())
            .event_format(KubernetesJson)
            .try_init(),
    };
    result.map_err(|err| anyhow::anyhow!("cannot set up logging: {err}"))
}

/// The Kubernetes component JSON line format (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KubernetesJson;

impl<S, N> FormatEvent<S, N> for KubernetesJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let metadata = event.metadata();
        let mut line = Line::default();
        line.push("ts", serde_json::json!(now.as_nanos() as f64 / 1e6));
        if let (Some(file), Some(number)) = (metadata.file(), metadata.line()) {
            line.push("caller", format!("{}:{number}", short_caller(file)).into());
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        line.push("msg", fields.message.take().unwrap_or_default().into());
        if let Some(v) = klog_verbosity(*metadata.level()) {
            line.push("v", v.into());
        }
        // Span fields, outermost first, as klog's WithValues.
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(formatted) = extensions.get::<FormattedFields<N>>() else {
                    continue;
                };
                if let Ok(serde_json::Value::Object(map)) =
                    serde_json::from_str::<serde_json::Value>(&formatted.fields)
                {
                    for (key, value) in map {
                        line.push_field(&key, value);
                    }
                }
            }
        }
        for (key, value) in fields.values {
            line.push_field(key, value);
        }
        if let Some(err) = fields.err {
            line.push("err", err.into());
        }
        writeln!(writer, "{}", line.finish())
    }
}

/// zap's `ShortCallerEncoder`: the file's last directory and name.
fn short_caller(file: &str) -> &str {
    let mut slashes = file.rmatch_indices('/').map(|(at, _)| at);
    match (slashes.next(), slashes.next()) {
        (Some(_), Some(before)) => &file[before + 1..],
        _ => file,
    }
}

/// A JSON object written in insertion order.
#[derive(Default)]
struct Line(String);

impl Line {
    fn push(&mut self, key: &str, value: serde_json::Value) {
        self.0.push(if self.0.is_empty() { '{' } else { ',' });
        // Writing to a String cannot fail; keys and values are JSON-escaped by serde_json.
        let _ = write!(
            self.0,
            "{}:{}",
            serde_json::Value::from(key),
            serde_json::to_string(&value).unwrap_or_else(|_| "null".into())
        );
    }

    /// A key/value field: `pod` as klog's `KObj` when it reads `namespace/name`.
    fn push_field(&mut self, key: &str, value: serde_json::Value) {
        if key == "pod"
            && let Some((namespace, name)) = value.as_str().and_then(|text| text.split_once('/'))
            && !namespace.is_empty()
            && !name.is_empty()
            && !name.contains('/')
        {
            let object = serde_json::json!({"name": name, "namespace": namespace});
            return self.push(key, object);
        }
        self.push(key, value);
    }

    fn finish(mut self) -> String {
        if self.0.is_empty() {
            self.0.push('{');
        }
        self.0.push('}');
        self.0
    }
}

/// An event's fields: the message, the error, the rest in order.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    err: Option<String>,
    values: Vec<(&'static str, serde_json::Value)>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: serde_json::Value) {
        match field.name() {
            "message" => {
                self.message = Some(match value {
                    serde_json::Value::String(text) => text,
                    other => other.to_string(),
                });
            }
            "err" | "error" => {
                self.err = Some(match value {
                    serde_json::Value::String(text) => text,
                    other => other.to_string(),
                });
            }
            // tracing-log's bridge fields say where a `log` record came from.
            name if name.starts_with("log.") => {}
            name => self.values.push((name, value)),
        }
    }
}

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, serde_json::json!(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.put(field, value.to_string().into());
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        self.put(field, value.to_string().into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        // The whole chain, as Go's wrapped errors print it.
        let mut text = value.to_string();
        let mut source = value.source();
        while let Some(cause) = source {
            let _ = write!(text, ": {cause}");
            source = cause.source();
        }
        self.put(field, text.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%value` fields arrive here too, and print as Display.
        self.put(field, format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    /// The JSON lines `emit` logs, at TRACE and above.
    fn json_lines(emit: impl FnOnce()) -> Vec<String> {
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(Level::TRACE)
            .with_writer(buffer.clone())
            .fmt_fields(JsonFields::new())
            .event_format(KubernetesJson)
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = buffer.0.lock().unwrap().clone();
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The top-level keys of a JSON object line, in order.
    fn keys(line: &str) -> Vec<String> {
        corral_testkit::object_keys_in_order(line)
    }

    #[derive(Debug, thiserror::Error)]
    #[error("reading the state file")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn json_lines_have_the_kubernetes_component_shape() {
        let lines = json_lines(|| {
            tracing::info!(
                pod = "kube-system/pod-1",
                podUID = "0b5c",
                count = 1,
                "pod admitted"
            );
            let err = Outer(std::io::Error::other("disk full"));
            tracing::error!(
                pod = "default/web",
                err = &err as &dyn std::error::Error,
                "releasing CPUs failed"
            );
            tracing::debug!(ready = true, "plugin connected");
            tracing::trace!(elapsed = %"1.5s", "tick");
            tracing::warn!(error = %"boom", key = "x", "configuration key not read by corral");
        });
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert_eq!(
            keys(&lines[0]),
            ["ts", "caller", "msg", "v", "pod", "podUID", "count"]
        );
        let info: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(info["msg"], "pod admitted");
        assert_eq!(info["v"], 0);
        assert_eq!(
            info["pod"],
            serde_json::json!({"name": "pod-1", "namespace": "kube-system"})
        );
        assert_eq!(info["count"], 1);
        assert_eq!(
            info["caller"],
            format!("src/logging.rs:{}", line_of(&lines[0]))
        );
        let ts = info["ts"].as_f64().unwrap();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as f64;
        assert!(
            (now_ms - ts).abs() < 60_000.0,
            "ts {ts} is not epoch milliseconds"
        );

        // Errors: no `v`, the error last under `err`, its causes included.
        assert_eq!(keys(&lines[1]), ["ts", "caller", "msg", "pod", "err"]);
        let error: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
        assert_eq!(error["err"], "reading the state file: disk full");

        let debug: serde_json::Value = serde_json::from_str(&lines[2]).unwrap();
        assert_eq!(
            (debug["v"].clone(), debug["ready"].clone()),
            (2.into(), true.into())
        );
        let trace: serde_json::Value = serde_json::from_str(&lines[3]).unwrap();
        assert_eq!(
            (trace["v"].clone(), trace["elapsed"].clone()),
            (4.into(), "1.5s".into())
        );
        assert_eq!(keys(&lines[4]), ["ts", "caller", "msg", "v", "key", "err"]);
    }

    fn line_of(line: &str) -> u32 {
        let doc: serde_json::Value = serde_json::from_str(line).unwrap();
        let caller = doc["caller"].as_str().unwrap();
        caller.rsplit(':').next().unwrap().parse().unwrap()
    }

    #[test]
    fn span_fields_come_after_v() {
        let lines = json_lines(|| {
            let span = tracing::info_span!("admit", podUID = "0b5c");
            let _entered = span.enter();
            tracing::info!(container = "app", "allocated");
        });
        assert_eq!(
            keys(&lines[0]),
            ["ts", "caller", "msg", "v", "podUID", "container"]
        );
    }

    #[test]
    fn klog_verbosity_maps_to_levels() {
        let cases = [
            ((0, None), "info"),
            ((0, Some(0)), "info"),
            ((0, Some(1)), "info"),
            ((0, Some(2)), "debug"),
            ((0, Some(3)), "debug"),
            ((0, Some(4)), "trace"),
            ((0, Some(10)), "trace"),
            ((1, None), "debug"),
            ((2, None), "trace"),
            ((1, Some(4)), "trace"),
            ((2, Some(0)), "trace"),
        ];
        for ((count, v), want) in cases {
            assert_eq!(default_filter(count, v), want, "-v x{count}, -v={v:?}");
        }
        // A message's `v` is the lowest -v=N that shows it.
        for (level, v) in [(Level::INFO, 0), (Level::DEBUG, 2), (Level::TRACE, 4)] {
            let filter = default_filter(0, Some(v));
            assert!(
                filter
                    .parse::<tracing::level_filters::LevelFilter>()
                    .unwrap()
                    >= level
            );
            assert_eq!(klog_verbosity(level), Some(v));
        }
        assert_eq!(klog_verbosity(Level::ERROR), None);
    }

    #[test]
    fn short_caller_keeps_the_last_directory() {
        assert_eq!(short_caller("crates/agent/src/node/mod.rs"), "node/mod.rs");
        assert_eq!(short_caller("src/main.rs"), "src/main.rs");
        assert_eq!(short_caller("main.rs"), "main.rs");
    }
}
