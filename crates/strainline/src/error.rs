//! One error type for the library. Each variant says what happened, and what happened
//! decides strainline's exit code (README, "Exit codes"): a bad flag or suite is the
//! user's to fix (2), a target that would not start or a disk that filled up mid-run
//! leaves nothing trustworthy (3). Modules keep their precise errors (a target that died
//! at start-up, a store that is not ours) and say which of these they are where they
//! convert; nothing is classified later by looking inside a message or by a downcast.
//! A message has no default category (no `From<String>`): each `?` that returns one says
//! which it is ([`Category`]), and a file that cannot be written says whose fault it is
//! by the I/O error's kind ([`writing`]). A message keeps the precise error it was made
//! from ([`Message::of`], [`Error::because`]): `source()` gives it, and `-v` prints
//! what of the chain the message does not already say ([`Error::causes`]).

/// Exit codes: a documented contract (README, "Exit codes").
pub mod exit {
    pub const PASSED: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const INVALID: i32 = 3;
    pub const CRASHED: i32 = 4;
    pub const INTERRUPTED: i32 = 130;

    /// The codes from the one that wins to the one that yields, when a command has more
    /// than one outcome (a load run both INVALID and failing a gate, a suite's cases
    /// that ended differently, a suite that passed but regressed): usage (2), interrupted
    /// (130), crashed (4), invalid (3), failed (1), passed (0). INVALID wins over FAILED
    /// because an invalid run's figures describe strainline: a gate they fail, or a
    /// regression they show, is no evidence against the target.
    pub const PRECEDENCE: [i32; 6] = [USAGE, INTERRUPTED, CRASHED, INVALID, FAILED, PASSED];

    /// How far down [`PRECEDENCE`] a code is; a code not in it (a command's own, as
    /// `monitor` passes on) just after usage.
    fn rank(code: i32) -> usize {
        match PRECEDENCE.iter().position(|&c| c == code) {
            Some(0) => 0,
            Some(i) => i + 1,
            None => 1,
        }
    }

    /// The code of two outcomes together: the one that comes first in [`PRECEDENCE`].
    /// Every command combines its outcomes through this.
    pub fn combine(a: i32, b: i32) -> i32 {
        if rank(b) < rank(a) {
            b
        } else {
            a
        }
    }

    /// The code of any number of outcomes together ([`PASSED`] for none).
    pub fn all(codes: impl IntoIterator<Item = i32>) -> i32 {
        codes.into_iter().fold(PASSED, combine)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn every_pair_of_outcomes_combines_to_the_one_documented_first() {
            for (i, &a) in PRECEDENCE.iter().enumerate() {
                for (j, &b) in PRECEDENCE.iter().enumerate() {
                    let first = PRECEDENCE[i.min(j)];
                    assert_eq!(combine(a, b), first, "{a} with {b}");
                    assert_eq!(combine(b, a), first, "{b} with {a}");
                }
            }
            // The case issue 51 found: INVALID and a failed gate is INVALID.
            assert_eq!(combine(INVALID, FAILED), INVALID);
            assert_eq!(all([FAILED, PASSED, INVALID, FAILED]), INVALID);
            assert_eq!(all([]), PASSED);
            // A command's own code (monitor's 127) yields only to usage.
            assert_eq!(combine(127, CRASHED), 127);
            assert_eq!(combine(127, INTERRUPTED), 127);
            assert_eq!(combine(127, USAGE), USAGE);
        }
    }
}

#[derive(Debug)]
pub enum Error {
    /// What the user gave cannot be used: a flag, a value, a suite, a file, a store.
    Usage(Message),
    /// The target could not be built, started or made ready: nothing measured of it
    /// could be trusted (its case is INVALID).
    Target(Message),
    /// strainline could not go on: an I/O failure (a full disk, a store or an agent that
    /// went away) where what the user gave was fine.
    Environment(Message),
    /// Ctrl-C or SIGTERM ended it.
    Interrupted,
    /// An ending with its own exit code: a run made invalid (3), `monitor`'s command
    /// not found (127) or not executable (126).
    Exit { code: i32, message: String },
}

