//! `--dma-latency US`: hold a CPU wake-up latency limit for the run, as
//! cyclictest does by default (at 0) and rtla timerlat does with its own
//! `--dma-latency`. The kernel's PM QoS keeps every CPU out of idle states
//! whose exit takes longer, for as long as /dev/cpu_dma_latency stays open
//! with the value written (a 32-bit integer, µs); closing it (at exit, also
//! on a crash) lifts the limit. Not held by default: jitterwatch measures
//! the machine as it is configured, and a limit the machine does not keep
//! in production would hide its idle-exit latency.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// Where the kernel takes the request.
pub const DEVICE: &str = "/dev/cpu_dma_latency";

/// The limit, held while this lives.
#[derive(Debug)]
pub struct Hold {
    _file: File,
    pub us: u32,
}

/// Opens `device` and writes `us`: the limit holds until the value drops.
pub fn hold(device: &Path, us: u32) -> Result<Hold> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(device)
        .with_context(|| format!("--dma-latency: cannot open {} (run as root, on a kernel with PM QoS)", device.display()))?;
    file.write_all(&request(us)).with_context(|| format!("--dma-latency: writing {}", device.display()))?;
    Ok(Hold { _file: file, us })
}

/// What the device takes: the limit as a native 32-bit integer (the
/// kernel also accepts text, but the binary form is what cyclictest and
/// rtla write).
pub fn request(us: u32) -> [u8; 4] {
    (us.min(i32::MAX as u32) as i32).to_ne_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_a_native_i32_written_and_held_open() {
        assert_eq!(request(0), [0; 4]);
        assert_eq!(request(7), 7i32.to_ne_bytes());
        assert_eq!(request(u32::MAX), i32::MAX.to_ne_bytes());
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("cpu_dma_latency");
        std::fs::write(&dev, b"").unwrap();
        let h = hold(&dev, 5).unwrap();
        assert_eq!(h.us, 5);
        assert_eq!(std::fs::read(&dev).unwrap(), 5i32.to_ne_bytes());
        let err = hold(&dir.path().join("missing"), 0).unwrap_err().to_string();
        assert!(err.starts_with("--dma-latency: cannot open"), "{err}");
    }
}
