//! Turns for server searches (`DITTO_SEARCH_SLOTS`): at most that many run at once, and a
//! freed slot goes to the waiting search whose repository runs the fewest searches; among
//! equals, to the repository whose last search started longest ago (round robin), and within
//! a repository in arrival order. So a repository's queue of searches never holds another
//! repository's search back beyond the searches already running: the other search waits
//! for the next slot to free, not for the whole queue ahead of it. A search that stops
//! waiting (its client went away) leaves the queue at once, and a turn handed to it as it
//! stopped is given back.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// The slots of one server, shared by every search request.
#[derive(Clone)]
pub struct SearchTurns {
    state: Arc<Mutex<State>>,
    count: usize,
}

struct State {
    free: usize,
    /// Per repository running or waiting searches: how many run, and when the last started.
    repos: HashMap<i64, Served>,
    /// Counts the searches started, as the clock of [`Served::last_start`].
    started: u64,
    /// Counts the searches that waited, naming each waiter.
    queued: u64,
    /// Searches waiting, in arrival order; non-empty only while no slot is free.
    waiting: VecDeque<Waiter>,
}

#[derive(Default)]
struct Served {
    running: usize,
    last_start: u64,
}

struct Waiter {
    repo: i64,
    ticket: u64,
    tx: oneshot::Sender<SearchTurn>,
}

/// Takes a waiter that stops waiting out of the queue (dropped with the waiting future).
struct Leave<'a> {
    state: &'a Mutex<State>,
    ticket: u64,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut s = lock(self.state);
        if let Some(k) = s.waiting.iter().position(|w| w.ticket == self.ticket) {
            let w = s.waiting.remove(k).expect("an index below the length");
            s.forget_idle(w.repo);
        }
    }
}

/// A running search's slot, given back when dropped.
pub struct SearchTurn {
    state: Arc<Mutex<State>>,
    repo: i64,
    /// False for a turn that was never handed over ([`grant`]): it holds nothing.
    held: bool,
}

