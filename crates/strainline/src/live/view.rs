//! Drawing the live view (ratatui on crossterm) and reading its keys.

use std::io::Stdout;
use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::crossterm::ExecutableCommand;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::prelude::CrosstermBackend;
use ratatui::style::{Color, Style, Stylize};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Sparkline};
use ratatui::{Frame, Terminal};

use super::State;
use crate::units::{format_duration, format_micros, Bytes};

pub type Term = Terminal<CrosstermBackend<Stdout>>;

pub fn enter() -> std::io::Result<Term> {
    enable_raw_mode()?;
    let mut out = std::io::stdout();
    if let Err(e) = out.execute(EnterAlternateScreen) {
        let _ = disable_raw_mode();
        return Err(e);
    }
    Terminal::new(CrosstermBackend::new(out))
}

pub fn leave(t: &mut Term) {
    let _ = disable_raw_mode();
    let _ = t.backend_mut().execute(LeaveAlternateScreen);
    let _ = t.show_cursor();
}

/// Waits up to `wait` for a key; true for `q`, `Esc` or Ctrl-C (in raw mode the
/// terminal sends Ctrl-C as a key, not as SIGINT).
pub fn quit_pressed(wait: Duration) -> bool {
    if !event::poll(wait).unwrap_or(false) {
        return false;
    }
    match event::read() {
        Ok(Event::Key(k)) if k.kind == KeyEventKind::Press => {
            matches!(k.code, KeyCode::Char('q') | KeyCode::Esc)
                || (k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL))
        }
        _ => false,
    }
}

/// The last `width` values of a series, scaled to u64 for a sparkline.
fn tail(values: impl Iterator<Item = f64>, width: u16, scale: f64) -> Vec<u64> {
    let v: Vec<u64> = values.map(|x| (x.max(0.0) * scale) as u64).collect();
    let skip = v.len().saturating_sub(width as usize);
    v[skip..].to_vec()
}

fn spark<'a>(title: String, data: &'a [u64], color: Color) -> Sparkline<'a> {
    Sparkline::default()
        .block(Block::default().borders(Borders::TOP).title(title))
        .data(data)
        .style(Style::default().fg(color))
}

/// Least-squares growth per second of the kept samples' RSS (the last 600): the leak
/// fit as it forms.
fn rss_trend(st: &State) -> Option<f64> {
    if st.samples.len() < 8 {
        return None;
    }
    let (xs, ys): (Vec<f64>, Vec<f64>) =
        st.samples.iter().map(|s| (s.t, s.rss_bytes as f64)).unzip();
    crate::analysis::stats::least_squares(&xs, &ys).map(|(slope, _)| slope)
}

pub fn draw(f: &mut Frame, st: &State, elapsed: Duration) {
    let area = f.area();
    let has_target = !st.samples.is_empty();
    let has_ramp = !st.steps.is_empty();
    let mut rows = vec![Constraint::Length(1)];
    if st.load {
        rows.push(Constraint::Length(8));
    }
    if has_target {
        rows.push(Constraint::Length(8));
    }
    if has_ramp {
        rows.push(Constraint::Length(6));
    }
    if st.threads.is_some() {
        rows.push(Constraint::Length(1 + THREAD_ROWS));
    }
    rows.push(Constraint::Min(3));
    rows.push(Constraint::Length(1));
    let parts = Layout::default()
        .direction(Direction::Vertical)
        .constraints(rows)
        .split(area);
    let mut i = 0;
    let mut next = || {
        i += 1;
        parts[i - 1]
    };
    f.render_widget(
        Paragraph::new(Line::from(vec![
            " strainline ".bold().reversed(),
            format!(" {}  ", st.title).into(),
            st.case.clone().bold(),
            format!(
                "  {}",
                format_duration(Duration::from_secs(elapsed.as_secs()))
            )
            .into(),
        ])),
        next(),
    );
    if st.load {
        draw_load(f, st, next());
    }
    if has_target {
        draw_target(f, st, next());
    }
    if has_ramp {
        draw_ramp(f, st, next());
    }
    if let Some(b) = &st.threads {
        draw_threads(f, b, next());
    }
    let log = next();
    let shown = log.height.saturating_sub(1) as usize;
    let lines: Vec<Line> = st
        .lines
        .iter()
        .skip(st.lines.len().saturating_sub(shown))
        .map(|l| Line::from(l.as_str()))
        .collect();
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::TOP).title("Output")),
        log,
    );
    f.render_widget(
        Paragraph::new(" q or Ctrl-C: stop (what was measured is kept, exit 130)".dim()),
        next(),
    );
}

/// Thread groups shown, at most.
const THREAD_ROWS: u16 = 5;

