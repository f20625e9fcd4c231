//! The table of test kinds, as `load::proto::PROTOCOLS` is the table of protocols: one
//! row per kind — its name (which is also its modules' name), its family and what the
//! rest of the suite must know of it. Each layer makes its part from this one row
//! (`table!` hands the rows to a macro of its own): [`Kind`] here; the `Spec` variant,
//! the keys' module and the checks in `suite`; the run's module and the dispatch in
//! `kinds`. Adding a kind is its row here, its metrics' rows in `metrics.rs`, and its two
//! modules, `suite/parse/kinds/NAME.rs` (its keys and spec) and `kinds/NAME.rs` (its run
//! and verdict): docs/design.md, "How to add a test kind".

/// Calls `$then! { load: [...], process: [...] }` with every kind's row:
/// `Variant module { trait: value, … }` (the traits of [`Traits`] it does not take the
/// default of). A load kind drives the load engine at a workload; a process kind runs
/// commands of its own.
macro_rules! table {
    ($then:ident) => {
        $then! {
            load: [
                Bench bench { duet: true, commands_alone: true },
                Ramp ramp { watched: true },
                Soak soak { watched: true },
                Rounds rounds { watched: true },
                Spike spike {},
            ],
            process: [
                Crash crash {},
                Scale scale {},
                Harness harness { printed_gates: true },
            ],
        }
    };
}
pub(crate) use table;

/// What the suite must know of a kind beyond its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traits {
    /// It drives the load engine at a workload (a load kind); else it runs commands of
    /// its own (a process kind).
    pub load: bool,
    /// Its verdict reads the target's CPU, memory or threads: a target that is only a
    /// URL is refused.
    pub watched: bool,
    /// Two versions may run it at once (`run --duet`): one fixed load at each.
    pub duet: bool,
    /// Its gates may name metrics its command prints (checked after it ran).
    pub printed_gates: bool,
    /// A command workload may run without a `[target]` (it may address a service
    /// strainline did not start).
    pub commands_alone: bool,
}

impl Traits {
    const NONE: Traits = Traits {
        load: false,
        watched: false,
        duet: false,
        printed_gates: false,
        commands_alone: false,
    };
}

macro_rules! kinds {
    (
        load: [$($lv:ident $lm:ident { $($lk:ident: $lx:expr),* $(,)? }),* $(,)?],
        process: [$($pv:ident $pm:ident { $($pk:ident: $px:expr),* $(,)? }),* $(,)?] $(,)?
    ) => {
        /// A test kind: what a suite's `[[test]]` does.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Kind {
            $($lv,)*
            $($pv,)*
        }

        impl Kind {
            /// The kinds a suite's `[[test]]` may name, in the table's order.
            pub const TESTS: &'static [Kind] = &[$(Kind::$lv,)* $(Kind::$pv,)*];

            /// Its name in a suite, which is its modules' name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Kind::$lv => stringify!($lm),)*
                    $(Kind::$pv => stringify!($pm),)*
                }
            }

            /// Its row's traits.
            pub fn traits(self) -> Traits {
                match self {
                    $(Kind::$lv => Traits { load: true, $($lk: $lx,)* ..Traits::NONE },)*
                    $(Kind::$pv => Traits { $($pk: $px,)* ..Traits::NONE },)*
                }
            }
        }
    };
}
table!(kinds);

impl Kind {
    /// A test kind by its name in a suite.
    pub fn parse_test(s: &str) -> Option<Kind> {
        Kind::TESTS.iter().copied().find(|k| k.name() == s)
    }

    /// Kinds that drive load at a started target (and so watch it and read its log).
    pub fn has_target(self) -> bool {
        self.traits().load
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_one_name_and_its_row() {
        let names: std::collections::BTreeSet<&str> =
            Kind::TESTS.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), Kind::TESTS.len());
        for &k in Kind::TESTS {
            assert_eq!(Kind::parse_test(k.name()), Some(k));
        }
        assert_eq!(Kind::parse_test("nope"), None);
        assert!(Kind::Bench.traits().duet && Kind::Bench.has_target());
        assert!(Kind::Ramp.traits().watched && !Kind::Crash.has_target());
        assert!(Kind::Harness.traits().printed_gates);
    }
}
