//! Test support: the damage a file or a reply meets on the way in (a byte changed, a byte
//! dropped, the rest cut off), shared by the property tests of everything Tandem reads from
//! outside.

use proptest::prelude::*;

/// One kind of damage.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Damage {
    /// The byte there becomes this one.
    Changed(u8),
    /// The byte there is gone.
    Dropped,
    /// Everything from there on is gone.
    Cut,
}

/// Any kind of damage.
pub(crate) fn kind() -> impl Strategy<Value = Damage> {
    prop_oneof![
        any::<u8>().prop_map(Damage::Changed),
        Just(Damage::Dropped),
        Just(Damage::Cut),
    ]
}

/// `bytes` with `damage` at `at` (taken modulo their length).
pub(crate) fn apply(mut bytes: Vec<u8>, at: usize, damage: Damage) -> Vec<u8> {
    let at = at % bytes.len().max(1);
    match damage {
        Damage::Changed(byte) => bytes[at] = byte,
        Damage::Dropped => {
            bytes.remove(at);
        }
        Damage::Cut => bytes.truncate(at),
    }
    bytes
}
