//! `run SUITE --baseline-ref REF`: the baseline version is a git ref, checked out as a
//! worktree of the repository beside the working tree, removed when the session ends —
//! however it ends, Ctrl-C included; one a kill -9 left behind is removed by the next
//! session that adds one (its directory names a process that is gone). The
//! baseline's target then builds and runs there, from the same place in the tree as the
//! candidate's does in the working tree (uncommitted changes included).

use crate::error::Category;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A detached worktree of a commit, removed when dropped.
pub struct Worktree {
    pub repo: PathBuf,
    pub path: PathBuf,
    /// The commit `REF` named, in full.
    pub commit: String,
}

/// What git said when it failed (its stderr), or why it did not run.
#[derive(Debug)]
struct GitSaid(String);

impl std::error::Error for GitSaid {}

impl std::fmt::Display for GitSaid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<String, GitSaid> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| GitSaid(format!("git: {e} (is git installed?)")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(GitSaid(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

impl Worktree {
    /// Checks out `rev` of the repository holding `dir` into a worktree under `into`.
    pub fn add(dir: &Path, rev: &str, into: &Path) -> crate::error::Result<Worktree> {
        let bad = |why: String| crate::Error::usage(format!("--baseline-ref {rev}: {why}"));
        if rev.starts_with('-') || rev.is_empty() {
            // Never an option to git.
            return Err(bad(
                "give a branch, tag or commit (main, v0.7.0, HEAD~1)".into()
            ));
        }
        let repo = git(dir, &["rev-parse", "--show-toplevel"])
            .map(PathBuf::from)
            .map_err(|e| {
                bad(format!(
                    "{} is not in a git repository ({e})",
                    dir.display()
                ))
            })?;
        let commit = git(
            &repo,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{rev}^{{commit}}"),
            ],
        )
        .map_err(|_| bad("no such commit, branch or tag in this repository".into()))?;
        std::fs::create_dir_all(into)?;
        // Its own per session: two sessions of one ref, or one a kill -9 left behind,
        // never share a directory.
        let path = into.join(format!(
            "baseline-{}-{}",
            &commit[..12.min(commit.len())],
            std::process::id()
        ));
        sweep(&repo, into);
        let _ = git(&repo, &["worktree", "prune"]);
        git(
            &repo,
            &[
                "worktree",
                "add",
                "--detach",
                "--force",
                &path.display().to_string(),
                &commit,
            ],
        )
        .environment_with(|e| format!("--baseline-ref {rev}: git worktree add: {e}"))?;
        Ok(Worktree { repo, path, commit })
    }

    /// What a paired session needs of it.
    pub fn tree(&self) -> Tree {
        Tree {
            repo: self.repo.clone(),
            path: self.path.clone(),
            commit: self.commit.clone(),
        }
    }
}

/// Removes the worktrees under `into` whose session is gone (`baseline-COMMIT-PID`, no
/// process PID): a kill -9 leaves its directory, so `git worktree prune` keeps it.
fn sweep(repo: &Path, into: &Path) {
    let Ok(entries) = std::fs::read_dir(into) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("baseline-")
            .and_then(|r| r.rsplit_once('-'))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || crate::os::process::exists(pid) {
            continue;
        }
        let path = e.path();
        if git(
            repo,
            &["worktree", "remove", "--force", &path.display().to_string()],
        )
        .is_err()
        {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// A worktree as a paired session reads it: the repository, the worktree, its commit.
#[derive(Debug, Clone)]
pub struct Tree {
    pub repo: PathBuf,
    pub path: PathBuf,
    pub commit: String,
}

impl Tree {
    /// Where in the worktree `dir` (a directory of the working tree) is.
    pub fn mirror(&self, dir: &Path) -> crate::error::Result<PathBuf> {
        let dir = std::fs::canonicalize(dir)?;
        let repo = std::fs::canonicalize(&self.repo)?;
        let rel = dir.strip_prefix(&repo).map_err(|_| {
            crate::Error::usage(format!(
                "--baseline-ref: the target runs in {}, outside the repository {}: give [target] cwd inside it",
                dir.display(),
                repo.display()
            ))
        })?;
        Ok(self.path.join(rel))
    }
}

impl Drop for Worktree {
    fn drop(&mut self) {
        let path = self.path.display().to_string();
        if git(&self.repo, &["worktree", "remove", "--force", &path]).is_err() {
            let _ = std::fs::remove_dir_all(&self.path);
            let _ = git(&self.repo, &["worktree", "prune"]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ref_that_reads_as_an_option_never_reaches_git() {
        let into = std::env::temp_dir().join(format!("strainline-wt-{}", std::process::id()));
        for rev in ["--upload-pack=touch /tmp/x", "-x", ""] {
            let e = Worktree::add(Path::new("/"), rev, &into)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("give a branch, tag or commit"), "{rev}: {e}");
        }
        assert!(!into.exists(), "nothing made for a refused ref");
    }

    #[test]
    fn a_worktree_a_kill_9_left_is_removed_by_the_next_session() {
        let base = tempfile::tempdir().unwrap();
        let repo = base.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let run = |args: &[&str]| git(&repo, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        run(&["init", "-q"]);
        std::fs::write(repo.join("f"), "1").unwrap();
        run(&["add", "f"]);
        run(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "one",
        ]);
        let into = base.path().join("worktrees");
        // Above pid_max: no process has it, as after a kill -9.
        let stale = into.join("baseline-000000000000-4194305");
        run(&[
            "worktree",
            "add",
            "--detach",
            stale.to_str().unwrap(),
            "HEAD",
        ]);
        let wt = Worktree::add(&repo, "HEAD", &into).unwrap();
        assert!(!stale.exists(), "the dead session's worktree is gone");
        assert!(wt.path.exists());
        let list = run(&["worktree", "list"]);
        assert_eq!(list.lines().count(), 2, "{list}");
        drop(wt);
        assert_eq!(run(&["worktree", "list"]).lines().count(), 1);
    }
}
