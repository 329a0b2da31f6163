//! Speed of the direct PoRep witness at 32 GiB, the figure the WindowPoSt
//! witness is compared with (`post::bench`), release mode, by hand:
//! `cargo test --release -p pinprove-filecoin --lib direct::porep::bench -- --ignored --nocapture`.

use std::time::Instant;

use filecoin_proofs::SectorShape32GiB;
use filecoin_proofs_api::seal::VanillaSealProof;

use super::PoRepWitness;
use super::tests::{c1_output, partition};
use crate::direct::tests::Recorder;

/// The first partition of a synthetic 32 GiB C1 output, its first
/// `PINPROVE_BENCH_CHALLENGES` challenges (default `default`; all if more).
fn first_partition(default: usize) -> PoRepWitness<SectorShape32GiB> {
    let challenges: usize = std::env::var("PINPROVE_BENCH_CHALLENGES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    let c1 = c1_output(32 << 30);
    let VanillaSealProof::StackedDrg32GiBV1(parts) = &c1.vanilla_proofs else {
        panic!("not a 32 GiB C1 output");
    };
    let (_, mut witness) = partition::<SectorShape32GiB>(&c1, &parts[0], 0);
    witness.challenges.truncate(challenges.max(1));
    witness
}

#[inline(never)]
fn one_pass(witness: &PoRepWitness<SectorShape32GiB>, cs: &mut Recorder) {
    witness.synthesize(cs).unwrap();
}

/// One pass (`PINPROVE_BENCH_CHALLENGES` challenges, default 1), for
/// instruction counts:
/// `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*one_pass*' <test binary>
/// direct::porep::bench::instructions --ignored --exact`.
#[test]
#[ignore = "for callgrind: run by hand"]
fn instructions() {
    let witness = first_partition(1);
    // Poseidon's constants and the gadgets' constraint counts are made on
    // first use, outside the pass counted.
    let mut cs = Recorder::default();
    witness.synthesize(&mut cs).unwrap();
    cs = Recorder::default();
    one_pass(&witness, &mut cs);
    println!("{} challenges, {} aux values", witness.challenges.len(), cs.aux.len());
}

#[test]
#[ignore = "benchmark; run in release with --ignored --nocapture"]
fn bench_porep_witness_at_32gib() {
    let witness = first_partition(usize::MAX);
    // Into a buffer faulted in already (as pool buffers are); the first
    // pass also counts the gadgets' constraints per shape, once.
    let mut cs = Recorder::default();
    one_pass(&witness, &mut cs);
    let aux = cs.aux.len();
    let mut times: Vec<f64> = (0..3)
        .map(|_| {
            cs.inputs.clear();
            cs.aux.clear();
            cs.constraints = 0;
            let t = Instant::now();
            one_pass(&witness, &mut cs);
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let s = times[1];
    println!(
        "32 GiB PoRep partition, {} challenges: {aux} aux values, {} constraints; one core {s:.3} s, {:.1} ns per \
         aux value",
        witness.challenges.len(),
        cs.constraints,
        s / aux as f64 * 1e9
    );
}
