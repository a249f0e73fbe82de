//! The plugin watcher of the simulated kubelets: the desired state of each node's registry
//! directory, kept from file system events as the kubelet's `pluginwatcher` keeps it
//! (`pkg/kubelet/pluginmanager/pluginwatcher`, `cache/desired_state_of_world.go`).
//!
//! A socket created in (or moved into) the directory is added with the time it was seen, and a
//! socket created again under the same path gets a new time, so that the registry loop
//! ([`super::registry`]) deregisters the old plugin and registers the new one, as the
//! kubelet's reconciler does when the timestamps differ. A deleted socket leaves the desired
//! state. Names starting with `.` and files that are not sockets are ignored; the sockets
//! present when the watch starts count as created then. Unlike the kubelet, subdirectories are
//! not watched.
//!
//! One inotify instance serves every node of a cluster (the kernel allows few per user). The
//! mapping of event masks to changes ([`change_of`]) and the cache ([`DesiredSockets`]) are
//! pure; [`start`] does the I/O.

use dra_runtime::lock::LockExt;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use tokio::net::unix::pipe;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The registration sockets the kubelet of one node wants registered: path -> the time their
/// creation was seen.
#[derive(Debug, Default)]
pub(crate) struct DesiredSockets {
    sockets: Mutex<BTreeMap<PathBuf, Instant>>,
    changed: Notify,
}

impl DesiredSockets {
    /// A socket was created at `path` at `at`: added, or given the new time when it was there.
    pub(crate) fn add_or_update(&self, path: PathBuf, at: Instant) {
        self.sockets.lock_or_recover().insert(path, at);
        self.changed.notify_one();
    }

    /// The socket at `path` was deleted.
    pub(crate) fn remove(&self, path: &Path) {
        if self.sockets.lock_or_recover().remove(path).is_some() {
            self.changed.notify_one();
        }
    }

    /// The sockets wanted now, with the time each was created.
    pub(crate) fn snapshot(&self) -> BTreeMap<PathBuf, Instant> {
        self.sockets.lock_or_recover().clone()
    }

    /// Resolves once the desired state changed since the last call returned (at once when it
    /// changed in between).
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }
}

/// What an event means for the desired state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// A file appeared under the name: created or moved in (fsnotify's `Create`).
    Created,
    /// The file was deleted (fsnotify's `Remove`). A file moved away is not a removal, as for
    /// the kubelet.
    Removed,
}

/// The change an inotify event mask stands for, as fsnotify maps masks and the plugin watcher
/// handles `Create` before `Remove`.
pub(crate) fn change_of(mask: ReadFlags) -> Option<Change> {
    if mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
        Some(Change::Created)
    } else if mask.contains(ReadFlags::DELETE) {
        Some(Change::Removed)
    } else {
        None
    }
}

/// Whether the watcher takes the file at `path` for a plugin socket: its name does not start
/// with `.` and it is a socket (symbolic links followed, as the kubelet's `os.Stat`).
fn is_plugin_socket(path: &Path) -> bool {
    let hidden = path
        .file_name()
        .is_none_or(|name| name.as_bytes().starts_with(b"."));
    !hidden && std::fs::metadata(path).is_ok_and(|meta| meta.file_type().is_socket())
}

/// One node's directory as the watcher sees it.
struct WatchedDir {
    dir: PathBuf,
    desired: Arc<DesiredSockets>,
}

/// Watches every directory of `dirs` (created when missing) with one inotify instance, adds the
/// sockets already there, and keeps each node's desired state until `stop` turns true.
pub(crate) fn start(
    dirs: Vec<(PathBuf, Arc<DesiredSockets>)>,
    stop: &watch::Receiver<bool>,
) -> std::io::Result<JoinHandle<()>> {
    let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
    let flags =
        WatchFlags::CREATE | WatchFlags::MOVED_TO | WatchFlags::DELETE | WatchFlags::ONLYDIR;
    let mut watched = BTreeMap::new();
    for (dir, desired) in dirs {
        std::fs::create_dir_all(&dir)?;
        // The watch comes first, so that a socket created during the listing is not missed.
        let wd = inotify::add_watch(&fd, &dir, flags)?;
        let now = Instant::now();
        for entry in std::fs::read_dir(&dir)?.filter_map(Result::ok) {
            let path = entry.path();
            if is_plugin_socket(&path) {
                desired.add_or_update(path, now);
            }
        }
        watched.insert(wd, WatchedDir { dir, desired });
    }
    // Tokio's pipe receiver registers any non-blocking readable descriptor with the reactor
    // without unsafe code; the inotify descriptor is read through it.
    let events = pipe::Receiver::from_owned_fd_unchecked(fd)?;
    Ok(tokio::spawn(read_events(events, watched, stop.clone())))
}

