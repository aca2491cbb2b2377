//! Compiles bpf/*.bpf.c into a skeleton in OUT_DIR. Against the checked-in
//! bpf/vmlinux.h (CO-RE), so the build never depends on the build machine's
//! kernel; clang's diagnostics come out as cargo warnings. Also generates
//! the Perfetto trace types from proto/perfetto_trace.proto.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::util::CargoWarningFormatter;
use libbpf_cargo::SkeletonBuilder;
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;

const SRC: &str = "bpf/jitterwatch.bpf.c";
const PROTO: &str = "proto/perfetto_trace.proto";

fn main() {
    // Surface clang's diagnostics only, not libbpf-cargo's own chatter.
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .event_format(CargoWarningFormatter)
                .with_filter(Targets::new().with_target("compiler-stderr", Level::INFO)),
        )
        .init();

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("jitterwatch.skel.rs");
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets the target arch");
    let target = match arch.as_str() {
        "x86_64" => "x86",
        other => panic!("jitterwatch's vmlinux.h is x86_64 only, not {other}"),
    };

    if let Err(e) = SkeletonBuilder::new()
        .source(SRC)
        .clang_args(["-Wall".to_string(), "-Ibpf".to_string(), format!("-D__TARGET_ARCH_{target}")])
        .build_and_generate(&out)
    {
        // One line that says what to do, not a backtrace.
        panic!("building {SRC} failed: {e:#}\n(is clang installed? `cargo xtask deps` installs it)");
    }
    perfetto_types();
    for f in [
        PROTO,
        "bpf/jitterwatch.bpf.c",
        "bpf/origins.bpf.h",
        "bpf/steal.bpf.h",
        "bpf/switch.bpf.h",
        "bpf/batch.bpf.h",
        "bpf/batch.bpf.h",
        "bpf/jitterwatch.h",
        "bpf/vmlinux.h",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
}

/// prost types for the trace format. protox parses the .proto in Rust, so
/// the build needs no protoc.
fn perfetto_types() {
    let fds = match protox::compile([PROTO], ["."]) {
        Ok(f) => f,
        Err(e) => panic!("parsing {PROTO} failed: {e}"),
    };
    if let Err(e) = prost_build::Config::new().compile_fds(fds) {
        panic!("generating the Perfetto types from {PROTO} failed: {e}");
    }
}