impl Drop for SearchTurn {
    fn drop(&mut self) {
        if self.held {
            let mut s = lock(&self.state);
            s.end(self.repo);
            grant(&mut s, &self.state);
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // The state is a few counters changed in whole steps, consistent even after a panic.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    /// Takes a free slot for a search of `repo`.
    fn start(&mut self, repo: i64) {
        self.free -= 1;
        self.started += 1;
        let r = self.repos.entry(repo).or_default();
        r.running += 1;
        r.last_start = self.started;
    }

    /// Gives back the slot a search of `repo` took.
    fn end(&mut self, repo: i64) {
        self.free += 1;
        if let Some(r) = self.repos.get_mut(&repo) {
            r.running -= 1;
        }
        self.forget_idle(repo);
    }

    /// Drops what is kept of a repository that neither runs nor waits for a search.
    fn forget_idle(&mut self, repo: i64) {
        if self.repos.get(&repo).is_some_and(|r| r.running == 0)
            && !self.waiting.iter().any(|w| w.repo == repo)
        {
            self.repos.remove(&repo);
        }
    }

    /// The order in which waiter `k` is served: lowest first.
    fn rank(&self, k: usize) -> (usize, u64, usize) {
        self.repos
            .get(&self.waiting[k].repo)
            .map_or((0, 0, k), |r| (r.running, r.last_start, k))
    }
}

/// Hands the free slots to waiters, the least-served repository first.
fn grant(s: &mut State, state: &Arc<Mutex<State>>) {
    while s.free > 0 {
        let Some(k) = (0..s.waiting.len()).min_by_key(|&k| s.rank(k)) else {
            return;
        };
        let w = s.waiting.remove(k).expect("an index below the length");
        if w.tx.is_closed() {
            s.forget_idle(w.repo);
            continue;
        }
        s.start(w.repo);
        let turn = SearchTurn {
            state: state.clone(),
            repo: w.repo,
            held: true,
        };
        if let Err(mut turn) = w.tx.send(turn) {
            // The waiter stopped between the check and the send: the slot is still free.
            turn.held = false;
            s.end(w.repo);
        }
    }
}

impl SearchTurns {
    pub fn new(count: usize) -> SearchTurns {
        SearchTurns {
            state: Arc::new(Mutex::new(State {
                free: count,
                repos: HashMap::new(),
                started: 0,
                queued: 0,
                waiting: VecDeque::new(),
            })),
            count,
        }
    }

    /// Waits for a slot for a search of repository `repo`.
    pub async fn turn(&self, repo: i64) -> SearchTurn {
        let (rx, ticket) = {
            let mut s = lock(&self.state);
            if s.free > 0 && s.waiting.is_empty() {
                s.start(repo);
                return SearchTurn {
                    state: self.state.clone(),
                    repo,
                    held: true,
                };
            }
            let (tx, rx) = oneshot::channel();
            s.queued += 1;
            let ticket = s.queued;
            s.waiting.push_back(Waiter { repo, ticket, tx });
            eprintln!(
                "search: repository {repo}: waits for one of {} search slots (DITTO_SEARCH_SLOTS), {} waiting",
                self.count,
                s.waiting.len()
            );
            (rx, ticket)
        };
        // Dropped with this future, as `rx` is: whichever goes first, a turn already sent is
        // given back when `rx` drops it, and a waiter still queued leaves the queue.
        let _leave = Leave {
            state: &self.state,
            ticket,
        };
        // The sender is dropped unsent only once this receiver is closed, which it is not
        // while this future runs.
        rx.await.expect("a waiting search is handed its turn")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};

    type Waiting = Pin<Box<dyn Future<Output = SearchTurn>>>;

    fn wait(turns: &SearchTurns, repo: i64) -> Waiting {
        let t = turns.clone();
        let mut f: Waiting = Box::pin(async move { t.turn(repo).await });
        assert!(poll(&mut f).is_none(), "repository {repo} waits");
        f
    }

    fn poll(f: &mut Waiting) -> Option<SearchTurn> {
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(t) => Some(t),
            Poll::Pending => None,
        }
    }

    fn now(turns: &SearchTurns, repo: i64) -> SearchTurn {
        let t = turns.clone();
        let mut f: Waiting = Box::pin(async move { t.turn(repo).await });
        poll(&mut f).expect("a free slot")
    }

    fn free(turns: &SearchTurns) -> usize {
        lock(&turns.state).free
    }

    #[test]
    fn another_repository_goes_before_a_queue_of_one() {
        let turns = SearchTurns::new(1);
        let a1 = now(&turns, 1);
        let mut a2 = wait(&turns, 1);
        let mut a3 = wait(&turns, 1);
        let mut b1 = wait(&turns, 2);
        drop(a1);
        let b1 = poll(&mut b1).expect("repository 2 runs next");
        assert!(poll(&mut a2).is_none() && poll(&mut a3).is_none());
        drop(b1);
        let a2 = poll(&mut a2).expect("then repository 1, in arrival order");
        assert!(poll(&mut a3).is_none());
        drop(a2);
        drop(poll(&mut a3).expect("and its next"));
        assert_eq!(free(&turns), 1);
    }

    #[test]
    fn with_two_slots_a_repository_running_none_goes_first() {
        let turns = SearchTurns::new(2);
        let a1 = now(&turns, 1);
        let b1 = now(&turns, 2);
        let mut a2 = wait(&turns, 1);
        let mut c1 = wait(&turns, 3);
        // Repository 1 still runs one search: repository 3, which runs none, goes first.
        drop(b1);
        let c1 = poll(&mut c1).expect("repository 3 runs");
        assert!(poll(&mut a2).is_none());
        drop(a1);
        let a2 = poll(&mut a2).expect("repository 1's second search runs");
        drop((a2, c1));
        assert_eq!(free(&turns), 2);
        assert!(lock(&turns.state).repos.is_empty());
    }

    #[test]
    fn a_search_that_stops_waiting_holds_nothing() {
        let turns = SearchTurns::new(1);
        let a1 = now(&turns, 1);
        // Gone before a slot frees: it leaves the queue at once.
        drop(wait(&turns, 2));
        assert!(lock(&turns.state).waiting.is_empty());
        // Handed the slot, then gone before it looked: the turn is given back.
        let late = wait(&turns, 3);
        drop(a1);
        assert_eq!(free(&turns), 0);
        drop(late);
        assert_eq!(free(&turns), 1);
        drop(now(&turns, 4));
        assert_eq!(free(&turns), 1);
        let s = lock(&turns.state);
        assert!(s.waiting.is_empty() && s.repos.is_empty());
    }
}