/// What went wrong in words for the user, and the precise error it was made from when
/// there is one (an I/O error, a store's, a target's): [`Error::source`] gives it, and
/// `-v` prints the chain.
#[derive(Debug)]
pub struct Message {
    text: String,
    cause: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Message {
    /// The words alone.
    pub fn new(text: impl Into<String>) -> Message {
        Message {
            text: text.into(),
            cause: None,
        }
    }

    /// A precise error's words, kept with it.
    pub fn of<E: std::error::Error + Send + Sync + 'static>(e: E) -> Message {
        Message {
            text: e.to_string(),
            cause: Some(Box::new(e)),
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Usage(m) | Error::Target(m) | Error::Environment(m) => m.fmt(f),
            Error::Interrupted => f.write_str("interrupted"),
            Error::Exit { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {
    /// The precise error this one was made from, if it was.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Usage(m) | Error::Target(m) | Error::Environment(m) => m
                .cause
                .as_deref()
                .map(|c| c as &(dyn std::error::Error + 'static)),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A usage error: strainline exits 2 with `msg`.
    pub fn usage(msg: impl Into<String>) -> Error {
        Error::Usage(Message::new(msg))
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
        Error::Environment(Message::new(msg))
    }

    /// The target could not be built, started or made ready (exit 3).
    pub fn target(msg: impl Into<String>) -> Error {
        Error::Target(Message::new(msg))
    }

    /// The same error, made from `cause` (kept as its [`std::error::Error::source`]; an
    /// interrupt or an ending with its own code carries none).
    pub fn because<E: std::error::Error + Send + Sync + 'static>(mut self, cause: E) -> Error {
        if let Error::Usage(m) | Error::Target(m) | Error::Environment(m) = &mut self {
            m.cause = Some(Box::new(cause));
        }
        self
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

    /// The same error with `what` in front of its message (`reading X: …`); its cause
    /// is kept.
    pub fn context(self, what: impl std::fmt::Display) -> Error {
        self.reword(|m| format!("{what}: {m}"))
    }

    /// The same error (its category, its cause) in the words `say` makes of its
    /// message: a message placed at its file's line, say. An interrupt stays as it is.
    pub fn reword(self, say: impl FnOnce(&str) -> String) -> Error {
        let say = |m: Message| Message {
            text: say(&m.text),
            cause: m.cause,
        };
        match self {
            Error::Usage(m) => Error::Usage(say(m)),
            Error::Target(m) => Error::Target(say(m)),
            Error::Environment(m) => Error::Environment(say(m)),
            Error::Interrupted => Error::Interrupted,
            Error::Exit { code, message } => Error::Exit {
                code,
                message: say(Message::new(message)).text,
            },
        }
    }

    /// The errors it was made from, each in its words, those its message does not
    /// already say (what `-v` prints under it).
    pub fn causes(&self) -> Vec<String> {
        let said = self.to_string();
        let mut out = Vec::new();
        let mut next = std::error::Error::source(self);
        while let Some(c) = next {
            let words = c.to_string();
            if !said.contains(&words) && !out.contains(&words) {
                out.push(words);
            }
            next = c.source();
        }
        out
    }
}

/// A bare I/O failure is the machine's, not the user's: a path the user named is
/// checked where it is named and reported as [`Error::Usage`] there.
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Environment(Message::of(e))
    }
}

/// Writing JSON of our own types fails only on an internal fault; JSON a user gave is
/// checked where it is read.
impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error::Environment(Message::of(e))
    }
}

/// States, at the `?` that returns it, which category a failure is: a precise error
/// is kept as the [`Error`]'s cause (`File::open(p).usage()?`, or with the caller's
/// words, `.usage_with(|e| format!("reading {p}: {e}"))?`); a message written for a
/// user is its words alone (`.ok_or("no [time] field").usage()?`). There is no
/// `From<String>`: a message never picks its exit code by default. `Kind` is
/// [`Cause`] or [`Words`], which the compiler infers from the error type (a `String`
/// is no `std::error::Error`); callers never name it.
pub trait Category<T, Kind> {
    /// What the failure is said with: the precise error, or the message.
    type Fault;
    /// The user's to fix (exit 2).
    fn usage(self) -> Result<T>;
    /// The machine's, not the user's (exit 3).
    fn environment(self) -> Result<T>;
    /// The user's to fix (exit 2), in the words `say` makes of the failure.
    fn usage_with(self, say: impl FnOnce(&Self::Fault) -> String) -> Result<T>;
    /// The machine's (exit 3), in the words `say` makes of the failure.
    fn environment_with(self, say: impl FnOnce(&Self::Fault) -> String) -> Result<T>;
}

/// [`Category`] of a precise error: it is kept as the cause.
pub enum Cause {}

/// [`Category`] of a message written for a user: its words alone.
pub enum Words {}

impl Message {
    /// `text`, made from `cause`.
    pub fn with<E: std::error::Error + Send + Sync + 'static>(
        text: impl Into<String>,
        cause: E,
    ) -> Message {
        Message {
            text: text.into(),
            cause: Some(Box::new(cause)),
        }
    }
}

impl<T, E: std::error::Error + Send + Sync + 'static> Category<T, Cause>
    for std::result::Result<T, E>
{
    type Fault = E;

    fn usage(self) -> Result<T> {
        self.map_err(|e| Error::Usage(Message::of(e)))
    }

    fn environment(self) -> Result<T> {
        self.map_err(|e| Error::Environment(Message::of(e)))
    }

    fn usage_with(self, say: impl FnOnce(&E) -> String) -> Result<T> {
        self.map_err(|e| Error::Usage(Message::with(say(&e), e)))
    }

    fn environment_with(self, say: impl FnOnce(&E) -> String) -> Result<T> {
        self.map_err(|e| Error::Environment(Message::with(say(&e), e)))
    }
}

impl<T, M: Into<String>> Category<T, Words> for std::result::Result<T, M> {
    type Fault = String;

