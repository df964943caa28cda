//! Freeing large values off the path of an answer. A million-node graph or solve result is
//! millions of small allocations, and freeing them one by one is a pass of its own: on the
//! path of an answer that a time limit governs (a graph read cut at its deadline, a job
//! result leaving the table on an async thread) it would delay the answer by that pass.
//! [`free_aside`] hands a value to a thread of its own that drops it; [`Aside`] does so
//! when it is dropped still holding its value (the error paths of a builder), and gives
//! the value back otherwise ([`Aside::into_inner`]).
//!
//! Scope: only the time of the caller's path changes; the memory is freed all the same,
//! a little later. A process that exits right after (the CLI) ends the thread with it.

use std::ops::{Deref, DerefMut};

/// Drops `value` on a thread of its own; where no thread can be started, here.
pub fn free_aside<T: Send + 'static>(value: T) {
    // On failure `spawn` drops its closure, and with it the value, here.
    let _ = std::thread::Builder::new()
        .name("free-aside".into())
        .spawn(move || drop(value));
}

/// A value that is freed by [`free_aside`] if it is dropped before it is taken back.
pub struct Aside<T: Send + 'static>(Option<T>);

impl<T: Send + 'static> Aside<T> {
    pub fn new(value: T) -> Aside<T> {
        Aside(Some(value))
    }

    /// The value, which the caller now owns (and frees where it drops it).
    pub fn into_inner(mut self) -> T {
        self.0
            .take()
            .expect("an Aside holds its value until it is taken")
    }
}

impl<T: Send + 'static> Deref for Aside<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
            .as_ref()
            .expect("an Aside holds its value until it is taken")
    }
}

impl<T: Send + 'static> DerefMut for Aside<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
            .as_mut()
            .expect("an Aside holds its value until it is taken")
    }
}

impl<T: Send + 'static> Drop for Aside<T> {
    fn drop(&mut self) {
        if let Some(value) = self.0.take() {
            free_aside(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Sends the name of the thread that drops it.
    struct Reports(mpsc::Sender<Option<String>>);
    impl Drop for Reports {
        fn drop(&mut self) {
            let name = std::thread::current().name().map(str::to_string);
            let _ = self.0.send(name);
        }
    }

    #[test]
    fn a_value_dropped_in_an_aside_is_freed_on_another_thread_and_a_taken_one_is_not() {
        let (tx, rx) = mpsc::channel();
        drop(Aside::new(Reports(tx.clone())));
        let freed_by = rx.recv().unwrap();
        assert_eq!(freed_by.as_deref(), Some("free-aside"));
        let here = std::thread::current().name().map(str::to_string);
        drop(Aside::new(Reports(tx)).into_inner());
        assert_eq!(rx.recv().unwrap(), here);
    }
}
