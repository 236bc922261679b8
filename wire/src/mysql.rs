//! The MySQL protocol's length-encoded integers, as the data node writes
//! them and clients (the bench's among them) read them back.

/// Appends `v` length-encoded: one byte up to 250, else a marker byte and
/// two, three or eight little-endian bytes.
pub fn put_lenenc(out: &mut Vec<u8>, v: u64) {
    match v {
        0..=250 => out.push(v as u8),
        251..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(v as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&(v as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// The length-encoded integer at the start of `p` and the bytes it took;
/// `None` if `p` is short or starts with no length marker.
pub fn lenenc(p: &[u8]) -> Option<(u64, usize)> {
    let le = |n: usize| {
        let b = p.get(1..1 + n)?;
        Some((
            b.iter().rev().fold(0u64, |v, &x| v << 8 | u64::from(x)),
            1 + n,
        ))
    };
    match *p.first()? {
        v @ 0..=250 => Some((u64::from(v), 1)),
        0xfc => le(2),
        0xfd => le(3),
        0xfe => le(8),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_width_reads_back_what_was_written() {
        for v in [
            0,
            250,
            251,
            0xffff,
            0x1_0000,
            0xff_ffff,
            0x100_0000,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_lenenc(&mut out, v);
            assert_eq!(lenenc(&out), Some((v, out.len())), "{v}");
            assert_eq!(lenenc(&out[..out.len() - 1]), None, "{v} cut short");
        }
        assert_eq!(lenenc(&[0xff]), None);
    }
}
