/*!
The locks this process holds through guards, and the thread each guard is bound to: so that a
thread that asks for what it already holds through a guard bound to it fails at once instead of
waiting for itself (every acquisition opens the files it locks anew, and two open file
descriptions of one file exclude each other, in one process as in two). A guard is bound to the
thread that took it until it is [unbound](crate::Unbound) (it is not `Send` until then, so a
bound guard is certainly still on its thread: the check is exact); the hold of an unbound guard
belongs to no thread, and every thread waits for it as another process would. Whole-file locks (`flock`) and byte ranges
(OFD locks) are kept apart, as the kernel keeps them: a range conflicts only with a range of the
same file that overlaps it.
*/
use std::{
    fs::Metadata,
    os::unix::fs::MetadataExt,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
    thread::{self, ThreadId},
};

use crate::{
    error::{Error, ErrorKind},
    platform::lock::Mode,
};

/// One holding: the lock file's device and inode, the thread it is bound to, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    /// This holding among all of the process's (a guard's removal and unbinding find it so).
    id: u64,
    dev: u64,
    ino: u64,
    /// `None`: unbound, held for no thread in particular.
    thread: Option<ThreadId>,
    mode: Mode,
    /// The lock file is a device (`/dev/null`): nothing is written beside it.
    device: bool,
    /// A byte range (start, length; 0: to the end of all offsets), or the whole file (`flock`).
    range: Option<(u64, u64)>,
}

impl Key {
    /// This thread's holding, in `mode`, of the file `meta` describes.
    pub(crate) fn new(meta: &Metadata, mode: Mode) -> Key {
        use std::os::unix::fs::FileTypeExt;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Key {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            dev: meta.dev(),
            ino: meta.ino(),
            thread: Some(thread::current().id()),
            mode,
            device: meta.file_type().is_char_device(),
            range: None,
        }
    }

    /// This thread's holding, in `mode`, of `len` bytes from `start` of the file `meta`
    /// describes (`len` 0: to the end of all offsets).
    pub(crate) fn range(meta: &Metadata, mode: Mode, start: u64, len: u64) -> Key {
        Key {
            range: Some((start, len)),
            ..Key::new(meta, mode)
        }
    }

    /// Whether the lock file is a device, beside which no record is kept.
    pub(crate) fn device(&self) -> bool {
        self.device
    }

    /// The file's device and inode numbers.
    pub(crate) fn file(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }
}

static HELD: Mutex<Vec<Key>> = Mutex::new(Vec::new());

fn table() -> std::sync::MutexGuard<'static, Vec<Key>> {
    // A panic elsewhere while holding the table leaves it consistent (pushes and removes).
    HELD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether this thread holds the file through another guard bound to it, in a mode that
/// excludes `key`'s (two shared holdings do not exclude each other).
pub(crate) fn held_by_this_thread(key: Key) -> bool {
    table().iter().any(|k| {
        // `key` is this thread's (`Some`): an unbound holding (`None`) never matches.
        (k.dev, k.ino, k.thread) == (key.dev, key.ino, key.thread)
            && (k.mode == Mode::Exclusive || key.mode == Mode::Exclusive)
            && match (k.range, key.range) {
                (None, None) => true,
                (Some(a), Some(b)) => overlap(a, b),
                _ => false,
            }
    })
}

/// Whether two byte ranges (start, length; length 0: to the end) share a byte.
fn overlap((a, a_len): (u64, u64), (b, b_len): (u64, u64)) -> bool {
    let end = |start: u64, len: u64| match len {
        0 => u64::MAX,
        n => start.saturating_add(n),
    };
    a < end(b, b_len) && b < end(a, a_len)
}

/// The error for an acquisition that [`held_by_this_thread`] refuses.
pub(crate) fn deadlock(path: &std::path::Path) -> Error {
    Error::new(
        path,
        ErrorKind::WouldDeadlock,
        "already held by this thread through another guard; waiting would deadlock (a guard \
         handed to another thread is unbound first: Unbound::new)",
    )
}

pub(crate) fn add(key: Key) {
    table().push(key);
}

/// The guard of `key` has let go of it (on whichever thread).
pub(crate) fn remove(key: Key) {
    let mut held = table();
    if let Some(i) = held.iter().position(|k| k.id == key.id) {
        held.swap_remove(i);
    }
}

/// Bind the holding of `key` to the current thread (`bound`), or to none.
pub(crate) fn set_thread(key: Key, bound: bool) {
    if let Some(k) = table().iter_mut().find(|k| k.id == key.id) {
        k.thread = bound.then(|| thread::current().id());
    }
}

/// Make a guard type that keeps a [`Key`] in field `$key` (a `Key` or an `Option<Key>`)
/// [`Bindable`](crate::Bindable), with an `unbind` method.
macro_rules! bindable {
    ($guard:ty, $key:ident) => {
        impl $crate::platform::binding::Sealed for $guard {}

        impl $crate::platform::binding::Bindable for $guard {
            fn set_thread(&self, bound: bool) {
                if let Some(key) = Option::<$crate::held::Key>::from(self.$key) {
                    $crate::held::set_thread(key, bound);
                }
            }
        }

        impl $guard {
            /// This guard, free to move to another thread: see [`Unbound`](crate::Unbound).
            pub fn unbind(self) -> $crate::Unbound<$guard> {
                $crate::Unbound::new(self)
            }
        }
    };
}
pub(crate) use bindable;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_overlap_where_they_share_a_byte() {
        assert!(overlap((0, 10), (9, 1)));
        assert!(!overlap((0, 10), (10, 1)));
        assert!(overlap((5, 0), (1_000_000, 1)), "0: to the end");
        assert!(!overlap((5, 0), (0, 5)));
        assert!(overlap((0, 0), (0, 0)));
    }
}
