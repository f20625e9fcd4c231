//! Containment units are removed after use: a case whose target never became ready
//! leaves no cgroup behind; the guardian stops the processes and removes the groups of a
//! strainline killed with SIGKILL; and if the guardian was killed too, the next run
//! empties and removes them.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use crate::common::*;

/// The guardian strainline `pid` started.
fn guardian_of(pid: u32) -> Option<u32> {
    std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
        let p: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        let ppid: u32 = stat[stat.rfind(')')? + 2..]
            .split(' ')
            .nth(1)?
            .parse()
            .ok()?;
        let cmd = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
        (ppid == pid && String::from_utf8_lossy(&cmd).contains("__guardian")).then_some(p)
    })
}

#[test]
fn the_guardian_stops_what_a_killed_strainline_left() {
    let _bench = loaded();
    let s = Scratch::new();
    let marker = format!("319.{}", std::process::id() % 1000);
    let (mut child, pid) = start_daemon_run(&s, &marker);
    let left = with_marker(&marker);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        eventually(3.0, || left.iter().all(|p| !alive(*p))),
        "the killed run's setsid child {left:?} still runs"
    );
    assert!(
        eventually(3.0, || groups_of(pid).is_empty()),
        "groups left: {:?}",
        groups_of(pid)
    );
}

fn suite_file(s: &Scratch, name: &str, text: &str) -> String {
    let path = s.path(name);
    std::fs::write(&path, with_testbed(text)).unwrap();
    path.display().to_string()
}

/// A 30 s run whose target leaves a `setsid sleep MARKER` child, started in the
/// background; returns once its cgroup and that child exist (so checks that they are
/// gone can fail), with strainline's pid.
fn start_daemon_run(s: &Scratch, marker: &str) -> (std::process::Child, u32) {
    let daemon = suite_file(
        s,
        "daemon.toml",
        &format!(
            "[target]\ncommand = [\"setsid sleep {marker} & exec TB serve --listen 127.0.0.1:{{{{port}}}}\"]\nshell = true\n\
             ready = \"http://127.0.0.1:{{{{port}}}}/health\"\n\
             [[test]]\nname = \"b\"\nkind = \"bench\"\nurl = \"http://127.0.0.1:{{{{port}}}}/health\"\nrate = 10\nduration = \"30s\"\n"
        ),
    );
    let child = start_run(s, &daemon);
    let pid = child.id();
    assert!(
        eventually(10.0, || !groups_of(pid).is_empty()
            && !with_marker(marker).is_empty()),
        "the target and its setsid child never started"
    );
    (child, pid)
}

/// `strainline run SUITE` in the background, quiet.
fn start_run(s: &Scratch, suite: &str) -> std::process::Child {
    strainline()
        .args(["--store", &s.store(), "run", suite])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_target_that_never_became_ready_leaves_no_cgroup() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let suite = suite_file(
        &s,
        "never.toml",
        "[target]\ncommand = [\"sleep\", \"30\"]\nready = \"tcp://127.0.0.1:1\"\nready_timeout = \"2s\"\n\
         [[test]]\nname = \"b\"\nkind = \"bench\"\nurl = \"http://127.0.0.1:{{port}}/\"\nrate = 10\nduration = \"1s\"\n",
    );
        let child = start_run(&s, &suite);
        let pid = child.id();
        // The group exists while the target waits to be ready: the check below can fail.
        assert!(
            eventually(5.0, || !groups_of(pid).is_empty()),
            "no cgroup was made for the target"
        );
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(groups_of(pid), Vec::<PathBuf>::new());
    });
}

#[test]
fn the_next_run_removes_what_a_killed_strainline_left() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let marker = format!("318.{}", std::process::id() % 1000);
        let (mut child, pid) = start_daemon_run(&s, &marker);
        // Both strainline and its guardian killed outright (an OOM kill of the job).
        let guardian = guardian_of(pid).expect("a guardian process");
        // SAFETY: signalling a process this test started (through strainline).
        unsafe { libc::kill(guardian as i32, libc::SIGKILL) };
        child.kill().unwrap();
        child.wait().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        // What that leaves: the setsid child and its groups.
        assert!(!groups_of(pid).is_empty());
        let left = with_marker(&marker);
        assert!(!left.is_empty());

        let next = suite_file(
        &s,
        "next.toml",
        "[target]\ncommand = [\"TB\", \"serve\", \"--listen\", \"127.0.0.1:{{port}}\"]\nready = \"http://127.0.0.1:{{port}}/health\"\n\
         [[test]]\nname = \"b\"\nkind = \"bench\"\nurl = \"http://127.0.0.1:{{port}}/health\"\nrate = 10\nduration = \"1s\"\n",
    );
        let out = s.run(&["run", &next]);
        assert_exit(&out, 0);
        assert_eq!(groups_of(pid), Vec::<PathBuf>::new());
        assert!(
            eventually(2.0, || left.iter().all(|p| !alive(*p))),
            "the killed run's setsid child {left:?} still runs"
        );
    });
}
