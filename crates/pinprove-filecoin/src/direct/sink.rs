//! Destinations for the allocated values.

/// Receives the values a gadget allocates, in allocation order.
///
/// Values arrive in runs of up to 64: `push_bits(bits, count)` appends the
/// low `count` bits of `bits`, least significant first. Higher bits of
/// `bits` are unspecified and must be ignored. `count` is at most 64.
pub trait AllocSink {
    /// Appends the low `count` bits of `bits`, bit 0 first.
    fn push_bits(&mut self, bits: u64, count: u32);
}

/// One `bool` per allocation: simple, slow; for tests and small uses.
impl AllocSink for Vec<bool> {
    fn push_bits(&mut self, bits: u64, count: u32) {
        self.extend((0..count.min(64)).map(|i| (bits >> i) & 1 == 1));
    }
}

/// Counts allocations without keeping them.
impl AllocSink for usize {
    fn push_bits(&mut self, _bits: u64, count: u32) {
        *self += count.min(64) as usize;
    }
}

/// Allocated values packed 64 to a word, allocation `i` at bit `i % 64` of
/// word `i / 64`; bits past [`len`](Self::len) are zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedBits {
    words: Vec<u64>,
    len: usize,
}

impl PackedBits {
    /// An empty buffer with room for `bits` values.
    pub fn with_capacity(bits: usize) -> Self {
        Self {
            words: Vec::with_capacity(bits.div_ceil(64)),
            len: 0,
        }
    }

    /// How many values it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Value `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<bool> {
        (i < self.len).then(|| (self.words[i / 64] >> (i % 64)) & 1 == 1)
    }

    /// The packed words (the last one partly filled).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Forgets the values, keeping the memory.
    pub fn clear(&mut self) {
        self.words.clear();
        self.len = 0;
    }

    /// The values in order.
    pub fn iter(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.len).map(|i| (self.words[i / 64] >> (i % 64)) & 1 == 1)
    }
}

impl AllocSink for PackedBits {
    #[inline]
    fn push_bits(&mut self, bits: u64, count: u32) {
        let count = count.min(64);
        if count == 0 {
            return;
        }
        let bits = if count == 64 {
            bits
        } else {
            bits & ((1u64 << count) - 1)
        };
        let offset = (self.len % 64) as u32;
        match self.words.last_mut() {
            Some(last) if offset != 0 => {
                *last |= bits << offset;
                if offset + count > 64 {
                    self.words.push(bits >> (64 - offset));
                }
            }
            _ => self.words.push(bits),
        }
        self.len += count as usize;
    }
}
