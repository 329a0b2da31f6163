//! Filecoin's proof kinds, their registered proof numbers, sector sizes and
//! circuit ids.
//!
//! The numbers are the chain's (the registered proof enums in declaration
//! order, as filecoin-ffi passes them). One naming trap: the WindowPoSt
//! proofs the chain numbers 10–14, which Go calls `..._V1_1`, are
//! filecoin-proofs-api's `StackedDrgWindow*V1_2`.

use std::fmt;
use std::str::FromStr;

use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};
use pinprove_engine::Priority;

use crate::FilecoinError;

/// Defines [`ProofKind`] from one table: each kind's variant, its short
/// name and its default priority. Every other per-kind fact is an
/// exhaustive `match` on the kind or a [`PerKind`] value, so a new kind is a
/// compile error wherever it is not handled (ARCHITECTURE.md, "Adding a
/// proof kind"), never a panic.
macro_rules! proof_kinds {
    ($($(#[$doc:meta])* $kind:ident => ($name:literal, $priority:ident),)+) => {
        /// What is proved.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ProofKind {
            $($(#[$doc])* $kind,)+
        }

        impl ProofKind {
            /// Every kind, in the table's order (that of [`PerKind`]).
            pub const ALL: [ProofKind; [$(ProofKind::$kind),+].len()] = [$(ProofKind::$kind),+];

            /// How many kinds there are.
            pub const COUNT: usize = Self::ALL.len();

            /// The short name in circuit ids and on the command line.
            pub const fn name(self) -> &'static str {
                match self {
                    $(ProofKind::$kind => $name,)+
                }
            }

            /// How urgent it is unless the caller says otherwise: a missed
            /// WinningPoSt loses a block reward, a late WindowPoSt a penalty.
            pub const fn default_priority(self) -> Priority {
                match self {
                    $(ProofKind::$kind => Priority::$priority,)+
                }
            }

            /// Its place in [`ALL`](Self::ALL) (and in a [`PerKind`]).
            pub const fn index(self) -> usize {
                self as usize
            }
        }
    };
}

proof_kinds! {
    /// PoRep C2: a sector's seal commitment (from its C1 output).
    PoRep => ("porep", Normal),
    /// SnapDeals: a sector update.
    SnapDeals => ("snap", Normal),
    /// One partition of a WindowPoSt.
    WindowPoSt => ("wpost", High),
    /// A WinningPoSt.
    WinningPoSt => ("winning", Critical),
}

/// One value per proof kind: what every layer that counts, bounds or
/// reports by kind holds (counters, limits, histograms, lists), indexed by
/// the kind itself, so that no kind can be missing from it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerKind<T>([T; ProofKind::COUNT]);

impl<T> PerKind<T> {
    /// Each kind's value, from `f`.
    pub fn from_fn(mut f: impl FnMut(ProofKind) -> T) -> PerKind<T> {
        PerKind(std::array::from_fn(|i| f(ProofKind::ALL[i])))
    }

    /// Each kind with its value, in [`ProofKind::ALL`]'s order.
    pub fn iter(&self) -> impl Iterator<Item = (ProofKind, &T)> {
        ProofKind::ALL.into_iter().zip(self.0.iter())
    }

    /// The values, in [`ProofKind::ALL`]'s order.
    pub fn into_values(self) -> impl Iterator<Item = T> {
        self.0.into_iter()
    }

    /// Each kind's value turned into another.
    pub fn map<U>(&self, mut f: impl FnMut(ProofKind, &T) -> U) -> PerKind<U> {
        PerKind::from_fn(|k| f(k, &self[k]))
    }
}

impl<T> std::ops::Index<ProofKind> for PerKind<T> {
    type Output = T;
    fn index(&self, kind: ProofKind) -> &T {
        &self.0[kind.index()]
    }
}

impl<T> std::ops::IndexMut<ProofKind> for PerKind<T> {
    fn index_mut(&mut self, kind: ProofKind) -> &mut T {
        &mut self.0[kind.index()]
    }
}

impl ProofKind {
    /// How long a proof of this kind may take from its request before it
    /// is late for the chain, for the kinds that have such a bound: the
    /// daemon's alert rules and status page flag a job older than this. A
    /// WinningPoSt goes into a block of a 30 s epoch, so past 10 s the
    /// block is at risk; a WindowPoSt deadline is 30 minutes for every
    /// partition of it (a 10 PiB provider has about 3), and the proof
    /// message must still land: past 5 minutes for one partition the
    /// deadline is at risk. Sealing proofs have none.
    pub const fn latency_bound(self) -> Option<std::time::Duration> {
        match self {
            ProofKind::WinningPoSt => Some(std::time::Duration::from_secs(10)),
            ProofKind::WindowPoSt => Some(std::time::Duration::from_secs(300)),
            ProofKind::PoRep | ProofKind::SnapDeals => None,
        }
    }
}

impl fmt::Display for ProofKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ProofKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        ProofKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown proof kind {s:?} (porep, snap, wpost or winning)"))
    }
}

