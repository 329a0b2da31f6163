//! With the `cuda` feature: links the CUDA runtime, and compiles pinprove's
//! own CUDA code (`cuda/*.cu`, on sppark's templates).
//!
//! The toolkit is looked up in this order: `PINPROVE_CUDA_HOME`, `CUDA_HOME`,
//! `CUDA_PATH`, the folder `scripts/install-cuda-toolchain` fills inside the
//! workspace, then `/usr/local/cuda`. The runtime is linked statically so the
//! binary starts on machines without any CUDA library; the driver
//! (`libcuda.so`) is opened by the runtime at first use, and its absence is an
//! ordinary error (the pool then falls back to heap memory).
//!
//! Flags that matter: sppark's host-side field code calls blst's assembly,
//! so when blst is built with ADX (x86-64 with the `adx` CPU feature, as the
//! blst crate detects) nvcc must see `__ADX__` too, or `mul_mont_384` fails
//! to link; and no debug info ever, because the `cc` crate turns debug info
//! into nvcc's `-G` (unoptimized device code, under which sppark's
//! grid-synchronized kernels stall). sm_90 machine code comes from
//! `NVCC_APPEND_FLAGS` in `.cargo/config.toml`, on top of sppark's portable
//! set.

#[cfg(feature = "cuda")]
use std::env;
#[cfg(feature = "cuda")]
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=cuda");
    for var in ["PINPROVE_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    // The kernels first, the runtime after them: a static archive must come
    // after the objects that use it on the linker's command line.
    #[cfg(feature = "cuda")]
    {
        compile_cuda();
        link_runtime();
    }
}

#[cfg(feature = "cuda")]
fn link_runtime() {
    let root = find_toolkit().unwrap_or_else(|| {
        panic!(
            "the `cuda` feature needs the CUDA 13.0 toolkit: run scripts/install-cuda-toolchain \
             from the repository root, or set CUDA_HOME to a toolkit that has lib/libcudart_static.a"
        )
    });
    let lib = ["lib64", "lib"]
        .iter()
        .map(|d| root.join(d))
        .find(|d| d.join("libcudart_static.a").is_file())
        .expect("toolkit checked for libcudart_static.a");

    println!("cargo:rerun-if-changed={}", lib.join("libcudart_static.a").display());
    println!("cargo:rustc-link-search=native={}", lib.display());
    // Not bundled into the rlib: the final link sees the archive once even
    // when other crates of the process (the GPU backends) link it as well.
    println!("cargo:rustc-link-lib=static:-bundle=cudart_static");
    for sys in ["dl", "rt", "pthread"] {
        println!("cargo:rustc-link-lib=dylib={sys}");
    }
}

#[cfg(feature = "cuda")]
fn compile_cuda() {
    let mut nvcc = sppark::build::ccmd();
    nvcc.debug(false);
    // The runtime is linked once, by `link_runtime`, with the modifiers the
    // whole process needs.
    nvcc.cudart("none");
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
        .file("cuda/msm_tables.cu")
        .file("cuda/native_spmv.cu")
        .compile("pinprove_native");
}

#[cfg(feature = "cuda")]
fn find_toolkit() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = ["PINPROVE_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(env::var_os)
        .map(PathBuf::from)
        .collect();
    if let Some(workspace) = workspace_root() {
        candidates.push(workspace.join(".cuda-toolchain/nvidia/cu13"));
    }
    candidates.push(PathBuf::from("/usr/local/cuda"));
    candidates.into_iter().find(|root| has_cudart(root))
}

#[cfg(feature = "cuda")]
fn has_cudart(root: &Path) -> bool {
    ["lib64", "lib"]
        .iter()
        .any(|d| root.join(d).join("libcudart_static.a").is_file())
}

#[cfg(feature = "cuda")]
fn workspace_root() -> Option<PathBuf> {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    // crates/pinprove-cuda -> workspace root
    manifest.parent()?.parent().map(Path::to_path_buf)
}
