//! Compiles the cuzk.v1 service from `proto/` with protox (pure Rust: no
//! protoc on the build machine) into the server and client code, and
//! writes each message's field numbers, by field name, for the codec's
//! checks on the wire bytes.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The code generator does not say which files it read.
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(["cuzk/v1/proving.proto"], ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("cuzk.v1.fields.rs"), field_numbers(&fds))?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // Every request is checked on its wire bytes before it is decoded.
        .codec_path("crate::codec::BoundedCodec")
        .compile_fds(fds)?;
    Ok(())
}

/// One module per message (`submit_proof_request`), one constant per
/// field (`VANILLA_PROOFS`), read from the same descriptors prost
/// generates the types from, so the two cannot disagree.
fn field_numbers(fds: &prost_types::FileDescriptorSet) -> String {
    let mut s = String::new();
    for file in &fds.file {
        for message in &file.message_type {
            let name = message.name();
            let _ = writeln!(s, "/// The field numbers of `{name}`.\npub mod {} {{", snake(name));
            for field in &message.field {
                let _ = writeln!(
                    s,
                    "    /// `{name}.{}`.\n    pub const {}: u32 = {};",
                    field.name(),
                    field.name().to_ascii_uppercase(),
                    field.number()
                );
            }
            s.push_str("}\n");
        }
    }
    s
}

/// `SubmitProofRequest` → `submit_proof_request`, `GPUStatus` → `gpu_status`.
fn snake(camel: &str) -> String {
    let c: Vec<char> = camel.chars().collect();
    let mut s = String::new();
    for (i, &ch) in c.iter().enumerate() {
        let word_starts = i > 0
            && ch.is_ascii_uppercase()
            && (!c[i - 1].is_ascii_uppercase() || c.get(i + 1).is_some_and(|n| n.is_ascii_lowercase()));
        if word_starts {
            s.push('_');
        }
        s.push(ch.to_ascii_lowercase());
    }
    s
}
