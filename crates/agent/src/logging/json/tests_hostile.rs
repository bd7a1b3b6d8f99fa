//! Field values made to break a JSON line: newlines, quotes, control characters, line and
//! paragraph separators, invalid UTF-8 (as `Debug` and lossy text show it), a `pod` and a
//! hint field that are not what they claim, keys named like the line's own. Each event
//! must stay one line holding one JSON object with no key twice.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::sync::{Arc, Mutex};

use tracing::Level;
use tracing_subscriber::fmt::MakeWriter;

use super::{KubernetesJson, SpanFields};

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

/// The bytes `emit` logs at TRACE.
fn logged(emit: impl FnOnce()) -> Vec<u8> {
    let buffer = Buffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(Level::TRACE)
        .with_writer(buffer.clone())
        .fmt_fields(SpanFields)
        .event_format(KubernetesJson)
        .finish();
    tracing::subscriber::with_default(subscriber, emit);
    buffer.0.lock().unwrap().clone()
}

const HOSTILE: &[&str] = &[
    "two\nlines",
    "carriage\rreturn",
    "\"quoted\" and \\backslash\\",
    "nul\0byte and \x1b[31mescape",
    "line\u{2028}separator\u{2029}paragraph",
    "}{\"msg\":\"forged\"}\n{\"ts\":0}",
    "ns/na\nme",
    "[{\"numa\":\"\\n\"}]",
];

#[test]
fn hostile_field_values_keep_each_line_one_json_object_without_repeated_keys() {
    let invalid = OsStr::from_bytes(b"bad\xff\xfe utf-8\n");
    let lossy = String::from_utf8_lossy(b"lossy\xc3\x28\n").into_owned();
    let mut events = 0;
    let bytes = logged(|| {
        for value in HOSTILE {
            let span = tracing::info_span!("decision", pod = value, msg = value, err = value);
            let _entered = span.enter();
            tracing::info!(
                pod = value,
                hints = value,
                bestHint = value,
                ts = value,
                "{value}"
            );
            tracing::error!(
                err = value,
                error = value,
                v = value,
                caller = value,
                "failed"
            );
            events += 2;
        }
        tracing::info!(path = ?invalid, lossy = %lossy, "odd bytes");
        tracing::trace!(bytes = ?b"\xff\x00\n", nan = f64::NAN, inf = f64::INFINITY, "numbers");
        tracing::warn!(big = u128::MAX, small = i128::MIN, "wide");
        events += 3;
    });
    let text = String::from_utf8(bytes).expect("the log is UTF-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), events, "{text}");
    for line in &lines {
        let value: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|err| panic!("not one JSON object ({err}): {line}"));
        assert!(value.is_object(), "{line}");
        let repeated = corral_testkit::repeated_keys(line);
        assert!(repeated.is_empty(), "{repeated:?} repeated in {line}");
    }
    // The forged object stays inside its string.
    let first: serde_json::Value = serde_json::from_str(lines[10]).unwrap();
    assert_eq!(first["msg"], HOSTILE[5], "{}", lines[10]);
}

/// A span's field recorded again (`Span::record`, twice), nested spans sharing keys, and a
/// field literally named like a renamed one (`field.msg` next to `msg`): one key each, the
/// innermost and latest value.
#[test]
fn fields_recorded_again_or_renamed_onto_each_other_appear_once() {
    let bytes = logged(|| {
        let outer = tracing::info_span!("outer", pod = "ns/outer", podUID = tracing::field::Empty);
        let _outer = outer.enter();
        outer.record("podUID", "first\n");
        outer.record("podUID", "second\"");
        let inner = tracing::info_span!("inner", pod = "ns/inner", msg = "span msg");
        let _inner = inner.enter();
        tracing::info!(
            field.msg = "literal",
            msg = "renamed",
            podUID = "event",
            "the message"
        );
    });
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        corral_testkit::repeated_keys(lines[0]).is_empty(),
        "{}",
        lines[0]
    );
    let doc: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(doc["msg"], "the message");
    assert_eq!(doc["podUID"], "event");
    assert_eq!(doc["pod"]["name"], "inner", "{}", lines[0]);
}
