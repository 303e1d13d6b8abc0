//! Waiting without sleeping: poll a condition until it holds, or check that it keeps holding.

use std::future::Future;
use std::time::Duration;

use anyhow::bail;

/// How often [`wait_for`] polls.
pub const POLL: Duration = Duration::from_millis(100);

/// Polls `check` until it returns `Ok(Some(value))`, and returns the value. `Ok(None)` means
/// "not yet"; an `Err` is remembered and polling goes on (the API may be briefly
/// unavailable). After `timeout` it fails naming `what` and the last error seen.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    wait_for_every(what, timeout, POLL, check).await
}

/// [`wait_for`], polling every `every` (for a check that is costly, e.g. runs a process).
pub async fn wait_for_every<T, F, Fut>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut check: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let start = tokio::time::Instant::now();
    let mut last_err: Option<anyhow::Error> = None;
    let mut polls = 0u64;
    loop {
        polls += 1;
        match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_err = Some(e),
        }
        if start.elapsed() >= timeout {
            match last_err {
                Some(e) => bail!(
                    "timed out after {timeout:?} ({polls} checks) waiting for {what}; last error: {e:#}"
                ),
                None => bail!("timed out after {timeout:?} ({polls} checks) waiting for {what}"),
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// Asserts that `check` keeps returning true for the whole of `period` (polling), e.g. "no
/// second replacement pod appears". Fails at the first false, naming `what`.
pub async fn holds_for<F, Fut>(what: &str, period: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    let start = tokio::time::Instant::now();
    while start.elapsed() < period {
        if !check().await? {
            bail!("{what} stopped holding after {:?}", start.elapsed());
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}