/// The sector sizes filecoin-proofs-api 19 supports, in bytes.
pub const SECTOR_SIZES: [u64; 5] = [2 << 10, 8 << 20, 512 << 20, 32 << 30, 64 << 30];

/// The short name of a sector size in circuit ids ("2k", "32g").
pub fn size_tag(sector_bytes: u64) -> Result<&'static str, FilecoinError> {
    Ok(match sector_bytes {
        b if b == 2 << 10 => "2k",
        b if b == 8 << 20 => "8m",
        b if b == 512 << 20 => "512m",
        b if b == 32 << 30 => "32g",
        b if b == 64 << 30 => "64g",
        other => return Err(FilecoinError::SectorSize(other)),
    })
}

/// The circuit id of `kind` at `sector_bytes`: "porep-32g", "wpost-2k", …
/// Capacity hints and parameters are keyed by it.
pub fn circuit_id(kind: ProofKind, sector_bytes: u64) -> Result<String, FilecoinError> {
    Ok(format!("{}-{}", kind.name(), size_tag(sector_bytes)?))
}

/// Seal proofs by number.
const SEAL: [RegisteredSealProof; 20] = {
    use RegisteredSealProof::*;
    [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
        StackedDrg2KiBV1_1,
        StackedDrg8MiBV1_1,
        StackedDrg512MiBV1_1,
        StackedDrg32GiBV1_1,
        StackedDrg64GiBV1_1,
        StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
        StackedDrg8MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg512MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg32GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg64GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg8MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg512MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg32GiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg64GiBV1_2_Feat_NonInteractivePoRep,
    ]
};

/// PoSt proofs by number (10–14: the chain's "V1_1", the API's V1_2).
const POST: [RegisteredPoStProof; 15] = {
    use RegisteredPoStProof::*;
    [
        StackedDrgWinning2KiBV1,
        StackedDrgWinning8MiBV1,
        StackedDrgWinning512MiBV1,
        StackedDrgWinning32GiBV1,
        StackedDrgWinning64GiBV1,
        StackedDrgWindow2KiBV1,
        StackedDrgWindow8MiBV1,
        StackedDrgWindow512MiBV1,
        StackedDrgWindow32GiBV1,
        StackedDrgWindow64GiBV1,
        StackedDrgWindow2KiBV1_2,
        StackedDrgWindow8MiBV1_2,
        StackedDrgWindow512MiBV1_2,
        StackedDrgWindow32GiBV1_2,
        StackedDrgWindow64GiBV1_2,
    ]
};

/// Update proofs by number.
const UPDATE: [RegisteredUpdateProof; 5] = {
    use RegisteredUpdateProof::*;
    [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
    ]
};

fn by_number<T: Copy>(table: &[T], n: u64, kind: &'static str) -> Result<T, FilecoinError> {
    usize::try_from(n)
        .ok()
        .and_then(|i| table.get(i).copied())
        .ok_or(FilecoinError::RegisteredProof { kind, number: n })
}

fn number_of<T: PartialEq>(table: &[T], p: T) -> u64 {
    table
        .iter()
        .position(|x| *x == p)
        .expect("every variant is in its table") as u64
}

