//! How a pre-compiled circuit's matrix is cut into row chunks when its
//! matrices stream from host memory (see
//! [`MatrixPlacement::Streamed`](crate::plan::MatrixPlacement)): each
//! chunk the most consecutive rows whose offsets, columns and ids fit one
//! of a proof's two chunk buffers, laid out as `cuda/native_spmv.cu`'s
//! `chunk_layout_t` lays them.

// Without `cuda` only the tests use this module.
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

/// Bytes a chunk of `rows` rows holding `nnz` entries takes in a chunk
/// buffer: `rows + 1` offsets (8 bytes each), then the columns (4), then
/// the coefficient ids (2), each part from a 16-byte boundary.
pub(crate) fn chunk_bytes(rows: u64, nnz: u64) -> u64 {
    let round16 = |n: u64| n.div_ceil(16) * 16;
    round16((rows + 1) * 8) + round16(nnz * 4) + nnz * 2
}

/// A row longer than a chunk buffer holds.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("row {row} of a matrix needs {bytes} bytes alone, more than a chunk buffer's {limit}")]
pub(crate) struct RowTooLong {
    pub(crate) row: u64,
    pub(crate) bytes: u64,
    pub(crate) limit: u64,
}

/// The row boundaries of a matrix's chunks (its `row_ptr` holds rows + 1
/// offsets): from 0 to the number of rows, increasing, each chunk the most
/// rows that fit `limit` bytes.
pub(crate) fn chunk_rows(row_ptr: &[u64], limit: u64) -> Result<Vec<u64>, RowTooLong> {
    let rows = row_ptr.len().saturating_sub(1);
    let bytes = |r0: usize, r1: usize| chunk_bytes((r1 - r0) as u64, row_ptr[r1] - row_ptr[r0]);
    let mut bounds = vec![0u64];
    let mut r0 = 0;
    while r0 < rows {
        if bytes(r0, r0 + 1) > limit {
            return Err(RowTooLong {
                row: r0 as u64,
                bytes: bytes(r0, r0 + 1),
                limit,
            });
        }
        // The last end that fits: a chunk's bytes grow with its rows.
        let (mut fits, mut over) = (r0 + 1, rows + 1);
        while over - fits > 1 {
            let mid = fits + (over - fits) / 2;
            if bytes(r0, mid) <= limit {
                fits = mid;
            } else {
                over = mid;
            }
        }
        bounds.push(fits as u64);
        r0 = fits;
    }
    Ok(bounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets of rows of the given lengths.
    fn offsets(lengths: &[u64]) -> Vec<u64> {
        std::iter::once(0)
            .chain(lengths.iter().scan(0, |end, &l| {
                *end += l;
                Some(*end)
            }))
            .collect()
    }

    fn check_chunks(row_ptr: &[u64], bounds: &[u64], limit: u64) {
        let rows = row_ptr.len() as u64 - 1;
        assert_eq!(bounds.first(), Some(&0));
        assert_eq!(bounds.last(), Some(&rows));
        for w in bounds.windows(2) {
            let (r0, r1) = (w[0] as usize, w[1] as usize);
            assert!(r1 > r0, "{bounds:?}");
            let b = chunk_bytes((r1 - r0) as u64, row_ptr[r1] - row_ptr[r0]);
            assert!(b <= limit, "{r0}..{r1}: {b} > {limit}");
            // The most rows that fit: one more would not.
            if r1 < rows as usize {
                let more = chunk_bytes((r1 + 1 - r0) as u64, row_ptr[r1 + 1] - row_ptr[r0]);
                assert!(more > limit, "{r0}..{r1} could take row {r1}");
            }
        }
    }

    #[test]
    fn chunks_cover_every_row_in_order_each_the_most_that_fit() {
        // Rows of 0 to 6 entries, in a repeating pattern.
        let lengths: Vec<u64> = (0..10_000u64).map(|r| (r * 7 + r / 3) % 7).collect();
        let row_ptr = offsets(&lengths);
        for limit in [64, 100, 1000, 4096, 1 << 20] {
            let bounds = chunk_rows(&row_ptr, limit).unwrap();
            check_chunks(&row_ptr, &bounds, limit);
        }
        // A limit above the whole matrix: one chunk.
        assert_eq!(chunk_rows(&row_ptr, 1 << 30).unwrap(), vec![0, 10_000]);
    }

    #[test]
    fn a_row_longer_than_a_buffer_is_an_error_and_empty_matrices_have_no_chunks() {
        let row_ptr = offsets(&[1, 2, 1000, 3]);
        let e = chunk_rows(&row_ptr, 512).unwrap_err();
        assert_eq!(e.row, 2);
        assert_eq!(e.bytes, chunk_bytes(1, 1000));
        assert!(e.to_string().contains("row 2"), "{e}");
        // Long enough for it: that row is a chunk of its own or shares one.
        check_chunks(
            &row_ptr,
            &chunk_rows(&row_ptr, chunk_bytes(1, 1000)).unwrap(),
            chunk_bytes(1, 1000),
        );
        assert_eq!(chunk_rows(&[0], 64).unwrap(), vec![0]);
        assert_eq!(chunk_rows(&[], 64).unwrap(), vec![0]);
    }

    #[test]
    fn chunk_bytes_aligns_each_part_as_the_kernel_reads_them() {
        // 2 rows: 3 offsets (24 -> 32 bytes); 5 entries: 20 -> 32 bytes of
        // columns, then 10 bytes of ids.
        assert_eq!(chunk_bytes(2, 5), 32 + 32 + 10);
        assert_eq!(chunk_bytes(1, 0), 16);
        assert_eq!(chunk_bytes(0, 0), 16);
    }
}
