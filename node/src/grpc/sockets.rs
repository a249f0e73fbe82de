//! The two sockets of the plugin: the registration socket `<registry-dir>/<driver>.sock` the
//! kubelet's plugin watcher finds, and the service socket `<plugins-dir>/<driver>/plugin.sock`.
//!
//! Whoever can connect to them can make devices appear in containers, so each socket is mode
//! 0600 and the plugin's own directory 0700. A socket is created under a name starting with `.`
//! (which the plugin watcher ignores), given its mode and then renamed into place, so the
//! kubelet never sees it with the process umask's mode. A stale socket of an earlier run is
//! replaced; one another process still answers on is refused, and so is a file that is not a
//! socket. The registry directory belongs to the kubelet: it is created when missing but its
//! mode is left alone.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use super::{GrpcError, Result};

/// Mode of both socket files.
pub const SOCKET_MODE: u32 = 0o600;
/// Mode of the plugin's directory under the plugins directory.
pub const PLUGIN_DIR_MODE: u32 = 0o700;
/// The service socket's file name in the plugin's directory.
pub const PLUGIN_SOCKET_NAME: &str = "plugin.sock";

/// Creates `dir` (and its parents) and makes it mode [`PLUGIN_DIR_MODE`], also when it existed:
/// what only the agent's user may reach (the plugin socket's directory, the journal's state
/// directory).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(PLUGIN_DIR_MODE)
        .create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(PLUGIN_DIR_MODE))
}

/// The paths of the plugin's sockets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginSockets {
    registration: PathBuf,
    plugin_dir: PathBuf,
    plugin: PathBuf,
}

impl PluginSockets {
    /// The socket paths of `driver_name`; the name must be usable as one file name.
    pub fn new(driver_name: &str, registry_dir: &Path, plugins_dir: &Path) -> Result<Self> {
        let reason = if driver_name.is_empty() {
            Some("must not be empty")
        } else if driver_name.starts_with('.') {
            Some("must not start with '.' (the kubelet ignores such sockets)")
        } else if driver_name.contains(['/', '\0']) {
            Some("must not contain '/' or NUL")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(GrpcError::DriverName {
                name: driver_name.to_owned(),
                reason,
            });
        }
        let own_dir = plugins_dir.join(driver_name);
        Ok(PluginSockets {
            registration: registry_dir.join(format!("{driver_name}.sock")),
            plugin: own_dir.join(PLUGIN_SOCKET_NAME),
            plugin_dir: own_dir,
        })
    }

    /// The registration socket, `<registry-dir>/<driver>.sock`.
    pub fn registration(&self) -> &Path {
        &self.registration
    }

    /// The plugin's directory, `<plugins-dir>/<driver>`.
    pub fn plugin_dir(&self) -> &Path {
        &self.plugin_dir
    }

    /// The service socket, `<plugins-dir>/<driver>/plugin.sock`: the endpoint the registration
    /// names.
    pub fn plugin(&self) -> &Path {
        &self.plugin
    }

    /// Creates the plugin's directory (mode 0700, also when it existed) and binds the service
    /// socket.
    pub(crate) fn bind_plugin(&self) -> Result<UnixListener> {
        let dir_error = |source| GrpcError::SocketDir {
            path: self.plugin_dir.clone(),
            source,
        };
        create_private_dir(&self.plugin_dir).map_err(dir_error)?;
        bind_private(&self.plugin)
    }

    /// Binds the registration socket, creating the registry directory when missing.
    pub(crate) fn bind_registration(&self) -> Result<UnixListener> {
        if let Some(dir) = self.registration.parent() {
            fs::create_dir_all(dir).map_err(|source| GrpcError::SocketDir {
                path: dir.to_owned(),
                source,
            })?;
        }
        bind_private(&self.registration)
    }

    /// Removes the registration socket; a missing file is not an error.
    pub(crate) fn remove_registration(&self) -> Result<()> {
        remove_socket(&self.registration)
    }

