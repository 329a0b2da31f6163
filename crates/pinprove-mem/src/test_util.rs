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
