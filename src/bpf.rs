//! Loading, attaching and reading the BPF side. Everything here lives on the
//! collector thread: the skeleton borrows its storage and is dropped (links
//! detached) when that thread leaves its scope, on every exit path.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

use libbpf_rs::btf::types::{Struct, Typedef};
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject, RingBuffer, RingBufferBuilder};

use crate::stats::ProgStat;

mod skel {
    #![allow(clippy::all, non_camel_case_types, non_snake_case, dead_code, unused_imports)]
    include!(concat!(env!("OUT_DIR"), "/jitterwatch.skel.rs"));
}
pub use skel::types;
use skel::{JitterwatchSkel, JitterwatchSkelBuilder};

#[derive(Debug, thiserror::Error)]
pub enum TracerError {
    #[error("this kernel has no {0} tracepoint, which jitterwatch cannot do without")]
    MissingTracepoint(&'static str),
    #[error("cannot read the kernel's BTF (/sys/kernel/btf/vmlinux): {0}; jitterwatch needs a kernel built with CONFIG_DEBUG_INFO_BTF=y")]
    Btf(String),
    #[error("{what} failed: {source} (JITTERWATCH_DEBUG=1 shows libbpf's log)")]
    Bpf { what: &'static str, source: libbpf_rs::Error },
    #[error("CPU {0} is past what the BPF side can watch")]
    CpuTooLarge(usize),
}

fn bpf(what: &'static str) -> impl FnOnce(libbpf_rs::Error) -> TracerError {
    move |source| TracerError::Bpf { what, source }
}

/// The tracepoints, by the program that attaches each. All but sched_switch
/// are optional: a kernel without one gets a notice, not a failure.
const TRACEPOINTS: &[(&str, &str)] = &[
    ("on_irq_entry", "irq_handler_entry"),
    ("on_irq_exit", "irq_handler_exit"),
    ("on_softirq_entry", "softirq_entry"),
    ("on_softirq_exit", "softirq_exit"),
    ("on_work_start", "workqueue_execute_start"),
    ("on_work_end", "workqueue_execute_end"),
    ("on_hrtimer_entry", "hrtimer_expire_entry"),
    ("on_hrtimer_exit", "hrtimer_expire_exit"),
    ("on_local_timer_entry", "local_timer_entry"),
    ("on_local_timer_exit", "local_timer_exit"),
    ("on_reschedule_entry", "reschedule_entry"),
    ("on_reschedule_exit", "reschedule_exit"),
    ("on_call_function_entry", "call_function_entry"),
    ("on_call_function_exit", "call_function_exit"),
    ("on_call_function_single_entry", "call_function_single_entry"),
    ("on_call_function_single_exit", "call_function_single_exit"),
    ("on_irq_work_entry", "irq_work_entry"),
    ("on_irq_work_exit", "irq_work_exit"),
    ("on_csd_entry", "csd_function_entry"),
    ("on_csd_exit", "csd_function_exit"),
    ("on_nmi", "nmi_handler"),
];

pub struct Tracer<'obj> {
    // Before `skel`: fields drop in order, so switches detach first.
    _switch_links: Vec<Link>,
    skel: JitterwatchSkel<'obj>,
    /// Tracepoints this kernel lacks (their programs were not loaded).
    pub missing: Vec<&'static str>,
    /// Where context switches come from, for the summary and the TUI.
    pub switch_hook: SwitchHook,
}

/// How sched switches are hooked. The per-CPU perf event leaves unwatched
/// CPUs out of BPF entirely; the tracepoint runs a program on every CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwitchHook {
    PerCpuPerfEvent,
    /// The tracepoint, and why the perf event could not be used.
    Tracepoint(String),
}

impl std::fmt::Display for SwitchHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::PerCpuPerfEvent => f.write_str("per-CPU perf event (unwatched CPUs never enter BPF)"),
            Self::Tracepoint(why) => write!(f, "tp_btf/sched_switch on every CPU ({why})"),
        }
    }
}

