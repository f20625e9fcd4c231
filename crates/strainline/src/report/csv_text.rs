//! The one way every CSV strainline writes (`report --csv`, `report --versions` and
//! `--by-host --csv`, `monitor --csv`) turns values into cells: text a spreadsheet
//! would read as a formula — first character `=`, `+`, `-`, `@`, a tab or a carriage
//! return — gets a leading `'` (OWASP's advice against CSV injection), every control
//! character and bidi override is shown as an escape ([`crate::units::one_line`]: no
//! control byte is written but the line ends), and a cell is quoted when it needs it
//! (RFC 4180). A number is written as a number (`-3.5` stays one).

use std::fmt::Write;

/// A text cell: a name, a unit, a label — anyone's text.
pub fn text(v: &str) -> String {
    let formula = v.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let v = crate::units::one_line(v);
    let v = if formula {
        format!("'{v}")
    } else {
        v.into_owned()
    };
    if v.contains([',', '"']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v
    }
}

/// A number cell, as Rust writes it (`100`, `0.25`, `-3.5`).
pub fn number(v: impl Into<f64>) -> String {
    v.into().to_string()
}

/// Appends a row of cells made by [`text`] or [`number`], and its line end.
pub fn row<S: AsRef<str>>(out: &mut String, cells: impl IntoIterator<Item = S>) {
    for (i, c) in cells.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = out.write_str(c.as_ref());
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_stay_text_control_characters_are_escaped_and_numbers_stay_numbers() {
        assert_eq!(text("plain"), "plain");
        assert_eq!(text("a,b"), "\"a,b\"");
        assert_eq!(text("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(text("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(text("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(text("+cmd|' /C calc'!A0"), "'+cmd|' /C calc'!A0");
        assert_eq!(text("-c"), "'-c");
        assert_eq!(text("-3.5"), "'-3.5", "a text cell is text");
        assert_eq!(text("\t=1+1"), "'\\u{9}=1+1");
        assert_eq!(text("\r=1"), "'\\u{d}=1");
        assert_eq!(text("a\x1b]0;x\x07\nb"), "a\\u{1b}]0;x\\u{7}\\u{a}b");
        assert_eq!(text("evil\u{202e}txt"), "evil\\u{202e}txt");
        assert_eq!(number(-3.5), "-3.5");
        assert_eq!(number(100u32), "100");
        let mut out = String::new();
        row(&mut out, [text("=1"), number(2.0)]);
        assert_eq!(out, "'=1,2\n");
    }
}
