//! Request units, DynamoDB-style: a read unit is one row read, per started
//! 4 KiB of its column values; a write unit is one row written (inserted,
//! updated or deleted), per started 1 KiB of its column values. (The data
//! node counts a row's column values without its own per-row bytes.)

/// Bytes of a row one read unit covers.
pub const READ_UNIT_BYTES: u64 = 4096;
/// Bytes of a row one write unit covers.
pub const WRITE_UNIT_BYTES: u64 = 1024;

/// Read units for reading one row of `bytes` (a missing row costs one).
pub fn read_units(bytes: u64) -> u64 {
    bytes.div_ceil(READ_UNIT_BYTES).max(1)
}

/// Write units for writing one row of `bytes` (a delete costs one).
pub fn write_units(bytes: u64) -> u64 {
    bytes.div_ceil(WRITE_UNIT_BYTES).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_per_started_block_and_at_least_one() {
        assert_eq!(read_units(0), 1);
        assert_eq!(read_units(1), 1);
        assert_eq!(read_units(4096), 1);
        assert_eq!(read_units(4097), 2);
        assert_eq!(write_units(0), 1);
        assert_eq!(write_units(1024), 1);
        assert_eq!(write_units(1025), 2);
        assert_eq!(write_units(30_000), 30);
    }
}
