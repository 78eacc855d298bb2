//! The device event thread: one event-manager loop over every virtio
//! device's queue eventfds and host sockets, plus a stop eventfd.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use event_manager::{EventManager, EventOps, EventSet, Events, MutEventSubscriber, SubscriberOps};
use vmm_sys_util::eventfd::EventFd;

use crate::hardening::{self, ThreadKind};

/// A subscriber as the loop holds it.
pub type Subscriber = Arc<Mutex<dyn MutEventSubscriber + Send>>;

/// Errors starting the loop.
#[derive(Debug, thiserror::Error)]
pub enum EventLoopError {
    /// epoll could not be created.
    #[error("cannot create the device event loop")]
    Create(#[source] event_manager::Error),
    /// The stop eventfd could not be created.
    #[error("cannot create the event loop's stop eventfd")]
    StopFd(#[source] std::io::Error),
    /// The thread could not be spawned.
    #[error("cannot spawn the device event thread")]
    Spawn(#[source] std::io::Error),
}

struct Stopper {
    evt: EventFd,
    stop: Arc<AtomicBool>,
}

impl MutEventSubscriber for Stopper {
    fn process(&mut self, _events: Events, _ops: &mut EventOps) {
        let _ = self.evt.read();
        self.stop.store(true, Ordering::SeqCst);
    }

    fn init(&mut self, ops: &mut EventOps) {
        ops.add(Events::new(&self.evt, EventSet::IN))
            .expect("stop eventfd registers once");
    }
}

/// A running event thread.
pub struct EventLoop {
    stop_evt: EventFd,
    thread: Option<JoinHandle<()>>,
}

impl EventLoop {
    /// Starts the thread, with the device seccomp filter if `seccomp`.
    pub fn start(subscribers: Vec<Subscriber>, seccomp: bool) -> Result<EventLoop, EventLoopError> {
        let mut manager = EventManager::<Subscriber>::new().map_err(EventLoopError::Create)?;
        let stop_evt = EventFd::new(libc::EFD_NONBLOCK).map_err(EventLoopError::StopFd)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopper = Stopper {
            evt: stop_evt.try_clone().map_err(EventLoopError::StopFd)?,
            stop: stop.clone(),
        };
        manager.add_subscriber(Arc::new(Mutex::new(stopper)));
        for s in subscribers {
            manager.add_subscriber(s);
        }
        let thread = std::thread::Builder::new()
            .name("devices".into())
            .spawn(move || run(manager, stop, seccomp))
            .map_err(EventLoopError::Spawn)?;
        Ok(EventLoop {
            stop_evt,
            thread: Some(thread),
        })
    }

    /// Stops and joins the thread.
    pub fn stop(&mut self) {
        let _ = self.stop_evt.write(1);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for EventLoop {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(mut manager: EventManager<Subscriber>, stop: Arc<AtomicBool>, seccomp: bool) {
    if seccomp && let Err(e) = hardening::apply(ThreadKind::Devices) {
        eprintln!("cubicle-vmm: {e}; exiting rather than running unconfined");
        std::process::exit(3);
    }
    while !stop.load(Ordering::SeqCst) {
        if manager.run().is_err() {
            break;
        }
    }
}
