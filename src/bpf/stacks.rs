//! The kernel stacks the switch programs take for `--stacks-above`, read
//! from userspace by the id each JW_STACK record names.

use libbpf_rs::{MapCore, MapFlags};

/// The kernel stacks the switch programs take (`--stacks-above`), by the
/// id their JW_STACK record names.
pub struct StackMap(pub(super) libbpf_rs::MapHandle);

impl StackMap {
    /// Stack `id`'s frames, innermost first, read once: its entry is freed
    /// for the next long run.
    pub fn take(&self, id: u32) -> Option<Vec<u64>> {
        let key = id.to_ne_bytes();
        let raw = self.0.lookup(&key, MapFlags::ANY).ok().flatten()?;
        let _ = self.0.delete(&key);
        // 8-byte addresses; the kernel zeroes those past the stack's depth.
        Some(raw.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes"))).take_while(|&a| a != 0).collect())
    }
}
