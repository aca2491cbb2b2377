//! Compiles bpf/*.bpf.c into a skeleton in OUT_DIR. Against the checked-in
//! vmlinux.h of the target's architecture (bpf/x86/ or bpf/arm64/, CO-RE),
//! so the build never depends on the build machine's kernel; clang's
//! diagnostics come out as cargo warnings. Also generates the Perfetto
//! trace types from proto/perfetto_trace.proto.

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
    // The name both the -D__TARGET_ARCH_ macro (bpf_tracing.h's) and the
    // directory of the vmlinux.h use. Each vmlinux.h is in a directory of
    // its own: `#include "vmlinux.h"` would find one beside the .c first.
    let target = match arch.as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => panic!("jitterwatch has a vmlinux.h for x86_64 and aarch64 only, not {other}"),
    };

    let mut clang = vec!["-Wall".to_string(), "-Ibpf".to_string(), format!("-Ibpf/{target}"), format!("-D__TARGET_ARCH_{target}")];
    if target == "arm64" {
        // bpf/arm64/vmlinux.h is a 7.x kernel's, which is built with
        // -fms-extensions: its structs embed tagged ones as anonymous
        // members (`struct __filename_head;`), which clang otherwise drops.
        clang.extend(["-fms-extensions".to_string(), "-Wno-microsoft-anon-tag".to_string()]);
        // The instruction set the x86 object gets from Debian 12's clang 14
        // by default (v1). The arm64 build's clang (sid's, 21) defaults to
        // v3, whose 32-bit compares 6.1's verifier does not carry to the
        // 64-bit index they guard: it refused on_irq_entry ("R2 min value
        // is outside of the allowed memory range" at the batch's copy) in
        // vmtest's arm64 6.1 VM.
        clang.push("-mcpu=v1".to_string());
    }
    if let Err(e) = SkeletonBuilder::new().source(SRC).clang_args(clang).build_and_generate(&out) {
        // One line that says what to do, not a backtrace.
        panic!("building {SRC} failed: {e:#}\n(is clang installed? `cargo xtask deps` installs it)");
    }
    perfetto_types();
    println!("cargo:rerun-if-changed={PROTO}");
    // The whole directory (cargo scans a directory for any change): every
    // part of the one object and each architecture's vmlinux.h, with no
    // list of them to keep in step by hand.
    println!("cargo:rerun-if-changed=bpf");
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
