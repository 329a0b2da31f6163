//! The binary end to end, as a user and as a client run it, in one test
//! binary: the commands (`cli`), `serve` with its configuration (`serve`),
//! `pinprove serve` against hostile clients (`hostile`), and the
//! operator's install and release scripts (`install`).

mod cli;
mod hostile;
mod install;
mod serve;
