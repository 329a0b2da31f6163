//! Which GPU pins host memory: the choice, apart from the CUDA calls that
//! act on it, so that it is tested in every build.

/// The GPU that should pin host memory from now on, when it should change:
/// the first of the `live` GPUs (those of devices not lost) unless the one
/// pinning `now` is one of them.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn pinning_gpu(now: Option<usize>, live: &[usize]) -> Option<usize> {
    match now {
        Some(o) if live.contains(&o) => None,
        _ => live.first().copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::pinning_gpu;

    #[test]
    fn pinning_moves_only_off_a_gpu_that_is_lost_or_not_ours() {
        assert_eq!(
            pinning_gpu(None, &[1, 2]),
            Some(1),
            "the engine's first GPU, not device 0"
        );
        assert_eq!(pinning_gpu(Some(2), &[1, 2]), None, "a live GPU of ours stays");
        assert_eq!(pinning_gpu(Some(0), &[1, 2]), Some(1), "GPU 0 lost: the next live one");
        assert_eq!(pinning_gpu(Some(0), &[]), None, "no live GPU: nothing better");
        assert_eq!(pinning_gpu(None, &[]), None, "the CPU backend");
    }
}
