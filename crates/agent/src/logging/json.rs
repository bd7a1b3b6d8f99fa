//! The Kubernetes component JSON line format: what the kubelet's `--logging-format=json`
//! writes (`k8s.io/component-base/logs/json`: zap through zapr), one object per line, keys
//! in this order:
//!
//! - `ts`: milliseconds since the Unix epoch as a float (upstream's `epochMillisTimeEncoder`);
//! - `logger`: for a dependency's line only, its tracing target (`h2::proto::streams`), where
//!   zap writes a named logger's name; corral's own lines have none, as the kubelet's;
//! - `caller`: `dir/file.rs:line` (zap's short caller);
//! - `msg`: the message;
//! - `v`: the verbosity (see [`super`]) — absent on errors, as zapr writes errors;
//! - the fields of the enclosing spans (outermost first, each span's in the order they were
//!   recorded: klog's `WithValues`), then the event's own, each flattened at top level
//!   (numbers and booleans as JSON numbers and booleans, everything else as its text);
//! - `err`: the error (a field named `err` or `error`), last, as zapr's `ErrorKey("err")`.
//!
//! A field named `pod` whose text is `namespace/name` is written as klog's `KObj` is:
//! `"pod":{"name":"…","namespace":"…"}` (the text format shows `pod="namespace/name"`).
//! The topology hints (fields `affinity`, `bestHint`, `cpuHints`, `hints`), whose text is
//! the JSON klog writes for them, are written as that JSON, not as a string.
//!
//! # No key twice
//!
//! A line never repeats a key. Where two fields share a name — a span's and the event's, or
//! two nested spans' — the innermost wins: the event's over any span's, an inner span's over
//! an outer one's, a later field over an earlier one, and it stands where the winner was
//! written. That is klog's rule for `WithValues` and call-site values (`MergeKVs`: the
//! second list wins); zap itself would write both. A field named like a key of the line
//! itself (`ts`, `logger`, `caller`, `msg`, `v`) is written as `field.NAME`.

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use super::is_own_target;

/// The keys of the line itself, written before any field.
const LINE_KEYS: &[&str] = &["ts", "logger", "caller", "msg", "v"];
/// Fields whose text is klog's JSON for a topology hint or hints.
const JSON_FIELDS: &[&str] = &["affinity", "bestHint", "cpuHints", "hints"];

/// klog's verbosity of a message at `level`, `None` for errors (see [`super`]).
pub(crate) fn klog_verbosity(level: Level) -> Option<u32> {
    match level {
        Level::ERROR => None,
        Level::WARN | Level::INFO => Some(0),
        Level::DEBUG => Some(2),
        Level::TRACE => Some(4),
    }
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
        if !is_own_target(metadata.target()) {
            line.push("logger", metadata.target().into());
        }
        if let (Some(file), Some(number)) = (metadata.file(), metadata.line()) {
            line.push("caller", format!("{}:{number}", short_caller(file)).into());
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        line.push("msg", fields.message.take().unwrap_or_default().into());
        if let Some(v) = klog_verbosity(*metadata.level()) {
            line.push("v", v.into());
        }
        // Span fields, outermost first, as klog's WithValues; then the event's.
        let mut pairs: Vec<(String, serde_json::Value)> = Vec::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(formatted) = extensions.get::<FormattedFields<N>>() else {
                    continue;
                };
                pairs.extend(SpanFields::pairs(&formatted.fields));
            }
        }
        pairs.extend(fields.values.into_iter().map(|(k, v)| (k.to_owned(), v)));
        if let Some(err) = fields.err {
            pairs.push(("err".to_owned(), err.into()));
        }
        for (key, value) in innermost_wins(pairs) {
            line.push_field(&key, value);
        }
        writeln!(writer, "{}", line.finish())
    }
}

/// How a span's fields are kept for [`KubernetesJson`] (the subscriber's `fmt_fields`): one
/// `["key",value]` JSON pair a line, in the order they were recorded, as klog writes
/// `WithValues` (tracing-subscriber's `JsonFields` sorts them by name). A field recorded
/// later (`Span::record`) is a line more.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SpanFields;

impl SpanFields {
    /// The pairs of a span's stored fields, in order.
    fn pairs(stored: &str) -> impl Iterator<Item = (String, serde_json::Value)> + '_ {
        stored
            .lines()
            .filter_map(|line| serde_json::from_str::<(String, serde_json::Value)>(line).ok())
    }
}

