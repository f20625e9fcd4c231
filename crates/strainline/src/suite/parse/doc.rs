//! The suite's text as it is parsed: located messages (`FILE:LINE:COLUMN`), durations
//! within their ranges and scaled by `--time-scale`, regexes, where a key is written,
//! sizes in bytes.

use std::path::Path;
use std::time::Duration;

use toml::Spanned;

use crate::limits;
use crate::units::parse_duration;

use super::Result;

/// The text being parsed, for located messages and scaled durations.
pub(super) struct Doc<'a> {
    pub(super) path: &'a Path,
    pub(super) text: &'a str,
    pub(super) time_scale: f64,
}

impl Doc<'_> {
    pub(super) fn at(&self, offset: usize, msg: impl std::fmt::Display) -> crate::Error {
        crate::Error::usage(crate::located::message(
            self.path,
            self.text,
            offset,
            &msg.to_string(),
        ))
    }

    /// A duration as written, within its range; `scaled` ones are then multiplied by
    /// `--time-scale`.
    pub(super) fn dur(
        &self,
        s: &Spanned<String>,
        key: &'static str,
        scaled: bool,
    ) -> Result<Duration> {
        let limit = match key {
            "interval" => limits::INTERVAL,
            "timeout" => limits::TIMEOUT,
            "settle" | "ready_timeout" | "stop_grace" => limits::PAUSE,
            _ => limits::DURATION,
        };
        let d = parse_duration(s.get_ref())
            .map_err(|e| format!("{key}: {e}"))
            .and_then(|d| {
                limit.named(key).duration(d).map_err(|_| {
                    format!(
                        "{key} = \"{}\": out of range, give a duration from {:?} to {:?}",
                        s.get_ref(),
                        Duration::from_secs_f64(limit.min),
                        Duration::from_secs_f64(limit.max)
                    )
                })
            })
            .map_err(|e| self.at(s.span().start, e))?;
        Ok(if scaled {
            d.mul_f64(self.time_scale)
        } else {
            d
        })
    }

    pub(super) fn opt_dur(
        &self,
        s: &Option<Spanned<String>>,
        key: &'static str,
        default: Duration,
        scaled: bool,
    ) -> Result<Duration> {
        match s {
            Some(s) => self.dur(s, key, scaled),
            None if scaled => Ok(default.mul_f64(self.time_scale)),
            None => Ok(default),
        }
    }

    pub(super) fn regex(&self, s: &Spanned<String>, key: &str) -> Result<regex_lite::Regex> {
        regex_lite::Regex::new(s.get_ref()).map_err(|e| {
            self.at(
                s.span().start,
                format!("{key}: not a regular expression: {e}"),
            )
        })
    }

    /// Where `key = …` is written in the table whose header is at `header` (the lines
    /// up to the next header), else the header itself.
    pub(super) fn key_offset(&self, header: usize, key: &str) -> usize {
        let mut offset = header;
        for (i, line) in self.text[header..].split_inclusive('\n').enumerate() {
            let trimmed = line.trim_start();
            if i > 0 && trimmed.starts_with('[') {
                break;
            }
            if trimmed
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
            {
                return offset + (line.len() - trimmed.len());
            }
            offset += line.len();
        }
        header
    }
}

/// Parses `1024B`, `17MiB`, `2GiB` into bytes (a bare number is not a size).
pub(super) fn bytes(s: &str) -> Option<f64> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let n: f64 = s[..split].parse().ok()?;
    let scale = match s[split..].trim() {
        "B" => 1.0,
        "KiB" | "KB" | "K" => 1024.0,
        "MiB" | "MB" | "M" => 1048576.0,
        "GiB" | "GB" | "G" => 1073741824.0,
        _ => return None,
    };
    Some(n * scale)
}
