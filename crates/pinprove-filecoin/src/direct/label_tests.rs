//! The label replica against storage-proofs' `create_label_circuit`, with
//! its inputs made the way the PoRep circuit makes them.

use bellpepper_core::boolean::Boolean;
use bellpepper_core::num::AllocatedNum;
use bellperson::gadgets::uint32::UInt32;
use blstrs::Scalar;
use ff::{Field, PrimeField};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use storage_proofs_core::gadgets::uint64::UInt64;
use storage_proofs_core::util::reverse_bit_numbering;
use storage_proofs_porep::stacked::create_label_circuit;

use super::label::{self, LabelInputError, TOTAL_PARENTS};
use super::tests::{Recorder, bit_of};
use super::{Bit, Word};

/// A label's inputs, both as the circuit's gadgets and as plain values.
pub(super) struct Inputs {
    pub(super) replica_id: Scalar,
    pub(super) parents: Vec<Scalar>,
    pub(super) layer: u32,
    pub(super) node: u64,
}

impl Inputs {
    /// Parents repeated the way `StackedCircuit` expands them: 6 base
    /// parents on layer 1, 6 base and 8 expander parents after it.
    pub(super) fn random(rng: &mut ChaCha8Rng, layer: u32) -> Self {
        let distinct: Vec<Scalar> = (0..if layer == 1 { 6 } else { 14 })
            .map(|_| Scalar::random(&mut *rng))
            .collect();
        let parents = distinct.iter().cycle().take(TOTAL_PARENTS).copied().collect();
        Self {
            replica_id: Scalar::random(&mut *rng),
            parents,
            layer,
            node: rng.gen_range(0..1 << 30),
        }
    }

    /// The gadget's arguments, allocated into `cs` as the circuit does.
    pub(super) fn gadget_args(&self, cs: &mut Recorder) -> (Vec<Boolean>, Vec<Vec<Boolean>>, UInt64) {
        let mut bits = |v: Scalar| {
            let num = AllocatedNum::alloc(&mut *cs, || Ok(v)).unwrap();
            reverse_bit_numbering(num.to_bits_le(&mut *cs).unwrap())
        };
        let replica_id = bits(self.replica_id);
        let parents = self.parents.iter().map(|&p| bits(p)).collect();
        let node = UInt64::alloc(&mut *cs, Some(self.node)).unwrap();
        (replica_id, parents, node)
    }
}

fn bits(booleans: &[Boolean]) -> Vec<Bit> {
    booleans.iter().map(bit_of).collect()
}

#[test]
fn create_label_matches_the_circuit() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x1abe1);
    for layer in [1, 2, 6, 11] {
        let inputs = Inputs::random(&mut rng, layer);

        let mut cs = Recorder::default();
        let (replica_id, parents, node) = inputs.gadget_args(&mut cs);
        let start = cs.aux.len();
        let want = create_label_circuit(
            &mut cs,
            &replica_id,
            parents.clone(),
            UInt32::constant(layer),
            node.clone(),
        )
        .unwrap();
        let want_aux = cs.aux[start..].to_vec();
        assert_eq!(want_aux.last(), want.get_value().as_ref());

        // Through tagged bits.
        let parent_bits: Vec<Vec<Bit>> = parents.iter().map(|p| bits(p)).collect();
        let msg = label::label_message(
            &bits(&replica_id),
            &parent_bits,
            Word::constant(layer),
            &bits(&node.to_bits_be()),
        )
        .unwrap();
        let mut direct = Recorder::default();
        let got = label::create_label(&mut direct, &msg).unwrap();
        assert_eq!(direct.aux.len(), want_aux.len(), "layer {layer}");
        assert!(direct.aux == want_aux, "layer {layer}: allocations differ");
        assert_eq!(got.get_value(), want.get_value());

        // Through field elements.
        let parent_bytes: Vec<[u8; 32]> = inputs.parents.iter().map(|p| p.to_repr()).collect();
        let words =
            label::porep_label_message(&inputs.replica_id.to_repr(), &parent_bytes, layer, inputs.node).unwrap();
        let mut direct = Recorder::default();
        let got = label::create_porep_label(&mut direct, &words).unwrap();
        assert!(
            direct.aux == want_aux,
            "layer {layer}: allocations from elements differ"
        );
        assert_eq!(got.get_value(), want.get_value());
        let from_bits: Vec<Word> = msg.chunks(32).map(|c| Word::from_bits_be(c).unwrap()).collect();
        assert_eq!(words, from_bits);
    }
}

#[test]
fn refuses_what_the_circuit_asserts_on() {
    let id = vec![Bit::Is(true); 256];
    let parents = vec![vec![Bit::Is(false); 256]; TOTAL_PARENTS];
    let node = [Bit::Is(false); 64];
    let layer = Word::constant(1);
    assert_eq!(
        label::label_message(&id[..16], &parents, layer, &node),
        Err(LabelInputError::ReplicaId(16))
    );
    assert_eq!(
        label::label_message(&id, &parents[1..], layer, &node),
        Err(LabelInputError::ParentCount(36))
    );
    assert_eq!(
        label::label_message(&id, &parents, layer, &node[1..]),
        Err(LabelInputError::Node(63))
    );
    let mut long = parents.clone();
    long[3].push(Bit::Is(true));
    assert_eq!(
        label::label_message(&id, &long, layer, &node),
        Err(LabelInputError::MessageLength(39 * 256 + 256))
    );
    assert!(label::label_message(&id, &parents, layer, &node).is_ok());

    let mut bad = [0u8; 32];
    bad[31] = 0x80;
    let ok = [[0u8; 32]; TOTAL_PARENTS];
    assert_eq!(
        label::porep_label_message(&bad, &ok, 1, 0),
        Err(LabelInputError::ElementTooLarge(0))
    );
    assert_eq!(
        label::porep_label_message(&[0; 32], &ok[..5], 1, 0),
        Err(LabelInputError::ParentCount(5))
    );
}
