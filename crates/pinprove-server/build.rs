//! Compiles the cuzk.v1 service from `proto/` with protox (pure Rust: no
//! protoc on the build machine) into the server and client code.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The code generator does not say which files it read.
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(["cuzk/v1/proving.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // Every request is checked on its wire bytes before it is decoded.
        .codec_path("crate::codec::BoundedCodec")
        .compile_fds(fds)?;
    Ok(())
}
