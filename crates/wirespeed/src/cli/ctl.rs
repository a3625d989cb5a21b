//! `wirespeed ctl [--socket PATH | --config FILE] WORDS...`: one request to a running switch's
//! control socket, its reply printed for a person (tables aligned, `--json` for the raw line).
//!
//! The exit code is non-zero when the switch answers with an error, so scripts can chain
//! commands. A file named by `route load` or `acl load` is read here, with the caller's rights,
//! and sent as the request's content: the switch runs as root and must never open a path a
//! client names (it would read any file, e.g. /etc/shadow, for anyone allowed on the socket).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::Value;

/// Where switches put their sockets by default.
const SOCKET_DIR: &str = "/run/wirespeed";

/// The `--help` text after the options: every request the switch understands.
fn requests_help() -> String {
    let mut text = String::from("Requests (WORDS):\n");
    for (usage, meaning) in wirespeed_control::protocol::COMMANDS {
        text.push_str(&format!("  {usage}\n      {meaning}\n"));
    }
    text.push_str(
        "\nExamples:\n  wirespeed ctl route add 198.51.100.0/24 via 198.18.1.1\n  \
         wirespeed ctl flow add priority=10 in_port=p0 ip_dst=10.0.0.0/8 \
         actions=set_field:eth_dst=02:00:00:00:00:01,output:p1\n  \
         wirespeed ctl acl load deny.acl\n  wirespeed ctl mac flush\n",
    );
    text
}

#[derive(Args)]
#[command(after_help = requests_help())]
pub struct CtlArgs {
    /// The switch's control socket (default: its config's, or the only one in /run/wirespeed).
    #[arg(long, conflicts_with = "config")]
    socket: Option<PathBuf>,
    /// The switch's configuration file: use the control socket it names.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Seconds to wait for the reply.
    #[arg(long, default_value_t = 30.0)]
    timeout: f64,
    /// Print the reply line as the switch sent it (JSON).
    #[arg(long)]
    json: bool,
    /// The request, e.g. `show ports`, `ping`, `route add 10.0.0.0/8 via 198.18.1.1`, `help`.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    words: Vec<String>,
}

pub fn run(args: CtlArgs) -> Result<()> {
    let socket = socket_path(&args)?;
    anyhow::ensure!(args.timeout > 0.0, "--timeout must be positive");
    let (line, body) = match args.words.as_slice() {
        [first, load, file] if matches!(first.as_str(), "route" | "acl") && load == "load" => {
            let body = read_file(Path::new(file))?;
            (upload_line(first, file, body.len()), body)
        }
        words => (words.join(" "), Vec::new()),
    };
    let reply = wirespeed_control::socket::request(
        &socket,
        &line,
        &body,
        Duration::from_secs_f64(args.timeout),
    )
    .with_context(|| format!("asking the switch at {}", socket.display()))?;
    let value: Value = serde_json::from_str(&reply)
        .with_context(|| format!("the switch sent a reply that is not JSON: {reply:?}"))?;
    if value["ok"] != Value::Bool(true) {
        if args.json {
            println!("{reply}");
        }
        anyhow::bail!(
            "{}\n  fix: {}",
            value["error"].as_str().unwrap_or("(no error message)"),
            value["fix"].as_str().unwrap_or("(none given)")
        );
    }
    if args.json {
        println!("{reply}");
    } else {
        print!("{}", render(&value["result"]));
    }
    Ok(())
}

/// Reads a file to send, up to the most the switch accepts (a pipe such as /dev/stdin works too).
fn read_file(path: &Path) -> Result<Vec<u8>> {
    let max = wirespeed_control::tables::MAX_FILE_BYTES;
    let mut content = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(max + 1).read_to_end(&mut content))
        .with_context(|| format!("reading {}", path.display()))?;
    anyhow::ensure!(
        content.len() as u64 <= max,
        "{} is larger than the {max} bytes the switch accepts; split it",
        path.display()
    );
    Ok(content)
}

/// `route load BYTES NAME`: the name as given, only for the switch's messages, kept on the
/// request's one line (a control character becomes `?`).
fn upload_line(first: &str, file: &str, bytes: usize) -> String {
    let name: String = file
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    format!("{first} load {bytes} {name}")
}

