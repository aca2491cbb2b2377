//! The framing of a watched CPU's region (struct jw_region in
//! bpf/jitterwatch.h, written by bpf/region.bpf.h): where each record
//! between the collector's tail and the CPU's head lies. Pure positions, no
//! memory: the reader (regions.rs) reads the headers and records these
//! say, so the arithmetic is tested here without BPF.

use super::types::jw_limits;

/// The ring's bytes (a power of two); records past its end run on into
/// the slack instead of wrapping.
pub const BYTES: u64 = jw_limits::JW_REGION_BYTES.0 as u64;
/// Room past the end: the longest record and its header.
pub const SLACK: u64 = jw_limits::JW_REGION_SLACK.0 as u64;
/// Each record's header: its length in bytes, then 0.
pub const HEADER: u64 = 8;

/// Where the header of the record at position `at` lies in the data.
pub fn header_at(at: u64) -> usize {
    (at & (BYTES - 8)) as usize
}

/// One record's place: its bytes in the data, and the position after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub start: usize,
    pub len: usize,
    pub next: u64,
}

/// The record at `at` whose header reads `header`, if it is one: a length
/// that would run past the slack, or past `head`, is not (the region was
/// written by something else than our programs, or torn); the reader then
/// gives up on what is left up to `head`.
pub fn place(at: u64, head: u64, header: u64) -> Option<Place> {
    let len = header & 0xffff_ffff;
    let next = at + HEADER + len.div_ceil(8) * 8;
    (header >> 32 == 0 && len > 0 && HEADER + len <= SLACK && next <= head).then(|| Place {
        start: header_at(at) + HEADER as usize,
        len: len as usize,
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The BPF side's writer (region_space + region_commit), over a Vec:
    /// None when the reader has not made room.
    fn write(data: &mut [u8], head: &mut u64, tail: u64, rec: &[u8]) -> Option<()> {
        let len = rec.len() as u64;
        if *head + HEADER + len - tail > BYTES {
            return None;
        }
        let off = header_at(*head);
        data[off..off + 8].copy_from_slice(&len.to_ne_bytes());
        data[off + 8..off + 8 + rec.len()].copy_from_slice(rec);
        *head += HEADER + len.div_ceil(8) * 8;
        Some(())
    }

    /// The reader's loop over `place`.
    fn read(data: &[u8], tail: &mut u64, head: u64) -> Vec<Vec<u8>> {
        let mut out = vec![];
        while *tail < head {
            let h = header_at(*tail);
            let header = u64::from_ne_bytes(data[h..h + 8].try_into().unwrap());
            let Some(p) = place(*tail, head, header) else {
                *tail = head;
                break;
            };
            out.push(data[p.start..p.start + p.len].to_vec());
            *tail = p.next;
        }
        out
    }

    #[test]
    fn records_come_back_whole_and_in_order_across_many_laps() {
        let mut data = vec![0u8; (BYTES + SLACK) as usize];
        let (mut head, mut tail) = (0u64, 0u64);
        let mut sent = 0u32;
        let mut got = 0u32;
        // Lengths of every size class our records have, odd ones too;
        // the reader falls behind by a varying number of records.
        for round in 0..3_000u32 {
            for _ in 0..(round % 97) {
                let len = 9 + (sent as usize * 37) % (SLACK as usize - 16);
                let mut rec = vec![(sent % 251) as u8; len];
                rec[..4].copy_from_slice(&sent.to_ne_bytes());
                if write(&mut data, &mut head, tail, &rec).is_none() {
                    break;
                }
                sent += 1;
            }
            for r in read(&data, &mut tail, head) {
                assert_eq!(u32::from_ne_bytes(r[..4].try_into().unwrap()), got, "record out of order or lost");
                assert!(r[4..].iter().all(|&b| b == (got % 251) as u8), "record {got} torn");
                got += 1;
            }
        }
        assert_eq!(got, sent);
        assert!(head > 10 * BYTES, "the test must wrap the region many times, wrote {head} bytes");
    }

    #[test]
    fn a_full_region_refuses_the_writer_until_read() {
        let mut data = vec![0u8; (BYTES + SLACK) as usize];
        let (mut head, mut tail) = (0u64, 0u64);
        let rec = [7u8; 120];
        let mut n = 0u64;
        while write(&mut data, &mut head, tail, &rec).is_some() {
            n += 1;
        }
        assert_eq!(n, BYTES / 128, "records of 120 bytes take 128 with their header");
        assert_eq!(read(&data, &mut tail, head).len() as u64, n);
        assert!(write(&mut data, &mut head, tail, &rec).is_some());
    }

    #[test]
    fn a_header_that_cannot_be_ours_is_refused() {
        // Past the slack, zero, a high word set, or beyond the head.
        assert_eq!(place(0, 4096, SLACK), None);
        assert_eq!(place(0, 4096, 0), None);
        assert_eq!(place(0, 4096, 1 << 32 | 16), None);
        assert_eq!(place(0, 16, 16), None);
        assert_eq!(place(0, 24, 16), Some(Place { start: 8, len: 16, next: 24 }));
        // Near the end: runs on into the slack, the next wraps to 0 by the mask.
        let at = BYTES - 8;
        let p = place(at, at + 8 + 104, 100).unwrap();
        assert_eq!((p.start, p.next), (BYTES as usize, at + 112));
        assert_eq!(header_at(p.next), 104);
    }
}
