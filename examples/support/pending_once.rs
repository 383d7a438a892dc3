//! The request the per-request workloads time: pending once (its task is woken at
//! once, as by a reply), then done. One definition, so that `examples/requests.rs`
//! and `benches/never_dearer.rs` measure the same request.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// See the module docs.
pub struct PendingOnce(pub bool);

impl Future for PendingOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
