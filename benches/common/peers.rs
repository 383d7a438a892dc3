//! Hand-written baselines that mirror real stacks, arming TLP (now + 20 ms) and RTO
//! (now + 200 ms) per packet. Shared by the criterion suites and `examples/compare/`
//! (which includes this module by path), so both measure the same code.

use super::{registered_sleep, registered_slot_timer, Tcp, RTO, TLP};
use lazy_deadline::SlotTimer;
use std::pin::Pin;
use tokio::time::{Instant, Sleep};

/// One TCP-like packet's timer work.
pub trait Peer {
    fn packet(&mut self, now: Instant);
}

/// A timing loop of `n` packets, 1 µs apart from `base`, for `peer` (generic, so the
/// packet work inlines into the loop).
pub fn packets<P: Peer>(base: Instant, mut peer: P) -> impl FnMut(u64) {
    let mut now = base;
    move |n| {
        for _ in 0..n {
            now += super::PACKET;
            peer.packet(std::hint::black_box(now));
        }
    }
}

/// Linux's pre-2019 layout: one timer carries TLP and RTO, moved earlier on every
/// send and later on every ACK.
pub struct KernelStyle(Pin<Box<Sleep>>);

impl KernelStyle {
    pub fn new(base: Instant) -> Self {
        Self(registered_sleep(base + TLP))
    }
}

impl Peer for KernelStyle {
    #[inline]
    fn packet(&mut self, now: Instant) {
        self.0.as_mut().reset(now + TLP);
        self.0.as_mut().reset(now + RTO);
    }
}

/// One tokio `Sleep` per kind, each reset later.
pub struct TwoSleeps {
    tlp: Pin<Box<Sleep>>,
    rto: Pin<Box<Sleep>>,
}

impl TwoSleeps {
    pub fn new(base: Instant) -> Self {
        Self {
            tlp: registered_sleep(base + TLP),
            rto: registered_sleep(base + RTO),
        }
    }
}

impl Peer for TwoSleeps {
    #[inline]
    fn packet(&mut self, now: Instant) {
        self.tlp.as_mut().reset(now + TLP);
        self.rto.as_mut().reset(now + RTO);
    }
}

/// quinn's layout: a table of optional deadlines and one `Sleep` reset whenever the
/// table's minimum changes.
pub struct QuinnStyle {
    table: [Option<Instant>; 5],
    armed: Instant,
    sleep: Pin<Box<Sleep>>,
}

impl QuinnStyle {
    pub fn new(base: Instant) -> Self {
        Self {
            table: [None; 5],
            armed: base + TLP,
            sleep: registered_sleep(base + TLP),
        }
    }
}

impl Peer for QuinnStyle {
    #[inline]
    fn packet(&mut self, now: Instant) {
        self.table[Tcp::Tlp as usize] = Some(now + TLP);
        self.table[Tcp::Rto as usize] = Some(now + RTO);
        let next = self.table.iter().flatten().min().copied();
        if let Some(next) = next.filter(|&next| next != self.armed) {
            self.sleep.as_mut().reset(next);
            self.armed = next;
        }
    }
}

/// Ours, with one clock reading per packet.
pub struct SlotBatch(SlotTimer<Tcp>);

impl SlotBatch {
    pub fn new(base: Instant) -> Self {
        Self(registered_slot_timer(base))
    }
}

impl Peer for SlotBatch {
    #[inline]
    fn packet(&mut self, now: Instant) {
        let mut batch = self.0.batch_at(now);
        batch.set_after(Tcp::Tlp, TLP);
        batch.set_after(Tcp::Rto, RTO);
    }
}
