use super::*;
use crate::circuits::{BenchCircuit, WitnessMix};
use bellpepper_core::{ConstraintSystem, SynthesisError};
use blstrs::Bls12;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// A circuit with what the bench circuits lack: a coefficient other than
/// ±1, a variable twice in one combination, one in A only, one in C only,
/// an input used in B, and (optionally) an aux variable in no constraint.
#[derive(Clone)]
struct Odd {
    unconstrained: bool,
    x: Option<Scalar>,
}

impl Circuit<Scalar> for Odd {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = self.x;
        let a = cs.alloc(|| "a", || x.ok_or(SynthesisError::AssignmentMissing))?;
        let out = cs.alloc_input(
            || "out",
            || {
                x.map(|x| x.square() * Scalar::from(7u64))
                    .ok_or(SynthesisError::AssignmentMissing)
            },
        )?;
        let sq = cs.alloc(
            || "sq",
            || x.map(|x| x.square()).ok_or(SynthesisError::AssignmentMissing),
        )?;
        cs.enforce(|| "sq", |lc| lc + a, |lc| lc + a, |lc| lc + sq);
        // 7·sq = out, with sq written twice in B (3 + 4).
        cs.enforce(
            || "scaled",
            |lc| lc + CS::one(),
            |lc| lc + (Scalar::from(3u64), sq) + (Scalar::from(4u64), sq),
            |lc| lc + out,
        );
        let c_only = cs.alloc(|| "c only", || x.ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(
            || "c only",
            |lc| lc + a,
            |lc| lc + out - out + CS::one(),
            |lc| lc + c_only,
        );
        if self.unconstrained {
            cs.alloc(|| "loose", || Ok(Scalar::ONE))?;
        }
        Ok(())
    }
}

fn ours<C: Circuit<Scalar>>(c: C, seed: u64) -> Vec<u8> {
    let waste = ToxicWaste::random(&mut ChaCha8Rng::seed_from_u64(seed));
    let mut out = Vec::new();
    let (_, stats) = generate(c, &waste, &mut out, &|_| {}).unwrap();
    assert_eq!(stats.bytes, out.len() as u64);
    out
}

fn bellpersons<C: Circuit<Scalar>>(c: C, seed: u64) -> Vec<u8> {
    let p = bellperson::groth16::generate_random_parameters::<Bls12, _, _>(c, &mut ChaCha8Rng::seed_from_u64(seed))
        .unwrap();
    let mut out = Vec::new();
    p.write(&mut out).unwrap();
    out
}

#[test]
fn the_same_toxic_waste_makes_bellpersons_file_byte_for_byte() {
    let odd = Odd {
        unconstrained: false,
        x: None,
    };
    assert_eq!(ours(odd.clone(), 5), bellpersons(odd, 5), "odd circuit");
    for (constraints, inputs, mix) in [(1000, 3, WitnessMix::Random), (4100, 1, WitnessMix::Bits)] {
        let c = BenchCircuit::with_inputs(constraints, inputs, mix).unwrap();
        let (a, b) = (ours(c.clone(), 9), bellpersons(c, 9));
        assert_eq!(a.len(), b.len(), "{constraints} constraints");
        assert!(a == b, "{constraints} constraints: the files differ");
    }
}

#[test]
fn an_aux_variable_in_no_constraint_is_refused_as_bellperson_refuses_it() {
    let odd = Odd {
        unconstrained: true,
        x: None,
    };
    let waste = ToxicWaste::random(&mut ChaCha8Rng::seed_from_u64(1));
    let err = generate(odd.clone(), &waste, &mut Vec::new(), &|_| {}).unwrap_err();
    assert!(matches!(err, SetupError::UnconstrainedVariable { index: 3 }), "{err:?}");
    assert!(
        bellperson::groth16::generate_random_parameters::<Bls12, _, _>(odd, &mut ChaCha8Rng::seed_from_u64(1)).is_err()
    );
}

#[test]
fn proofs_with_our_parameters_verify_and_a_wrong_input_does_not() {
    let x = Scalar::from(5u64);
    let circuit = |x| Odd {
        unconstrained: false,
        x,
    };
    let bytes = ours(circuit(None), 2);
    let params = bellperson::groth16::Parameters::<Bls12>::read(&bytes[..], true).unwrap();
    let proof =
        bellperson::groth16::create_random_proof(circuit(Some(x)), &params, &mut ChaCha8Rng::seed_from_u64(3)).unwrap();
    let pvk = bellperson::groth16::prepare_verifying_key(&params.vk);
    let out = x.square() * Scalar::from(7u64);
    assert!(bellperson::groth16::verify_proof(&pvk, &proof, &[out]).unwrap());
    assert!(!bellperson::groth16::verify_proof(&pvk, &proof, &[out + Scalar::ONE]).unwrap());
}

#[test]
fn progress_is_reported_up_to_every_point() {
    let c = BenchCircuit::new(3000, WitnessMix::Random).unwrap();
    let waste = ToxicWaste::random(&mut ChaCha8Rng::seed_from_u64(4));
    let seen = std::sync::Mutex::new(Vec::new());
    generate(c, &waste, &mut Vec::new(), &|s| seen.lock().unwrap().push(s)).unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen[..2], [SetupStage::Recording, SetupStage::Evaluating]);
    let Some(SetupStage::Points { done, total }) = seen.last().copied() else {
        panic!("no points reported: {seen:?}");
    };
    assert_eq!(done, total);
}