/// Applies the events read from `events` to the desired states until `stop` turns true.
async fn read_events(
    events: pipe::Receiver,
    watched: BTreeMap<i32, WatchedDir>,
    mut stop: watch::Receiver<bool>,
) {
    // Room for many events; one event takes at most 16 bytes and a name of 256.
    let mut buf = vec![0; 64 * 1024];
    loop {
        tokio::select! {
            changed = stop.changed() => if changed.is_err() || *stop.borrow() { return },
            ready = events.readable() => if let Err(error) = ready {
                tracing::error!(%error, "The kubelets' plugin watcher stopped");
                return;
            },
        }
        match events.try_read(&mut buf) {
            Ok(read) => {
                for event in parse_events(&buf[..read]) {
                    apply(&watched, &event);
                }
            }
            Err(error) if error.kind() == ErrorKind::WouldBlock => {}
            Err(error) => {
                tracing::error!(%error, "The kubelets' plugin watcher cannot read events");
                return;
            }
        }
    }
}

/// One inotify event: the watch it came from, its mask and the name in the directory.
#[derive(Debug, PartialEq, Eq)]
struct Event {
    wd: i32,
    mask: ReadFlags,
    name: Vec<u8>,
}

/// The events in what one read of an inotify descriptor returned (`struct inotify_event`: watch,
/// mask, cookie and name length as native 32-bit integers, then the name padded with NULs).
fn parse_events(mut bytes: &[u8]) -> Vec<Event> {
    const HEADER: usize = 16;
    let word = |b: &[u8], at: usize| u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let mut events = Vec::new();
    while bytes.len() >= HEADER {
        let len = usize::try_from(word(bytes, 12)).unwrap_or(usize::MAX);
        let Some(name) = bytes.get(HEADER..HEADER.saturating_add(len)) else {
            break;
        };
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        events.push(Event {
            wd: i32::from_ne_bytes(word(bytes, 0).to_ne_bytes()),
            mask: ReadFlags::from_bits_retain(word(bytes, 4)),
            name: name[..end].to_vec(),
        });
        bytes = &bytes[HEADER + len..];
    }
    events
}

