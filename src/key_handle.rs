//! `KeyHandle`: touch one `IdleQueue` key from any task or thread.

use crate::core::remote::RemoteActivity;
use crate::sync::Arc;
use crate::time_base::to_nanos;
use std::fmt;
use tokio::time::Instant;

/// Records activity on one key of an [`IdleQueue`](crate::IdleQueue) from any task
/// or thread, so the task that owns the queue keeps one runtime timer entry for all
/// its keys while other tasks see their traffic (a relay's per-session upstream
/// tasks, a pool's client tasks).
///
/// `Send + Sync + 'static`, cheap to clone (one `Arc`). A touch is one atomic
/// read-modify-write on that key's own word: no lock, no line shared by all keys, no
/// allocation, no runtime call. The owner sees it when the key's check time comes up,
/// exactly as it sees its own touches, so it is never early. A touch racing the
/// key's expiry either keeps it alive (and returns `true`) or comes after its
/// `Expired` (and returns `false`): never both, never lost. Once the entry has left
/// the queue (expired, removed, cleared, or the queue dropped) a touch returns
/// `false` and changes nothing, also for an entry later inserted in the same slot.
///
/// [`touch`](KeyHandle::touch) reads the clock of the runtime the *caller* runs in
/// (the system's monotonic clock outside one), like
/// [`ActivityHandle::touch`](crate::ActivityHandle::touch): from a plain thread, a
/// queue on a paused runtime gets real-time activity. Pass the owner's clock with
/// [`touch_at`](KeyHandle::touch_at) where that matters.
///
/// # Examples
///
/// See [`IdleQueue::handle`](crate::IdleQueue::handle).
#[derive(Clone)]
pub struct KeyHandle {
    remote: Arc<RemoteActivity>,
}

impl KeyHandle {
    pub(crate) fn new(remote: Arc<RemoteActivity>) -> Self {
        Self { remote }
    }

    /// Records activity now, by the tokio clock of the current runtime (the system
    /// clock outside one). `false` once the entry has left the queue.
    pub fn touch(&self) -> bool {
        self.touch_at(Instant::now())
    }

    /// Records activity at `at`: one atomic RMW. Older than the key's last activity
    /// through handles: ignored (still `true` for a live entry). `false` once the
    /// entry has left the queue.
    #[inline]
    pub fn touch_at(&self, at: Instant) -> bool {
        self.remote.touch_at(to_nanos(at))
    }
}

impl fmt::Debug for KeyHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyHandle")
            .field("live", &(self.remote.load() != crate::core::remote::LEFT))
            .finish()
    }
}
