//! The capabilities a run needs, feature by feature, and the one line that
//! names the missing one. jitterwatch needs no root: CAP_BPF and
//! CAP_PERFMON load and attach its programs, CAP_SYSLOG lets it read the
//! kernel's function names; `--rt` and a few others add one each
//! (docs/install.md has the table, each row found by trying as uid 65534
//! with ambient capabilities). Host facts (the effective set, the limits,
//! the kernel's version) come in as values, so this is tested without them.

/// The capabilities jitterwatch asks about (numbers from
/// linux/capability.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    DacOverride = 1,
    NetBindService = 10,
    SysAdmin = 21,
    SysNice = 23,
    SysResource = 24,
    Syslog = 34,
    Perfmon = 38,
    Bpf = 39,
}

impl Cap {
    pub fn name(self) -> &'static str {
        match self {
            Self::DacOverride => "CAP_DAC_OVERRIDE",
            Self::NetBindService => "CAP_NET_BIND_SERVICE",
            Self::SysAdmin => "CAP_SYS_ADMIN",
            Self::SysNice => "CAP_SYS_NICE",
            Self::SysResource => "CAP_SYS_RESOURCE",
            Self::Syslog => "CAP_SYSLOG",
            Self::Perfmon => "CAP_PERFMON",
            Self::Bpf => "CAP_BPF",
        }
    }
}

/// An effective capability set, as /proc/self/status's `CapEff` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps(pub u64);

impl Caps {
    /// `CapEff` from the text of /proc/PID/status.
    pub fn from_status(status: &str) -> Option<Self> {
        let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
        u64::from_str_radix(hex.trim(), 16).ok().map(Self)
    }

    pub fn has(self, c: Cap) -> bool {
        self.0 & (1 << c as u32) != 0
    }

    /// Loading and attaching tracing programs: CAP_BPF and CAP_PERFMON
    /// (5.8+), or CAP_SYS_ADMIN, which implies both.
    pub fn can_trace(self) -> bool {
        self.has(Cap::SysAdmin) || (self.has(Cap::Bpf) && self.has(Cap::Perfmon))
    }
}

/// What a run will do that a capability gates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wants {
    /// `--rt PRIO`: the probe at SCHED_FIFO PRIO.
    pub rt: Option<i32>,
    /// `--bpf-stats`: the kernel's BPF run-time statistics.
    pub bpf_stats: bool,
}

/// The host facts the rules read besides the capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    pub euid: u32,
    /// RLIMIT_RTPRIO's soft limit: SCHED_FIFO up to it needs no capability.
    pub rtprio: u64,
    /// RLIMIT_MEMLOCK's hard limit (`None`: unlimited).
    pub memlock_max: Option<u64>,
    /// The kernel's version, (major, minor).
    pub kernel: (u32, u32),
}

/// What a kernel before 5.11 charges to RLIMIT_MEMLOCK for jitterwatch's
/// maps and programs (the 4 MiB ring buffer, the rest well under 1 MiB),
/// with room to spare.
pub const MEMLOCK_NEEDED: u64 = 16 << 20;

/// Where the table is, for the lines below.
const SEE: &str = "see docs/install.md";

