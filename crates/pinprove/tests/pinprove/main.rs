//! The binary end to end, as a user and as a client run it, in one test
//! binary: the commands (`cli`), `serve` with its configuration (`serve`),
//! and `pinprove serve` against hostile clients (`hostile`).

mod cli;
mod hostile;
mod serve;
