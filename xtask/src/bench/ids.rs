//! The figures of a run, as the code names them: one row each below, with
//! its id (the key of its numbers in bench-history.jsonl, and how the tables
//! number it) and its title in BENCHMARKS.md's tables. Those strings appear
//! only here, and leave only at the edges: serde writes and reads the id in
//! the history, the tables print the title. Everywhere else a figure is an
//! [`Id`], and a match on one names every figure, so a new figure cannot
//! go without its target, its verdict or its line in the summary.

use serde::{Deserialize, Serialize};

macro_rules! figures {
    ($($(#[doc = $doc:literal])* $figure:ident = $id:literal, $name:literal;)*) => {
        /// A figure. The history keys its numbers by the id (`#[serde(rename)]`,
        /// so the lines written before this enum read as they did); a line with
        /// an id not listed here does not parse (history.rs names it).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum Id {
            $($(#[doc = $doc])* #[serde(rename = $id)] $figure,)*
        }

        impl Id {
            /// Every figure, in the order the tables list them.
            pub const ALL: &[Id] = &[$(Id::$figure),*];

            /// Its name in the tables, numbered: "1b. Probe floor, `--clock tsc`".
            pub fn title(self) -> &'static str {
                match self {
                    $(Id::$figure => concat!($id, ". ", $name),)*
                }
            }
        }
    };
}

// In the tables' order, which is also the ids' sorted order: the order of
// the enum is the order serde writes a run's figures in, as it did when
// they were keyed by their id strings (a test holds the two together).
figures! {
    /// The probe's loop floor and its period between hiccups, against a
    /// bare C clock_gettime loop (+ the auto threshold).
    ProbeFloor = "1", "Probe floor";
    /// The same with `--clock tsc`.
    ProbeFloorTsc = "1b", "Probe floor, `--clock tsc`";
    /// jitterwatch's cost to a CPU it does not watch, by parts and end to
    /// end, beside bpftrace's.
    UnwatchedCost = "2", "Cost to an unwatched CPU";
    /// The BPF programs' ns per run under a switch storm.
    BpfRunTime = "3", "BPF run time per event";
    /// What jitterwatch adds to one tick and one function-call IPI of the
    /// watched CPU, seen by a plain spin loop, beside the hooks alone.
    PerInterruption = "3b", "Per interruption, end to end";
    /// The event rate drained without ring-buffer drops.
    RingCapacity = "4", "Ring-buffer capacity";
    /// The flight recorder's cost to the consumer, on and off.
    RecorderCost = "4b", "Flight recorder, consumer cost";
    /// The consumer's ns per event at a TCP ping-pong's mix, in passive mode.
    CollectorMix = "4c", "Collector at a real app's mix";
    /// jitterwatch's CPU with the live screen (80×24, 200×50) against
    /// headless, on a passive sockperf ping-pong.
    ScreenCost = "4d", "The live screen's cost";
    /// Peak RSS over a long run at a high rate.
    PeakRss = "5", "Peak RSS";
    /// From exec to the first sample and the first event.
    Startup = "6", "Start-up";
    /// Events/s per consumer core and memory per CPU, 1 to 256 CPUs, by replay.
    ManyCpus = "7", "Many CPUs, by replay";
    /// `jitterwatch explain` of 10⁶ operations against 10⁶ stalls.
    ExplainScale = "7b", "explain at a million";
    /// The wake-up probe's latencies beside cyclictest's.
    WakeupProbe = "8", "Wake-up probe vs cyclictest";
    /// cyclictest alone and watched by jitterwatch in passive mode.
    WatchedCyclictest = "8b", "cyclictest watched by jitterwatch";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id the history keys a figure by.
    fn id(f: Id) -> String {
        serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap()
    }

    #[test]
    fn the_history_keys_figures_by_their_ids() {
        assert_eq!(
            Id::ALL.iter().map(|&f| id(f)).collect::<Vec<_>>(),
            ["1", "1b", "2", "3", "3b", "4", "4b", "4c", "4d", "5", "6", "7", "7b", "8", "8b"]
        );
        for &f in Id::ALL {
            assert_eq!(serde_json::from_str::<Id>(&format!("\"{}\"", id(f))).unwrap(), f);
            assert!(f.title().starts_with(&format!("{}. ", id(f))), "{f:?}");
        }
        assert!(serde_json::from_str::<Id>("\"9\"").is_err(), "an id no figure has");
    }

    /// serde writes a run's figures in the enum's order; the history's
    /// lines have them in their ids' sorted order, as when the ids were
    /// strings.
    #[test]
    fn the_enums_order_is_the_ids_sorted_order() {
        let ids: Vec<String> = Id::ALL.iter().map(|&f| id(f)).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        assert!(Id::ALL.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn titles_read_as_the_tables_print_them() {
        assert_eq!(Id::ProbeFloorTsc.title(), "1b. Probe floor, `--clock tsc`");
        assert_eq!(Id::WatchedCyclictest.title(), "8b. cyclictest watched by jitterwatch");
    }
}
