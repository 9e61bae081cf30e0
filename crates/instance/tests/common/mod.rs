//! What the instance test binaries share.
#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;

use jetproof_instance::Instance;
use rand::Rng;
use rand::rngs::StdRng;

/// One random change through `instance`, mirrored in `model`: half inserts, three in ten
/// deletes, the rest replaces, of keys `0..keys`; a fifth of the values are large (over half the
/// largest record, so leaves split and merge), the rest small.
pub fn random_change(
    instance: &Instance,
    rng: &mut StdRng,
    keys: u64,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) {
    let max = instance.database().max_record_bytes() - 8;
    let key = rng.random_range(0..keys).to_be_bytes().to_vec();
    let len = if rng.random_bool(0.2) {
        rng.random_range(max / 2..max)
    } else {
        rng.random_range(1..max / 6)
    };
    let value = vec![rng.random::<u8>(); len];
    match rng.random_range(0..10) {
        0..5 => {
            if instance.insert(&key, &value).unwrap() {
                model.insert(key, value);
            }
        }
        5..8 => {
            if instance.delete(&key).unwrap() {
                model.remove(&key);
            }
        }
        _ => {
            if instance.replace(&key, &value).unwrap() {
                model.insert(key, value);
            }
        }
    }
}
