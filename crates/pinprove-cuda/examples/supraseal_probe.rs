//! Diagnostic: one supraseal-c2 proof through the crate's own Rust wrapper,
//! from heap memory, touching no other CUDA call first ("plain"), or through
//! pinprove's backend from pinned pool buffers ("backend").
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use blstrs::Scalar;
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
use pinprove_groth16::shape::CircuitShape;
use pinprove_groth16::synthetic::write_synthetic_params;
use pinprove_groth16::{AbcLayout, Backend, CapacityHints, ProofBatch, Srs, synthesize};
use pinprove_mem::{HeapAllocator, MemoryBudget, PinnedPool, PoolConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("plain");
    let log: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let heap = PinnedPool::new(
        Arc::new(HeapAllocator::default()),
        MemoryBudget::new(64 << 30),
        PoolConfig::default(),
    );
    let c = BenchCircuit::new(1 << log, WitnessMix::Random).unwrap();
    let hints = CapacityHints::in_memory();
    let (asg, _) = synthesize(c.clone(), &c.id(), &heap, &hints, AbcLayout::Exact, None).unwrap();
    let path = std::env::temp_dir().join("probe.params");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    write_synthetic_params(&CircuitShape::of(&asg), &mut f).unwrap();
    f.flush().unwrap();
    drop(f);
    eprintln!("params written");
    let t = Instant::now();
    match mode {
        "plain" => {
            let srs = supraseal_c2::SRS::try_new(path.clone(), false).unwrap_or_else(|e| panic!("{}", String::from(e)));
            eprintln!("srs loaded {:?}", t.elapsed());
            let d = asg.densities();
            let (ad, bi, bd) = (&d.a_aux, &d.b_input, &d.b_aux);
            let mut proofs = vec![[0u64; 48]; 1];
            supraseal_c2::generate_groth16_proof(
                &[asg.a().unwrap().as_ptr()],
                &[asg.b().unwrap().as_ptr()],
                &[asg.c().unwrap().as_ptr()],
                asg.num_constraints(),
                &[asg.inputs().as_ptr()],
                &[asg.aux().as_ptr()],
                asg.num_inputs(),
                asg.num_aux(),
                ad.words(),
                bi.words(),
                bd.words(),
                ad.total(),
                bi.total(),
                bd.total(),
                1,
                &[Scalar::from(3u64)],
                &[Scalar::from(5u64)],
                &mut proofs,
                &srs,
            );
            eprintln!("plain proof done {:?}", t.elapsed());
        }
        _ => {
            let gpu = pinprove_cuda::SuprasealBackend::new().unwrap();
            let srs = Arc::new(Srs::read_file_header(&path).unwrap());
            gpu.prove(ProofBatch::new(
                srs,
                vec![asg],
                vec![(Scalar::from(3u64), Scalar::from(5u64))],
            ))
            .unwrap();
            eprintln!("backend proof done {:?}", t.elapsed());
        }
    }
}
