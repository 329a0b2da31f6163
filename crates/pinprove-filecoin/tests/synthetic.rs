//! Synthetic inputs and parameters: the shapes they give are the real
//! circuits' shapes, they prove through the engine, and at production size
//! every kind's circuits build from them.

mod common;

use common::*;
use pinprove_filecoin::kind::circuit_id;
use pinprove_filecoin::synthetic::{self, circuit_shape};
use pinprove_filecoin::{FilecoinOptions, ProofKind};
use pinprove_groth16::Srs;

#[test]
fn blank_shapes_are_the_shapes_of_the_generated_parameters() {
    // The real 2 KiB parameters (made by bellperson's generator from the
    // same blank circuits) have exactly the query lengths the blank shape
    // gives: synthetic parameters have the shape real ones would.
    let prover = prover(8 << 30);
    for kind in ProofKind::ALL {
        let id = circuit_id(kind, 2048).unwrap();
        let path = prover.register(&id).unwrap().expect("a parameter file");
        let real = Srs::read_file_header(&path).unwrap();
        let shape = circuit_shape(kind, 2048).unwrap();
        assert_eq!(&shape.lengths().unwrap(), real.lengths(), "{id}");
        assert_eq!(shape.inputs, real.vk().ic.len(), "{id}");
    }
}

#[test]
fn synthetic_requests_prove_through_the_engine_with_synthetic_parameters() {
    let prover = prover_with(
        8 << 30,
        FilecoinOptions {
            synthetic_inputs: true,
            ..FilecoinOptions::default()
        },
    );
    for (kind, seed) in [
        (ProofKind::WinningPoSt, 1),
        (ProofKind::WindowPoSt, 2),
        (ProofKind::SnapDeals, 3),
        (ProofKind::PoRep, 4),
    ] {
        let req = synthetic::request(kind, 2048, seed).unwrap();
        let proved = prover.prove(&req).unwrap();
        assert_eq!(proved.proof.len(), 192, "{kind}");
        assert!(
            proved.verification.is_none(),
            "{kind}: synthetic proofs are not verified"
        );
        // The real circuit ran: as many constraints as its parameters say.
        let id = circuit_id(kind, 2048).unwrap();
        let learned = prover.engine().hints().get(&id).unwrap();
        assert_eq!(
            learned.constraints,
            circuit_shape(kind, 2048).unwrap().constraints,
            "{id}"
        );
        // The same seed gives the same request.
        let again = synthetic::request(kind, 2048, seed).unwrap();
        assert_eq!(again.vanilla_proofs, req.vanilla_proofs);
        assert_eq!(again.vanilla_proof, req.vanilla_proof);
    }
    assert_idle(prover.engine(), "synthetic");
}

#[test]
fn production_size_synthetic_requests_build_every_partition() {
    let prover = prover_with(
        8 << 30,
        FilecoinOptions {
            synthetic_inputs: true,
            ..FilecoinOptions::default()
        },
    );
    for (kind, partitions) in [
        (ProofKind::WinningPoSt, 1),
        (ProofKind::WindowPoSt, 1),
        (ProofKind::SnapDeals, 16),
        (ProofKind::PoRep, 10),
    ] {
        let req = synthetic::request(kind, 32 << 30, 7).unwrap();
        let prepared = prover.prepare(&req).unwrap();
        assert_eq!(prepared.partitions(), partitions, "{kind}");
        assert_eq!(prepared.circuit_id(), circuit_id(kind, 32 << 30).unwrap());
    }
    // Without the synthetic flag, the vanilla checks refuse them.
    let checking = common::prover(1 << 30);
    let req = synthetic::request(ProofKind::WinningPoSt, 32 << 30, 7).unwrap();
    let Err(err) = checking.prepare(&req) else {
        panic!("a synthetic request passed the vanilla checks");
    };
    assert!(err.is_bad_input(), "{err}");
}
