//! A value that tasks wait on (has the cache synced, which resourceVersion it reflects), whose
//! waiters wake in the order they began to wait.
//!
//! tokio's `watch` channel would do, except for that order: to spread lock contention it files
//! each waiter under one of eight lists picked by the runtime's random generator, and wakes the
//! lists one after another. That generator is seeded from the operating system on every start
//! (tokio seeds it only under `--cfg tokio_unstable`), so when two controllers wait for one
//! informer, which of them runs first after the sync changes from process to process. Nothing
//! relies on that order in production, but the deterministic simulation must replay it: a seed
//! of the TTL-after-finished scenario, where the TTL and Job controllers both wait for the Job
//! informer, ran differently from one process to the next. [`Signal`] keeps a single list
//! (tokio's `Notify`, first come first woken).

use parking_lot::Mutex;
use tokio::sync::Notify;

/// A value and the tasks waiting for it to change.
#[derive(Debug)]
pub(crate) struct Signal<T> {
    value: Mutex<T>,
    changed: Notify,
}

impl<T: Clone + PartialEq> Signal<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            value: Mutex::new(value),
            changed: Notify::new(),
        }
    }

    /// The current value.
    pub(crate) fn get(&self) -> T {
        self.value.lock().clone()
    }

    /// `f` of the current value, without a copy.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.value.lock())
    }

    /// Sets the value; wakes every waiter, oldest first, if it changed.
    pub(crate) fn set(&self, value: T) {
        let mut current = self.value.lock();
        if *current == value {
            return;
        }
        *current = value;
        drop(current);
        self.changed.notify_waiters();
    }

    /// Changes the value in place and wakes every waiter, oldest first.
    pub(crate) fn modify(&self, f: impl FnOnce(&mut T)) {
        f(&mut self.value.lock());
        self.changed.notify_waiters();
    }

    /// Returns once the value satisfies `ready` (at once if it already does).
    pub(crate) async fn wait_for(&self, ready: impl Fn(&T) -> bool) {
        loop {
            // Registered before the check, so a change between the check and the wait wakes it.
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if ready(&self.value.lock()) {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::Signal;

    /// Waiters wake in the order they began to wait, however many there are.
    #[tokio::test(flavor = "current_thread")]
    async fn waiters_wake_in_the_order_they_began_to_wait() {
        let signal = Arc::new(Signal::new(false));
        let woken = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..16 {
            let (signal, woken) = (signal.clone(), woken.clone());
            tasks.push(tokio::spawn(async move {
                signal.wait_for(|v| *v).await;
                woken.lock().push(i);
            }));
        }
        // Every task is waiting before the value changes.
        tokio::task::yield_now().await;
        signal.set(true);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*woken.lock(), (0..16).collect::<Vec<_>>());
    }

    /// A waiter whose condition holds returns at once; one whose does not waits for a value
    /// that satisfies it, not merely for any change.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn waits_for_a_value_that_satisfies_it() {
        let signal = Arc::new(Signal::new(1u32));
        signal.wait_for(|v| *v == 1).await;
        let waiter = {
            let signal = signal.clone();
            tokio::spawn(async move { signal.wait_for(|v| *v >= 3).await })
        };
        tokio::task::yield_now().await;
        signal.set(2);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        signal.set(3);
        waiter.await.unwrap();
        assert_eq!(signal.get(), 3);
    }
}
