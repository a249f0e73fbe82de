//! The one policy for poisoned locks, for every crate of the workspace.
//!
//! Owns [`LockExt`] and [`RwLockExt`] only; depends on nothing but `std`.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Takes a lock even when a thread panicked while holding it.
///
/// The policy: a poisoned lock is recovered with [`PoisonError::into_inner`], never turned into a
/// second panic. Every lock of these crates guards plain data (maps, queues, flags) whose
/// invariants hold between any two statements of the code that updates it, so a panic midway
/// cannot leave it half-updated in a way the next user must not see; cascading the panic into
/// every other task would only turn one failure into many.
pub trait LockExt {
    /// The guard of the lock.
    type Guard<'a>
    where
        Self: 'a;

    /// Locks, recovering a poisoned lock.
    fn lock_or_recover(&self) -> Self::Guard<'_>;
}

impl<T: ?Sized> LockExt for Mutex<T> {
    type Guard<'a>
        = MutexGuard<'a, T>
    where
        Self: 'a;

    fn lock_or_recover(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`LockExt`] for the two sides of a [`RwLock`], with the same policy.
pub trait RwLockExt<T: ?Sized> {
    /// Locks for reading, recovering a poisoned lock.
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T>;
    /// Locks for writing, recovering a poisoned lock.
    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}
