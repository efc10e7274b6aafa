//! Compiles the AG-UI protobuf schema (`proto/ag_ui/*.proto`) into Rust types with `protox` (a
//! protobuf compiler in Rust, so no `protoc` binary is needed) and `prost-build`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = "proto/ag_ui";
    let files = ["events.proto", "types.proto", "patch.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={dir}/{f}");
    }
    let descriptors = protox::compile(files, [dir])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
