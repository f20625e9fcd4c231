//! Latency signatures: shapes of a run's figures that name their cause on their own.
//! The one known here: Linux delays an ACK by 40 ms at least; a server that writes a
//! response in two segments without TCP_NODELAY holds the second back until the first
//! is acknowledged (Nagle's algorithm), so the response's tail comes ~40 ms after its
//! head while nothing is busy. The client sees it directly: the body in a later read,
//! 30 ms or more after the head (`late_tails`).

/// A run shows the signature when at least this share of its answered responses came
/// with a late tail.
pub const LATE_TAIL_SHARE: f64 = 0.5;

/// The delayed-ACK signature in words, when `late_tails` of `answered` responses (with
/// the service time's median, ms) show it.
pub fn delayed_ack(late_tails: u64, answered: u64, service_p50_ms: f64) -> Option<String> {
    if answered == 0 || (late_tails as f64) < LATE_TAIL_SHARE * answered as f64 {
        return None;
    }
    Some(format!(
        "Nagle's algorithm meeting delayed ACKs: {late_tails} of {answered} responses ({:.0}%) came in two parts, the body 30 ms or more after the head (service time p50 {}) — the server writes a response in more than one segment without TCP_NODELAY, and holds the rest until the client's ACK, which Linux delays 40 ms; set TCP_NODELAY on its sockets, or write each response in one piece",
        100.0 * late_tails as f64 / answered as f64,
        crate::units::latency_ms(service_p50_ms)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_responses_with_late_tails_is_the_signature() {
        assert_eq!(delayed_ack(0, 0, 0.0), None);
        assert_eq!(delayed_ack(49, 100, 41.0), None);
        let s = delayed_ack(97, 100, 41.2).unwrap();
        assert!(
            s.starts_with("Nagle's algorithm meeting delayed ACKs: 97 of 100 responses (97%)"),
            "{s}"
        );
        assert!(s.contains("p50 41.2 ms"), "{s}");
    }
}
