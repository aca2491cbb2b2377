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

use anyhow::{bail, Context, Result};

/// Where the kernel takes the request.
pub const DEVICE: &str = "/dev/cpu_dma_latency";

/// The largest limit that limits anything. The kernel reads an s32 and
/// keeps the smallest request, starting from its default of 2000 s
/// (PM_QOS_CPU_LATENCY_DEFAULT_VALUE): a request of 2·10⁹ µs or more
/// changes nothing, and one past 2³¹ − 1 cannot even be written.
pub const MAX_US: u32 = 1_999_999_999;

fn range() -> String {
    format!("the kernel takes 0 to {MAX_US} µs (2000 s and over is no limit at all)")
}

/// `--dma-latency US`, refused in one line when the kernel cannot hold it.
pub fn parse(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(us) if us <= MAX_US => Ok(us),
        // Digits too many for a u32 are out of range too, not malformed.
        _ if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => Err(range()),
        _ => Err(format!("not a whole number of µs: {}", range())),
    }
}

/// The limit, held while this lives.
#[derive(Debug)]
pub struct Hold {
    _file: File,
    pub us: u32,
}

/// Opens `device` and writes `us`: the limit holds until the value drops.
pub fn hold(device: &Path, us: u32) -> Result<Hold> {
    if us > MAX_US {
        bail!("--dma-latency {us}: {}", range());
    }
    let mut file = match std::fs::OpenOptions::new().write(true).open(device) {
        Ok(f) => f,
        // The device is root's, mode 0600: the kernel checks nothing more.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            bail!("{}", crate::caps::dma_latency_denied(&device.display().to_string()))
        }
        Err(e) => return Err(e).with_context(|| format!("--dma-latency: cannot open {} (on a kernel with PM QoS)", device.display())),
    };
    file.write_all(&request(us)).with_context(|| format!("--dma-latency: writing {}", device.display()))?;
    Ok(Hold { _file: file, us })
}

/// What the device takes: the limit as a native 32-bit integer (the
/// kernel also accepts text, but the binary form is what cyclictest and
/// rtla write). `hold` has refused what is over [`MAX_US`].
pub fn request(us: u32) -> [u8; 4] {
    (us.min(MAX_US) as i32).to_ne_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_a_native_i32_written_and_held_open() {
        assert_eq!(request(0), [0; 4]);
        assert_eq!(request(7), 7i32.to_ne_bytes());
        assert_eq!(request(MAX_US), 1_999_999_999i32.to_ne_bytes());
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("cpu_dma_latency");
        std::fs::write(&dev, b"").unwrap();
        let h = hold(&dev, 5).unwrap();
        assert_eq!(h.us, 5);
        assert_eq!(std::fs::read(&dev).unwrap(), 5i32.to_ne_bytes());
        let err = hold(&dir.path().join("missing"), 0).unwrap_err().to_string();
        assert!(err.starts_with("--dma-latency: cannot open"), "{err}");
        let err = hold(&dev, 2_000_000_000).unwrap_err().to_string();
        assert!(err.contains("0 to 1999999999 µs"), "{err}");
    }

    /// `--dma-latency 2147483648` used to be taken and said as held, while
    /// the kernel got 2147483647: no limit at all (nor is anything from
    /// 2·10⁹ on). Refused with the range.
    #[test]
    fn a_limit_the_kernel_cannot_hold_is_refused_with_the_range() {
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("1999999999"), Ok(MAX_US));
        for bad in ["2000000000", "2147483647", "2147483648", "4294967296", "99999999999999999999999"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("0 to 1999999999 µs") && !e.contains("whole number"), "{bad}: {e}");
        }
        for bad in ["", "-1", "1.5", "10us", " 7"] {
            assert!(parse(bad).unwrap_err().starts_with("not a whole number"), "{bad:?}");
        }
    }
}
