//! How many constraints the replaced gadgets enforce: witness-only
//! synthesis checks the constraint count against the recording, so the
//! direct parts must enforce as many (empty) constraints as the gadgets.
//!
//! The counts are taken from the gadgets themselves, once per process and
//! shape, on inputs made the way the circuit makes them (which bits are
//! constants decides what the gadgets fold; the allocated values do not
//! change their structure).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use bellpepper_core::SynthesisError;
use bellpepper_core::num::AllocatedNum;
use bellperson::gadgets::uint32::UInt32;
use blstrs::Scalar as Fr;
use ff::Field;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::sha256::Sha256Hasher;
use filecoin_hashers::{HashFunction, Hasher};
use generic_array::typenum::{U2, U11};
use pinprove_mem::sync::Recover;
use storage_proofs_core::gadgets::uint64::UInt64;
use storage_proofs_core::util::reverse_bit_numbering;
use storage_proofs_porep::stacked::{TOTAL_PARENTS, create_label_circuit};

use crate::direct::count::Counter;
pub(super) use crate::direct::count::enforce_n;

/// Constraints of `AllocatedNum::to_bits_le`.
pub(super) fn to_bits_le() -> Result<usize, SynthesisError> {
    static COUNT: OnceLock<Option<usize>> = OnceLock::new();
    let count = COUNT.get_or_init(|| {
        let mut cs = Counter::default();
        let num = AllocatedNum::alloc(&mut cs, || Ok(Fr::from(3u64))).ok()?;
        let before = cs.constraints;
        num.to_bits_le(&mut cs).ok()?;
        Some(cs.constraints - before)
    });
    count.ok_or(SynthesisError::Unsatisfiable)
}

/// Constraints of `Sha256Function::hash_multi_leaf_circuit` on two nodes.
pub(super) fn sha256_node() -> Result<usize, SynthesisError> {
    static COUNT: OnceLock<Option<usize>> = OnceLock::new();
    let count = COUNT.get_or_init(|| {
        let mut cs = Counter::default();
        let a = AllocatedNum::alloc(&mut cs, || Ok(Fr::from(5u64))).ok()?;
        let b = AllocatedNum::alloc(&mut cs, || Ok(Fr::from(7u64))).ok()?;
        let before = cs.constraints;
        <Sha256Hasher as Hasher>::Function::hash_multi_leaf_circuit::<U2, _>(&mut cs, &[a, b], 0).ok()?;
        Some(cs.constraints - before)
    });
    count.ok_or(SynthesisError::Unsatisfiable)
}

/// Constraints of `hash_single_column` on `rows` rows (2 or 11).
pub(super) fn column_hash(rows: usize) -> Result<usize, SynthesisError> {
    static COUNTS: OnceLock<Option<[usize; 2]>> = OnceLock::new();
    fn count<A: filecoin_hashers::PoseidonArity>() -> Option<usize> {
        let mut cs = Counter::default();
        let rows = (0..A::to_usize())
            .map(|_| AllocatedNum::alloc(&mut cs, || Ok(Fr::ONE)).ok())
            .collect::<Option<Vec<_>>>()?;
        let before = cs.constraints;
        <PoseidonHasher as Hasher>::Function::hash_multi_leaf_circuit::<A, _>(&mut cs, &rows, 0).ok()?;
        Some(cs.constraints - before)
    }
    let counts = COUNTS.get_or_init(|| Some([count::<U2>()?, count::<U11>()?]));
    match (counts, rows) {
        (Some([two, _]), 2) => Ok(*two),
        (Some([_, eleven]), 11) => Ok(*eleven),
        _ => Err(SynthesisError::Unsatisfiable),
    }
}

/// Constraints of `create_label_circuit` for `layer`, its arguments made as
/// the PoRep circuit makes them (the parents' decompositions not counted).
pub(super) fn label(layer: u32) -> Result<usize, SynthesisError> {
    static COUNTS: OnceLock<Mutex<HashMap<u32, usize>>> = OnceLock::new();
    let counts = COUNTS.get_or_init(Default::default);
    if let Some(&n) = counts.lock().recover().get(&layer) {
        return Ok(n);
    }
    let mut cs = Counter::default();
    let bits = |cs: &mut Counter, v: u64| -> Result<_, SynthesisError> {
        let num = AllocatedNum::alloc(&mut *cs, || Ok(Fr::from(v)))?;
        Ok(reverse_bit_numbering(num.to_bits_le(&mut *cs)?))
    };
    let replica_id = bits(&mut cs, 11)?;
    let parents = (0..TOTAL_PARENTS as u64)
        .map(|i| bits(&mut cs, 13 + i))
        .collect::<Result<Vec<_>, _>>()?;
    let node = UInt64::alloc(&mut cs, Some(17))?;
    let before = cs.constraints;
    create_label_circuit(&mut cs, &replica_id, parents, UInt32::constant(layer), node)?;
    let n = cs.constraints - before;
    counts.lock().recover().insert(layer, n);
    Ok(n)
}