/// Applies one event to the desired state of the directory it happened in.
fn apply(watched: &BTreeMap<i32, WatchedDir>, event: &Event) {
    if event.mask.contains(ReadFlags::QUEUE_OVERFLOW) {
        tracing::warn!("The kubelets' plugin watcher lost events (inotify queue overflow)");
    }
    let Some(watch) = watched.get(&event.wd) else {
        return;
    };
    if event.name.is_empty() {
        return;
    }
    let path = watch.dir.join(OsStr::from_bytes(&event.name));
    match change_of(event.mask) {
        Some(Change::Created) if is_plugin_socket(&path) => {
            tracing::debug!(socket = %path.display(), "Plugin socket created");
            watch.desired.add_or_update(path, Instant::now());
        }
        Some(Change::Removed) => watch.desired.remove(&path),
        Some(Change::Created) | None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::time::Duration;

    #[test]
    fn created_and_moved_in_files_are_creations_and_deleted_ones_removals() {
        assert_eq!(change_of(ReadFlags::CREATE), Some(Change::Created));
        assert_eq!(change_of(ReadFlags::MOVED_TO), Some(Change::Created));
        assert_eq!(change_of(ReadFlags::DELETE), Some(Change::Removed));
        assert_eq!(change_of(ReadFlags::MOVED_FROM), None);
        assert_eq!(change_of(ReadFlags::ATTRIB), None);
    }

    #[test]
    fn events_are_read_with_their_names_without_padding() {
        let mut bytes = Vec::new();
        for (wd, mask, name) in [
            (1_i32, ReadFlags::CREATE, &b"a.sock\0\0"[..]),
            (2, ReadFlags::DELETE, b""),
        ] {
            bytes.extend(wd.to_ne_bytes());
            bytes.extend(mask.bits().to_ne_bytes());
            bytes.extend(0_u32.to_ne_bytes());
            bytes.extend(u32::try_from(name.len()).unwrap().to_ne_bytes());
            bytes.extend(name);
        }
        let event = |wd, mask, name: &[u8]| Event {
            wd,
            mask,
            name: name.to_vec(),
        };
        assert_eq!(
            parse_events(&bytes),
            [
                event(1, ReadFlags::CREATE, b"a.sock"),
                event(2, ReadFlags::DELETE, b"")
            ]
        );
        assert_eq!(parse_events(&bytes[..20]), [], "a cut event is not read");
    }

    #[test]
    fn a_socket_created_again_gets_a_new_time_and_a_deleted_one_goes() {
        let desired = DesiredSockets::default();
        let path = PathBuf::from("/r/a.sock");
        let first = Instant::now();
        desired.add_or_update(path.clone(), first);
        let second = first + Duration::from_millis(1);
        desired.add_or_update(path.clone(), second);
        assert_eq!(desired.snapshot(), BTreeMap::from([(path.clone(), second)]));
        desired.remove(&path);
        assert!(desired.snapshot().is_empty());
    }

    #[test]
    fn hidden_names_and_files_that_are_not_sockets_are_no_plugins() {
        let dir = tempfile::tempdir().unwrap();
        let _plugin = UnixListener::bind(dir.path().join("p.sock")).unwrap();
        let _hidden = UnixListener::bind(dir.path().join(".p.sock.1")).unwrap();
        let _other = UnixListener::bind(dir.path().join("no-extension")).unwrap();
        std::fs::write(dir.path().join("file.sock"), b"").unwrap();
        assert!(is_plugin_socket(&dir.path().join("p.sock")));
        assert!(is_plugin_socket(&dir.path().join("no-extension")));
        assert!(!is_plugin_socket(&dir.path().join(".p.sock.1")));
        assert!(!is_plugin_socket(&dir.path().join("file.sock")));
    }

    /// Waits until `desired` satisfies `check`, failing after five seconds.
    async fn until(desired: &DesiredSockets, check: impl Fn(&BTreeMap<PathBuf, Instant>) -> bool) {
        tokio::time::timeout(Duration::from_secs(5), async {
            while !check(&desired.snapshot()) {
                desired.changed().await;
            }
        })
        .await
        .expect("the desired state changed in time");
    }

    #[tokio::test]
    async fn a_socket_replaced_under_its_path_is_seen_as_created_again() {
        let dir = tempfile::tempdir().unwrap();
        let registry = dir.path().join("plugins_registry");
        let path = registry.join("d.sock");
        let desired = Arc::new(DesiredSockets::default());
        let (_stop_tx, stop) = watch::channel(false);
        let task = start(vec![(registry.clone(), Arc::clone(&desired))], &stop).unwrap();
        let first = UnixListener::bind(&path).unwrap();
        until(&desired, |s| s.contains_key(&path)).await;
        let seen = desired.snapshot()[&path];
        // As a restarted plugin does: the stale socket removed, a new one bound under a hidden
        // name and renamed into place (the inode number may well be the same).
        drop(first);
        std::fs::remove_file(&path).unwrap();
        let hidden = registry.join(".d.sock.2");
        let _second = UnixListener::bind(&hidden).unwrap();
        std::fs::rename(&hidden, &path).unwrap();
        until(&desired, |s| s.get(&path).is_some_and(|at| *at > seen)).await;
        assert_eq!(desired.snapshot().len(), 1, "the hidden socket is ignored");
        std::fs::remove_file(&path).unwrap();
        until(&desired, BTreeMap::is_empty).await;
        task.abort();
    }

    #[tokio::test]
    async fn sockets_present_at_start_are_wanted() {
        let dir = tempfile::tempdir().unwrap();
        let _plugin = UnixListener::bind(dir.path().join("p.sock")).unwrap();
        let desired = Arc::new(DesiredSockets::default());
        let (_stop_tx, stop) = watch::channel(false);
        let task = start(vec![(dir.path().to_owned(), Arc::clone(&desired))], &stop).unwrap();
        assert_eq!(
            desired.snapshot().into_keys().collect::<Vec<_>>(),
            [dir.path().join("p.sock")]
        );
        task.abort();
    }
}
