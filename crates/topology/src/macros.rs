//! Macros shared by the crate's modules.

/// For a fieldless enum: `as_str` (documented by the given doc comment) mapping each variant
/// to its string, and `Display` printing that string.
macro_rules! enum_strings {
    ($(#[$doc:meta])* $ty:ident { $($variant:ident => $text:literal,)* }) => {
        impl $ty {
            $(#[$doc])*
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $text,)*
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
