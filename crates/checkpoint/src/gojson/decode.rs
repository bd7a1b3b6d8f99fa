//! `encoding/json.Unmarshal` semantics onto a [`GoValue`] guided by a [`GoType`].
//!
//! What Go does and this reproduces:
//! - object keys match struct fields by exact tag name, else case-insensitively (Go's
//!   `foldName`: ASCII case plus the few non-ASCII letters that fold onto ASCII, like
//!   U+212A KELVIN SIGN onto `K`); unknown keys are skipped;
//! - a repeated key is applied again, so the last one wins — and decoding merges into
//!   what is already there: a struct keeps fields the object does not mention, a slice
//!   element is decoded into the existing element, a map gains entries (each value
//!   decoded into a fresh zero value);
//! - `null` sets a pointer, map or slice to nil and leaves anything else unchanged;
//! - numbers must be integer literals that fit the target width; `[]byte` takes base64;
//! - the first type error is reported, with Go's message.

use super::base64;
use super::parse::Json;
use super::value::{GoValue, MapKey};
use crate::gotype::{GoStruct, GoType};

/// A decoding error, in Go's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeError {
    pub(crate) message: String,
}

enum Seg<'a> {
    Field(&'static str),
    Key(&'a str),
    Index(usize),
}

struct Ctx<'a> {
    top: &'static str,
    path: Vec<Seg<'a>>,
}

impl Ctx<'_> {
    fn type_error(&self, what: &str, ty: &GoType, detail: Option<String>) -> DecodeError {
        let mut message = format!("json: cannot unmarshal {what} into Go ");
        if self.path.is_empty() {
            message.push_str("value");
        } else {
            message.push_str("struct field ");
            message.push_str(self.top);
            for seg in &self.path {
                message.push('.');
                match seg {
                    Seg::Field(name) => message.push_str(name),
                    Seg::Key(key) => message.push_str(key),
                    Seg::Index(i) => message.push_str(&i.to_string()),
                }
            }
        }
        message.push_str(" of type ");
        ty.write_name(&mut message);
        if let Some(detail) = detail {
            message.push_str(": ");
            message.push_str(&detail);
        }
        DecodeError { message }
    }
}

/// Decodes `json` into `target` (of type `ty`) as `json.Unmarshal(data, &target)` would.
pub(crate) fn decode_into(
    json: &Json,
    ty: &'static GoType,
    target: &mut GoValue,
) -> Result<(), DecodeError> {
    let top = ty
        .as_struct()
        .map(|s| s.name.rsplit('.').next().unwrap_or(s.name))
        .unwrap_or("");
    let mut ctx = Ctx {
        top,
        path: Vec::new(),
    };
    value(json, ty, target, &mut ctx)
}

fn value<'a>(
    json: &'a Json,
    ty: &'static GoType,
    target: &mut GoValue,
    ctx: &mut Ctx<'a>,
) -> Result<(), DecodeError> {
    if let GoType::Ptr(elem) = ty {
        if matches!(json, Json::Null) {
            *target = GoValue::Nil;
            return Ok(());
        }
        if matches!(target, GoValue::Nil) {
            *target = GoValue::zero(elem);
        }
        return value(json, elem, target, ctx);
    }
    let under = ty.underlying();
    match json {
        Json::Null => {
            if matches!(under, GoType::Slice(_) | GoType::Map(..) | GoType::Ptr(_)) {
                *target = GoValue::Nil;
            }
            Ok(())
        }
        Json::Bool(b) => match under {
            GoType::Bool => {
                *target = GoValue::Bool(*b);
                Ok(())
            }
            _ => Err(ctx.type_error("bool", ty, None)),
        },
        Json::Number(raw) => number(raw, ty, target, ctx),
        Json::String(s) => match under {
            GoType::String => {
                *target = GoValue::Str(s.clone());
                Ok(())
            }
            _ if ty.is_bytes() => match base64::decode(s.as_bytes()) {
                Ok(bytes) => {
                    *target = GoValue::Bytes(bytes);
                    Ok(())
                }
                Err(at) => Err(ctx.type_error(
                    "string",
                    ty,
                    Some(format!("illegal base64 data at input byte {at}")),
                )),
            },
            _ => Err(ctx.type_error("string", ty, None)),
        },
        Json::Array(items) => match under {
            GoType::Slice(elem) => array(items, ty, elem, target, ctx),
            _ => Err(ctx.type_error("array", ty, None)),
        },
        Json::Object(members) => match under {
            GoType::Struct(s) => object_into_struct(members, s, target, ctx),
            GoType::Map(key, val) => object_into_map(members, key, val, target, ctx),
            _ => Err(ctx.type_error("object", ty, None)),
        },
    }
}

