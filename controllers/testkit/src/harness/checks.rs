//! Assertions that fail a scenario with a message instead of panicking.

use std::fmt::{Debug, Display};

use anyhow::{Result, bail};

/// Fails with `what` unless `cond`.
pub fn ensure(cond: bool, what: impl Display) -> Result<()> {
    if !cond {
        bail!("{what}");
    }
    Ok(())
}

/// Fails unless `got == want`, showing both.
pub fn ensure_eq<T: PartialEq + Debug>(got: T, want: T, what: &str) -> Result<()> {
    if got != want {
        bail!("{what}: got {got:?}, want {want:?}");
    }
    Ok(())
}

/// `Ok` for success and for 404 (already gone).
pub fn ignore_404<T>(r: Result<T, kube::Error>) -> Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
