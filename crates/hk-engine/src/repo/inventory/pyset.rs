//! The order Python iterates a set literal in, for the sets Ansible's INI values can hold.
//!
//! `{3, 1, 2}` reaches Ansible as a Python `set`, which ansible-inventory prints in CPython's
//! iteration order: the order of the set's hash table slots. For numbers and booleans the
//! hash is fixed (`hash(n)` is `n` modulo 2**61 - 1; floats follow `_Py_HashDouble`), so the
//! order is computed here by replaying CPython 3.11's `set_add_entry` (linear probing, then
//! perturbation; resize at 3/5 full). For strings, bytes and `None` the hash is randomised
//! per process (or an address), so Ansible's own order changes from run to run: such a set
//! with two or more items is refused, naming why, rather than printed in an invented order.

use super::pyliteral::Py;

/// `_PyHASH_BITS` and `_PyHASH_MODULUS` on 64-bit CPython.
const HASH_BITS: u32 = 61;
const MODULUS: u64 = (1 << HASH_BITS) - 1;
const LINEAR_PROBES: usize = 9;
const PERTURB_SHIFT: u32 = 5;
const MIN_SIZE: usize = 8;

/// Why Python would refuse `v` as a set item or dict key (`unhashable type: 'list'`).
pub(super) fn unhashable(v: &Py) -> Option<&'static str> {
    match v {
        Py::List(_) => Some("list"),
        Py::Set(_) => Some("set"),
        Py::Dict(_) => Some("dict"),
        Py::Tuple(items) => items.iter().find_map(unhashable),
        _ => None,
    }
}

/// Python's `hash(v)` where it does not change between processes.
fn fixed_hash(v: &Py) -> Option<i64> {
    match v {
        Py::Bool(b) => Some(i64::from(*b)),
        Py::Int(i) => Some(int_hash(*i)),
        Py::Float(f) => Some(float_hash(*f)),
        _ => None,
    }
}

fn int_hash(n: i128) -> i64 {
    // `m < 2**61`, so it fits an i64.
    let m = (n.unsigned_abs() % u128::from(MODULUS)) as i64;
    let h = if n < 0 { -m } else { m };
    if h == -1 {
        -2
    } else {
        h
    }
}

/// `frexp`: `v = m * 2**e` with `0.5 <= |m| < 1`.
fn frexp(v: f64) -> (f64, i32) {
    if v == 0.0 || !v.is_finite() {
        return (v, 0);
    }
    let (v, adjust) = if v.abs() < f64::MIN_POSITIVE {
        (v * 2f64.powi(64), -64)
    } else {
        (v, 0)
    };
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let mantissa = (bits & !(0x7ff << 52)) | (1022 << 52);
    (f64::from_bits(mantissa), exp - 1022 + adjust)
}

/// CPython's `_Py_HashDouble` for finite values (infinity never reaches a set here: it is
/// refused as a value first).
fn float_hash(v: f64) -> i64 {
    if !v.is_finite() {
        return if v > 0.0 { 314_159 } else { -314_159 };
    }
    let (mut m, mut e) = frexp(v);
    let mut sign = 1i64;
    if m < 0.0 {
        sign = -1;
        m = -m;
    }
    let mut x: u64 = 0;
    while m != 0.0 {
        x = ((x << 28) & MODULUS) | x >> (HASH_BITS - 28);
        m *= 268_435_456.0;
        e -= 28;
        let y = m as u64;
        m -= y as f64;
        x += y;
        if x >= MODULUS {
            x -= MODULUS;
        }
    }
    let bits = HASH_BITS as i32;
    let e = if e >= 0 {
        e % bits
    } else {
        bits - 1 - ((-1 - e) % bits)
    } as u32;
    x = ((x << e) & MODULUS) | x >> (HASH_BITS - e);
    let h = (x as i64) * sign;
    if h == -1 {
        -2
    } else {
        h
    }
}

/// Python's `==` between two items with fixed hashes (numbers and booleans).
fn py_eq(a: &Py, b: &Py) -> bool {
    fn num(v: &Py) -> Option<f64> {
        match v {
            Py::Bool(b) => Some(f64::from(u8::from(*b))),
            Py::Int(i) => Some(*i as f64),
            Py::Float(f) => Some(*f),
            _ => None,
        }
    }
    match (a, b) {
        (Py::Int(x), Py::Int(y)) => x == y,
        (Py::Bool(x), Py::Int(y)) | (Py::Int(y), Py::Bool(x)) => i128::from(*x) == *y,
        _ => num(a).is_some_and(|x| num(b).is_some_and(|y| x == y)),
    }
}

/// The set's items in the order Python iterates them, duplicates (by Python's `==`) dropped,
/// the first of equal items kept. Errs where Python fails (an unhashable item) or where the
/// order is not fixed (see the module docs).
pub(super) fn iteration_order(items: &[Py]) -> Result<Vec<&Py>, String> {
    if let Some(kind) = items.iter().find_map(unhashable) {
        return Err(format!(
            "a set holding a {kind}: Python refuses it (unhashable type: '{kind}'), and so does Ansible"
        ));
    }
    let mut hashed: Vec<(i64, &Py)> = Vec::with_capacity(items.len());
    let mut unfixed: Vec<&Py> = Vec::new();
    for item in items {
        match fixed_hash(item) {
            Some(h) => hashed.push((h, item)),
            None => {
                if !unfixed.contains(&item) {
                    unfixed.push(item);
                }
            }
        }
    }
    if !unfixed.is_empty() {
        if hashed.is_empty() && unfixed.len() == 1 {
            return Ok(unfixed);
        }
        return Err(
            "a set of strings (or bytes, None, tuples, complex numbers) with two or more items: Python randomises their hashes per process, so Ansible prints them in a different order on every run; write a list `[...]` instead".to_string(),
        );
    }
    let mut table = Table::new();
    for (h, item) in hashed {
        table.add(h, item);
    }
    Ok(table.slots.into_iter().flatten().map(|(_, v)| v).collect())
}

