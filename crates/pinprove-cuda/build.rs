//! Compiles pinprove's own CUDA code (`cuda/*.cu`, on sppark's templates)
//! when the `cuda` feature is on.
//!
//! Flags that matter: sppark's host-side field code calls blst's assembly,
//! so when blst is built with ADX (x86-64 with the `adx` CPU feature, as the
//! blst crate detects) nvcc must see `__ADX__` too, or `mul_mont_384` fails
//! to link; and no debug info ever, because the `cc` crate turns debug info
//! into nvcc's `-G` (unoptimized device code, under which sppark's
//! grid-synchronized kernels stall). sm_90 machine code comes from
//! `NVCC_APPEND_FLAGS` in `.cargo/config.toml`, on top of sppark's portable
//! set.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=cuda");
    #[cfg(feature = "cuda")]
    compile_cuda();
}

#[cfg(feature = "cuda")]
fn compile_cuda() {
    use std::env;
    let mut nvcc = sppark::build::ccmd();
    nvcc.debug(false);
    nvcc.define("FEATURE_BLS12_381", None);
    nvcc.define("TAKE_RESPONSIBILITY_FOR_ERROR_MESSAGE", None);
    let x86_64 = env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a == "x86_64");
    #[cfg(target_arch = "x86_64")]
    let adx = std::is_x86_feature_detected!("adx");
    #[cfg(not(target_arch = "x86_64"))]
    let adx = false;
    if x86_64 && adx {
        nvcc.define("__ADX__", None);
    }
    nvcc.file("cuda/lane.cu")
        .file("cuda/native_h.cu")
        .file("cuda/native_msm.cu")
        .file("cuda/native_spmv.cu")
        .compile("pinprove_native");
}
