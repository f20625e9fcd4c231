//! A worker thread's runtime: single-threaded, its tasks local (they share `Rc`s), as
//! every generator thread and the MQTT subscribers' thread run.

/// A current-thread runtime and the set its local tasks run in.
pub fn single_threaded() -> (tokio::runtime::Runtime, tokio::task::LocalSet) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    (rt, tokio::task::LocalSet::new())
}

/// Waits for every task (each waits for the common start itself).
pub async fn join(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for t in tasks {
        let _ = t.await;
    }
}