/// The seal proof Filecoin numbers `n`.
pub fn seal_proof(n: u64) -> Result<RegisteredSealProof, FilecoinError> {
    by_number(&SEAL, n, "seal")
}

/// The PoSt proof Filecoin numbers `n`.
pub fn post_proof(n: u64) -> Result<RegisteredPoStProof, FilecoinError> {
    by_number(&POST, n, "PoSt")
}

/// The update proof Filecoin numbers `n`.
pub fn update_proof(n: u64) -> Result<RegisteredUpdateProof, FilecoinError> {
    by_number(&UPDATE, n, "update")
}

/// Filecoin's number of a seal proof.
pub fn seal_number(p: RegisteredSealProof) -> u64 {
    number_of(&SEAL, p)
}

/// Filecoin's number of a PoSt proof.
pub fn post_number(p: RegisteredPoStProof) -> u64 {
    number_of(&POST, p)
}

/// Filecoin's number of an update proof.
pub fn update_number(p: RegisteredUpdateProof) -> u64 {
    number_of(&UPDATE, p)
}

/// The prover id of miner actor `miner_id`: its id address's payload (the
/// id as an unsigned LEB128 varint), left-aligned in 32 zero bytes.
pub fn prover_id(miner_id: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut v = miner_id;
    let mut i = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = byte;
            return out;
        }
        out[i] = byte | 0x80;
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_the_chains() {
        assert_eq!(seal_proof(8).unwrap(), RegisteredSealProof::StackedDrg32GiBV1_1);
        assert_eq!(
            seal_number(RegisteredSealProof::StackedDrg2KiBV1_1_Feat_SyntheticPoRep),
            10
        );
        assert_eq!(post_proof(0).unwrap(), RegisteredPoStProof::StackedDrgWinning2KiBV1);
        // The chain's WindowPoSt V1_1 (13) is the API's V1_2.
        assert_eq!(post_proof(13).unwrap(), RegisteredPoStProof::StackedDrgWindow32GiBV1_2);
        assert_eq!(update_proof(3).unwrap(), RegisteredUpdateProof::StackedDrg32GiBV1);
        for n in 0..20 {
            assert_eq!(seal_number(seal_proof(n).unwrap()), n);
        }
        let err = seal_proof(20).unwrap_err();
        assert!(err.to_string().contains("20"), "{err}");
        assert!(post_proof(u64::MAX).is_err());
    }

    #[test]
    fn every_kind_has_its_own_place_in_a_per_kind_table() {
        for (i, k) in ProofKind::ALL.into_iter().enumerate() {
            assert_eq!(k.index(), i);
            assert_eq!(k.name().parse::<ProofKind>(), Ok(k));
        }
        let mut counts = PerKind::from_fn(|k| k.index() * 10);
        counts[ProofKind::WindowPoSt] += 1;
        let seen: Vec<_> = counts.iter().map(|(k, &n)| (k.name(), n)).collect();
        assert_eq!(seen, [("porep", 0), ("snap", 10), ("wpost", 21), ("winning", 30)]);
        assert_eq!(counts.map(|k, &n| n + k.index())[ProofKind::WinningPoSt], 33);
    }

    #[test]
    fn circuit_ids_name_kind_and_size() {
        assert_eq!(circuit_id(ProofKind::PoRep, 32 << 30).unwrap(), "porep-32g");
        assert_eq!(circuit_id(ProofKind::WindowPoSt, 2048).unwrap(), "wpost-2k");
        assert!(circuit_id(ProofKind::SnapDeals, 4096).is_err());
        assert_eq!("WINNING".parse::<ProofKind>(), Ok(ProofKind::WinningPoSt));
    }

    #[test]
    fn prover_ids_are_leb128() {
        assert_eq!(prover_id(1000)[..3], [0xe8, 0x07, 0]);
        assert_eq!(prover_id(128)[..3], [0x80, 0x01, 0]);
        assert_eq!(prover_id(5)[..2], [5, 0]);
        assert_eq!(prover_id(u64::MAX)[9], 0x01);
    }
}
