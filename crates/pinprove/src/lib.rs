//! What the `pinprove` binary shares with the benchmarks' binary
//! (`pinprove-bench`): logging and how sizes and times are printed; and the
//! advice `selftest` gives (a library module, so that it is tested as one).
//! The commands themselves live in the binaries.

pub mod advice;
pub mod logging;
pub mod units;
