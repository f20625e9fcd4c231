//! Targets that daemonise, as real servers started the usual way do: nginx in its
//! default mode (the master forks and the command exits 0), `redis-server --daemonize
//! yes`, and a `setsid` background server that later dies. What the command leaves is
//! the target — watched, judged, stopped — and its end, not the command's, is a crash.

use crate::common::*;

/// Checks that no process whose command line holds `marker` survived the run.
fn nothing_left(marker: &str) {
    assert!(
        eventually(3.0, || with_marker(marker).is_empty()),
        "left running: {:?}",
        with_marker(marker)
    );
}

#[test]
fn nginx_in_its_default_daemon_mode_is_the_target_until_stopped() {
    let _l = loaded();
    let s = Scratch::new();
    let dir = s.path("nginx");
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::write(dir.join("www/health"), "ok\n").unwrap();
    let port = free_port();
    let d = dir.display();
    // No `daemon off;`: nginx forks its master and the command returns.
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            "worker_processes 2;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 256; }}\n\
             http {{ access_log off; client_body_temp_path {d}/body;\n\
             server {{ listen 127.0.0.1:{port}; root {d}/www; }} }}\n"
        ),
    )
    .unwrap();
    // nginx's workers drop to `nobody` when run as root: they must read the files.
    let _ = std::process::Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(s.dir.path())
        .status();
    let suite = format!(
        "[target]\ncommand = [\"nginx\", \"-c\", \"{d}/nginx.conf\", \"-p\", \"{d}\"]\n\
         ready = \"http://127.0.0.1:{port}/health\"\n\
         [[test]]\nname = \"health\"\nkind = \"bench\"\nurl = \"http://127.0.0.1:{port}/health\"\n\
         rate = 200\nduration = \"2s\"\n"
    );
    let out = run_suite(&s, &suite, &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_has(
        &text,
        "target daemonised: its command exited 0 leaving pid ",
    );
    assert_has(&text, "`nginx: master process nginx -c ");
    // The master and its two workers were watched: their memory is the target's.
    let case = &case_metrics(&s)[0];
    let seen = case["summary"]["target"]["processes_seen"]
        .as_u64()
        .unwrap();
    assert!(
        seen >= 4,
        "{seen} processes seen (the command, master, 2 workers)\n{text}"
    );
    nothing_left(&format!("{d}/nginx.conf"));
    assert!(
        !dir.join("nginx.pid").exists(),
        "nginx was not asked to stop (TERM to its master removes its pid file)"
    );
}

#[test]
fn redis_daemonized_is_the_target_of_a_command_workload() {
    let _l = loaded();
    let s = Scratch::new();
    let suite = "[target]\n\
         command = [\"redis-server\", \"--port\", \"{{port}}\", \"--bind\", \"127.0.0.1\", \"--daemonize\", \"yes\", \
                    \"--save\", \"\", \"--appendonly\", \"no\", \"--dir\", \"{{dir}}\", \"--pidfile\", \"{{dir}}/redis.pid\", \
                    \"--logfile\", \"{{dir}}/redis.log\"]\n\
         ready = \"tcp://127.0.0.1:{{port}}\"\n\
         [[test]]\nname = \"set\"\nkind = \"bench\"\n\
         command = [\"redis-cli\", \"-p\", \"{{port}}\", \"set\", \"k\", \"v\"]\n\
         rate = 20\nduration = \"2s\"\n";
    let out = run_suite(&s, suite, &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_has(
        &text,
        "target daemonised: its command exited 0 leaving pid ",
    );
    assert_has(&text, "`redis-server 127.0.0.1:");
    let case = &case_metrics(&s)[0];
    // Its memory is redis's, not the exited launcher's: several MiB.
    let peak = case["summary"]["target"]["peak_rss"]["bytes"]
        .as_f64()
        .unwrap();
    assert!(peak > 4.0 * 1048576.0, "peak RSS {peak}\n{text}");
    nothing_left("redis-server 127.0.0.1:");
}

#[test]
fn a_daemon_that_dies_during_the_case_is_a_crash_named_as_such() {
    let _l = loaded();
    let s = Scratch::new();
    // A background server in a session of its own that aborts after 150 requests.
    let suite = "[target]\n\
         command = [\"sh\", \"-c\", \"setsid TB serve --listen 127.0.0.1:{{port}} --crash-after 150 > /dev/null 2>&1 &\"]\n\
         ready = \"http://127.0.0.1:{{port}}/health\"\n\
         [[test]]\nname = \"health\"\nkind = \"bench\"\nurl = \"http://127.0.0.1:{{port}}/health\"\n\
         rate = 100\nduration = \"3s\"\n";
    let out = run_suite(&s, suite, &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert_has(
        &text,
        "the target exited during the case (every process its command had left running in the background ended; the command itself had exited 0)",
    );
}
