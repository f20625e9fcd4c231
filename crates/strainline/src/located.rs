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
    let col = before
        .rfind('\n')
        .map_or(before.len(), |nl| before.len() - nl - 1)
        + 1;
    (line, col)
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
    }
}
