//! Units that appear on the command line and in reports: durations such as `10ms` or
//! `0.5s`, and byte sizes printed as KiB/MiB/GiB. One parser and one formatter, so every
//! flag and every report reads the same way.

use std::fmt;
use std::time::Duration;

/// A duration could not be parsed; the message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{input}' is not a duration: {why} (examples: 10ms, 0.5s, 2m, 1h30m)")]
pub struct DurationError {
    input: String,
    why: &'static str,
}

/// Parses `10ms`, `0.5s`, `250us`, `2m`, `1h30m`, `1d`. A bare number is refused,
/// because `--interval 100` is ambiguous between seconds and milliseconds.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |why| DurationError {
        input: input.to_string(),
        why,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("it is empty"));
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| err("a unit is missing after the number"))?;
        if num_len == 0 {
            return Err(err("expected a number"));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| err("the number is malformed"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => return Err(err("unknown unit (use ns, us, ms, s, m, h or d)")),
        };
        total += value * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    if !total.is_finite() || total > 1e12 {
        return Err(err("it is too large"));
    }
    Ok(Duration::from_secs_f64(total))
}

/// Formats a duration compactly for humans: `850µs`, `12.3ms`, `4.20s`, `3m05s`, `2h10m`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1e-3 {
        format!("{:.0}µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.1}ms", s * 1e3)
    } else if s < 60.0 {
        format!("{s:.2}s")
    } else if s < 3600.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!(
            "{}h{:02}m",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    }
}

/// A number of bytes, displayed with a binary prefix (`13.5 MiB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut v = self.0 as f64;
        let mut unit = 0;
        while v >= 1024.0 && unit + 1 < UNITS.len() {
            v /= 1024.0;
            unit += 1;
        }
        if unit == 0 {
            write!(f, "{} B", self.0)
        } else {
            write!(f, "{v:.1} {}", UNITS[unit])
        }
    }
}

/// What a share written without its `%` gets told: `'3' has no unit: 3 what? write 3%`,
/// and for a number under 1 the fraction it may have meant (`or 0.1% if 0.001 was a
/// fraction`). One wording for flags, suite keys and gates.
pub fn share_without_unit(raw: &str, v: f64) -> String {
    let fraction = if v > 0.0 && v < 1.0 {
        format!(
            " (or {}% if {raw} was a fraction)",
            (v * 100.0 * 1e9).round() / 1e9
        )
    } else {
        String::new()
    };
    format!("'{raw}' has no unit: {raw} what? write {raw}%{fraction}")
}

/// A share written with its unit: `20%` → 0.2. A bare number is refused with the fix,
/// because `3` is ambiguous between 3% and 300% (a fraction of 3).
pub fn parse_fraction(s: &str) -> crate::error::Result<f64> {
    let t = s.trim();
    // Zero is zero in every unit.
    if t.parse::<f64>() == Ok(0.0) {
        return Ok(0.0);
    }
    let Some(p) = t.strip_suffix('%') else {
        return Err(crate::Error::usage(match t.parse::<f64>() {
            Ok(v) if v.is_finite() => share_without_unit(t, v),
            _ => format!("'{s}' is not a percentage: write it as 20%"),
        }));
    };
    match p.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v / 100.0),
        _ => Err(crate::Error::usage(format!(
            "'{s}' is not a percentage: write it as 20%"
        ))),
    }
}

