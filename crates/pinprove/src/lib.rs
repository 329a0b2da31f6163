//! What the `pinprove` binary shares with the benchmarks' binary
//! (`pinprove-bench`): the built-in circuits and their parameter cache,
//! logging, and how sizes and times are printed; and the advice `selftest`
//! gives (a library module, so that it is tested as one). The commands
//! themselves live in the binaries.

pub mod advice;
pub mod builtin;
pub mod logging;
pub mod params_cache;
pub mod units;
