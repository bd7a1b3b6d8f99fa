//! What go-spew writes before a value: the `(type)` header, the pointer prefix (`(*T)` or
//! `<*>`), and its "ignore next type" flag that suppresses headers.

use super::Dumper;
use crate::dump_sink::DumpSink;
use crate::gotype::GoType;

impl<S: DumpSink> Dumper<'_, S> {
    /// Writes what go-spew writes before a non-nil value of type `ty` (pointer prefix, type
    /// header) and returns the underlying type the value is printed as.
    #[inline]
    pub(super) fn header(&mut self, ty: &'static GoType) -> &'static GoType {
        let mut ty = ty;
        if let GoType::Ptr(elem) = ty {
            if self.ignore_next_type {
                self.out.push_str("<*>");
            } else {
                self.type_header(ty);
            }
            self.ignore_next_type = true;
            ty = elem;
        }
        if !self.ignore_next_type {
            self.type_header(ty);
        }
        self.ignore_next_type = false;
        ty.underlying()
    }

    /// Writes a nil pointer of type `ty` (go-spew's formatPtr): `(*T)<nil>`, or `<nil>` while
    /// the flag is set, which it leaves as it was.
    #[inline]
    pub(super) fn nil_pointer(&mut self, ty: &'static GoType) {
        if !self.ignore_next_type {
            self.type_header(ty);
        }
        self.out.push_str("<nil>");
    }

    /// Writes `(type)`.
    #[inline]
    fn type_header(&mut self, ty: &'static GoType) {
        match ty {
            GoType::Struct(s) => self.bracketed(s.name),
            GoType::Named(name, _) => self.bracketed(name),
            GoType::Bool => self.out.push_str("(bool)"),
            GoType::String => self.out.push_str("(string)"),
            GoType::Int(w) => self.out.push_str(INT_HEADERS[*w as usize]),
            GoType::Uint(w) => self.out.push_str(UINT_HEADERS[*w as usize]),
            GoType::Slice(_) | GoType::Map(..) | GoType::Ptr(_) => {
                let header = match self.headers.iter().find(|(t, _)| std::ptr::eq(*t, ty)) {
                    Some((_, header)) => header,
                    None => {
                        let mut header = String::from("(");
                        ty.write_name(&mut header);
                        header.push(')');
                        self.headers.push((ty, header.into_boxed_str()));
                        &self.headers[self.headers.len() - 1].1
                    }
                };
                self.out.push_str(header);
            }
        }
    }

    #[inline]
    fn bracketed(&mut self, name: &str) {
        self.out.push_byte(b'(');
        self.out.push_str(name);
        self.out.push_byte(b')');
    }
}

/// `(int)`, `(int8)` … indexed by [`IntWidth`](crate::gotype::IntWidth) (declared `Native`, `W8`, `W16`, `W32`, `W64`).
const INT_HEADERS: [&str; 5] = ["(int)", "(int8)", "(int16)", "(int32)", "(int64)"];
/// `(uint)`, `(uint8)` … indexed by [`IntWidth`](crate::gotype::IntWidth).
const UINT_HEADERS: [&str; 5] = ["(uint)", "(uint8)", "(uint16)", "(uint32)", "(uint64)"];
