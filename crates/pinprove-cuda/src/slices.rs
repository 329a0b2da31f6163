//! How one MSM over a query is cut into calls of bounded device memory:
//! per window of streamed bases (each call reads only the bases in its
//! window), and within a window, or over resident bases, into runs of at
//! most [`MAX_LISTED`](crate::plan::MAX_LISTED) listed scalars and as many
//! small values. Indices of listed scalars and small values ascend (split
//! writes them in base order), so a window's are one contiguous run.

// Without `cuda` only the tests use this module.
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

use std::ops::Range;

/// What a query's prepared scalars look like, for cutting.
#[derive(Clone, Copy)]
pub(crate) struct QueryShape<'a> {
    /// The query's bases.
    pub bases: usize,
    /// The listed scalars' bases (ascending); `None`: the list pairs with
    /// bases 0, 1, 2, … (as many as it holds).
    pub idx: Option<&'a [u32]>,
    /// How many scalars are listed.
    pub listed: usize,
    /// The small values' bases (ascending).
    pub small_idx: Option<&'a [u32]>,
    /// Whether the query has a bitmap of ones.
    pub ones: bool,
}

/// One MSM call: which bases it reads, and which of the query's inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CallSlice {
    /// The bases the call reads (the window's, or all resident ones).
    pub bases: Range<usize>,
    /// Its listed scalars (and indices), by position in the list.
    pub listed: Range<usize>,
    /// Its small values, by position.
    pub small: Range<usize>,
    /// The bitmap's words for `bases` (the first call of a window only).
    pub ones: Option<Range<usize>>,
}

/// Where the entries of `idx` (ascending) at bases in `window` are.
fn run_of(idx: &[u32], window: &Range<usize>) -> Range<usize> {
    let below = |b: usize| idx.partition_point(|&i| (i as usize) < b);
    below(window.start)..below(window.end)
}

/// The calls of one MSM over `q`: per window of `window` bases (`None`:
/// the bases are resident, one window of all of them), each window's
/// listed scalars and small values in runs of at most `max_listed`. Every
/// listed scalar and small value is in exactly one call, every window's
/// bitmap words in its first; a window with nothing to sum has no call.
/// Windows start at multiples of `window`, which callers keep a multiple
/// of 1024 so that each starts a bitmap block.
pub(crate) fn calls(q: &QueryShape<'_>, window: Option<usize>, max_listed: usize) -> Vec<CallSlice> {
    let max_listed = max_listed.max(1);
    let width = window.unwrap_or(q.bases).max(1);
    let mut out = Vec::new();
    for w in crate::plan::windows(q.bases, width) {
        let listed = match q.idx {
            Some(idx) => run_of(idx, &w),
            None => w.start.min(q.listed)..w.end.min(q.listed),
        };
        let small = q.small_idx.map_or(0..0, |s| run_of(s, &w));
        let ones = q.ones.then(|| w.start / 32..w.end.div_ceil(1024) * 32);
        let runs = listed
            .len()
            .div_ceil(max_listed)
            .max(small.len().div_ceil(max_listed))
            .max(1);
        for r in 0..runs {
            let cut = |range: &Range<usize>| {
                let start = (range.start + r * max_listed).min(range.end);
                start..(start + max_listed).min(range.end)
            };
            let call = CallSlice {
                bases: w.clone(),
                listed: cut(&listed),
                small: cut(&small),
                ones: if r == 0 { ones.clone() } else { None },
            };
            if !call.listed.is_empty() || !call.small.is_empty() || call.ones.is_some() {
                out.push(call);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed scalar and small value in exactly one call, within
    /// its call's bases; ones once per window; runs bounded.
    fn check(q: &QueryShape<'_>, window: Option<usize>, max: usize) -> Vec<CallSlice> {
        let calls = calls(q, window, max);
        let mut listed = vec![0u32; q.listed];
        let mut small = vec![0u32; q.small_idx.map_or(0, <[u32]>::len)];
        for c in &calls {
            assert!(c.listed.len() <= max && c.small.len() <= max, "{c:?}");
            for i in c.listed.clone() {
                listed[i] += 1;
                let base = q.idx.map_or(i, |x| x[i] as usize);
                assert!(c.bases.contains(&base), "{c:?}: listed {i} at base {base}");
            }
            for i in c.small.clone() {
                small[i] += 1;
                assert!(c.bases.contains(&(q.small_idx.unwrap()[i] as usize)), "{c:?}");
            }
            if let Some(words) = &c.ones {
                assert_eq!(words.start * 32, c.bases.start, "a window starts a bitmap block");
                assert!(words.end * 32 >= c.bases.end);
            }
        }
        assert!(listed.iter().all(|&n| n == 1), "{listed:?}");
        assert!(small.iter().all(|&n| n == 1), "{small:?}");
        if q.ones {
            let windows = window.map_or(1, |w| q.bases.div_ceil(w));
            assert_eq!(calls.iter().filter(|c| c.ones.is_some()).count(), windows);
        }
        calls
    }

    #[test]
    fn resident_bases_take_one_call_unless_the_list_is_long() {
        let idx: Vec<u32> = (0..10_000).step_by(3).collect();
        let small: Vec<u32> = (1..10_000).step_by(7).collect();
        let q = QueryShape {
            bases: 10_000,
            idx: Some(&idx),
            listed: idx.len(),
            small_idx: Some(&small),
            ones: true,
        };
        assert_eq!(check(&q, None, 1 << 20).len(), 1);
        let calls = check(&q, None, 1000);
        assert_eq!(calls.len(), 4, "3334 listed in runs of 1000");
        assert!(calls.iter().all(|c| c.bases == (0..10_000)));
    }

    #[test]
    fn streamed_bases_cut_every_input_at_its_windows() {
        let idx: Vec<u32> = [0, 5, 1023, 1024, 4000, 4095, 4096, 9999].to_vec();
        let small: Vec<u32> = [2, 2048, 8191].to_vec();
        let q = QueryShape {
            bases: 10_000,
            idx: Some(&idx),
            listed: idx.len(),
            small_idx: Some(&small),
            ones: true,
        };
        let calls = check(&q, Some(4096), 3);
        assert_eq!(calls[0].bases, 0..4096);
        assert_eq!(calls[0].listed, 0..3);
        assert_eq!(calls[1].listed, 3..6, "the rest of the first window's six");
        assert_eq!(calls.last().unwrap().bases, 8192..10_000);
        // A dense list pairs with the bases in order.
        let dense = QueryShape {
            bases: 10_000,
            idx: None,
            listed: 10_000,
            small_idx: None,
            ones: false,
        };
        let calls = check(&dense, Some(4096), 1 << 20);
        assert_eq!(
            calls.iter().map(|c| c.listed.clone()).collect::<Vec<_>>(),
            vec![0..4096, 4096..8192, 8192..10_000]
        );
    }

    #[test]
    fn a_window_with_nothing_to_sum_has_no_call() {
        let idx: Vec<u32> = vec![9000];
        let q = QueryShape {
            bases: 10_000,
            idx: Some(&idx),
            listed: 1,
            small_idx: None,
            ones: false,
        };
        let calls = check(&q, Some(4096), 100);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].bases, 8192..10_000);
    }
}
