//! Generates the gRPC code of the node-to-node protocol (`proto/cluster.proto`) with a vendored
//! `protoc`, so building needs nothing beyond cargo.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY-free: build scripts are single-threaded; tonic-build reads PROTOC.
    std::env::set_var("PROTOC", protoc);
    println!("cargo:rerun-if-changed=proto/cluster.proto");
    tonic_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/cluster.proto"], &["proto"])?;
    Ok(())
}