/// Every start-up refusal for missing privilege, in the order a user fixes
/// them: the first missing one, as one line with what to do.
pub fn check(caps: Caps, host: Host, wants: Wants) -> Result<(), String> {
    if !caps.can_trace() {
        let missing: Vec<&str> = [Cap::Bpf, Cap::Perfmon].into_iter().filter(|&c| !caps.has(c)).map(Cap::name).collect();
        return Err(if host.euid != 0 {
            format!(
                "must run as root (or with CAP_BPF and CAP_PERFMON) to load its BPF programs; missing {}: run it with sudo, or grant them ({SEE})",
                missing.join(" and ")
            )
        } else {
            format!(
                "root lacks {} here (without them, e.g. in a container) to load its BPF programs: grant them or run on the host",
                missing.join(" and ")
            )
        });
    }
    // Before 5.11 BPF maps count against RLIMIT_MEMLOCK, which libbpf
    // raises to unlimited: that takes CAP_SYS_RESOURCE past the hard limit.
    if host.kernel < (5, 11) && !caps.has(Cap::SysResource) && host.memlock_max.is_some_and(|m| m < MEMLOCK_NEEDED) {
        let max = host.memlock_max.unwrap_or_default();
        return Err(format!(
            "needs CAP_SYS_RESOURCE on Linux before 5.11: its BPF maps count against RLIMIT_MEMLOCK, {} KiB here: grant it, or raise the limit to {} MiB or more (ulimit -l, LimitMEMLOCK= in a unit), or run as root",
            max >> 10,
            MEMLOCK_NEEDED >> 20
        ));
    }
    if let Some(prio) = wants.rt {
        if !caps.has(Cap::SysNice) && host.rtprio < prio as u64 {
            return Err(format!(
                "needs CAP_SYS_NICE for --rt: the probe's SCHED_FIFO {prio} takes it, or an RLIMIT_RTPRIO of {prio} or more ({} here): grant it (LimitRTPRIO= in a unit also does), or leave --rt out",
                host.rtprio
            ));
        }
    }
    if wants.bpf_stats && !caps.has(Cap::SysAdmin) {
        return Err(
            "needs CAP_SYS_ADMIN for --bpf-stats: the kernel lets only it turn on BPF run-time statistics: run as root, or leave --bpf-stats out"
                .to_string(),
        );
    }
    Ok(())
}

/// Whether a kallsyms table that came out empty is a refusal: addresses
/// read as 0 without CAP_SYSLOG (unless perf_event_paranoid ≤ 1 and
/// kptr_restrict = 0), and every work item and timer would be a bare
/// address. With CAP_SYSLOG, kptr_restrict = 2 hides them from everyone:
/// then a notice, and addresses.
pub fn symbols(caps: Caps, symbols: usize) -> Result<Option<&'static str>, String> {
    match (symbols, caps.has(Cap::Syslog)) {
        (0, false) => Err(format!(
            "needs CAP_SYSLOG to name kernel functions: /proc/kallsyms shows every address as 0 without it: grant it, or run as root ({SEE})"
        )),
        (0, true) => Ok(Some("/proc/kallsyms shows no addresses (kernel.kptr_restrict=2?): kernel functions show as addresses")),
        _ => Ok(None),
    }
}

/// The kernel's (major, minor) from its release string (`5.10.0-28-amd64`).
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.trim().split(['.', '-']);
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// `--dma-latency`'s device refused this process.
pub fn dma_latency_denied(device: &str) -> String {
    format!(
        "needs {} for --dma-latency: {device} is writable by root only: grant it, or give this user write access to the device (a udev rule), or run as root ({SEE})",
        Cap::DacOverride.name()
    )
}

