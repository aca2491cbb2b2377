//! Perfetto's trace format: the types prost generates at build time from
//! proto/perfetto_trace.proto (a subset of Perfetto's published protos).
//! Public so the integration tests decode the traces jitterwatch writes.
#![allow(missing_docs, clippy::doc_lazy_continuation, clippy::enum_variant_names)]

include!(concat!(env!("OUT_DIR"), "/perfetto.protos.rs"));
