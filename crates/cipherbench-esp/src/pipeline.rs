//! An ordered parallel pipeline: one producer, N workers, one consumer, and jobs
//! leave in the order they entered. This is how one SA's packets are sealed or
//! opened on several cores without reordering a flow: the same shape as
//! wireguard-go's encryption queue beside its per-peer sequential queue, and the
//! kernel's `pcrypt` (parallel workers, then a serial step in submission order).
//!
//! ```text
//!   producer ──(seq, job)──> work queue ──> worker 0..N ──(seq, job)──> consumer
//!      ^   (the caller's thread)              (parallel)      reorders by seq,
//!      └───────────────── free jobs <──────────────────────── consumes in order
//! ```
//!
//! A fixed pool of `jobs` circulates, so nothing is allocated per job and at most
//! `jobs.len()` are in flight: a slow consumer holds the producer back instead of
//! queueing without bound. Jobs are batches (a gateway's job is up to a system
//! call's worth of packets), so the locks here are taken once per batch, not per
//! packet. Sequence-sensitive work (an ESP sequence number) belongs in the
//! producer, which runs in arrival order: see [`crate::OutboundSa::reserve`].
//!
//! No sockets, no clock: the caller's closures do the I/O. A panic in any stage
//! closes the pipeline (the others drain and stop) and is re-raised by [`run`].

use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread;

/// How many times a worker with an empty queue, or the consumer missing its next
/// job, yields its core and looks again before it sleeps. Sleeping costs a futex
/// wait, and waking it a futex wake (an IPI to an idle vCPU under KVM): measured on
/// the 2-vCPU machine of BENCHMARKS.md section 5a, 16 yields took 2 workers from
/// 3.1-3.5 to 4.1-4.5 GB/s sealing aes128-gcm (CPU per batch 46-50 -> 38-41 µs),
/// and more bought nothing but CPU burnt by the waiting stages. A yield lets any
/// other runnable thread have the core, and after 16 the stage sleeps as before,
/// so an idle gateway costs nothing.
const SPINS: usize = 16;

/// Which thread of the pipeline is starting, for [`Hooks::on_start`] (pinning a
/// core, registering the thread's CPU clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Worker `i` (0-based).
    Worker(usize),
    /// The in-order consumer.
    Consumer,
}

/// How the pipeline names its threads and what each does first.
pub struct Hooks<'a> {
    /// Thread names: `NAME/i` for worker i, `NAME-out` for the consumer (Linux
    /// keeps the first 15 bytes).
    pub name: &'a str,
    /// Called on each new thread before it takes its first job.
    pub on_start: &'a (dyn Fn(Stage) + Sync),
}

/// A multi-consumer queue of jobs for the workers; closed by the producer.
struct WorkQueue<T> {
    state: Mutex<QueueState<T>>,
    ready: Condvar,
}

struct QueueState<T> {
    items: VecDeque<T>,
    closed: bool,
    /// Workers asleep in [`WorkQueue::pop`]. A push wakes one only if one sleeps:
    /// a condvar's notify is a system call even with no waiter, and while the
    /// workers are busy (the case that matters) nobody needs waking.
    sleeping: usize,
}

