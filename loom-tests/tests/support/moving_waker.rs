//! A waker whose clones move to a new address, and whose own address can be handed
//! to another task once it is gone: the two freedoms `RawWaker`'s contract gives that
//! tokio's, futures' and async-task's wakers happen not to use. Built with `unsafe`
//! (a `RawWaker` needs it), which is why it lives in this crate and not in the
//! library's own tests (the library forbids `unsafe` for every target).
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{RawWaker, RawWakerVTable, Waker};

/// The task a waker at this address currently stands for (its wake counter).
struct Address {
    task: Mutex<Arc<AtomicUsize>>,
}

/// One task's waker at an address of its own (see the module docs).
pub struct MovingWaker {
    address: Box<Address>,
}

impl MovingWaker {
    pub fn new() -> Self {
        Self {
            address: Box::new(Address {
                task: Mutex::new(Arc::new(AtomicUsize::new(0))),
            }),
        }
    }

    /// A waker for this task at its address; its clones are boxed afresh, each at a
    /// new address. Every waker this returned must be gone before
    /// [`reuse_address_for_another_task`](Self::reuse_address_for_another_task).
    pub fn waker(&self) -> Waker {
        let data = &*self.address as *const Address as *const ();
        // SAFETY: the vtable's functions treat `data` as the `Address`, which lives
        // as long as `self`, and the caller drops the waker before `self`.
        unsafe { Waker::from_raw(RawWaker::new(data, &AT_ADDRESS)) }
    }

    /// This task is gone and another task's waker now sits at the same address: the
    /// returned value wakes a fresh counter from there. Clones made before still
    /// wake the old task.
    pub fn reuse_address_for_another_task(self) -> Self {
        *self.address.task.lock().unwrap() = Arc::new(AtomicUsize::new(0));
        self
    }

    /// How many wakes reached the task now at this address.
    pub fn wakes(&self) -> usize {
        self.address.task.lock().unwrap().load(Ordering::SeqCst)
    }
}

impl Default for MovingWaker {
    fn default() -> Self {
        Self::new()
    }
}

fn boxed(task: Arc<AtomicUsize>) -> RawWaker {
    RawWaker::new(Box::into_raw(Box::new(task)) as *const (), &BOXED)
}

static AT_ADDRESS: RawWakerVTable = RawWakerVTable::new(
    // SAFETY (all four): `data` is the `Address` a live `MovingWaker` owns.
    |data| {
        boxed(
            unsafe { &*(data as *const Address) }
                .task
                .lock()
                .unwrap()
                .clone(),
        )
    },
    |data| {
        let address = unsafe { &*(data as *const Address) };
        address.task.lock().unwrap().fetch_add(1, Ordering::SeqCst);
    },
    |data| {
        let address = unsafe { &*(data as *const Address) };
        address.task.lock().unwrap().fetch_add(1, Ordering::SeqCst);
    },
    |_| {},
);

static BOXED: RawWakerVTable = RawWakerVTable::new(
    // SAFETY (all four): `data` came from `Box::into_raw` in `boxed` and is freed
    // exactly once, by `wake` or `drop`.
    |data| boxed(unsafe { &*(data as *const Arc<AtomicUsize>) }.clone()),
    |data| {
        let task = unsafe { Box::from_raw(data as *mut Arc<AtomicUsize>) };
        task.fetch_add(1, Ordering::SeqCst);
    },
    |data| {
        let task = unsafe { &*(data as *const Arc<AtomicUsize>) };
        task.fetch_add(1, Ordering::SeqCst);
    },
    |data| drop(unsafe { Box::from_raw(data as *mut Arc<AtomicUsize>) }),
);
