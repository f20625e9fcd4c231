//! One error type for the library. Each variant says what happened, and what happened
//! decides strainline's exit code (README, "Exit codes"): a bad flag or suite is the
//! user's to fix (2), a target that would not start or a disk that filled up mid-run
//! leaves nothing trustworthy (3). Modules keep their precise errors (a target that died
//! at start-up, a store that is not ours) and say which of these they are where they
//! convert; nothing is classified later by looking inside a message or by a downcast.
//! A message has no default category (no `From<String>`): each `?` that returns one says
//! which it is ([`Category`]), and a file that cannot be written says whose fault it is
//! by the I/O error's kind ([`writing`]).

/// Exit codes: a documented contract (README, "Exit codes").
pub mod exit {
    pub const PASSED: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const INVALID: i32 = 3;
    pub const CRASHED: i32 = 4;
    pub const INTERRUPTED: i32 = 130;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What the user gave cannot be used: a flag, a value, a suite, a file, a store.
    #[error("{0}")]
    Usage(String),
    /// The target could not be built, started or made ready: nothing measured of it
    /// could be trusted (its case is INVALID).
    #[error("{0}")]
    Target(String),
    /// strainline could not go on: an I/O failure (a full disk, a store or an agent that
    /// went away) where what the user gave was fine.
    #[error("{0}")]
    Environment(String),
    /// Ctrl-C or SIGTERM ended it.
    #[error("interrupted")]
    Interrupted,
    /// An ending with its own exit code: a run made invalid (3), `monitor`'s command
    /// not found (127) or not executable (126).
    #[error("{message}")]
    Exit { code: i32, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A usage error: strainline exits 2 with `msg`.
    pub fn usage(msg: impl Into<String>) -> Error {
        Error::Usage(msg.into())
    }

    /// An ending with its own exit code.
    pub fn exit(code: i32, message: impl Into<String>) -> Error {
        Error::Exit {
            code,
            message: message.into(),
        }
    }

    /// strainline could not go on (exit 3).
    pub fn environment(msg: impl Into<String>) -> Error {
        Error::Environment(msg.into())
    }

    /// The exit code this error ends strainline with.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => exit::USAGE,
            Error::Target(_) | Error::Environment(_) => exit::INVALID,
            Error::Interrupted => exit::INTERRUPTED,
            Error::Exit { code, .. } => *code,
        }
    }

    /// The same error with `what` in front of its message (`reading X: …`).
    pub fn context(self, what: impl std::fmt::Display) -> Error {
        let say = |m: String| format!("{what}: {m}");
        match self {
            Error::Usage(m) => Error::Usage(say(m)),
            Error::Target(m) => Error::Target(say(m)),
            Error::Environment(m) => Error::Environment(say(m)),
            Error::Interrupted => Error::Interrupted,
            Error::Exit { code, message } => Error::Exit {
                code,
                message: say(message),
            },
        }
    }
}

/// A bare I/O failure is the machine's, not the user's: a path the user named is
/// checked where it is named and reported as [`Error::Usage`] there.
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Environment(e.to_string())
    }
}

/// Writing JSON of our own types fails only on an internal fault; JSON a user gave is
/// checked where it is read.
impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error::Environment(e.to_string())
    }
}

/// States, at the `?` that returns it, which category a message written for a user
/// is: `.ok_or("no [time] field").usage()?`, `.map_err(|e| e.to_string())
/// .environment()?`. There is no `From<String>`: a message never picks its exit code
/// by default.
pub trait Category<T> {
    /// The user's to fix (exit 2).
    fn usage(self) -> Result<T>;
    /// The machine's, not the user's (exit 3).
    fn environment(self) -> Result<T>;
}

impl<T, E: std::fmt::Display> Category<T> for std::result::Result<T, E> {
    fn usage(self) -> Result<T> {
        self.map_err(|e| Error::Usage(e.to_string()))
    }

    fn environment(self) -> Result<T> {
        self.map_err(|e| Error::Environment(e.to_string()))
    }
}

/// A file strainline was asked to write (a report, a chart, a log) could not be: the
/// user's to fix when the path is wrong (no such directory, not allowed, a directory),
/// the machine's otherwise (a full disk, an I/O error).
pub fn writing(path: &std::path::Path, e: std::io::Error) -> Error {
    use std::io::ErrorKind as K;
    let msg = format!("cannot write {}: {e}", path.display());
    match e.kind() {
        K::NotFound
        | K::PermissionDenied
        | K::IsADirectory
        | K::NotADirectory
        | K::ReadOnlyFilesystem => Error::Usage(msg),
        _ => Error::Environment(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_happened_decides_the_exit_code() {
        assert_eq!(Error::usage("bad flag").exit_code(), 2);
        assert_eq!(Error::Target("died at start".into()).exit_code(), 3);
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let e: Error = full.into();
        assert_eq!(e.exit_code(), 3, "a full disk is not a usage error: {e}");
        assert_eq!(Error::Interrupted.exit_code(), 130);
        let e = Error::Exit {
            code: 127,
            message: "command not found".into(),
        };
        assert_eq!(e.exit_code(), 127);
    }

    #[test]
    fn context_keeps_the_category() {
        let e = Error::environment("No space left on device").context("writing run 4");
        assert_eq!(e.to_string(), "writing run 4: No space left on device");
        assert_eq!(e.exit_code(), 3);
        let e = Error::usage("unknown key 'rat'").context("suite.toml:3:1");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn a_message_says_its_category_where_it_is_returned() {
        let r: std::result::Result<(), &str> = Err("no [time] field");
        assert_eq!(r.usage().unwrap_err().exit_code(), 2);
        assert_eq!(r.environment().unwrap_err().exit_code(), 3);
        let e = writing(
            std::path::Path::new("/no/such/dir/report.html"),
            std::io::Error::from(std::io::ErrorKind::NotFound),
        );
        assert_eq!(
            e.exit_code(),
            2,
            "a path that cannot be: the user's to fix: {e}"
        );
        assert!(e
            .to_string()
            .starts_with("cannot write /no/such/dir/report.html: "));
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(
            writing(std::path::Path::new("r.html"), full).exit_code(),
            3,
            "a full disk is the machine's"
        );
    }
}