impl<T> WorkQueue<T> {
    fn new(capacity: usize) -> WorkQueue<T> {
        WorkQueue {
            state: Mutex::new(QueueState {
                items: VecDeque::with_capacity(capacity),
                closed: false,
                sleeping: 0,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, QueueState<T>> {
        // Nothing panics while holding the lock, so a poisoned one is consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, item: T) {
        let mut state = self.lock();
        state.items.push_back(item);
        let wake = state.sleeping > 0;
        drop(state);
        if wake {
            self.ready.notify_one();
        }
    }

    /// The next job; `None` once closed and empty.
    fn pop(&self) -> Option<T> {
        for _ in 0..SPINS {
            {
                let mut state = self.lock();
                if let Some(item) = state.items.pop_front() {
                    return Some(item);
                }
                if state.closed {
                    return None;
                }
            }
            thread::yield_now();
        }
        let mut state = self.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                return Some(item);
            }
            if state.closed {
                return None;
            }
            state.sleeping += 1;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
            state.sleeping -= 1;
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

/// Runs its closure when dropped, including on unwinding: a stage that stops, by
/// finishing or by panicking, closes the work queue (no worker waits for a job
/// that will never come) or tells the free list the consumer is gone.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// The free jobs, returned by the consumer to the producer. A producer that ran out
/// sleeps until half the pool is back (or the consumer is gone), not until the
/// first job is: with every job in flight the workers have enough queued, and one
/// wake-up per half pool instead of one per job keeps the producer's thread (and
/// its system calls) off the cores the workers need.
struct FreeList<T> {
    state: Mutex<FreeState<T>>,
    back: Condvar,
    /// How many free jobs wake a sleeping producer.
    wake_at: usize,
}

struct FreeState<T> {
    jobs: Vec<T>,
    producer_sleeping: bool,
    consumer_gone: bool,
}

impl<T> FreeList<T> {
    fn new(jobs: Vec<T>) -> FreeList<T> {
        let wake_at = jobs.len().div_ceil(2).max(1);
        FreeList {
            state: Mutex::new(FreeState {
                jobs,
                producer_sleeping: false,
                consumer_gone: false,
            }),
            back: Condvar::new(),
            wake_at,
        }
    }

    fn lock(&self) -> MutexGuard<'_, FreeState<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A free job for the producer; `None` once the consumer has stopped and none
    /// is left.
    fn take(&self) -> Option<T> {
        let mut state = self.lock();
        if state.jobs.is_empty() {
            state.producer_sleeping = true;
            while state.jobs.len() < self.wake_at && !state.consumer_gone {
                state = self.back.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            state.producer_sleeping = false;
        }
        state.jobs.pop()
    }

    /// The consumer gives a job back.
    fn give(&self, job: T) {
        let mut state = self.lock();
        state.jobs.push(job);
        let wake = state.producer_sleeping && state.jobs.len() >= self.wake_at;
        drop(state);
        if wake {
            self.back.notify_one();
        }
    }

    /// The consumer has stopped (finished or unwinding): a waiting producer
    /// takes what is left and then stops.
    fn consumer_gone(&self) {
        self.lock().consumer_gone = true;
        self.back.notify_one();
    }
}

/// The next finished job for the consumer, yielding up to [`SPINS`] times before
/// it sleeps; `None` once every worker is gone and nothing is left.
fn receive_done<T>(done: &mpsc::Receiver<T>) -> Option<T> {
    for _ in 0..SPINS {
        match done.try_recv() {
            Ok(item) => return Some(item),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) => thread::yield_now(),
        }
    }
    done.recv().ok()
}

/// Runs the pipeline until `produce` returns false, then drains it: every job
/// produced is worked and consumed, in order, before `run` returns the workers'
/// states.
///
/// - `jobs`: the pool that circulates (at least one; two per worker keeps every
///   worker busy while the consumer works).
/// - `workers`: one state per worker thread (its own SA worker, counters).
/// - `produce`: on the calling thread, fills a free job; false stops the pipeline
///   (that job is dropped).
/// - `work`: on a worker, in parallel with the other workers.
/// - `consume`: on the consumer thread, strictly in the order `produce` filled.
///
/// # Panics
/// Re-raises a panic of any stage, after the others have stopped; panics with no
/// worker or no job.
pub fn run<J, W, P, F, C>(
    jobs: Vec<J>,
    workers: Vec<W>,
    hooks: &Hooks<'_>,
    mut produce: P,
    work: F,
    mut consume: C,
) -> Vec<W>
where
    J: Send,
    W: Send,
    P: FnMut(&mut J) -> bool,
    F: Fn(&mut W, &mut J) + Sync,
    C: FnMut(&mut J) + Send,
{
    assert!(!workers.is_empty(), "a pipeline needs a worker");
    assert!(!jobs.is_empty(), "a pipeline needs a job");
    let depth = jobs.len();
    let free = FreeList::new(jobs);
    let queue = WorkQueue::<(u64, J)>::new(depth);
    let (done_tx, done_rx) = mpsc::channel::<(u64, J)>();
    thread::scope(|scope| {
        let close = OnDrop(|| queue.close());
        let handles: Vec<_> = workers
            .into_iter()
            .enumerate()
            .map(|(i, mut state)| {
                let (queue, work, done_tx) = (&queue, &work, done_tx.clone());
                thread::Builder::new()
                    .name(format!("{}/{i}", hooks.name))
                    .spawn_scoped(scope, move || {
                        // A panicking worker closes the queue: the others finish
                        // what is queued, the consumer stops at the gap, and the
                        // producer finds no free job.
                        let _close = OnDrop(|| queue.close());
                        (hooks.on_start)(Stage::Worker(i));
                        while let Some((seq, mut job)) = queue.pop() {
                            work(&mut state, &mut job);
                            if done_tx.send((seq, job)).is_err() {
                                break;
                            }
                        }
                        state
                    })
                    .expect("spawning a pipeline worker")
            })
            .collect();
        drop(done_tx);
        let free = &free;
        let consumer = thread::Builder::new()
            .name(format!("{}-out", hooks.name))
            .spawn_scoped(scope, move || {
                let _gone = OnDrop(|| free.consumer_gone());
                (hooks.on_start)(Stage::Consumer);
                // In flight are at most `depth` jobs with consecutive numbers from
                // `next`, so `seq % depth` never holds two at once.
                let mut held: Vec<Option<J>> = (0..depth).map(|_| None).collect();
                let mut next = 0u64;
                while let Some((seq, job)) = receive_done(&done_rx) {
                    held[(seq % depth as u64) as usize] = Some(job);
                    while let Some(mut job) = held[(next % depth as u64) as usize].take() {
                        consume(&mut job);
                        next += 1;
                        free.give(job);
                    }
                }
            })
            .expect("spawning the pipeline's consumer");
        let mut seq = 0u64;
        while let Some(mut job) = free.take() {
            if !produce(&mut job) {
                break;
            }
            queue.push((seq, job));
            seq += 1;
        }
        drop(close);
        let states: Vec<W> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        if let Err(p) = consumer.join() {
            std::panic::resume_unwind(p);
        }
        states
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn hooks<'a>(on_start: &'a (dyn Fn(Stage) + Sync)) -> Hooks<'a> {
        Hooks {
            name: "test",
            on_start,
        }
    }

    #[test]
    fn consumes_in_production_order_although_workers_finish_out_of_order() {
        let started = AtomicUsize::new(0);
        let on_start = |_: Stage| {
            started.fetch_add(1, Ordering::Relaxed);
        };
        let mut produced = 0u64;
        let mut seen = Vec::new();
        let states = run(
            vec![0u64; 6],
            vec![0usize; 3],
            &hooks(&on_start),
            |job| {
                *job = produced;
                produced += 1;
                produced <= 200
            },
            |count, job| {
                // Even jobs take longer: later odd ones overtake them.
                if *job % 2 == 0 {
                    thread::sleep(std::time::Duration::from_micros(200));
                }
                *count += 1;
            },
            |job| seen.push(*job),
        );
        assert_eq!(seen, (0..200).collect::<Vec<_>>());
        assert_eq!(states.iter().sum::<usize>(), 200);
        assert_eq!(
            started.load(Ordering::Relaxed),
            4,
            "three workers, one consumer"
        );
    }

    #[test]
    fn every_pool_size_drains_in_order_although_the_producer_waits_for_half_the_pool() {
        for jobs in 1..=7 {
            for workers in 1..=3 {
                let mut produced = 0u32;
                let mut seen = Vec::new();
                run(
                    vec![0u32; jobs],
                    vec![(); workers],
                    &hooks(&|_| {}),
                    |job| {
                        *job = produced;
                        produced += 1;
                        produced <= 100
                    },
                    |_, _| {},
                    |job| seen.push(*job),
                );
                assert_eq!(
                    seen,
                    (0..100).collect::<Vec<_>>(),
                    "{jobs} jobs, {workers} workers"
                );
            }
        }
    }

    #[test]
    fn a_panicking_consumer_stops_the_pipeline_and_is_reraised() {
        let outcome = std::panic::catch_unwind(|| {
            let mut n = 0u32;
            run(
                vec![0u32; 4],
                vec![(); 2],
                &hooks(&|_| {}),
                |job| {
                    n += 1;
                    *job = n;
                    true
                },
                |_, _| {},
                |job| assert!(*job != 50, "consumer fails on job 50"),
            )
        });
        assert!(outcome.is_err());
    }

    #[test]
    fn a_panicking_worker_stops_the_pipeline_and_is_reraised() {
        let outcome = std::panic::catch_unwind(|| {
            let mut n = 0u32;
            run(
                vec![0u32; 4],
                vec![(); 2],
                &hooks(&|_| {}),
                |job| {
                    n += 1;
                    *job = n;
                    true
                },
                |_, job| assert!(*job != 50, "worker fails on job 50"),
                |_| {},
            )
        });
        assert!(outcome.is_err());
    }
}
