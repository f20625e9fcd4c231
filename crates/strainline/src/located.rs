//! Messages that point into a file: `suite.toml:14:9: what is wrong`, for every file
//! strainline reads (suites, scenarios).

use std::path::Path;

/// Line and column (1-based) of a byte offset in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    // An offset computed from decoded text (escapes) may fall inside a character.
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    // Columns count characters, as an editor shows them.
    let col = before[before.rfind('\n').map_or(0, |nl| nl + 1)..]
        .chars()
        .count()
        + 1;
    (line, col)
}

/// The byte offset in `text` of the `decoded`-th byte of the TOML string whose opening
/// quote is at `start`: through its escapes (`\t`, `\u00e9`), its line-ending
/// backslashes and a multi-line string's first newline, so that a message points at
/// what the author wrote.
pub fn string_offset(text: &str, start: usize, decoded: usize) -> usize {
    let Some(raw) = text.get(start..) else {
        return start + decoded;
    };
    let (open, literal, multi) = if raw.starts_with("\"\"\"") {
        (3, false, true)
    } else if raw.starts_with("'''") {
        (3, true, true)
    } else if raw.starts_with('"') {
        (1, false, false)
    } else if raw.starts_with('\'') {
        (1, true, false)
    } else {
        return start + decoded;
    };
    let mut i = open;
    if multi {
        if raw[i..].starts_with("\r\n") {
            i += 2;
        } else if raw[i..].starts_with('\n') {
            i += 1;
        }
    }
    let mut d = 0;
    while d < decoded {
        let Some(c) = raw[i..].chars().next() else {
            break;
        };
        if literal || c != '\\' {
            i += c.len_utf8();
            d += c.len_utf8();
            continue;
        }
        let rest = &raw[i + 1..];
        let hex = |n: usize| {
            rest.get(1..1 + n)
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .and_then(char::from_u32)
                .map_or(1, char::len_utf8)
        };
        let (used, made) = match rest.chars().next() {
            Some('u') => (6, hex(4)),
            Some('U') => (10, hex(8)),
            Some(w) if multi && w.is_whitespace() => (1 + rest.len() - rest.trim_start().len(), 0),
            _ => (2, 1),
        };
        i = (i + used).min(raw.len());
        d += made;
    }
    start + i
}

/// `PATH:LINE:COLUMN: msg` for a byte offset of the file's text.
pub fn message(path: &Path, text: &str, offset: usize, msg: &str) -> String {
    let (l, c) = line_col(text, offset);
    format!("{}:{l}:{c}: {msg}", path.display())
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_lines_and_columns_from_one() {
        let t = "a = 1\nbb = 2\n";
        assert_eq!(super::line_col(t, 0), (1, 1));
        assert_eq!(super::line_col(t, 6), (2, 1));
        assert_eq!(super::line_col(t, 9), (2, 4));
        // Inside a two-byte character: its start.
        assert_eq!(super::line_col("a\u{a0}b", 2), (1, 2));
        // Characters, not bytes.
        assert_eq!(super::line_col("é{{x}}", 2), (1, 2));
    }

    #[test]
    fn a_string_s_decoded_offset_points_where_its_author_wrote_it() {
        let at = |text: &str, decoded: &str| {
            let start = text.find(['"', '\'']).unwrap();
            let value: toml::Value = toml::from_str(text).unwrap();
            let s = value["p"].as_str().unwrap().to_string();
            let off = s.find(decoded).unwrap();
            super::line_col(text, super::string_offset(text, start, off))
        };
        assert_eq!(at(r#"p = "/\u00e9\t\"{{clinet}}""#, "{{"), (1, 17));
        assert_eq!(at("p = \"\"\"\n\nabc\n  {{clinet}}\"\"\"", "{{"), (4, 3));
        assert_eq!(at("p = '''\nx\n  {{clinet}}'''", "{{"), (3, 3));
        assert_eq!(at("p = \"/é{{clinet}}\"", "{{"), (1, 8));
        assert_eq!(at("p = \"\"\"a \\\n   b{{x}}\"\"\"", "{{"), (2, 5));
    }
}