fn socket_path(args: &CtlArgs) -> Result<PathBuf> {
    find_socket(args.socket.as_deref(), args.config.as_deref())
}

/// The control socket to talk to: `socket` if given, else the one `config` names, else the only
/// one in /run/wirespeed.
pub(super) fn find_socket(socket: Option<&Path>, config: Option<&Path>) -> Result<PathBuf> {
    if let Some(socket) = socket {
        return Ok(socket.to_path_buf());
    }
    if let Some(config) = config {
        let config = wirespeed_control::config::load(config).map_err(anyhow::Error::msg)?;
        return config
            .switch
            .control_socket
            .context("this configuration disables the control socket (control_socket = \"\")");
    }
    let sockets: Vec<PathBuf> = std::fs::read_dir(SOCKET_DIR)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|path| path.extension().is_some_and(|e| e == "sock"))
                .collect()
        })
        .unwrap_or_default();
    match sockets.as_slice() {
        [only] => Ok(only.clone()),
        [] => anyhow::bail!(
            "no control socket in {SOCKET_DIR}; is a switch running? Give --socket PATH or --config FILE"
        ),
        several => anyhow::bail!(
            "several control sockets in {SOCKET_DIR} ({}); choose one with --socket",
            several
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A result as text: a table aligned in columns (numbers to the right), an object as
/// `key: value` lines, anything else as JSON.
fn render(result: &Value) -> String {
    if let (Some(columns), Some(rows)) = (result["columns"].as_array(), result["rows"].as_array()) {
        let cell = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
        let header: Vec<String> = columns.iter().map(cell).collect();
        let body: Vec<Vec<String>> = rows
            .iter()
            .map(|row| {
                row.as_array()
                    .map_or_else(Vec::new, |r| r.iter().map(cell).collect())
            })
            .collect();
        return format_table(&header, &body);
    }
    if let Some(object) = result.as_object() {
        return object
            .iter()
            .map(|(key, value)| {
                let value = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_string);
                format!("{key}: {value}\n")
            })
            .collect();
    }
    format!("{result}\n")
}

fn format_table(header: &[String], rows: &[Vec<String>]) -> String {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    let mut numeric = vec![true; columns];
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
            numeric[i] &= cell.parse::<f64>().is_ok();
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::new();
        for i in 0..columns {
            let cell = cells.get(i).map_or("", String::as_str);
            let pad = widths[i].saturating_sub(cell.chars().count());
            if i > 0 {
                out.push_str("  ");
            }
            if numeric[i] && !rows.is_empty() {
                out.push_str(&" ".repeat(pad));
                out.push_str(cell);
            } else {
                out.push_str(cell);
                if i + 1 < columns {
                    out.push_str(&" ".repeat(pad));
                }
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    for row in rows {
        out.push_str(&line(row));
    }
    if rows.is_empty() {
        out.push_str("(empty)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_goes_as_its_size_and_name_on_one_line() {
        assert_eq!(
            upload_line("route", "routes.txt", 42),
            "route load 42 routes.txt"
        );
        assert_eq!(
            upload_line("acl", "my\nfile acl", 0),
            "acl load 0 my?file acl"
        );
        let request =
            wirespeed_control::protocol::parse(upload_line("acl", "my\nfile acl", 7).as_bytes())
                .unwrap();
        assert_eq!(
            request,
            wirespeed_control::protocol::Request::AclLoad(wirespeed_control::protocol::Upload {
                name: "my?file acl".into(),
                bytes: 7
            })
        );
    }

    #[test]
    fn tables_are_aligned_with_numbers_to_the_right() {
        let result = serde_json::json!({
            "columns": ["worker", "port", "rx packets"],
            "rows": [["0", "p0", "5"], ["1", "long-name", "12345"]],
        });
        assert_eq!(
            render(&result),
            "worker  port       rx packets\n     0  p0                  5\n     1  long-name       12345\n"
        );
        let result = serde_json::json!({"applied": 2, "build_ms": 7});
        assert_eq!(render(&result), "applied: 2\nbuild_ms: 7\n");
    }
}