/// `text` in bold red when stdout is a terminal (and `NO_COLOR` is unset), else as is:
/// for the line a reader must not miss.
pub fn alarm(text: &str) -> String {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none() {
        format!("\x1b[1;31m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// Microseconds for people, as [`latency_ms`] writes them: `850 µs`, `12.3 ms`, `1.20 s`;
/// `u64::MAX` (a latency never taken) reads `over 1 h`.
pub fn format_micros(v: u64) -> String {
    latency_ms(v as f64 / 1000.0)
}

/// `v` to three significant digits, its trailing zeros kept (`1.20`, `12.3`, `850`).
fn three_digits(v: f64) -> String {
    let digits = if v < 10.0 {
        2
    } else if v < 100.0 {
        1
    } else {
        0
    };
    let text = format!("{v:.digits$}");
    // 9.995 rounds up to 10.00: one digit fewer, as the larger number is written.
    match text.parse::<f64>() {
        Ok(r) if digits > 0 && r >= [10.0, 100.0][2 - digits] => {
            format!("{:.*}", digits - 1, v)
        }
        _ => text,
    }
}

/// A latency or a time per request, given in milliseconds, for people in every format
/// (terminal, HTML, Markdown, CSV's comments, serve): three significant digits in µs,
/// ms or s (`850 µs`, `12.3 ms`, `1.20 s`), minutes and seconds from a minute on
/// (`3m05s`), and words where a number would not be one: `over 1 h`, `not measured`
/// (NaN, a negative time).
pub fn latency_ms(ms: f64) -> String {
    if ms.is_nan() || ms < 0.0 {
        return "not measured".into();
    }
    let s = ms / 1000.0;
    if s >= 3600.0 {
        "over 1 h".into()
    } else if s >= 60.0 {
        format_duration(Duration::from_secs_f64(s))
    } else if s >= 1.0 {
        format!("{} s", three_digits(s))
    } else if ms >= 1.0 {
        let t = three_digits(ms);
        if t == "1000" {
            "1.00 s".into()
        } else {
            format!("{t} ms")
        }
    } else {
        let t = three_digits(ms * 1000.0);
        if t == "1000" {
            "1.00 ms".into()
        } else {
            format!("{t} µs")
        }
    }
}

/// A share (0.1234 → `12.34%`), in every format: two decimals; words where a number
/// would not be one: `not measured` (NaN), `no bound` (infinite); never `-0.00%`.
pub fn share(ratio: f64) -> String {
    if ratio.is_nan() {
        return "not measured".into();
    }
    // Past a billion percent a share is a division by nothing.
    if (100.0 * ratio).abs() >= 1e9 {
        return "no bound".into();
    }
    format!("{:.2}%", 100.0 * ratio + 0.0).replace("-0.00%", "0.00%")
}

/// A value as a percent of another (a candidate of its baseline: `103.2%`), in every
/// format: one decimal; `no bound` over a baseline of nothing, `not measured` for NaN.
pub fn percent_of(ratio: f64) -> String {
    if ratio.is_nan() {
        return "not measured".into();
    }
    if (100.0 * ratio).abs() >= 1e9 {
        return "no bound".into();
    }
    format!("{:.1}%", 100.0 * ratio + 0.0).replace("-0.0%", "0.0%")
}

/// A change in percent, signed (`+3.2%`, `-12.0%`), in every format: one decimal; no
/// sign on what rounds to nothing (`0.0%`, never `-0.0%`); `no bound` from nothing,
/// `not measured` for NaN.
pub fn signed_percent(p: f64) -> String {
    if p.is_nan() {
        return "not measured".into();
    }
    if p.abs() >= 1e9 {
        return "no bound".into();
    }
    if (p * 10.0).round() == 0.0 {
        return "0.0%".into();
    }
    format!("{p:+.1}%")
}

/// Above this many requests a second no generator or target measured a rate: a figure
/// there is a division by a time near zero, and reads `no bound`.
const RATE_BEYOND_SENSE: f64 = 1e9;

/// A throughput in requests a second, in every format: four significant digits
/// (`935.0 req/s`, `99.94 req/s`), words past sense (`no bound` for infinite or over a
/// billion a second, `not measured` for NaN or a negative rate).
pub fn rate(per_s: f64) -> String {
    if per_s.is_nan() || per_s < 0.0 {
        return "not measured".into();
    }
    if per_s.is_infinite() || per_s > RATE_BEYOND_SENSE {
        return "no bound".into();
    }
    format_value(per_s, "req/s")
}

/// A number for people, to the four significant digits a measurement supports: whole
/// numbers below a million as such, larger ones in words (`3.78 billion`), never `inf`.
pub fn format_number(v: f64) -> String {
    if v.is_nan() {
        return "not measured".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "no bound".into()
        } else {
            "no lower bound".into()
        };
    }
    // Never `-0`.
    let v = v + 0.0;
    if v.abs() < 5e-7 {
        return "0".into();
    }
    let a = v.abs();
    // u64::MAX read as a float, a sum that overflowed: no count of anything measured.
    if a >= 1e15 {
        return if v > 0.0 {
            "over 1000 trillion"
        } else {
            "under -1000 trillion"
        }
        .into();
    }
    for (scale, word) in [(1e12, "trillion"), (1e9, "billion"), (1e6, "million")] {
        if a >= scale {
            let x = v / scale;
            let digits = if x.abs() < 10.0 {
                2
            } else if x.abs() < 100.0 {
                1
            } else {
                0
            };
            let text = format!("{x:.digits$}");
            let text = if text.contains('.') {
                text.trim_end_matches('0').trim_end_matches('.')
            } else {
                &text
            };
            return format!("{text} {word}");
        }
    }
    if v.fract() == 0.0 {
        return format!("{v:.0}");
    }
    let digits = decimals(v, 6);
    format!("{v:.digits$}")
}

/// Decimals that leave four significant digits, at most `max`.
fn decimals(v: f64, max: i32) -> usize {
    if v == 0.0 {
        return max.min(3) as usize;
    }
    (3 - v.abs().log10().floor() as i32).clamp(0, max) as usize
}

/// Singular or plural: `1 process`, `3 processes`.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A metric's value with its unit, for people: `13.5 MiB`, `1.234 ms`, `935.0 req/s`.
pub fn format_value(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return format_number(v);
    }
    let v = v + 0.0;
    match unit {
        "bytes" if v < 0.0 => "not measured".into(),
        "bytes" => Bytes(v as u64).to_string(),
        "ms" => latency_ms(v),
        "s" => latency_ms(v * 1000.0),
        "req/s" if v > RATE_BEYOND_SENSE => "no bound".into(),
        // Time per operation of an imported benchmark: four significant digits.
        "ns" if v.abs() >= 1e9 => format!("{:.4} s", v / 1e9),
        "ns" if v.abs() >= 1e6 => format!("{:.4} ms", v / 1e6),
        "ns" if v.abs() >= 1e3 => format!("{:.4} µs", v / 1e3),
        "ns" => format!("{v:.4} ns"),
        "ratio" => share(v),
        "finding" => {
            if v > 0.0 {
                "yes".into()
            } else {
                "no".into()
            }
        }
        "count" => format_number(v),
        "" => format_number(v),
        // A whole number as such (an offered rate, a ceiling): `100 req/s`.
        _ if v.fract() == 0.0 && v.abs() < 1e6 => format!("{v:.0} {unit}"),
        _ if v.abs() >= 1e6 => format!("{} {unit}", format_number(v)),
        _ if v.abs() >= 100.0 => format!("{v:.1} {unit}"),
        // Four significant digits, at most three decimals: 99.94 req/s, 0.031 cores.
        _ => {
            let digits = decimals(v, 3);
            format!("{v:.digits$} {unit}")
        }
    }
}

/// `s` safe to print on a terminal: control characters (an ANSI or OSC escape from a
/// test name or a target's log) and bidi controls are shown as `\u{1b}`-style escapes;
/// lines and tabs stay (a whole text's layout: a name goes through [`one_line`]).
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    escape_controls(s, |c| c == '\n' || c == '\t')
}

