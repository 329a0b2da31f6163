//! A challenge's circuit inputs from its vanilla proof, the values the
//! circuit's `From<vanilla::Proof>` conversion takes.

use blstrs::Scalar as Fr;
use filecoin_hashers::poseidon::{PoseidonDomain, PoseidonHasher};
use filecoin_hashers::sha256::Sha256Hasher;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_porep::stacked;

use super::{Challenge, ParentColumn, PoseidonPath};

type TreeProof<Tree> = MerkleProof<
    PoseidonHasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

/// The inputs of one challenge; the error says what does not fit.
pub(super) fn challenge<Tree>(p: &stacked::Proof<Tree, Sha256Hasher>) -> Result<Challenge, String>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let comm_d_path = p
        .comm_d_proofs
        .as_options()
        .into_iter()
        .enumerate()
        .map(|(level, (hashes, index))| match (hashes.as_slice(), index) {
            ([Some(sibling)], Some(index)) => Ok((*sibling, index & 1 == 1)),
            _ => Err(format!(
                "level {level} of the comm_d path is not one sibling and an index"
            )),
        })
        .collect::<Result<_, _>>()?;
    let columns = |proofs: &[stacked::ColumnProof<TreeProof<Tree>>]| {
        proofs.iter().map(column::<Tree>).collect::<Result<Vec<_>, _>>()
    };
    let rc = &p.replica_column_proofs;
    let drg_parents = columns(&rc.drg_parents)?;
    let exp_parents = columns(&rc.exp_parents)?;
    let layers = drg_parents.first().map(|c| c.rows.len()).ok_or("no base parents")?;
    if exp_parents.is_empty() {
        return Err("no expander parents".into());
    }
    if let Some(c) = drg_parents.iter().chain(&exp_parents).find(|c| c.rows.len() != layers) {
        return Err(format!("a parent column of {} rows, another of {layers}", c.rows.len()));
    }
    let labeling = p.labeling_proofs.first().ok_or("no labeling proofs")?;
    let node = parts::<LabelingNode>(labeling, "labeling proof")?.node;
    Ok(Challenge {
        data_leaf: p.comm_d_proofs.leaf().into(),
        node,
        comm_d_path,
        comm_r_last_path: PoseidonPath::from_options(p.comm_r_last_proof.as_options())
            .map_err(|e| format!("comm_r_last path: {e}"))?,
        comm_c_path: column::<Tree>(&rc.c_x)?.path,
        drg_parents,
        exp_parents,
    })
}

fn column<Tree>(proof: &stacked::ColumnProof<TreeProof<Tree>>) -> Result<ParentColumn, String>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let parts = parts::<ColumnProofParts<TreeProof<Tree>>>(proof, "column proof")?;
    Ok(ParentColumn {
        rows: parts.column.rows.into_iter().map(Fr::from).collect(),
        path: PoseidonPath::from_options(parts.inclusion_proof.as_options())
            .map_err(|e| format!("column path: {e}"))?,
    })
}

/// Reads `value`'s crate-private fields through its serialized form.
fn parts<T: DeserializeOwned>(value: &impl Serialize, what: &str) -> Result<T, String> {
    serde_json::to_value(value)
        .and_then(serde_json::from_value)
        .map_err(|e| format!("the {what} does not parse: {e}"))
}

/// Parses a column proof's parts; storage-proofs keeps them crate-private
/// and serializes them under these names.
#[derive(Deserialize)]
struct ColumnProofParts<P> {
    column: ColumnParts,
    inclusion_proof: P,
}

#[derive(Deserialize)]
struct ColumnParts {
    rows: Vec<PoseidonDomain>,
}

/// The node a labeling proof names (crate-private in storage-proofs too).
#[derive(Deserialize)]
struct LabelingNode {
    node: u64,
}