fn number(
    raw: &str,
    ty: &'static GoType,
    target: &mut GoValue,
    ctx: &mut Ctx<'_>,
) -> Result<(), DecodeError> {
    match ty.underlying() {
        GoType::Int(w) => match raw.parse::<i64>() {
            Ok(n) if w.fits_signed(n) => {
                *target = GoValue::Int(n);
                Ok(())
            }
            _ => Err(ctx.type_error(&format!("number {raw}"), ty, None)),
        },
        GoType::Uint(w) => match raw.parse::<u64>() {
            Ok(n) if w.fits_unsigned(n) => {
                *target = GoValue::Uint(n);
                Ok(())
            }
            _ => Err(ctx.type_error(&format!("number {raw}"), ty, None)),
        },
        _ => Err(ctx.type_error("number", ty, None)),
    }
}

fn array<'a>(
    items: &'a [Json],
    ty: &'static GoType,
    elem: &'static GoType,
    target: &mut GoValue,
    ctx: &mut Ctx<'a>,
) -> Result<(), DecodeError> {
    let bytes = ty.is_bytes();
    let mut current: Vec<GoValue> = match std::mem::replace(target, GoValue::Nil) {
        GoValue::Slice(v) => v,
        GoValue::Bytes(b) => b.into_iter().map(|x| GoValue::Uint(x.into())).collect(),
        _ => Vec::new(),
    };
    for (i, item) in items.iter().enumerate() {
        if i >= current.len() {
            current.push(GoValue::zero(elem));
        }
        ctx.path.push(Seg::Index(i));
        let result = value(item, elem, &mut current[i], ctx);
        ctx.path.pop();
        if let Err(err) = result {
            *target = rebuild(bytes, current);
            return Err(err);
        }
    }
    current.truncate(items.len());
    *target = rebuild(bytes, current);
    Ok(())
}

fn rebuild(bytes: bool, items: Vec<GoValue>) -> GoValue {
    if bytes {
        GoValue::Bytes(
            items
                .into_iter()
                .map(|v| match v {
                    GoValue::Uint(x) => u8::try_from(x).unwrap_or(0),
                    _ => 0,
                })
                .collect(),
        )
    } else {
        GoValue::Slice(items)
    }
}

/// Go's `foldName` for one character: ASCII upper case; the non-ASCII letters whose
/// `ToUpper(ToLower(r))` is ASCII map onto it; everything else stays itself.
fn fold_char(c: char) -> char {
    match c {
        'a'..='z' => c.to_ascii_uppercase(),
        '\u{212a}' => 'K', // KELVIN SIGN
        '\u{17f}' => 'S',  // LATIN SMALL LETTER LONG S
        '\u{131}' => 'I',  // LATIN SMALL LETTER DOTLESS I
        '\u{130}' => 'I',  // LATIN CAPITAL LETTER I WITH DOT ABOVE
        _ => c,
    }
}

fn fold_equal(key: &str, name: &str) -> bool {
    key.chars().map(fold_char).eq(name.chars().map(fold_char))
}

fn find_field(s: &GoStruct, key: &str) -> Option<usize> {
    s.fields
        .iter()
        .position(|f| f.json == key)
        .or_else(|| s.fields.iter().position(|f| fold_equal(key, f.json)))
}

fn object_into_struct<'a>(
    members: &'a [(String, Json)],
    s: &'static GoStruct,
    target: &mut GoValue,
    ctx: &mut Ctx<'a>,
) -> Result<(), DecodeError> {
    if !matches!(target, GoValue::Struct(f) if f.len() == s.fields.len()) {
        *target = GoValue::zero(&GoType::Struct(s));
    }
    for (key, json) in members {
        let Some(index) = find_field(s, key) else {
            continue;
        };
        let field = &s.fields[index];
        let Some(slot) = target.field_mut(index) else {
            continue;
        };
        ctx.path.push(Seg::Field(field.json));
        let result = value(json, field.ty, slot, ctx);
        ctx.path.pop();
        result?;
    }
    Ok(())
}

fn map_key(key: &str, key_ty: &'static GoType, ctx: &Ctx<'_>) -> Result<MapKey, DecodeError> {
    match key_ty.underlying() {
        GoType::String => Ok(MapKey::Str(key.to_owned())),
        GoType::Int(w) => match key.parse::<i64>() {
            Ok(n) if w.fits_signed(n) => Ok(MapKey::Int(n)),
            _ => Err(ctx.type_error(&format!("number {key}"), key_ty, None)),
        },
        GoType::Uint(w) => match key.parse::<u64>() {
            Ok(n) if !key.starts_with('+') && w.fits_unsigned(n) => Ok(MapKey::Uint(n)),
            _ => Err(ctx.type_error(&format!("number {key}"), key_ty, None)),
        },
        _ => Err(ctx.type_error("object", key_ty, None)),
    }
}

