//! Inputs from valid seeds: a few structural mutations each (bit flips, interesting integers at
//! length and count positions, insertions, deletions, duplications, truncations, splices), and
//! now and then plain random bytes.

use crate::rng::Rng;

/// Integers that sit at the edges decoders get wrong: zero, one, the signed and unsigned
/// limits of each width.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0x8000,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
];

/// Tokens that change a JSON document's shape.
const JSON: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"-",
    b"0",
    b"1e999",
    b"null",
    b"true",
    b"18446744073709551616",
    b"-1",
    b"\\u0000",
    b"[[[[[[[[",
];

/// One generated input: a mutated seed, or (one time in 32) random bytes.
pub fn input(rng: &mut Rng, seeds: &[Vec<u8>], out: &mut Vec<u8>) {
    out.clear();
    if seeds.is_empty() || rng.below(32) == 0 {
        let len = rng.below(512) as usize;
        out.extend((0..len).map(|_| rng.next_u64() as u8));
        return;
    }
    out.extend_from_slice(&seeds[rng.below(seeds.len() as u64) as usize]);
    let rounds = 1 + rng.below(4) + rng.below(4) * rng.below(2);
    for _ in 0..rounds {
        mutate(rng, seeds, out);
    }
}

fn at(rng: &mut Rng, out: &[u8]) -> usize {
    rng.below(out.len() as u64 + 1) as usize
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], out: &mut Vec<u8>) {
    match rng.below(11) {
        0 if !out.is_empty() => {
            let i = rng.below(out.len() as u64) as usize;
            out[i] ^= 1 << rng.below(8);
        }
        1 if !out.is_empty() => {
            let i = rng.below(out.len() as u64) as usize;
            out[i] = rng.next_u64() as u8;
        }
        2 | 3 => {
            // An interesting integer, big-endian, over 1, 2, 4 or 8 bytes: where lengths,
            // counts and offsets live.
            let value = INTERESTING[rng.below(INTERESTING.len() as u64) as usize];
            let width = 1usize << rng.below(4);
            let bytes = value.to_be_bytes();
            let i = at(rng, out);
            for (k, b) in bytes[8 - width..].iter().enumerate() {
                if let Some(slot) = out.get_mut(i + k) {
                    *slot = *b;
                }
            }
        }
        4 => {
            // A maximal varint (postcard's and Kafka's compact lengths).
            let i = at(rng, out);
            out.splice(i..i, [0xff, 0xff, 0xff, 0xff, 0x0f]);
        }
        5 if !out.is_empty() => {
            let i = rng.below(out.len() as u64) as usize;
            let n = 1 + rng.below((out.len() - i).min(64) as u64) as usize;
            out.drain(i..i + n);
        }
        6 => {
            let i = at(rng, out);
            let n = 1 + rng.below(16) as usize;
            let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            out.splice(i..i, bytes);
        }
        7 if !out.is_empty() => {
            let from = rng.below(out.len() as u64) as usize;
            let n = 1 + rng.below((out.len() - from).min(256) as u64) as usize;
            let chunk = out[from..from + n].to_vec();
            let i = at(rng, out);
            out.splice(i..i, chunk);
        }
        8 => {
            let i = at(rng, out);
            out.truncate(i);
        }
        9 => {
            let other = &seeds[rng.below(seeds.len() as u64) as usize];
            let keep = at(rng, out);
            let from = rng.below(other.len() as u64 + 1) as usize;
            out.truncate(keep);
            out.extend_from_slice(&other[from..]);
        }
        _ => {
            let token = JSON[rng.below(JSON.len() as u64) as usize];
            let i = at(rng, out);
            out.splice(i..i, token.iter().copied());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_vary_repeat_with_the_seed_and_start_from_the_seeds() {
        let seeds = vec![b"0123456789abcdef".to_vec()];
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        let mut distinct = std::collections::BTreeSet::new();
        let mut near_seed = 0;
        for _ in 0..1000 {
            input(&mut a, &seeds, &mut x);
            input(&mut b, &seeds, &mut y);
            assert_eq!(x, y, "the same seed, the same inputs");
            near_seed += usize::from(x.windows(4).any(|w| seeds[0].windows(4).any(|s| s == w)));
            distinct.insert(x.clone());
        }
        assert!(distinct.len() > 900, "{} distinct inputs", distinct.len());
        assert!(near_seed > 800, "most inputs keep parts of a seed");
    }
}