/// CPython 3.11's set hash table (`setobject.c`): only what decides slot order.
struct Table<'a> {
    slots: Vec<Option<(i64, &'a Py)>>,
    fill: usize,
}

impl<'a> Table<'a> {
    fn new() -> Self {
        Table {
            slots: vec![None; MIN_SIZE],
            fill: 0,
        }
    }

    /// `set_add_entry`: nothing is ever deleted here, so there are no dummy slots.
    fn add(&mut self, hash: i64, key: &'a Py) {
        let mask = self.slots.len() - 1;
        let mut perturb = hash as u64;
        let mut i = (hash as u64 as usize) & mask;
        loop {
            let mut probes = if i + LINEAR_PROBES <= mask {
                LINEAR_PROBES
            } else {
                0
            };
            let mut j = i;
            loop {
                match self.slots[j] {
                    None => {
                        self.slots[j] = Some((hash, key));
                        self.fill += 1;
                        if self.fill * 5 >= mask * 3 {
                            let used = self.fill;
                            self.resize(if used > 50_000 { used * 2 } else { used * 4 });
                        }
                        return;
                    }
                    Some((h, k)) if h == hash && py_eq(k, key) => return,
                    Some(_) => {}
                }
                j += 1;
                if probes == 0 {
                    break;
                }
                probes -= 1;
            }
            perturb >>= PERTURB_SHIFT;
            i = (i
                .wrapping_mul(5)
                .wrapping_add(1)
                .wrapping_add(perturb as usize))
                & mask;
        }
    }

    /// `set_table_resize`: the smallest power of two above `min_used`, entries re-inserted
    /// in old slot order with `set_insert_clean`.
    fn resize(&mut self, min_used: usize) {
        let mut size = MIN_SIZE;
        while size <= min_used {
            size <<= 1;
        }
        let old = std::mem::replace(&mut self.slots, vec![None; size]);
        let mask = size - 1;
        for (hash, key) in old.into_iter().flatten() {
            let mut perturb = hash as u64;
            let mut i = (hash as u64 as usize) & mask;
            'probe: loop {
                if self.slots[i].is_none() {
                    self.slots[i] = Some((hash, key));
                    break 'probe;
                }
                if i + LINEAR_PROBES <= mask {
                    for j in 1..=LINEAR_PROBES {
                        if self.slots[i + j].is_none() {
                            self.slots[i + j] = Some((hash, key));
                            break 'probe;
                        }
                    }
                }
                perturb >>= PERTURB_SHIFT;
                i = (i
                    .wrapping_mul(5)
                    .wrapping_add(1)
                    .wrapping_add(perturb as usize))
                    & mask;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(v: &[i128]) -> Vec<Py> {
        v.iter().map(|&i| Py::Int(i)).collect()
    }

    fn order(items: &[Py]) -> Vec<Py> {
        iteration_order(items)
            .expect("fixed order")
            .into_iter()
            .cloned()
            .collect()
    }

    /// Orders printed by ansible-core 2.19 on Python 3.11 (tests/fixtures/inventories/sets
    /// holds the same values and compares them with the real tool).
    #[test]
    fn orders_match_cpython() {
        assert_eq!(order(&ints(&[3, 1, 2])), ints(&[1, 2, 3]));
        assert_eq!(order(&ints(&[10, 1, 9, 17])), ints(&[1, 10, 9, 17]));
        assert_eq!(order(&ints(&[-1, -2, 5])), ints(&[5, -1, -2]));
        assert_eq!(
            order(&ints(&[100, 64, 8, 0, 72])),
            ints(&[64, 0, 100, 8, 72])
        );
        assert_eq!(order(&ints(&[-5, 3, -3, 11])), ints(&[3, 11, -5, -3]));
        let big: Vec<i128> = (0..40).map(|i| i * 7 % 50).collect();
        let mut want: Vec<i128> = big.clone();
        want.sort();
        want.dedup();
        assert_eq!(order(&ints(&big)), ints(&want));
        assert_eq!(
            order(&[Py::Float(2.5), Py::Float(0.5), Py::Int(1)]),
            [Py::Float(0.5), Py::Int(1), Py::Float(2.5)]
        );
        assert_eq!(
            order(&[Py::Bool(true), Py::Int(0), Py::Bool(false)]),
            [Py::Int(0), Py::Bool(true)]
        );
        assert_eq!(
            order(&[Py::Int(1), Py::Float(1.0), Py::Bool(true)]),
            [Py::Int(1)]
        );
    }

    #[test]
    fn hashes_match_cpython() {
        assert_eq!(float_hash(0.5), 1 << 60);
        assert_eq!(float_hash(1.0), 1);
        assert_eq!(float_hash(-1.0), -2);
        assert_eq!(float_hash(3.0), 3);
        assert_eq!(float_hash(2.5), 2 + (1 << 60));
        assert_eq!(int_hash(-1), -2);
        assert_eq!(int_hash(1 << 61), 1);
    }

    #[test]
    fn random_orders_and_unhashables_are_refused() {
        let s = |t: &str| Py::Str(t.into());
        assert!(iteration_order(&[s("b"), s("a")])
            .expect_err("random")
            .contains("different order on every run"));
        assert_eq!(iteration_order(&[s("a"), s("a")]).expect("one").len(), 1);
        assert!(iteration_order(&[Py::List(vec![])])
            .expect_err("list")
            .contains("unhashable type: 'list'"));
    }
}