/// A port under 1024 refused.
pub fn low_port_denied(addr: &str) -> String {
    format!(
        "--prometheus {addr}: needs {} for a port under 1024: pick one from 1024 up (9464 is the usual one), or grant it",
        Cap::NetBindService.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(cs: &[Cap]) -> Caps {
        Caps(cs.iter().fold(0, |a, &c| a | 1 << c as u32))
    }

    const HOST: Host = Host { euid: 65534, rtprio: 0, memlock_max: Some(8 << 20), kernel: (6, 12) };
    const BASE: [Cap; 3] = [Cap::Bpf, Cap::Perfmon, Cap::Syslog];

    #[test]
    fn capeff_is_read_from_status() {
        let status = "Name:\tjw\nCapInh:\t0000000000000000\nCapEff:\t000000c000000000\nCapBnd:\t000001ffffffffff\n";
        let c = Caps::from_status(status).unwrap();
        assert!(c.has(Cap::Bpf) && c.has(Cap::Perfmon) && !c.has(Cap::SysAdmin) && c.can_trace());
        assert_eq!(Caps::from_status("Name:\tjw\n"), None);
        assert_eq!(Caps::from_status("CapEff:\tzz\n"), None);
        assert!(caps(&[Cap::SysAdmin]).can_trace());
    }

    #[test]
    fn each_missing_capability_is_one_line_naming_it() {
        let ok = |cs: &[Cap], host: Host, wants: Wants| check(caps(cs), host, wants);
        assert_eq!(ok(&BASE, HOST, Wants::default()), Ok(()));
        let e = ok(&[Cap::Bpf], HOST, Wants::default()).unwrap_err();
        assert!(e.contains("must run as root") && e.contains("missing CAP_PERFMON:") && e.contains("sudo"), "{e}");
        let e = ok(&[], Host { euid: 0, ..HOST }, Wants::default()).unwrap_err();
        assert!(e.contains("root lacks CAP_BPF and CAP_PERFMON"), "{e}");

        let rt = Wants { rt: Some(50), ..Wants::default() };
        let e = ok(&BASE, HOST, rt).unwrap_err();
        assert!(e.starts_with("needs CAP_SYS_NICE for --rt:") && e.contains("SCHED_FIFO 50"), "{e}");
        assert_eq!(ok(&[Cap::Bpf, Cap::Perfmon, Cap::SysNice], HOST, rt), Ok(()));
        // An RLIMIT_RTPRIO that covers the priority is enough.
        assert_eq!(ok(&BASE, Host { rtprio: 50, ..HOST }, rt), Ok(()));
        assert!(ok(&BASE, Host { rtprio: 49, ..HOST }, rt).is_err());

        let stats = Wants { bpf_stats: true, ..Wants::default() };
        assert!(ok(&BASE, HOST, stats).unwrap_err().starts_with("needs CAP_SYS_ADMIN for --bpf-stats:"));
        assert_eq!(ok(&[Cap::SysAdmin], HOST, stats), Ok(()));
        for e in [dma_latency_denied("/dev/cpu_dma_latency"), low_port_denied("127.0.0.1:80")] {
            assert!(e.contains("needs CAP_") && !e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn before_5_11_the_memlock_limit_or_cap_sys_resource() {
        let old = Host { kernel: (5, 10), memlock_max: Some(64 << 10), ..HOST };
        let e = check(caps(&BASE), old, Wants::default()).unwrap_err();
        assert!(e.starts_with("needs CAP_SYS_RESOURCE on Linux before 5.11") && e.contains("64 KiB"), "{e}");
        assert_eq!(check(caps(&[Cap::Bpf, Cap::Perfmon, Cap::SysResource]), old, Wants::default()), Ok(()));
        assert_eq!(check(caps(&BASE), Host { memlock_max: None, ..old }, Wants::default()), Ok(()));
        assert_eq!(check(caps(&BASE), Host { memlock_max: Some(MEMLOCK_NEEDED), ..old }, Wants::default()), Ok(()));
        // 5.11 charges them to the memory cgroup instead.
        assert_eq!(check(caps(&BASE), Host { kernel: (5, 11), ..old }, Wants::default()), Ok(()));
    }

    #[test]
    fn an_empty_symbol_table_without_cap_syslog_is_refused() {
        let e = symbols(caps(&[Cap::Bpf, Cap::Perfmon]), 0).unwrap_err();
        assert!(e.starts_with("needs CAP_SYSLOG to name kernel functions"), "{e}");
        assert!(symbols(caps(&BASE), 0).unwrap().is_some());
        assert_eq!(symbols(caps(&[]), 150_000), Ok(None));
    }

    #[test]
    fn kernel_versions() {
        assert_eq!(kernel_version("5.10.0-28-amd64\n"), Some((5, 10)));
        assert_eq!(kernel_version("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(kernel_version("6.1"), Some((6, 1)));
        assert_eq!(kernel_version("garbage"), None);
    }
}
