//! The results store's schema, as an ordered list of migrations. A store records the
//! migrations it has applied; opening it applies the missing ones in one transaction.
//! Never edit a released migration: add a new one.

/// `(version, what it does, SQL)`, in order. Written in SQLite's dialect;
/// [`super::backend::Dialect::ddl`] renders them for PostgreSQL.
pub const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "runs, cases, metrics, samples, processes, series, histograms, events",
        r#"
CREATE TABLE hosts (
    id            INTEGER PRIMARY KEY,
    fingerprint   TEXT NOT NULL,
    hostname      TEXT NOT NULL,
    cpu_model     TEXT NOT NULL,
    cores         INTEGER NOT NULL,
    memory_bytes  INTEGER NOT NULL,
    kernel        TEXT NOT NULL,
    os            TEXT NOT NULL,
    UNIQUE (fingerprint, hostname, kernel, os)
);
CREATE TABLE runs (
    id                  INTEGER PRIMARY KEY,
    kind                TEXT NOT NULL,        -- monitor | suite
    label               TEXT,
    suite               TEXT,
    command             TEXT NOT NULL,
    cwd                 TEXT NOT NULL,
    git_commit          TEXT,
    git_dirty           INTEGER,
    host_id             INTEGER NOT NULL REFERENCES hosts(id),
    strainline_version  TEXT NOT NULL,
    pid                 INTEGER NOT NULL,     -- strainline's pid, to spot abandoned runs
    started_at          TEXT NOT NULL,
    ended_at            TEXT,
    status              TEXT NOT NULL,        -- running | completed | passed | failed | invalid | crashed | interrupted
    exit_code           INTEGER,
    reasons             TEXT                  -- JSON array of strings
);
CREATE INDEX runs_label ON runs(label);
CREATE TABLE cases (
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    test_kind   TEXT NOT NULL,
    params      TEXT,                         -- JSON object of matrix parameters
    repetition  INTEGER NOT NULL DEFAULT 0,
    started_at  TEXT NOT NULL,
    ended_at    TEXT,
    status      TEXT NOT NULL,
    reasons     TEXT,
    summary     TEXT                          -- JSON document of the kind's summary
);
CREATE INDEX cases_run ON cases(run_id);
CREATE TABLE metrics (
    case_id    INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    value      REAL NOT NULL,
    unit       TEXT NOT NULL,
    direction  TEXT NOT NULL,                 -- lower | higher | none (which way is better)
    source     TEXT,
    PRIMARY KEY (case_id, name)
);
CREATE TABLE samples (
    case_id       INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    t             REAL NOT NULL,
    rss_bytes     INTEGER NOT NULL,
    cpu_cores     REAL NOT NULL,
    threads       INTEGER NOT NULL,
    fds           INTEGER NOT NULL,
    read_bytes    INTEGER NOT NULL,
    write_bytes   INTEGER NOT NULL,
    ctx_switches  INTEGER NOT NULL,
    processes     INTEGER NOT NULL,
    top           TEXT NOT NULL               -- JSON array of {pid, name, rss_bytes}
);
CREATE INDEX samples_case ON samples(case_id, t);
CREATE TABLE processes (
    case_id           INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    pid               INTEGER NOT NULL,
    ppid              INTEGER NOT NULL,
    name              TEXT NOT NULL,
    cmdline           TEXT NOT NULL,
    first_seen        REAL NOT NULL,
    last_seen         REAL NOT NULL,
    peak_rss_sampled  INTEGER NOT NULL,
    peak_rss_exact    INTEGER NOT NULL,
    cpu_seconds       REAL NOT NULL,
    exit              TEXT
);
CREATE TABLE series (
    case_id  INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    name     TEXT NOT NULL,
    t        REAL NOT NULL,
    value    REAL NOT NULL
);
CREATE INDEX series_case ON series(case_id, name, t);
CREATE TABLE histograms (
    case_id         INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    interval_start  REAL NOT NULL,
    interval_end    REAL NOT NULL,
    encoding        TEXT NOT NULL,            -- e.g. hdr-v2-deflate
    data            BLOB NOT NULL
);
CREATE TABLE events (
    case_id  INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    t        REAL NOT NULL,
    kind     TEXT NOT NULL,
    message  TEXT NOT NULL
);
"#,
    ),
    (
        2,
        "runs.settings: the suite's settings that later commands need (compare bands)",
        "ALTER TABLE runs ADD COLUMN settings TEXT;",
    ),
    (
        3,
        "artifacts: named files of a case (folded CPU stacks for flame graphs)",
        r#"
CREATE TABLE artifacts (
    case_id  INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    name     TEXT NOT NULL,
    data     BLOB NOT NULL,
    PRIMARY KEY (case_id, name)
);
"#,
    ),
    (
        4,
        "processes: the CPU and largest peak of the children each process reaped, apart from its own",
        r#"
ALTER TABLE processes ADD COLUMN children_cpu_seconds REAL NOT NULL DEFAULT 0;
ALTER TABLE processes ADD COLUMN children_peak_rss INTEGER NOT NULL DEFAULT 0;
"#,
    ),
    (
        5,
        "live: a run's figures of each second as it goes (serve's live page); runs by suite",
        r#"
CREATE TABLE live (
    run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    t               REAL NOT NULL,             -- seconds since the run started
    case_name       TEXT NOT NULL,
    offered         REAL,                      -- the open model's rate that second
    achieved        REAL,
    p99_us          INTEGER,
    errors          INTEGER,
    rss_bytes       INTEGER,
    cpu_cores       REAL
);
CREATE INDEX live_run ON live(run_id, t);
CREATE INDEX runs_suite ON runs(suite, id);
"#,
    ),
    (
        6,
        "gates: each gate a case was judged by, with the value it measured",
        r#"
CREATE TABLE gates (
    case_id   INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,            -- the gate's place among the case's gates
    gate      TEXT NOT NULL,               -- as written: error_rate < 5%
    metric    TEXT NOT NULL,
    measured  REAL,                        -- in the metric's unit; NULL when not measured
    unit      TEXT NOT NULL,
    passed    INTEGER NOT NULL,
    detail    TEXT NOT NULL,               -- the gate with the measured value, in words
    PRIMARY KEY (case_id, seq)
);
"#,
    ),
    (
        7,
        "runs.scenario: the name of the scenario a load ran (its file's stem), to tell load runs apart",
        "ALTER TABLE runs ADD COLUMN scenario TEXT;",
    ),
];

/// The newest schema version this build knows.
pub fn latest() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}