fn object_into_map<'a>(
    members: &'a [(String, Json)],
    key_ty: &'static GoType,
    value_ty: &'static GoType,
    target: &mut GoValue,
    ctx: &mut Ctx<'a>,
) -> Result<(), DecodeError> {
    if !matches!(target, GoValue::Map(_)) {
        *target = GoValue::Map(Default::default());
    }
    for (key, json) in members {
        let mut element = GoValue::zero(value_ty);
        ctx.path.push(Seg::Key(key));
        let result = value(json, value_ty, &mut element, ctx);
        ctx.path.pop();
        result?;
        let k = map_key(key, key_ty, ctx)?;
        if let GoValue::Map(map) = target {
            map.insert(k, element);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::cpumanager::V1 as S;
    use crate::gojson::parse::parse;
    use crate::gotype::{INT64, MAP_STRING_STRING, STRING};

    // Fields of `S` (`state.CPUManagerCheckpointV1`).
    const POLICY_NAME: usize = 0;
    const ENTRIES: usize = 2;
    const CHECKSUM: usize = 3;

    fn decode(text: &str, mut target: GoValue) -> Result<GoValue, String> {
        let json = parse(text.as_bytes()).map_err(|e| e.message)?;
        decode_into(&json, &S, &mut target).map_err(|e| e.message)?;
        Ok(target)
    }

    fn initial() -> GoValue {
        GoValue::Struct(vec![
            GoValue::Str(String::new()),
            GoValue::Str(String::new()),
            GoValue::empty(&MAP_STRING_STRING),
            GoValue::Uint(0),
        ])
    }

    #[test]
    fn case_insensitive_last_wins_unknown_ignored() {
        let v = decode(
            r#"{"POLICYNAME":"a","policyName":"b","x":[1],"checkSUM":1,"checksum":2}"#,
            initial(),
        )
        .unwrap();
        assert_eq!(v.field(POLICY_NAME), Some(&GoValue::Str("b".into())));
        assert_eq!(v.field(CHECKSUM), Some(&GoValue::Uint(2)));
        // Kelvin sign folds onto K: not a field here, but checks the folding helper.
        assert!(fold_equal("\u{212a}ey", "key"));
    }

    #[test]
    fn missing_keeps_constructor_value_null_sets_nil() {
        let v = decode(r#"{"policyName":"a"}"#, initial()).unwrap();
        assert_eq!(v.field(ENTRIES), Some(&GoValue::empty(&MAP_STRING_STRING)));
        let v = decode(r#"{"entries":null}"#, initial()).unwrap();
        assert_eq!(v.field(ENTRIES), Some(&GoValue::Nil));
        // null into a string leaves it alone.
        let v = decode(r#"{"policyName":null}"#, initial()).unwrap();
        assert_eq!(v.field(POLICY_NAME), Some(&GoValue::Str(String::new())));
    }

    #[test]
    fn duplicate_map_keys_merge() {
        let v = decode(r#"{"entries":{"a":"1"},"entries":{"b":"2"}}"#, initial()).unwrap();
        let GoValue::Map(m) = v.field(ENTRIES).unwrap() else {
            panic!()
        };
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn go_type_errors() {
        assert_eq!(
            decode(r#"{"checksum":-1}"#, initial()).unwrap_err(),
            "json: cannot unmarshal number -1 into Go struct field CPUManagerCheckpointV1.checksum of type checksum.Checksum"
        );
        assert_eq!(
            decode(r#"{"checksum":"1"}"#, initial()).unwrap_err(),
            "json: cannot unmarshal string into Go struct field CPUManagerCheckpointV1.checksum of type checksum.Checksum"
        );
        assert_eq!(
            decode(r#"{"entries":{"pod":{}}}"#, initial()).unwrap_err(),
            "json: cannot unmarshal object into Go struct field CPUManagerCheckpointV1.entries.pod of type string"
        );
        assert_eq!(
            decode(r#"[]"#, initial()).unwrap_err(),
            "json: cannot unmarshal array into Go value of type state.CPUManagerCheckpointV1"
        );
        assert!(decode("1e3", initial()).unwrap_err().contains("number"));
    }

    #[test]
    fn integer_map_keys() {
        static M: GoType = GoType::Map(&INT64, &STRING);
        let json = parse(br#"{"+5":"a","007":"b"}"#).unwrap();
        let mut v = GoValue::Nil;
        decode_into(&json, &M, &mut v).unwrap();
        let GoValue::Map(m) = v else { panic!() };
        assert_eq!(
            m.keys().cloned().collect::<Vec<_>>(),
            vec![MapKey::Int(5), MapKey::Int(7)]
        );
        let json = parse(br#"{"x":"a"}"#).unwrap();
        let mut v = GoValue::Nil;
        assert!(decode_into(&json, &M, &mut v).is_err());
    }
}