/// The target's threads over the last second: per group of one name, the states it
/// spent time in (thread-seconds per second = threads in that state), largest first.
fn draw_threads(f: &mut Frame, b: &crate::measure::threads::Breakdown, area: Rect) {
    let lines: Vec<Line> = b
        .groups
        .iter()
        .take(THREAD_ROWS as usize)
        .map(|g| {
            let mut states: Vec<(crate::measure::threads::State, f64)> =
                crate::measure::threads::State::ALL
                    .into_iter()
                    .map(|st| (st, g.states.get(st)))
                    .filter(|(_, v)| *v >= 0.005)
                    .collect();
            states.sort_by(|a, b| b.1.total_cmp(&a.1));
            let shown: Vec<String> = states
                .iter()
                .map(|(st, v)| format!("{} {v:.2}", st.label()))
                .collect();
            Line::from(format!(
                " {:<18} ×{:<4} {}",
                crate::units::one_line(&g.name),
                g.threads,
                shown.join(" · ")
            ))
        })
        .collect();
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::TOP)
                .title("Threads by state (thread-s/s, last second)"),
        ),
        area,
    );
}

fn halves(r: Rect) -> std::rc::Rc<[Rect]> {
    Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(50), Constraint::Percentage(50)])
        .split(r)
}

fn draw_load(f: &mut Frame, st: &State, area: Rect) {
    let cols = halves(area);
    let w = cols[0].width;
    let last = st.seconds.back();
    let offered = st
        .offered
        .map_or(String::new(), |o| format!(" of {o:.0} offered"));
    let rate = tail(st.seconds.iter().map(|s| s.achieved), w, 1.0);
    let title = match last {
        Some(s) => format!("Rate {:.1} req/s{offered}", s.achieved),
        None => "Rate (waiting for the first second)".into(),
    };
    f.render_widget(spark(title, &rate, Color::Green), cols[0]);
    let p99 = tail(st.seconds.iter().map(|s| s.p99_us as f64), w, 1.0);
    let title = match last {
        Some(s) => format!(
            "p99 {}  p50 {}  errors {}",
            format_micros(s.p99_us),
            format_micros(s.p50_us),
            s.errors
        ),
        None => "Latency".into(),
    };
    f.render_widget(spark(title, &p99, Color::Yellow), cols[1]);
}

fn draw_target(f: &mut Frame, st: &State, area: Rect) {
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Percentage(50), Constraint::Percentage(50)])
        .split(area);
    let (top, bottom) = (halves(rows[0]), halves(rows[1]));
    let w = top[0].width;
    let last = st.samples.back().expect("drawn only with samples");
    let trend = rss_trend(st).map_or(String::new(), |g| {
        let b = Bytes(g.abs() as u64);
        format!("  trend {}{b}/s", if g < 0.0 { "-" } else { "+" })
    });
    let rss = tail(st.samples.iter().map(|s| s.rss_bytes as f64), w, 1.0);
    f.render_widget(
        spark(
            format!("Target RSS {}{trend}", Bytes(last.rss_bytes)),
            &rss,
            Color::Magenta,
        ),
        top[0],
    );
    let cpu = tail(st.samples.iter().map(|s| s.cpu_cores), w, 1000.0);
    f.render_widget(
        spark(
            format!("CPU {:.2} cores", last.cpu_cores),
            &cpu,
            Color::Cyan,
        ),
        top[1],
    );
    let threads = tail(st.samples.iter().map(|s| s.threads as f64), w, 1.0);
    f.render_widget(
        spark(format!("Threads {}", last.threads), &threads, Color::Blue),
        bottom[0],
    );
    let fds = tail(st.samples.iter().map(|s| s.fds as f64), w, 1.0);
    f.render_widget(
        spark(format!("FDs {}", last.fds), &fds, Color::Blue),
        bottom[1],
    );
}

fn draw_ramp(f: &mut Frame, st: &State, area: Rect) {
    let w = area.width as usize;
    let steps = &st.steps[st.steps.len().saturating_sub(w)..];
    let achieved: Vec<u64> = steps.iter().map(|s| s.1 as u64).collect();
    let last = steps.last().expect("drawn only with steps");
    let ceiling = steps
        .iter()
        .filter(|s| s.3)
        .map(|s| s.0)
        .fold(0.0, f64::max);
    f.render_widget(
        spark(
            format!(
                "Ramp: {} steps, last {:.0} offered → {:.0} achieved, p99 {:.1} ms{}; ceiling so far {ceiling:.0} req/s",
                st.steps.len(),
                last.0,
                last.1,
                last.2,
                if last.3 { "" } else { " (broke)" }
            ),
            &achieved,
            Color::Red,
        ),
        area,
    );
}
