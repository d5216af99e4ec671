//! The read connections of an index backend, reused across requests: at most `MAX_IDLE`
//! kept; one that is no longer usable (a closed network connection) is dropped instead.

use std::{
    ops::{Deref, DerefMut},
    sync::Mutex,
};

use crate::store::StoreResult;

const MAX_IDLE: usize = 16;

type Connect<C> = Box<dyn Fn() -> StoreResult<C> + Send + Sync>;

pub struct Pool<C> {
    idle: Mutex<Vec<C>>,
    connect: Connect<C>,
    usable: fn(&C) -> bool,
}

/// A connection out of the pool, returned to it when dropped.
pub struct Pooled<'a, C> {
    pool: &'a Pool<C>,
    conn: Option<C>,
}

impl<C> Pool<C> {
    /// `connect` opens a new connection; `usable` says whether one may go back.
    pub fn new(
        connect: impl Fn() -> StoreResult<C> + Send + Sync + 'static,
        usable: fn(&C) -> bool,
    ) -> Self {
        Pool {
            idle: Mutex::new(Vec::new()),
            connect: Box::new(connect),
            usable,
        }
    }

    /// Closes the idle connections (those in use go back to the pool as usual).
    pub fn close_idle(&self) {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    pub fn get(&self) -> StoreResult<Pooled<'_, C>> {
        let popped = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match popped {
            Some(c) => c,
            None => (self.connect)()?,
        };
        Ok(Pooled {
            pool: self,
            conn: Some(conn),
        })
    }
}

impl<C> Deref for Pooled<'_, C> {
    type Target = C;
    fn deref(&self) -> &C {
        self.conn.as_ref().expect("present until drop")
    }
}

impl<C> DerefMut for Pooled<'_, C> {
    fn deref_mut(&mut self) -> &mut C {
        self.conn.as_mut().expect("present until drop")
    }
}

impl<C> Drop for Pooled<'_, C> {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            if !(self.pool.usable)(&c) {
                return;
            }
            let mut idle = self.pool.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < MAX_IDLE {
                idle.push(c);
            }
        }
    }
}
