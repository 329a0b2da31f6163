/// Which variables of one query appear with a non-zero coefficient in any
/// constraint: a bit per variable and the count of set bits.
///
/// The parameters hold points only for variables that appear (the others
/// would be the point at infinity), so an MSM over a query pairs its
/// consecutive bases with the assignments whose bit is set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Density {
    words: Vec<u64>,
    len: usize,
    total: usize,
}

impl Density {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// A tracker with room for `n` variables.
    pub fn with_capacity(n: usize) -> Self {
        Density {
            words: Vec::with_capacity(n.div_ceil(64)),
            len: 0,
            total: 0,
        }
    }

    /// Adds a variable, not yet seen.
    #[inline]
    pub fn add_element(&mut self) {
        if self.len.is_multiple_of(64) {
            self.words.push(0);
        }
        self.len += 1;
    }

    /// Marks variable `i` as seen. Returns false if there is no such
    /// variable.
    #[inline]
    pub fn inc(&mut self, i: usize) -> bool {
        if i >= self.len {
            return false;
        }
        let (w, b) = (i / 64, 1u64 << (i % 64));
        if self.words[w] & b == 0 {
            self.words[w] |= b;
            self.total += 1;
        }
        true
    }

    /// Whether variable `i` was seen.
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] & (1 << (i % 64)) != 0
    }

    /// Number of variables tracked.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no variable is tracked.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of variables seen.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Appends `other`'s variables, skipping its first one when
    /// `skip_first` (the constant ONE input, which both sides have: a use of
    /// `other`'s ONE is a use of this one's).
    pub fn extend(&mut self, other: &Density, skip_first: bool) {
        if skip_first && other.get(0) {
            self.inc(0);
        }
        let start = usize::from(skip_first && !other.is_empty());
        for i in start..other.len {
            self.add_element();
            if other.get(i) {
                self.inc(self.len - 1);
            }
        }
    }

    /// The bit words, least significant bit first (for device upload).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Indices of the variables seen, in order.
    pub fn iter_ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let t = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(w * 64 + t)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_and_counts() {
        let mut d = Density::new();
        for _ in 0..130 {
            d.add_element();
        }
        assert!(d.inc(0) && d.inc(64) && d.inc(129) && d.inc(64));
        assert!(!d.inc(130));
        assert_eq!(d.total(), 3);
        assert!(d.get(64) && !d.get(63) && !d.get(500));
        assert_eq!(d.iter_ones().collect::<Vec<_>>(), vec![0, 64, 129]);

        let mut e = Density::new();
        for _ in 0..3 {
            e.add_element();
        }
        e.inc(0);
        e.inc(2);
        d.extend(&e, true);
        assert_eq!(d.len(), 132);
        assert_eq!(d.iter_ones().collect::<Vec<_>>(), vec![0, 64, 129, 131]);
    }
}

/// The variables each query of a circuit uses: what selects an MSM's
/// bases (the A query's aux variables, the B query's inputs and aux
/// variables; every input is in A, every aux variable in L).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Densities {
    /// Aux variables used by the A query.
    pub a_aux: Density,
    /// Inputs used by the B query.
    pub b_input: Density,
    /// Aux variables used by the B query.
    pub b_aux: Density,
}

impl Densities {
    /// Trackers with room for `inputs` and `aux` variables.
    pub fn with_capacity(inputs: usize, aux: usize) -> Densities {
        Densities {
            a_aux: Density::with_capacity(aux),
            b_input: Density::with_capacity(inputs),
            b_aux: Density::with_capacity(aux),
        }
    }

    /// Bases of the A query for a circuit of `inputs` inputs.
    pub fn a_bases(&self, inputs: usize) -> usize {
        inputs + self.a_aux.total()
    }

    /// Bases of the B query (in G1 and in G2).
    pub fn b_bases(&self) -> usize {
        self.b_input.total() + self.b_aux.total()
    }
}
