//! Links the CUDA runtime when the `cuda` feature is on.
//!
//! The toolkit is looked up in this order: `PINPROVE_CUDA_HOME`, `CUDA_HOME`,
//! `CUDA_PATH`, the folder `scripts/install-cuda-toolchain` fills inside the
//! workspace, then `/usr/local/cuda`. The runtime is linked statically so the
//! binary starts on machines without any CUDA library; the driver
//! (`libcuda.so`) is opened by the runtime at first use, and its absence is an
//! ordinary error the allocator turns into a heap fallback.
//!
//! The toolkit root is exported to dependent build scripts as
//! `DEP_PINPROVE_MEM_CUDART_ROOT`, so the whole process links one runtime.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in ["PINPROVE_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }

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
    println!("cargo:root={}", root.display());
}

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

fn has_cudart(root: &Path) -> bool {
    ["lib64", "lib"]
        .iter()
        .any(|d| root.join(d).join("libcudart_static.a").is_file())
}

fn workspace_root() -> Option<PathBuf> {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    // crates/pinprove-mem -> workspace root
    manifest.parent()?.parent().map(Path::to_path_buf)
}
