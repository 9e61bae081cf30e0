//! The operation mix of a transaction and the commit mode, drawn per transaction.

use jetproof_job::Workload;
use rand::Rng;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Operation {
    Insert,
    Delete,
    Replace,
    Read,
}

/// Cumulative thresholds over 0..100, validated by the job (the shares sum to 100).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Mix {
    insert_below: u32,
    delete_below: u32,
    replace_below: u32,
    lazy_percent: u32,
}

impl Mix {
    pub fn from_job(workload: &Workload) -> Mix {
        let insert_below = workload.insert_percent;
        let delete_below = insert_below + workload.delete_percent;
        let replace_below = delete_below + workload.replace_percent;
        Mix {
            insert_below,
            delete_below,
            replace_below,
            lazy_percent: workload.lazy_commit_percent,
        }
    }

    pub fn operation(&self, rng: &mut impl Rng) -> Operation {
        let draw = rng.random_range(0..100);
        if draw < self.insert_below {
            Operation::Insert
        } else if draw < self.delete_below {
            Operation::Delete
        } else if draw < self.replace_below {
            Operation::Replace
        } else {
            Operation::Read
        }
    }

    /// True when this transaction commits lazily (does not wait for the log).
    pub fn lazy(&self, rng: &mut impl Rng) -> bool {
        rng.random_range(0..100) < self.lazy_percent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn default_mix_draws_its_shares() {
        let seed = 7;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mix = Mix::from_job(&Workload::default());
        let mut counts = [0u32; 4];
        let mut lazy = 0;
        let draws = 100_000;
        for _ in 0..draws {
            counts[mix.operation(&mut rng) as usize] += 1;
            lazy += u32::from(mix.lazy(&mut rng));
        }
        let share = |n: u32| f64::from(n) * 100.0 / f64::from(draws);
        let expected = [40.0, 20.0, 5.0, 35.0];
        for (i, e) in expected.iter().enumerate() {
            assert!(
                (share(counts[i]) - e).abs() < 0.7,
                "seed {seed}: operation {i} drew {:.2}%, expected {e}%",
                share(counts[i])
            );
        }
        assert!(
            (share(lazy) - 70.0).abs() < 0.7,
            "seed {seed}: lazy {:.2}%",
            share(lazy)
        );
    }
}
