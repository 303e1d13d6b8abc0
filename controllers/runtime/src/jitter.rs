//! Random jitter (retry waits, watch timeouts, spreads of retries), from the thread's
//! generator; or, on a thread the deterministic simulation seeded ([`seed_thread`]), from a
//! seeded generator, so that a seed replays the same run.

use std::cell::RefCell;
use std::ops::Range;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

thread_local! {
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// Makes this thread's jitter come from a generator seeded with `seed` (`None`: the thread's
/// random generator again). For the simulation, which runs on one thread.
pub fn seed_thread(seed: Option<u64>) {
    SEEDED.with(|s| *s.borrow_mut() = seed.map(StdRng::seed_from_u64));
}

fn with_rng<T>(f: impl FnOnce(&mut dyn rand::RngCore) -> T) -> T {
    SEEDED.with(|s| match s.borrow_mut().as_mut() {
        Some(rng) => f(rng),
        None => f(&mut rand::rng()),
    })
}

/// A number in `[0, 1)`.
pub fn unit() -> f64 {
    with_rng(|rng| rng.random::<f64>())
}

/// A number in `range`.
pub fn in_range(range: Range<u32>) -> u32 {
    with_rng(|rng| rng.random_range(range))
}