/// A software context-switch counter on `cpu` that overflows on every switch,
/// for a BPF program to hang on.
fn open_switch_event(cpu: usize) -> std::io::Result<OwnedFd> {
    use libbpf_rs::libbpf_sys as sys;
    let mut attr = sys::perf_event_attr {
        type_: sys::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<sys::perf_event_attr>() as u32,
        config: u64::from(sys::PERF_COUNT_SW_CONTEXT_SWITCHES),
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 1;
    let cpu = i32::try_from(cpu).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: attr is a valid, fully initialised perf_event_attr that outlives the call.
    let fd = unsafe {
        libc::syscall(libc::SYS_perf_event_open, &attr as *const _, -1i32, cpu, -1i32, sys::PERF_FLAG_FD_CLOEXEC as libc::c_ulong)
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

impl<'obj> Tracer<'obj> {
    /// Opens, loads and attaches the programs, watching `cpus`.
    pub fn attach(storage: &'obj mut MaybeUninit<OpenObject>, cpus: &[usize]) -> Result<Self, TracerError> {
        // libbpf's log (verifier output...) is many lines: only on request.
        if std::env::var_os("JITTERWATCH_DEBUG").is_none() {
            libbpf_rs::set_print(None);
        }
        let btf = Btf::from_vmlinux().map_err(|e| TracerError::Btf(e.to_string()))?;
        let has = |tp: &str| btf.type_by_name::<Typedef<'_>>(&format!("btf_trace_{tp}")).is_some();
        if !has("sched_switch") {
            return Err(TracerError::MissingTracepoint("sched_switch"));
        }

        let mut open = JitterwatchSkelBuilder::default().open(storage).map_err(bpf("opening the BPF object"))?;
        let bss = open.maps.bss_data.as_deref_mut().expect("the object has a .bss");
        for &c in cpus {
            *bss.watched.get_mut(c).ok_or(TracerError::CpuTooLarge(c))? = 1;
        }
        // The perf-event program finds the runqueue via task->se.cfs_rq->rq,
        // which exists with CONFIG_FAIR_GROUP_SCHED only.
        let has_member = |ty: &str, member: &str| {
            btf.type_by_name::<Struct<'_>>(ty).is_some_and(|s| s.iter().any(|m| m.name.is_some_and(|n| n == member)))
        };
        let perf_ok = has_member("sched_entity", "cfs_rq") && has_member("cfs_rq", "rq");
        let mut missing = Vec::new();
        for mut prog in open.open_object_mut().progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            if name == "on_switch_out" {
                prog.set_autoload(perf_ok);
            } else if name == "on_sched_switch" {
                // Loaded always (it is the fallback), attached only if needed.
                prog.set_autoload(true);
                prog.set_autoattach(false);
            } else if let Some(&(_, tp)) = TRACEPOINTS.iter().find(|(p, _)| *p == name) {
                let present = has(tp);
                prog.set_autoload(present);
                if !present {
                    missing.push(tp);
                }
            }
        }
        let mut skel = open.load().map_err(bpf("loading the BPF programs"))?;
        skel.attach().map_err(bpf("attaching the BPF programs"))?;
        let (switch_hook, links) = match perf_ok.then(|| Self::attach_perf(&skel, cpus)) {
            Some(Ok(links)) => (SwitchHook::PerCpuPerfEvent, links),
            failed => {
                let why = match failed {
                    Some(Err(e)) => format!("the per-CPU perf event failed: {e}"),
                    _ => "this kernel has no CONFIG_FAIR_GROUP_SCHED".to_string(),
                };
                let link = skel.progs.on_sched_switch.attach().map_err(bpf("attaching tp_btf/sched_switch"))?;
                (SwitchHook::Tracepoint(why), vec![link])
            }
        };
        Ok(Self { _switch_links: links, skel, missing, switch_hook })
    }

    /// One perf event per watched CPU with the program on it; on error the
    /// links made so far are dropped (detached).
    fn attach_perf(skel: &JitterwatchSkel<'obj>, cpus: &[usize]) -> Result<Vec<Link>, String> {
        let mut links = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            let fd = open_switch_event(cpu).map_err(|e| format!("perf_event_open on CPU {cpu}: {e}"))?;
            let link = skel.progs.on_switch_out.attach_perf_event(fd.as_raw_fd()).map_err(|e| e.to_string())?;
            // The link closes the perf event when it is destroyed.
            let _ = fd.into_raw_fd();
            links.push(link);
        }
        Ok(links)
    }

    /// A ring-buffer reader that hands each raw record to `cb`.
    pub fn ring_buffer<'a>(&'a self, cb: impl FnMut(&[u8]) -> i32 + 'a) -> Result<RingBuffer<'a>, TracerError> {
        let mut b = RingBufferBuilder::new();
        b.add(&self.skel.maps.events, cb).map_err(bpf("opening the ring buffer"))?;
        b.build().map_err(bpf("opening the ring buffer"))
    }

    /// Stops every program from recording (they return after their lookup).
    pub fn unwatch(&self) -> Result<(), TracerError> {
        let bss = &self.skel.maps.bss;
        let zeros = vec![0u8; bss.value_size() as usize];
        bss.update(&0u32.to_ne_bytes(), &zeros, MapFlags::ANY).map_err(bpf("clearing the watched CPUs"))
    }

    /// Failed ring-buffer reservations, indexed by CPU.
    pub fn drops(&self) -> Result<Vec<u64>, TracerError> {
        let per_cpu = self
            .skel
            .maps
            .drops
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf("reading the drop counters"))?
            .unwrap_or_default();
        Ok(per_cpu.iter().map(|v| v.get(..8).map_or(0, |b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))).collect())
    }

    /// Run counts and times of each loaded program, as the kernel keeps them
    /// (non-zero only while kernel.bpf_stats_enabled=1).
    pub fn prog_stats(&self) -> Vec<ProgStat> {
        self.skel
            .object()
            .progs()
            .filter_map(|p| {
                let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
                let mut len = std::mem::size_of_val(&info) as u32;
                // SAFETY: info is a properly sized, zeroed bpf_prog_info and len says so.
                let rc = unsafe {
                    libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(std::os::fd::AsRawFd::as_raw_fd(&p.as_fd()), &mut info, &mut len)
                };
                (rc == 0).then(|| ProgStat {
                    name: p.name().to_string_lossy().into_owned(),
                    run_cnt: info.run_cnt,
                    run_time_ns: info.run_time_ns,
                })
            })
            .collect()
    }
}