impl<'writer> FormatFields<'writer> for SpanFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> std::fmt::Result {
        let mut visitor = Fields {
            span: true,
            ..Fields::default()
        };
        fields.record(&mut visitor);
        for (at, pair) in visitor.values.iter().enumerate() {
            if at > 0 {
                writer.write_char('\n')?;
            }
            let text = serde_json::to_string(pair).map_err(|_| std::fmt::Error)?;
            writer.write_str(&text)?;
        }
        Ok(())
    }

    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> std::fmt::Result {
        if !current.fields.is_empty() {
            current.fields.push('\n');
        }
        self.format_fields(current.as_writer(), fields)
    }
}

/// Each key once (see the module docs): a key of the line itself renamed `field.NAME`,
/// then of the pairs sharing a key the last one, in its place.
fn innermost_wins(
    pairs: Vec<(String, serde_json::Value)>,
) -> impl Iterator<Item = (String, serde_json::Value)> {
    let renamed: Vec<(String, serde_json::Value)> = pairs
        .into_iter()
        .map(|(key, value)| match LINE_KEYS.contains(&key.as_str()) {
            true => (format!("field.{key}"), value),
            false => (key, value),
        })
        .collect();
    let last: std::collections::HashMap<&str, usize> = renamed
        .iter()
        .enumerate()
        .map(|(at, (key, _))| (key.as_str(), at))
        .collect();
    let keep: Vec<bool> = renamed
        .iter()
        .enumerate()
        .map(|(at, (key, _))| last[key.as_str()] == at)
        .collect();
    renamed
        .into_iter()
        .zip(keep)
        .filter_map(|(pair, keep)| keep.then_some(pair))
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

    /// A key/value field: `pod` as klog's `KObj` when it reads `namespace/name`, a hint
    /// field as the JSON its text is.
    fn push_field(&mut self, key: &str, value: serde_json::Value) {
        if JSON_FIELDS.contains(&key)
            && let Some(json) = value
                .as_str()
                .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        {
            return self.push(key, json);
        }
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

/// An event's fields: the message, the error, the rest in order (a span's: all in order).
#[derive(Default)]
struct Fields {
    /// A span's fields: `message` and `err` are fields like the others.
    span: bool,
    message: Option<String>,
    err: Option<String>,
    values: Vec<(&'static str, serde_json::Value)>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: serde_json::Value) {
        match field.name() {
            // tracing-log's bridge fields say where a `log` record came from.
            name if name.starts_with("log.") => {}
            name if self.span => self.values.push((name, value)),
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
mod tests_hostile;

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
        filtered_json_lines("trace", emit)
    }

    /// The JSON lines `emit` logs through `filter` (a [`super::super::default_filter`]).
    fn filtered_json_lines(filter: &str, emit: impl FnOnce()) -> Vec<String> {
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::try_new(filter).unwrap())
            .with_writer(buffer.clone())
            .fmt_fields(SpanFields)
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
            format!("logging/json.rs:{}", line_of(&lines[0]))
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
    fn short_caller_keeps_the_last_directory() {
        assert_eq!(short_caller("crates/agent/src/node/mod.rs"), "node/mod.rs");
        assert_eq!(short_caller("src/main.rs"), "src/main.rs");
        assert_eq!(short_caller("main.rs"), "main.rs");
    }

    #[test]
    fn no_key_is_written_twice_and_the_innermost_wins() {
        let lines = json_lines(|| {
            let outer =
                tracing::info_span!("outer", pod = "default/outer", podUID = "1", depth = 1);
            let _outer = outer.enter();
            let inner = tracing::info_span!("inner", depth = 2, err = "span's");
            let _inner = inner.enter();
            tracing::info!(pod = "default/event", "both spans and the event name pod");
            tracing::info!("only the spans");
            tracing::error!(err = %"event's", podUID = "2", "an error");
            tracing::info!(
                v = 9,
                msg = "mine",
                ts = 1,
                caller = "x",
                logger = "y",
                "line keys"
            );
        });
        assert_eq!(lines.len(), 4, "{lines:#?}");
        for line in &lines {
            assert_eq!(
                corral_testkit::repeated_keys(line),
                Vec::<String>::new(),
                "{line}"
            );
        }
        let first: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(
            first["pod"],
            serde_json::json!({"name": "event", "namespace": "default"}),
            "the event's field wins over the span's"
        );
        assert_eq!(
            first["depth"], 2,
            "the inner span's field wins over the outer's"
        );
        assert_eq!(
            keys(&lines[0]),
            ["ts", "caller", "msg", "v", "podUID", "depth", "err", "pod"],
            "each key where its winner was written"
        );
        let second: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
        assert_eq!(second["pod"]["name"], "outer");
        let error: serde_json::Value = serde_json::from_str(&lines[2]).unwrap();
        assert_eq!(
            (error["err"].as_str(), error["podUID"].as_str()),
            (Some("event's"), Some("2"))
        );
        assert_eq!(
            keys(&lines[2]).last().map(String::as_str),
            Some("err"),
            "the event's err last"
        );
        assert_eq!(
            keys(&lines[3]),
            [
                "ts",
                "caller",
                "msg",
                "v",
                "pod",
                "podUID",
                "depth",
                "err",
                "field.v",
                "field.msg",
                "field.ts",
                "field.caller",
                "field.logger",
            ]
        );
        let own: serde_json::Value = serde_json::from_str(&lines[3]).unwrap();
        assert_eq!(
            (own["msg"].as_str(), own["field.msg"].as_str()),
            (Some("line keys"), Some("mine"))
        );
    }

    #[test]
    fn a_dependency_line_names_its_logger() {
        let lines = json_lines(|| {
            tracing::debug!(target: "h2::proto::streams", stream = 1, "send frame");
            tracing::info!("corral's own");
        });
        assert_eq!(
            keys(&lines[0]),
            ["ts", "logger", "caller", "msg", "v", "stream"]
        );
        let dependency: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(dependency["logger"], "h2::proto::streams");
        assert_eq!(keys(&lines[1]), ["ts", "caller", "msg", "v"]);
    }

    #[test]
    fn hints_are_written_as_klog_writes_them() {
        let lines = json_lines(|| {
            let hint = r#"{"NUMANodeAffinity":1,"Preferred":true}"#;
            tracing::info!(bestHint = %hint, pod = "default/web", "Best TopologyHint");
            tracing::info!(hints = %"null", cpuHints = %"[]", "TopologyHints");
            tracing::info!(hints = %"not json", "TopologyHints");
        });
        let best: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(
            best["bestHint"],
            serde_json::json!({"NUMANodeAffinity": 1, "Preferred": true})
        );
        let none: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
        assert_eq!(
            (none["hints"].clone(), none["cpuHints"].clone()),
            (serde_json::Value::Null, serde_json::json!([]))
        );
        let text: serde_json::Value = serde_json::from_str(&lines[2]).unwrap();
        assert_eq!(text["hints"], "not json");
    }

    #[test]
    fn the_verbosity_opens_corral_and_not_its_dependencies() {
        let emit = || {
            tracing::trace!(target: "h2::proto::streams", "h2 internals");
            tracing::debug!(target: "hyper_util::client", "hyper internals");
            tracing::info!(target: "tonic::transport", "tonic internals");
            tracing::warn!(target: "h2::proto::connection", "h2 warns");
            tracing::trace!(target: "corral_topology::topologymanager", "corral library");
            tracing::trace!(target: "corral::server", "corral binary");
        };
        let messages = |lines: Vec<String>| -> Vec<String> {
            lines
                .iter()
                .map(|line| {
                    serde_json::from_str::<serde_json::Value>(line).unwrap()["msg"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                })
                .collect()
        };
        let at_v4 = messages(filtered_json_lines(
            &super::super::default_filter(0, Some(4)),
            emit,
        ));
        assert_eq!(at_v4, ["h2 warns", "corral library", "corral binary"]);
        let at_v0 = messages(filtered_json_lines(
            &super::super::default_filter(0, None),
            emit,
        ));
        assert_eq!(at_v0, ["h2 warns"]);
        // RUST_LOG's directives, when given, are the filter: they can open a dependency.
        let asked = messages(filtered_json_lines("warn,corral=trace,h2=trace", emit));
        assert_eq!(
            asked,
            [
                "h2 internals",
                "h2 warns",
                "corral library",
                "corral binary"
            ]
        );
    }

    #[test]
    fn span_fields_keep_the_order_they_were_recorded_in() {
        let lines = json_lines(|| {
            let span = tracing::info_span!(
                "Allocate",
                pod = "default/web",
                podUID = "0b5c",
                containerName = "app",
                late = tracing::field::Empty
            );
            span.record("late", 3);
            let _entered = span.enter();
            tracing::info!(numCPUs = 4, "AllocateCPUs");
        });
        assert_eq!(
            keys(&lines[0]),
            [
                "ts",
                "caller",
                "msg",
                "v",
                "pod",
                "podUID",
                "containerName",
                "late",
                "numCPUs"
            ]
        );
        let line: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(
            (line["late"].clone(), line["pod"]["name"].clone()),
            (3.into(), "web".into())
        );
    }
}