    fn usage(self) -> Result<T> {
        self.map_err(|m| Error::usage(m))
    }

    fn environment(self) -> Result<T> {
        self.map_err(|m| Error::environment(m))
    }

    fn usage_with(self, say: impl FnOnce(&String) -> String) -> Result<T> {
        self.map_err(|m| Error::usage(say(&m.into())))
    }

    fn environment_with(self, say: impl FnOnce(&String) -> String) -> Result<T> {
        self.map_err(|m| Error::environment(say(&m.into())))
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
        | K::ReadOnlyFilesystem => Error::usage(msg).because(e),
        _ => Error::environment(msg).because(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_happened_decides_the_exit_code() {
        assert_eq!(Error::usage("bad flag").exit_code(), 2);
        assert_eq!(Error::target("died at start").exit_code(), 3);
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

    #[test]
    fn an_error_keeps_the_precise_error_it_was_made_from() {
        use std::error::Error as _;
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let e: Error = full.into();
        let io = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(io.and_then(|e| e.raw_os_error()), Some(libc::ENOSPC));
        // Context keeps it; -v names only what the message does not already say.
        let e = e.context("writing run 4");
        assert!(e.source().is_some());
        assert_eq!(e.causes(), Vec::<String>::new(), "{e}");
        let e = Error::usage("--json out/x.json: cannot be written")
            .because(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(e.causes(), vec!["entity not found".to_string()]);
        assert_eq!(e.exit_code(), 2);
        let w = writing(
            std::path::Path::new("r.html"),
            std::io::Error::from_raw_os_error(libc::EACCES),
        );
        assert!(w.source().is_some(), "{w}");
        assert!(Error::usage("bad flag").source().is_none());
    }

    #[test]
    fn a_wrapped_error_keeps_its_category_and_source_through_two_layers() {
        use std::error::Error as _;
        let path = "/no/such/strainline/dir/suite.toml";
        let read = || -> Result<()> {
            std::fs::File::open(path).usage_with(|e| format!("reading {path}: {e}"))?;
            Ok(())
        };
        let load = || -> Result<()> {
            read().map_err(|e| e.context("suite"))?;
            Ok(())
        };
        let run = || -> Result<()> {
            load()?;
            Ok(())
        };
        let e = run().unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(
            e.to_string()
                .starts_with(&format!("suite: reading {path}: ")),
            "{e}"
        );
        let io = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(io.map(|e| e.kind()), Some(std::io::ErrorKind::NotFound));
        // The message already says the OS's words: -v does not repeat them.
        assert_eq!(e.causes(), Vec::<String>::new(), "{e}");

        // The machine's, in the caller's words alone: -v names the cause.
        let write = || -> Result<()> {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
                .environment_with(|_| "the run could not be stored".to_string())
        };
        let store = || -> Result<()> {
            write().map_err(|e| e.context("run 4"))?;
            Ok(())
        };
        let e = (|| -> Result<()> {
            store()?;
            Ok(())
        })()
        .unwrap_err();
        assert_eq!(e.exit_code(), 3, "{e}");
        assert_eq!(e.to_string(), "run 4: the run could not be stored");
        let io = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(io.and_then(|e| e.raw_os_error()), Some(libc::ENOSPC));
        assert_eq!(e.causes().len(), 1, "{:?}", e.causes());
        assert!(e.causes()[0].starts_with("No space left on device"));

        // Our own error passed up keeps its category, reworded or not.
        let e = Error::environment("lua state").reword(|m| format!("s.toml:3:1: {m}"));
        assert_eq!(e.exit_code(), 3);
        assert_eq!(e.to_string(), "s.toml:3:1: lua state");

        // A message written for a user has no cause.
        let e = None::<()>.ok_or("no [time] field").usage().unwrap_err();
        assert!(e.source().is_none());
        assert_eq!(e.exit_code(), 2);
    }
}
