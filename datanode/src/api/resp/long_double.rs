//! `INCRBYFLOAT` and `HINCRBYFLOAT`'s arithmetic: the C library's long
//! double, read and printed as Redis does (`long_double.c`), so that a
//! client sees the digits Redis would answer on the same platform — an
//! `f64` answers `10.5 + 0.1` as `10.59999999999999964`, Redis `10.6`.

use std::ffi::{c_char, c_int, c_long};

unsafe extern "C" {
    fn shoal_float_check(s: *const c_char, len: usize) -> c_int;
    fn shoal_float_add(
        a: *const c_char,
        alen: usize,
        has_a: c_int,
        b: *const c_char,
        blen: usize,
        out: *mut c_char,
        cap: usize,
    ) -> c_long;
}

/// Longest sum printed: the largest long double's digits and 17 decimals
/// fit (Redis's `MAX_LONG_DOUBLE_CHARS`).
const MAX_CHARS: usize = 5 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FloatError {
    /// The value held is no float.
    Value,
    /// The increment is no float.
    Increment,
    /// The sum (or the increment) is infinite.
    NotFinite,
}

/// Whether `text` is a finite float as Redis reads one.
pub(crate) fn check(text: &[u8]) -> Result<(), FloatError> {
    // SAFETY: the pointer and length are a live slice's; the C side reads
    // only those bytes.
    match unsafe { shoal_float_check(text.as_ptr().cast(), text.len()) } {
        1 => Ok(()),
        0 => Err(FloatError::Increment),
        _ => Err(FloatError::NotFinite),
    }
}

/// `value` (0 when `None`) plus `incr`, printed as Redis prints it.
pub(crate) fn add(value: Option<&[u8]>, incr: &[u8]) -> Result<Vec<u8>, FloatError> {
    let mut out = vec![0u8; MAX_CHARS];
    let (a, alen) = value.map_or((std::ptr::null(), 0), |v| (v.as_ptr(), v.len()));
    // SAFETY: every pointer and length is a live slice's (or null with
    // length 0, which the C side does not read when `has_a` is 0); the C
    // side writes at most `out.len()` bytes into `out`.
    let len = unsafe {
        shoal_float_add(
            a.cast(),
            alen,
            c_int::from(value.is_some()),
            incr.as_ptr().cast(),
            incr.len(),
            out.as_mut_ptr().cast(),
            out.len(),
        )
    };
    match len {
        -1 => Err(FloatError::Value),
        -2 => Err(FloatError::Increment),
        // Too long to print is only reached past the largest finite value.
        -3 | -4 => Err(FloatError::NotFinite),
        n => {
            out.truncate(n as usize);
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_read_as_redis_answers_them() {
        let sum = |a: Option<&str>, b: &str| {
            add(a.map(str::as_bytes), b.as_bytes()).map(|v| String::from_utf8(v).unwrap())
        };
        assert_eq!(sum(Some("10.5"), "0.1").unwrap(), "10.6");
        assert_eq!(sum(Some("10.6"), "0.1").unwrap(), "10.7");
        assert_eq!(sum(None, "1e5").unwrap(), "100000");
        assert_eq!(sum(None, "3.0e-3").unwrap(), "0.003");
        assert_eq!(sum(None, "-0").unwrap(), "0");
        assert_eq!(sum(None, "0x10").unwrap(), "16");
        assert_eq!(sum(Some("1e3"), "1").unwrap(), "1001");
        assert_eq!(sum(Some("5"), "-5").unwrap(), "0");
        for bad in [" 1", "1 ", "", "abc", "1.5.5", "nan", "1\u{0}2"] {
            assert_eq!(sum(None, bad), Err(FloatError::Increment), "{bad:?}");
            assert_eq!(sum(Some(bad), "1"), Err(FloatError::Value), "{bad:?}");
        }
        assert_eq!(sum(None, "inf"), Err(FloatError::NotFinite));
        assert_eq!(check(b"-inf"), Err(FloatError::NotFinite));
        assert_eq!(check(b"2.5"), Ok(()));
        assert_eq!(check(&[b'1'; MAX_CHARS]), Err(FloatError::Increment));
    }
}
