//! The one checked reader of little-endian integers in bytes read from disk.
//!
//! Every on-disk format (database pages and their checksums, the flush map, the log's generation
//! headers and frames, the instance's log records) reads its integers through these functions.
//! Each returns `None` when `bytes` holds fewer than the integer's width from `offset` (or the
//! offset overflows): short input is damage, and the caller turns it into its own typed error.
//! None of them panics, whatever the input.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

/// `N` bytes at `offset`, or `None` if `bytes` is too short.
#[inline]
pub fn array_at<const N: usize>(bytes: &[u8], offset: usize) -> Option<[u8; N]> {
    let end = offset.checked_add(N)?;
    bytes.get(offset..end)?.try_into().ok()
}

/// The little-endian u16 at `offset`, or `None` if `bytes` is too short.
#[inline]
pub fn u16_at(bytes: &[u8], offset: usize) -> Option<u16> {
    array_at(bytes, offset).map(u16::from_le_bytes)
}

/// The little-endian u32 at `offset`, or `None` if `bytes` is too short.
#[inline]
pub fn u32_at(bytes: &[u8], offset: usize) -> Option<u32> {
    array_at(bytes, offset).map(u32::from_le_bytes)
}

/// The little-endian u64 at `offset`, or `None` if `bytes` is too short.
#[inline]
pub fn u64_at(bytes: &[u8], offset: usize) -> Option<u64> {
    array_at(bytes, offset).map(u64::from_le_bytes)
}

/// The little-endian u128 at `offset`, or `None` if `bytes` is too short.
#[inline]
pub fn u128_at(bytes: &[u8], offset: usize) -> Option<u128> {
    array_at(bytes, offset).map(u128::from_le_bytes)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn bytes_reads_little_endian_at_the_offset() {
        let bytes: Vec<u8> = (1..=20).collect();
        assert_eq!(u16_at(&bytes, 1), Some(0x0302));
        assert_eq!(u32_at(&bytes, 0), Some(0x0403_0201));
        assert_eq!(u64_at(&bytes, 2), Some(0x0a09_0807_0605_0403));
        assert_eq!(
            u128_at(&bytes, 4),
            Some(u128::from_le_bytes(
                bytes[4..20].try_into().expect("16 bytes")
            ))
        );
    }

    #[test]
    fn bytes_short_input_is_none_never_a_panic() {
        let bytes = [0xffu8; 7];
        assert_eq!(u16_at(&bytes, 6), None);
        assert_eq!(u32_at(&bytes, 4), None);
        assert_eq!(u32_at(&bytes, 3), Some(u32::MAX));
        assert_eq!(u64_at(&bytes, 0), None);
        assert_eq!(u128_at(&[], 0), None);
        assert_eq!(u32_at(&bytes, usize::MAX), None);
        assert_eq!(u64_at(&bytes, usize::MAX - 3), None);
        assert_eq!(u16_at(&bytes, 100), None);
    }
}
