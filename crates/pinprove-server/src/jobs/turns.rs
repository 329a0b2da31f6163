//! Turns to decode a request (`[jobs] max_preparing` at once), given by
//! priority: a WindowPoSt's request is decoded before PoRep requests that
//! came first, as the engine proves it first. A first-come semaphore made
//! a deadline wait behind the decoding of a sealing backlog.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};

use pinprove_engine::Priority;
use pinprove_mem::sync::Recover;
use tokio::sync::oneshot;

/// `n` turns, handed out highest priority first, first come first served
/// within one.
pub(crate) struct Turns {
    state: Mutex<State>,
}

struct State {
    free: usize,
    next_seq: u64,
    waiting: BinaryHeap<Waiting>,
}

struct Waiting {
    priority: Priority,
    seq: u64,
    give: oneshot::Sender<Turn>,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    /// The heap's greatest is served first: higher priority, then earlier.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        self.priority
            .rank()
            .cmp(&other.priority.rank())
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// One turn, given back (to the most urgent waiter) when dropped.
pub(crate) struct Turn {
    turns: Option<Arc<Turns>>,
}

impl Turns {
    pub(crate) fn new(n: usize) -> Arc<Turns> {
        Arc::new(Turns {
            state: Mutex::new(State {
                free: n.max(1),
                next_seq: 0,
                waiting: BinaryHeap::new(),
            }),
        })
    }

    /// A turn for work of `priority`, waiting behind more urgent and earlier
    /// waiters of its priority.
    pub(crate) async fn take(self: &Arc<Self>, priority: Priority) -> Turn {
        let rx = {
            let mut s = self.state.lock().recover();
            if s.free > 0 && s.waiting.is_empty() {
                s.free -= 1;
                return Turn {
                    turns: Some(Arc::clone(self)),
                };
            }
            let (give, rx) = oneshot::channel();
            let seq = s.next_seq;
            s.next_seq += 1;
            s.waiting.push(Waiting { priority, seq, give });
            rx
        };
        // The sender is dropped only with the table, which awaits nothing
        // after that; a turn sent to a waiter that went away comes back
        // through the channel's drop.
        rx.await.unwrap_or(Turn { turns: None })
    }

    /// Gives a turn back: to the most urgent waiter still waiting, or to
    /// the free count.
    fn give_back(self: &Arc<Self>) {
        loop {
            let next = {
                let mut s = self.state.lock().recover();
                match s.waiting.pop() {
                    Some(w) => w,
                    None => {
                        s.free += 1;
                        return;
                    }
                }
            };
            let turn = Turn {
                turns: Some(Arc::clone(self)),
            };
            match next.give.send(turn) {
                Ok(()) => return,
                // That waiter went away: the next one.
                Err(mut unsent) => unsent.turns = None,
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.state.lock().recover().waiting.len()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let Some(t) = self.turns.take() {
            t.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_go_to_the_most_urgent_waiter_then_the_earliest() {
        let turns = Turns::new(1);
        let held = turns.take(Priority::Normal).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for (name, p) in [
            ("normal-1", Priority::Normal),
            ("normal-2", Priority::Normal),
            ("high", Priority::High),
        ] {
            let (t, o) = (Arc::clone(&turns), Arc::clone(&order));
            waiters.push(tokio::spawn(async move {
                let _turn = t.take(p).await;
                o.lock().unwrap().push(name);
            }));
            while turns.waiting() < waiters.len() {
                tokio::task::yield_now().await;
            }
        }
        // A waiter that goes away does not take a turn with it.
        let gone = tokio::spawn({
            let t = Arc::clone(&turns);
            async move { t.take(Priority::Critical).await }
        });
        while turns.waiting() < 4 {
            tokio::task::yield_now().await;
        }
        gone.abort();
        let _ = gone.await;
        drop(held);
        for w in waiters {
            w.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["high", "normal-1", "normal-2"]);
        // Every turn came back.
        let _again = turns.take(Priority::Low).await;
        assert_eq!(turns.waiting(), 0);
    }
}
