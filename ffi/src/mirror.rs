//! Generated conversions between the C mirrors and the Rust types they
//! mirror. The mirrors themselves are written out (cbindgen reads them and
//! does not expand macros); these macros derive every conversion from one
//! list per type, checked exhaustive by the compiler in both directions.

/// A C enum: a `uint32_t` a caller passes in becomes one only through
/// [`CEnum::from_u32`], which refuses every other value.
pub(crate) trait CEnum: Sized {
    /// The mirror value `v` names, or `RY_STATUS_INVALID_ARGUMENT` naming
    /// the argument (`what`).
    fn from_u32(v: u32, what: &str) -> crate::error::Result<Self>;

    /// The value `v` names, as the Rust type it mirrors.
    fn to_core<K: From<Self>>(v: u32, what: &str) -> crate::error::Result<K> {
        Self::from_u32(v, what).map(K::from)
    }
}

/// The conversions of a C enum mirror, from one list of its variants:
/// `mirror!(ry_x <=> Core: A, B)` gives `From` both ways (each an
/// exhaustive `match`, so a variant missing on either side does not
/// compile) and [`CEnum`]; `mirror!(ry_x: A, B)` only [`CEnum`] (the list
/// is checked exhaustive too).
macro_rules! mirror {
    ($c:ident <=> $core:ident: $($v:ident),+ $(,)?) => {
        impl From<$core> for $c {
            fn from(v: $core) -> Self {
                match v { $($core::$v => $c::$v),+ }
            }
        }
        impl From<$c> for $core {
            fn from(v: $c) -> Self {
                match v { $($c::$v => $core::$v),+ }
            }
        }
        $crate::mirror::mirror!($c: $($v),+);
    };
    ($c:ident: $($v:ident),+ $(,)?) => {
        impl $crate::mirror::CEnum for $c {
            fn from_u32(v: u32, what: &str) -> $crate::error::Result<Self> {
                const _: fn($c) = |v| match v { $($c::$v => ()),+ };
                $(if v == $c::$v as u32 {
                    return Ok($c::$v);
                })+
                Err($crate::error::Error::invalid(format_args!(
                    concat!("{}: {} is not a valid ", stringify!($c)), what, v
                )))
            }
        }
    };
}
pub(crate) use mirror;

/// `From<Core> for Mirror` for a C struct whose fields repeat a Rust
/// struct's (same names; each converted with `Into`):
/// `mirror_struct!(ry_x <= Core { a, b; c })` also names the Rust fields the
/// C struct leaves out (`c`). The Rust struct is destructured without
/// `..`, so a field added to it does not compile until it is either in the
/// mirror or listed as left out.
macro_rules! mirror_struct {
    ($c:ident <= $core:ident { $($f:ident),+ $(; $($skip:ident),+)? $(,)? }) => {
        impl From<$core> for $c {
            fn from(v: $core) -> Self {
                let $core { $($f,)+ $($($skip: _,)+)? } = v;
                $c { $($f: $f.into()),+ }
            }
        }
    };
}
pub(crate) use mirror_struct;
