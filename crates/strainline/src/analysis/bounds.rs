//! The bounds every verdict about saturation shares: when a thread counts as busy,
//! when achieved falls short of offered, when the generator sends late. The load
//! engine's validity verdict and the ramp's step verdicts read them from here.

/// Schedule lag (p99, microseconds) beyond which the generator is sending late.
pub const LAG_BOUND_US: u64 = 2_000;
/// A thread busier than this share of a run was at its capacity; a target tree using
/// this share of the machine's cores is saturated.
pub const SATURATED: f64 = 0.90;
/// Achieved below this share of offered is a shortfall.
pub const ACHIEVED_BOUND: f64 = 0.95;
/// The share of the machine's CPU the hypervisor may take (steal) before a run says so,
/// and before a broken ramp step is measured again or named the machine's.
pub const STOLEN_BOUND: f64 = 0.01;
