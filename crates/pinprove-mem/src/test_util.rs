//! For tests that need a GPU (feature `test-util`, and this crate's own
//! tests).

/// Says that `test` is skipped because no GPU is usable (`why`) — or, where
/// a GPU is expected (`PINPROVE_REQUIRE_GPU=1`, which `scripts/gpu-run`
/// sets), fails it: on a GPU machine a test that cannot reach the GPU must
/// not pass by skipping.
pub fn skip_without_gpu(test: &str, why: impl std::fmt::Display) {
    if gpu_required() {
        panic!("{test}: no usable GPU ({why}), and PINPROVE_REQUIRE_GPU is set");
    }
    eprintln!("{test}: skipped, no usable GPU ({why})");
}

/// Whether `PINPROVE_REQUIRE_GPU` asks GPU tests to fail rather than skip.
pub fn gpu_required() -> bool {
    std::env::var("PINPROVE_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Says that `test` is skipped because it needs `needed` GPUs and `found`
/// are usable — or fails it where that many are expected
/// (`PINPROVE_REQUIRE_GPUS` at least `needed`; `scripts/gpu-run` sets it
/// to the machine's count). `PINPROVE_REQUIRE_GPU` alone expects one GPU,
/// not several: a one-GPU machine skips the tests of several.
pub fn skip_without_gpus(test: &str, needed: usize, found: usize) {
    let expected = std::env::var("PINPROVE_REQUIRE_GPUS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    if expected >= needed {
        panic!("{test}: needs {needed} GPUs, {found} usable, and PINPROVE_REQUIRE_GPUS is {expected}");
    }
    eprintln!("{test}: skipped, it needs {needed} GPUs and {found} are usable");
}
