//! `wirespeed top [--socket PATH | --config FILE]`: a running switch, live, in the terminal.
//!
//! Once a second (`--interval`) it asks the switch's control socket for `show ports` and `show
//! counters`, the same requests `wirespeed ctl` sends, and draws what changed since the last
//! answer: Mpps per port, drops per second by reason, cycles per packet in each part of the
//! workers' loop, and the app's counters and table fills. It reads nothing the switch does not
//! already publish for `ctl`, so watching never slows forwarding. `q`, Esc or Ctrl-C quits.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};
use serde_json::Value;

use super::{ctl, numbers};

#[derive(Args)]
pub struct TopArgs {
    /// The switch's control socket (default: its config's, or the only one in /run/wirespeed).
    #[arg(long, conflicts_with = "config")]
    socket: Option<PathBuf>,
    /// The switch's configuration file: use the control socket it names.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Seconds between refreshes (0.1..=86400).
    #[arg(long, default_value_t = 1.0, value_parser = numbers::real(0.1, numbers::SECONDS.1))]
    interval: f64,
}

/// One answer of the switch: per port and per counter, the values at `at`.
struct Sample {
    at: Instant,
    /// `show ports`: (worker, port) -> backend, rx, tx, rx drop, tx refused, path.
    ports: Vec<PortRow>,
    /// `show counters`: counter -> its values, one per column (workers, then the kernel's).
    counters: BTreeMap<String, Vec<u64>>,
}

struct PortRow {
    key: String,
    backend: String,
    rx: u64,
    tx: u64,
    rx_drop: u64,
    tx_refused: u64,
    path: String,
}

pub fn run(args: TopArgs) -> Result<()> {
    let socket = ctl::find_socket(args.socket.as_deref(), args.config.as_deref())?;
    let interval = Duration::from_secs_f64(args.interval);
    // The first answer before the terminal changes: a switch that is not there is an error
    // printed as usual, not a flash of an empty screen.
    let mut previous = sample(&socket)?;
    let mut terminal = ratatui::init();
    let result = (|| -> Result<()> {
        let mut current: Option<Sample> = None;
        let mut problem: Option<String> = None;
        loop {
            terminal.draw(|frame| {
                draw(
                    frame,
                    &socket,
                    &previous,
                    current.as_ref(),
                    problem.as_deref(),
                )
            })?;
            if event::poll(interval)?
                && let Event::Key(key) = event::read()?
            {
                let control_c =
                    key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
                if matches!(key.code, KeyCode::Char('q') | KeyCode::Esc) || control_c {
                    return Ok(());
                }
                continue;
            }
            match sample(&socket) {
                Ok(next) => {
                    if let Some(last) = current.replace(next) {
                        previous = last;
                    }
                    problem = None;
                }
                // A switch that stopped or does not answer in time is shown, not fatal: it
                // may come back.
                Err(error) => problem = Some(format!("{error:#}")),
            }
        }
    })();
    ratatui::restore();
    result
}

/// Asks the switch for its ports and counters.
fn sample(socket: &std::path::Path) -> Result<Sample> {
    let ask = |request: &str| -> Result<Value> {
        let reply =
            wirespeed_control::socket::request(socket, request, &[], Duration::from_secs(5))
                .with_context(|| format!("asking the switch at {}", socket.display()))?;
        let value: Value = serde_json::from_str(&reply).context("a reply that is not JSON")?;
        anyhow::ensure!(
            value["ok"] == Value::Bool(true),
            "the switch refused {request:?}: {}",
            value["error"]
        );
        Ok(value["result"].clone())
    };
    let at = Instant::now();
    let ports = rows(&ask("show ports")?)
        .into_iter()
        .map(|row| {
            let field = |name: &str| cell(&row, name).cloned().unwrap_or_default();
            let number = |name: &str| field(name).parse().unwrap_or(0);
            PortRow {
                key: format!("{}/{}", field("worker"), field("port")),
                backend: field("backend"),
                rx: number("rx packets"),
                tx: number("tx packets"),
                rx_drop: number("rx drop"),
                tx_refused: number("tx refused"),
                path: field("path"),
            }
        })
        .collect();
    let counters = rows(&ask("show counters")?)
        .into_iter()
        .filter_map(|row| {
            let name = cell(&row, "counter")?.clone();
            let values = row
                .iter()
                .filter(|(column, _)| column.as_str() != "counter")
                .map(|(_, value)| value.parse().unwrap_or(0))
                .collect();
            Some((name, values))
        })
        .collect();
    Ok(Sample {
        at,
        ports,
        counters,
    })
}

