//! quinn integration (feature `quinn`): a [`quinn::Runtime`] whose connection timers
//! are lazy [`Sleep`]s.
//!
//! quinn's connection driver resets one timer whenever quinn-proto's next timeout
//! changes, which is about once per packet, swinging between later deadlines (idle,
//! PTO) and earlier ones (max ACK delay, pacing): the kernel's TLP/RTO pattern. With
//! [`LazyRuntime`] the later resets are stores; earlier ones re-arm at once, as
//! tokio's do. Everything else (spawning, the UDP socket, the clock) is exactly
//! [`quinn::TokioRuntime`].
//!
//! ```no_run
//! # async fn demo(server_config: quinn::ServerConfig) -> std::io::Result<()> {
//! use lazy_deadline::quinn::LazyRuntime;
//! use std::sync::Arc;
//!
//! let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
//! // The one-line swap: `Arc::new(quinn::TokioRuntime)` becomes `Arc::new(LazyRuntime)`.
//! let endpoint = quinn::Endpoint::new(
//!     quinn::EndpointConfig::default(),
//!     Some(server_config),
//!     socket,
//!     Arc::new(LazyRuntime),
//! )?;
//! # drop(endpoint);
//! # Ok(())
//! # }
//! ```

use crate::Sleep;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

/// A [`quinn::Runtime`] for tokio whose timers are lazy [`Sleep`]s.
///
/// `new_timer` returns a [`Sleep`]; `spawn`, `wrap_udp_socket` and `now` do what
/// [`quinn::TokioRuntime`] does (`now` reads tokio's clock, so a paused runtime's
/// time is quinn's time too). Use it inside a tokio runtime with the time and IO
/// drivers enabled, as `TokioRuntime` requires.
///
/// # Examples
///
/// See the [module docs](self) for the one-line swap; `examples/quinn_bulk.rs` runs
/// quinn on both runtimes side by side.
#[derive(Debug, Default, Clone, Copy)]
pub struct LazyRuntime;

impl quinn::Runtime for LazyRuntime {
    fn new_timer(&self, at: Instant) -> Pin<Box<dyn quinn::AsyncTimer>> {
        Box::pin(crate::sleep_until(at.into()))
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        tokio::spawn(future);
    }

    fn wrap_udp_socket(
        &self,
        socket: std::net::UdpSocket,
    ) -> io::Result<Arc<dyn quinn::AsyncUdpSocket>> {
        quinn::Runtime::wrap_udp_socket(&quinn::TokioRuntime, socket)
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// quinn's timer interface on a lazy [`Sleep`]: `reset` to a later instant is a
/// store; `poll` is [`Future::poll`] (it spends tokio's cooperative budget like
/// tokio's `Sleep`, which is why quinn reads the clock before polling its timer).
impl quinn::AsyncTimer for Sleep {
    fn reset(self: Pin<&mut Self>, at: Instant) {
        Sleep::reset(self, at.into());
    }

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Future::poll(self, cx)
    }
}
