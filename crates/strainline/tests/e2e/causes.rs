//! `-v` names what a failure came from: the OS's, the store driver's or the TLS
//! library's words under strainline's own, and the exit code is the same with or
//! without it.

use crate::common::*;
use std::process::{Command, Output};

/// `args` on the scratch store, without and with `-v`: the same exit code either way.
fn both(s: &Scratch, store: &str, args: &[&str], code: i32) -> Output {
    let run = |verbose: bool| {
        let mut c = strainline();
        if verbose {
            c.arg("-v");
        }
        c.args(["--store", store])
            .args(args)
            .current_dir(s.dir.path())
            .output()
            .unwrap()
    };
    let quiet = run(false);
    assert_exit(&quiet, code);
    let verbose = run(true);
    assert_exit(&verbose, code);
    assert!(
        stderr(&verbose).starts_with(
            &stderr(&quiet)
                .lines()
                .next()
                .unwrap_or_default()
                .to_string()
        ),
        "-v says the same first:\n{}\n---\n{}",
        stderr(&quiet),
        stderr(&verbose)
    );
    verbose
}

/// A self-signed certificate for 127.0.0.1 and its key, as `name`.pem and `name`.key.
fn certificate(s: &Scratch, name: &str) -> (String, String) {
    let cert = s.path(&format!("{name}.pem")).display().to_string();
    let key = s.path(&format!("{name}.key")).display().to_string();
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .args(["-keyout", &key, "-out", &cert])
        .output()
        .expect("openssl (installed by `make test`)");
    assert!(out.status.success(), "{}", stderr(&out));
    (cert, key)
}

/// A TLS listener on 127.0.0.1 (openssl s_server) serving `cert`, with `extra` options.
fn tls_listener(cert: &str, key: &str, extra: &[&str]) -> (KillOnDrop, u16) {
    let port = free_port();
    let mut c = Command::new("openssl");
    c.args([
        "s_server",
        "-quiet",
        "-accept",
        &format!("127.0.0.1:{port}"),
    ])
    .args(["-cert", cert, "-key", key])
    .args(extra);
    (serving(c, ("127.0.0.1", port), "openssl s_server"), port)
}

#[test]
fn verbose_names_the_cause_of_an_io_a_store_and_a_tls_failure() {
    let s = Scratch::new();
    let store = s.store();

    // I/O: the summary cannot be written, the disk is full (the machine's: exit 3).
    let out = both(
        &s,
        &store,
        &["monitor", "--json", "/dev/full", "--", "true"],
        3,
    );
    assert_has(&stderr(&out), "writing /dev/full: No space left on device");

    // A store that is not one: the user's (exit 2); -v names SQLite's own words.
    let not_a_store = s.path("notes.txt");
    std::fs::write(&not_a_store, "not a database, ".repeat(64)).unwrap();
    let out = both(&s, not_a_store.to_str().unwrap(), &["runs"], 2);
    let said = stderr(&out);
    assert_has(&said, "is not a strainline results store");
    assert_has(&said, "  caused by: file is not a database");
    // A directory where the store's file should be: SQLite cannot open it.
    let out = both(&s, s.dir.path().to_str().unwrap(), &["runs"], 2);
    assert_has(&stderr(&out), "unable to open database file");
    assert_has(&stderr(&out), "  caused by: ");

    // TLS: a server whose certificate is not the one trusted; every request fails
    // with the library's reason, said once, and the exit code does not depend on -v.
    let (cert, key) = certificate(&s, "server");
    let (other, _) = certificate(&s, "stranger");
    let (_server, port) = tls_listener(&cert, &key, &["-www"]);
    let url = format!("https://127.0.0.1:{port}/");
    let out = both(
        &s,
        &store,
        &["load", &url, "-n", "5", "--cacert", &other, "--no-tui"],
        1,
    );
    assert_has(&stderr(&out), "invalid peer certificate");
    // An agent behind a TLS server that wants a client certificate: the handshake's
    // alert, as rustls names it (the user's: exit 2).
    let (_server, port) = tls_listener(&cert, &key, &["-Verify", "1", "-verify_return_error"]);
    let token = s.path("token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let agents = format!("tls://127.0.0.1:{port}");
    let plain = format!("http://127.0.0.1:{port}/");
    let out = both(
        &s,
        &store,
        &[
            "load",
            &plain,
            "-n",
            "5",
            "--agents",
            &agents,
            "--agent-token-file",
            token.to_str().unwrap(),
            "--no-tui",
        ],
        2,
    );
    assert_has(&stderr(&out), "CertificateRequired");
}
