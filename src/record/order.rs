//! A drain's events in time order. The ring holds them in the order they
//! were written, which is nearly time order: a record written while a
//! CPU's batch was open (a wake-up, a sending, an NMI) lands before the
//! batch's earlier events, a few places from where it belongs. The
//! standard stable sort finds no long runs in that and quicksorts (a tenth
//! of the collector's time at a passive TCP mix); moving each event back
//! past the few later ones before it costs one pass plus those moves. Many
//! CPUs writing while batches are open could displace events further:
//! past a budget of moves, the standard sort finishes the job.

use super::Event;

/// Sorts `events` by time, stably: events with equal times keep their order.
pub fn in_time_order(events: &mut [Event]) {
    let mut budget = 8 * events.len();
    for i in 1..events.len() {
        let ts = events[i].ts;
        if ts >= events[i - 1].ts {
            continue;
        }
        // Where it belongs: after the last earlier event not later than it.
        let mut j = i - 1;
        while j > 0 && events[j - 1].ts > ts {
            j -= 1;
        }
        if i - j > budget {
            events.sort_by_key(|e| e.ts);
            return;
        }
        budget -= i - j;
        events[j..=i].rotate_right(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Payload;

    fn ev(ts: u64, cpu: u32) -> Event {
        Event { ts, cpu, dropped: 0, own_ns: 0, payload: Payload::Idle { state: 0 } }
    }

    fn order(v: &[Event]) -> Vec<(u64, u32)> {
        v.iter().map(|e| (e.ts, e.cpu)).collect()
    }

    #[test]
    fn a_record_written_inside_an_open_batch_goes_back_to_its_time() {
        // CPU 0's wake-up at 25 was written before CPU 1's batch 10..40.
        let mut v = vec![ev(5, 1), ev(25, 0), ev(10, 1), ev(20, 1), ev(30, 1), ev(40, 1), ev(50, 0)];
        in_time_order(&mut v);
        assert_eq!(order(&v), vec![(5, 1), (10, 1), (20, 1), (25, 0), (30, 1), (40, 1), (50, 0)]);
    }

    #[test]
    fn equal_times_keep_their_order_and_any_input_comes_out_sorted() {
        let mut v = vec![ev(3, 7), ev(1, 1), ev(3, 8), ev(1, 2), ev(2, 0), ev(3, 9), ev(0, 5)];
        let mut want = v.clone();
        want.sort_by_key(|e| e.ts);
        in_time_order(&mut v);
        assert_eq!(order(&v), order(&want), "the same as the standard stable sort");
        // A reversed drain, the worst case, still comes out right (by the
        // standard sort, once the budget of moves is spent).
        let mut r: Vec<Event> = (0..1000u64).rev().map(|t| ev(t, 0)).collect();
        in_time_order(&mut r);
        assert!(r.windows(2).all(|w| w[0].ts <= w[1].ts));
        in_time_order(&mut []);
    }
}
