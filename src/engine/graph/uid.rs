//! Compact object UIDs. Kubernetes UIDs are RFC 4122 UUIDs; we keep them as 16 bytes instead of a
//! 36-byte heap string. Anything that is not a canonical UUID is hashed into the same space and
//! its text kept in a side table, so it still round-trips for preconditions.

use std::fmt;

/// Two u64 halves rather than a u128 so the type only needs 8-byte alignment inside nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uid(pub [u64; 2]);

impl Uid {
    /// Parses a canonical lowercase UUID (`8-4-4-4-12` hex). `None` for anything else.
    pub fn parse_uuid(s: &str) -> Option<Uid> {
        let b = s.as_bytes();
        if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
            return None;
        }
        let mut v: u128 = 0;
        for (i, &c) in b.iter().enumerate() {
            if matches!(i, 8 | 13 | 18 | 23) {
                continue;
            }
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                _ => return None,
            };
            v = (v << 4) | u128::from(d);
        }
        Some(Uid([(v >> 64) as u64, v as u64]))
    }

    /// A stable 128-bit hash for non-UUID uids (FNV-1a, twice with different seeds), tagged so it
    /// cannot equal a version-4 UUID (the version nibble is set to 0).
    pub fn hash_of(s: &str) -> Uid {
        let fnv = |seed: u64| {
            s.bytes().fold(seed, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            })
        };
        let hi = fnv(0xcbf2_9ce4_8422_2325) & !0x0000_0000_0000_f000;
        Uid([hi, fnv(0x8422_2325_cbf2_9ce4)])
    }

    fn as_u128(self) -> u128 {
        (u128::from(self.0[0]) << 64) | u128::from(self.0[1])
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = format!("{:032x}", self.as_u128());
        write!(
            f,
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_round_trips() {
        let s = "0a1b2c3d-4e5f-4061-8a9b-0c1d2e3f4a5b";
        assert_eq!(Uid::parse_uuid(s).unwrap().to_string(), s);
    }

    #[test]
    fn non_canonical_uids_are_not_parsed_as_uuids() {
        for bad in [
            "",
            "abc",
            "0A1B2C3D-4E5F-4061-8A9B-0C1D2E3F4A5B",
            "0a1b2c3d4e5f40618a9b0c1d2e3f4a5b0000",
        ] {
            assert!(Uid::parse_uuid(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn hashes_are_stable_and_distinct() {
        assert_eq!(Uid::hash_of("x"), Uid::hash_of("x"));
        assert_ne!(Uid::hash_of("x"), Uid::hash_of("y"));
    }
}