    /// Removes both socket files (registration first); missing files are not an error.
    pub fn remove(&self) -> Result<()> {
        let registration = remove_socket(&self.registration);
        let plugin = remove_socket(&self.plugin);
        registration.and(plugin)
    }
}

/// Binds a listener at `path` with mode [`SOCKET_MODE`], replacing a stale socket.
fn bind_private(path: &Path) -> Result<UnixListener> {
    replace_stale(path)?;
    let bind_error = |source| GrpcError::SocketBind {
        path: path.to_owned(),
        source,
    };
    let hidden = hidden_name(path);
    remove_socket(&hidden)?;
    let listener = UnixListener::bind(&hidden).map_err(bind_error)?;
    let placed = fs::set_permissions(&hidden, fs::Permissions::from_mode(SOCKET_MODE))
        .and_then(|()| fs::rename(&hidden, path))
        .and_then(|()| listener.set_nonblocking(true));
    if let Err(source) = placed {
        let _ = fs::remove_file(&hidden);
        return Err(bind_error(source));
    }
    Ok(listener)
}

/// `dir/.name.<pid>`: a name the kubelet's plugin watcher skips.
fn hidden_name(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}", std::process::id()))
}

/// Removes a socket an earlier run left at `path`; refuses a live socket or another kind of file.
fn replace_stale(path: &Path) -> Result<()> {
    let metadata = match fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(GrpcError::SocketBind {
                path: path.to_owned(),
                source,
            })
        }
    };
    if !metadata.file_type().is_socket() {
        return Err(GrpcError::NotASocket {
            path: path.to_owned(),
        });
    }
    if UnixStream::connect(path).is_ok() {
        return Err(GrpcError::SocketInUse {
            path: path.to_owned(),
        });
    }
    tracing::info!(path = %path.display(), "Replacing a stale socket");
    remove_socket(path)
}

fn remove_socket(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != ErrorKind::NotFound => Err(GrpcError::SocketRemove {
            path: path.to_owned(),
            source: error,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_paths_follow_the_driver_name() {
        let sockets = PluginSockets::new(
            "gpu.dra-ledger.io",
            Path::new("/var/lib/kubelet/plugins_registry"),
            Path::new("/var/lib/kubelet/plugins"),
        )
        .unwrap();
        assert_eq!(
            sockets.registration(),
            Path::new("/var/lib/kubelet/plugins_registry/gpu.dra-ledger.io.sock")
        );
        assert_eq!(
            sockets.plugin(),
            Path::new("/var/lib/kubelet/plugins/gpu.dra-ledger.io/plugin.sock")
        );
    }

    #[test]
    fn driver_names_that_cannot_name_a_socket_are_refused() {
        for name in ["", ".hidden", "a/b"] {
            let error = PluginSockets::new(name, Path::new("/r"), Path::new("/p")).unwrap_err();
            assert!(matches!(error, GrpcError::DriverName { .. }), "{name:?}");
        }
    }

    #[test]
    fn a_regular_file_in_the_socket_place_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let sockets = PluginSockets::new("d", dir.path(), dir.path()).unwrap();
        fs::write(sockets.registration(), b"not a socket").unwrap();
        let error = sockets.bind_registration().unwrap_err();
        assert!(matches!(error, GrpcError::NotASocket { .. }), "{error}");
        assert_eq!(fs::read(sockets.registration()).unwrap(), b"not a socket");
    }

    #[test]
    fn a_socket_another_process_answers_on_is_not_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let sockets = PluginSockets::new("d", dir.path(), dir.path()).unwrap();
        let _live = sockets.bind_registration().unwrap();
        let error = sockets.bind_registration().unwrap_err();
        assert!(matches!(error, GrpcError::SocketInUse { .. }), "{error}");
    }

    #[test]
    fn no_hidden_socket_is_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let sockets = PluginSockets::new("d", dir.path(), dir.path()).unwrap();
        let _listener = sockets.bind_registration().unwrap();
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            names.iter().filter(|n| n.starts_with('.')).count(),
            0,
            "{names:?}"
        );
    }
}