/// The rows of a `{columns, rows}` table as column -> cell (columns in their order).
fn rows(table: &Value) -> Vec<Vec<(String, String)>> {
    let columns: Vec<String> = table["columns"]
        .as_array()
        .map(|columns| {
            columns
                .iter()
                .map(|c| c.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    table["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|row| {
                    let cells = row.as_array().cloned().unwrap_or_default();
                    columns
                        .iter()
                        .cloned()
                        .zip(cells.iter().map(|cell| match cell {
                            Value::String(text) => text.clone(),
                            other => other.to_string(),
                        }))
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The cell of `column` in one of [`rows`]'s rows.
fn cell<'a>(row: &'a [(String, String)], column: &str) -> Option<&'a String> {
    row.iter()
        .find(|(name, _)| name == column)
        .map(|(_, value)| value)
}

/// Per-second rate of a counter between two samples.
fn rate(now: u64, before: u64, seconds: f64) -> f64 {
    now.saturating_sub(before) as f64 / seconds
}

fn draw(
    frame: &mut Frame,
    socket: &std::path::Path,
    before: &Sample,
    now: Option<&Sample>,
    problem: Option<&str>,
) {
    let [title, ports, lower] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(before.ports.len() as u16 + 3),
        Constraint::Min(4),
    ])
    .areas(frame.area());
    let [drops, cycles, app] = Layout::horizontal([
        Constraint::Percentage(34),
        Constraint::Percentage(33),
        Constraint::Percentage(33),
    ])
    .areas(lower);
    let status = match (problem, now) {
        (Some(problem), _) => format!("not answering: {problem}"),
        (None, None) => "measuring...".to_string(),
        (None, Some(now)) => format!(
            "rates over the last {:.1} s",
            now.at.duration_since(before.at).as_secs_f64()
        ),
    };
    frame.render_widget(
        Paragraph::new(format!(
            "wirespeed top: {} ({status}); q quits",
            socket.display()
        ))
        .style(Style::new().add_modifier(Modifier::BOLD)),
        title,
    );
    let Some(now) = now else {
        return;
    };
    let seconds = now
        .at
        .duration_since(before.at)
        .as_secs_f64()
        .max(f64::EPSILON);
    let heading = |cells: &[&str]| {
        Row::new(cells.iter().map(|c| Cell::from(c.to_string())))
            .style(Style::new().add_modifier(Modifier::BOLD))
    };
    let port_rows = now.ports.iter().map(|port| {
        let old = before.ports.iter().find(|p| p.key == port.key);
        let pps = |f: fn(&PortRow) -> u64| rate(f(port), old.map_or(f(port), f), seconds);
        Row::new(vec![
            Cell::from(port.key.clone()),
            Cell::from(port.backend.clone()),
            Cell::from(format!("{:.4}", pps(|p| p.rx) / 1e6)),
            Cell::from(format!("{:.4}", pps(|p| p.tx) / 1e6)),
            Cell::from(format!("{:.0}", pps(|p| p.rx_drop))),
            Cell::from(format!("{:.0}", pps(|p| p.tx_refused))),
            Cell::from(port.path.clone()),
        ])
    });
    frame.render_widget(
        Table::new(
            port_rows,
            [
                Constraint::Length(14),
                Constraint::Length(9),
                Constraint::Length(9),
                Constraint::Length(9),
                Constraint::Length(11),
                Constraint::Length(11),
                Constraint::Min(10),
            ],
        )
        .header(heading(&[
            "worker/port",
            "backend",
            "rx Mpps",
            "tx Mpps",
            "rx drop/s",
            "tx full/s",
            "path",
        ]))
        .block(Block::bordered().title("ports")),
        ports,
    );
    let total = |sample: &Sample, name: &str| -> u64 {
        sample.counters.get(name).map_or(0, |v| v.iter().sum())
    };
    let drop_rows = now
        .counters
        .keys()
        .filter_map(|name| name.strip_prefix("drop."))
        .map(|reason| {
            let name = format!("drop.{reason}");
            Row::new(vec![
                reason.to_string(),
                format!(
                    "{:.0}",
                    rate(total(now, &name), total(before, &name), seconds)
                ),
                total(now, &name).to_string(),
            ])
        });
    frame.render_widget(
        Table::new(
            drop_rows,
            [
                Constraint::Min(14),
                Constraint::Length(10),
                Constraint::Length(12),
            ],
        )
        .header(heading(&["drop reason", "per s", "total"]))
        .block(Block::bordered().title("drops")),
        drops,
    );
    let received = total(now, "rx_packets").saturating_sub(total(before, "rx_packets"));
    let spent = |part: &str| {
        let name = format!("cycles.{part}");
        total(now, &name).saturating_sub(total(before, &name))
    };
    let all_cycles: u64 = ["rx", "process", "tx", "idle"].map(spent).iter().sum();
    let mut cycle_rows: Vec<Row> = ["rx", "process", "tx"]
        .map(|part| {
            let per_packet = if received == 0 {
                "-".to_string()
            } else {
                format!("{:.0}", spent(part) as f64 / received as f64)
            };
            Row::new(vec![format!("{part} (cycles/pkt)"), per_packet])
        })
        .into();
    cycle_rows.push(Row::new(vec![
        "idle (% of cycles)".to_string(),
        if all_cycles == 0 {
            "-".to_string()
        } else {
            format!("{:.1}", 100.0 * spent("idle") as f64 / all_cycles as f64)
        },
    ]));
    frame.render_widget(
        Table::new(cycle_rows, [Constraint::Min(20), Constraint::Length(10)])
            .header(heading(&["loop part", "value"]))
            .block(Block::bordered().title("workers")),
        cycles,
    );
    let app_rows = now
        .counters
        .iter()
        .filter(|(name, _)| name.starts_with("app.") || name.starts_with("fast_path."))
        .map(|(name, values)| Row::new(vec![name.clone(), values.iter().sum::<u64>().to_string()]));
    frame.render_widget(
        Table::new(app_rows, [Constraint::Min(16), Constraint::Length(14)])
            .header(heading(&["app counter", "value"]))
            .block(Block::bordered().title("app and tables")),
        app,
    );
}
