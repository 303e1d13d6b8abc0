//! Waits that say what they last saw.

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::wait::{holds_for, wait_for};

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads with `read` until `check` holds (up to `timeout`) and returns what was read; on
/// timeout the error carries `describe` of the last value read.
pub async fn wait_seen<T, R, Fut>(
    what: &str,
    timeout: Duration,
    read: R,
    check: impl Fn(&T) -> bool,
    describe: impl Fn(&T) -> String,
) -> Result<T>
where
    R: Fn() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let look = Look::new(read, check, describe);
    wait_for(what, timeout, || async {
        let (ok, value) = look.once().await?;
        Ok(ok.then_some(value))
    })
    .await
    .with_context(|| look.last_seen())
}

/// Fails unless `check` holds for everything `read` returns during `period`; the error
/// carries `describe` of the value that broke it.
pub async fn holds_seen<T, R, Fut>(
    what: &str,
    period: Duration,
    read: R,
    check: impl Fn(&T) -> bool,
    describe: impl Fn(&T) -> String,
) -> Result<()>
where
    R: Fn() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let look = Look::new(read, check, describe);
    holds_for(what, period, || async { Ok(look.once().await?.0) })
        .await
        .with_context(|| look.last_seen())
}

/// One read, checked, with a description of the value kept for the failure message.
struct Look<R, C, D> {
    read: R,
    check: C,
    describe: D,
    last: Mutex<Option<String>>,
}

impl<T, R, Fut, C, D> Look<R, C, D>
where
    R: Fn() -> Fut,
    Fut: Future<Output = Result<T>>,
    C: Fn(&T) -> bool,
    D: Fn(&T) -> String,
{
    fn new(read: R, check: C, describe: D) -> Self {
        Self {
            read,
            check,
            describe,
            last: Mutex::new(None),
        }
    }

    async fn once(&self) -> Result<(bool, T)> {
        let value = (self.read)().await?;
        let ok = (self.check)(&value);
        *lock(&self.last) = Some((self.describe)(&value));
        Ok((ok, value))
    }

    fn last_seen(&self) -> String {
        match &*lock(&self.last) {
            Some(seen) => format!("last seen: {seen}"),
            None => "never read".to_owned(),
        }
    }
}