/// Whether `c` reorders the text around it on screen (a bidi embedding, override or
/// isolate, or a direction mark): `evil\u{202e}txt.exe` shows as `evilexe.txt`.
fn bidi(c: char) -> bool {
    matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every control character but those `keep` allows, and every bidi control,
/// shown as an escape.
fn escape_controls(s: &str, keep: fn(char) -> bool) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| (c.is_control() && !keep(c)) || bidi(c);
    if !s.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if escaped(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A terminal writer that passes text through [`printable`]: what strainline prints
/// from a store (labels, case names, commands, reasons — anyone's text) cannot send an
/// escape sequence to the reader's terminal. Each write is one whole piece of text
/// (`write!` hands over whole `str`s).
pub struct Printable<W: std::io::Write>(pub W);

impl<W: std::io::Write> std::io::Write for Printable<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(printable(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// `s` safe to print as one line of a log, or as a name in a table (a label, a host, a
/// case): every control character, line breaks and tabs included, and every bidi
/// control shown as an escape — what a stranger sent cannot forge a second line, shift
/// a column, reorder what follows or drive the terminal.
/// Hexadecimal digits, for text made without formatting (on a request's path).
pub const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";
const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// `bytes` percent-encoded onto `out`: all but the unreserved `A-Z a-z 0-9 - . _ ~`
/// (RFC 3986), as a query value, a form field or a path segment carries any text.
pub fn percent_encode(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[
                b'%',
                HEX_UPPER[usize::from(b >> 4)],
                HEX_UPPER[usize::from(b & 15)],
            ]);
        }
    }
}

pub fn one_line(s: &str) -> std::borrow::Cow<'_, str> {
    escape_controls(s, |_| false)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_share_needs_its_percent_sign() {
        assert_eq!(super::parse_fraction("3%").unwrap(), 0.03);
        assert_eq!(super::parse_fraction(" 0.1% ").unwrap(), 0.001);
        let e = super::parse_fraction("3").unwrap_err().to_string();
        assert!(e.contains("'3' has no unit: 3 what? write 3%"), "{e}");
        let e = super::parse_fraction("0.2").unwrap_err().to_string();
        assert!(
            e.contains("write 0.2% (or 20% if 0.2 was a fraction)"),
            "{e}"
        );
        assert!(super::parse_fraction("-3%").is_err());
        assert_eq!(super::parse_fraction("0").unwrap(), 0.0);
        assert!(super::parse_fraction("abc").is_err());
    }

    use super::*;

    #[test]
    fn control_characters_are_shown_not_sent() {
        let hostile = "a\x1b]8;;http://evil\x07b\x1b[2J\nc\td\u{9b}e";
        assert_eq!(
            printable(hostile),
            "a\\u{1b}]8;;http://evil\\u{7}b\\u{1b}[2J\nc\td\\u{9b}e"
        );
        assert_eq!(
            one_line(hostile),
            "a\\u{1b}]8;;http://evil\\u{7}b\\u{1b}[2J\\u{a}c\\u{9}d\\u{9b}e"
        );
        assert!(matches!(one_line("plain"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(format_number(3779705625.0), "3.78 billion");
        assert_eq!(format_number(2_000_000.0), "2 million");
        assert_eq!(format_number(96000.0), "96000");
        assert_eq!(format_number(1.80161), "1.802");
        assert_eq!(format_value(0.0, "ratio"), "0.00%");
        assert_eq!(format_value(6287360.0, ""), "6.29 million");
        assert_eq!(count(1u32, "process", "processes"), "1 process");
        assert_eq!(count(5u32, "case", "cases"), "5 cases");
    }

    #[test]
    fn latencies_read_to_three_digits_in_every_format() {
        assert_eq!(latency_ms(0.85), "850 µs");
        assert_eq!(latency_ms(12.345), "12.3 ms");
        assert_eq!(latency_ms(1.0), "1.00 ms");
        assert_eq!(latency_ms(0.9999), "1.00 ms");
        assert_eq!(latency_ms(9.996), "10.0 ms");
        assert_eq!(latency_ms(999.9), "1.00 s");
        assert_eq!(latency_ms(1200.0), "1.20 s");
        assert_eq!(latency_ms(185_000.0), "3m05s");
        assert_eq!(format_micros(850), "850 µs");
        assert_eq!(format_value(12.345, "ms"), format_micros(12_345));
        assert_eq!(format_value(1.2, "s"), "1.20 s");
    }

    #[test]
    fn figures_past_sense_read_as_words() {
        // Latencies: never taken, negative, too long.
        assert_eq!(format_micros(u64::MAX), "over 1 h");
        assert_eq!(latency_ms(f64::INFINITY), "over 1 h");
        assert_eq!(latency_ms(4_000_000.0), "over 1 h");
        assert_eq!(latency_ms(f64::NAN), "not measured");
        assert_eq!(latency_ms(-3.0), "not measured");
        assert_eq!(format_value(-1.0, "s"), "not measured");
        // Shares.
        assert_eq!(share(f64::NAN), "not measured");
        assert_eq!(share(f64::INFINITY), "no bound");
        assert_eq!(share(-0.0), "0.00%");
        assert_eq!(share(-0.00001), "0.00%");
        assert_eq!(share(0.12345), "12.35%");
        assert_eq!(format_value(f64::NAN, "ratio"), "not measured");
        assert_eq!(percent_of(1.0324), "103.2%");
        assert_eq!(percent_of(f64::INFINITY), "no bound");
        assert_eq!(percent_of(f64::NAN), "not measured");
        assert_eq!(signed_percent(-0.04), "0.0%");
        assert_eq!(signed_percent(-0.0), "0.0%");
        assert_eq!(signed_percent(3.24), "+3.2%");
        assert_eq!(signed_percent(-12.0), "-12.0%");
        assert_eq!(signed_percent(f64::INFINITY), "no bound");
        assert_eq!(signed_percent(f64::NAN), "not measured");
        // Rates.
        assert_eq!(rate(1e15), "no bound");
        assert_eq!(rate(f64::INFINITY), "no bound");
        assert_eq!(rate(f64::NAN), "not measured");
        assert_eq!(rate(-1.0), "not measured");
        assert_eq!(rate(935.04), "935.0 req/s");
        assert_eq!(format_value(1e15, "req/s"), "no bound");
        // Plain numbers.
        assert_eq!(format_number(f64::INFINITY), "no bound");
        assert_eq!(format_number(f64::NEG_INFINITY), "no lower bound");
        assert_eq!(format_number(f64::NAN), "not measured");
        assert_eq!(format_number(-0.0), "0");
        assert_eq!(format_number(u64::MAX as f64), "over 1000 trillion");
        assert_eq!(format_value(1.8e19, "count"), "over 1000 trillion");
        assert_eq!(format_value(-0.0, "cores"), "0 cores");
        assert_eq!(format_value(-1.0, "bytes"), "not measured");
        for v in [f64::INFINITY, f64::NAN, -0.0, 1.8e19, f64::MAX] {
            for unit in ["ms", "s", "ratio", "req/s", "count", "", "cores", "bytes"] {
                let t = format_value(v, unit);
                assert!(
                    !t.contains("inf")
                        && !t.contains("NaN")
                        && !t.contains("e1")
                        && !t.starts_with("-0"),
                    "{v} {unit}: {t}"
                );
            }
        }
    }

    #[test]
    fn parses_the_documented_forms() {
        assert_eq!(parse_duration("10ms").unwrap(), Duration::from_millis(10));
        assert_eq!(parse_duration("0.5s").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
    }

    #[test]
    fn refuses_ambiguous_or_malformed_input() {
        for bad in ["100", "", "ms", "10 parsecs", "1.2.3s", "10x"] {
            let e = parse_duration(bad).unwrap_err().to_string();
            assert!(e.contains("examples: 10ms"), "{bad}: {e}");
        }
    }

    #[test]
    fn formats_bytes_with_binary_prefixes() {
        assert_eq!(Bytes(512).to_string(), "512 B");
        assert_eq!(Bytes(13792 * 1024).to_string(), "13.5 MiB");
        assert_eq!(Bytes(3 << 30).to_string(), "3.0 GiB");
    }

    #[test]
    fn parses_and_formats_metric_values() {
        assert_eq!(parse_fraction("20%").unwrap(), 0.2);
        assert!(parse_fraction("0.05").is_err());
        assert!(parse_fraction("-5%")
            .unwrap_err()
            .to_string()
            .contains("20%"));
        assert_eq!(format_value(13792.0 * 1024.0, "bytes"), "13.5 MiB");
        assert_eq!(format_value(0.25, "ms"), "250 µs");
        assert_eq!(format_value(935.04, "req/s"), "935.0 req/s");
        assert_eq!(format_value(1.0, "finding"), "yes");
    }

    #[test]
    fn formats_durations_compactly() {
        assert_eq!(format_duration(Duration::from_micros(850)), "850µs");
        assert_eq!(format_duration(Duration::from_millis(4200)), "4.20s");
        assert_eq!(format_duration(Duration::from_secs(185)), "3m05s");
    }
}
