//! The log: `tracing` events to standard error or `--logpath`, as text or (`--logFormat
//! json`, `systemLog.format: json`) in MongoDB's structured form, one JSON document a line:
//! `{"t":{"$date":"2026-11-25T10:00:00.000+00:00"},"s":"I","c":"NETWORK","id":4915701,
//! "ctx":"conn3","msg":"connection accepted","attr":{"remote":"127.0.0.1:50000"}}`.
//! `c` is the component (from the module that logged), `ctx` the thread, `id` a stable
//! number per message text (mongod's ids are per log statement).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use serde_json::{json, Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Layered, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

use crate::config::Config;

/// What can change in the log while the server runs: its level (`setParameter: {logLevel}`)
/// and its file (`logRotate`).
struct Control {
    filter: reload::Handle<EnvFilter, Registry>,
    level: AtomicI32,
    file: Option<(PathBuf, Arc<Mutex<File>>)>,
}

static CONTROL: OnceLock<Control> = OnceLock::new();

/// The `--logpath` file, shared by the subscriber and `logRotate`.
#[derive(Clone)]
struct SharedFile(Arc<Mutex<File>>);

/// One event's hold on the log file.
struct FileGuard<'a>(MutexGuard<'a, File>);

impl io::Write for FileGuard<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl<'a> MakeWriter<'a> for SharedFile {
    type Writer = FileGuard<'a>;

    fn make_writer(&'a self) -> FileGuard<'a> {
        FileGuard(self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// mongod's `logLevel` (verbosity) as a filter: 0 is info, 1 debug, 2 and more trace.
/// openraft's own lines are one level quieter than ours below trace: it reports every
/// unreachable peer and every internal step, and `silt_raft` logs what an operator needs
/// (role, term, leader, catch-up).
fn level_filter(level: i32) -> &'static str {
    match level {
        i32::MIN..=0 => "info,openraft=error",
        1 => "debug,openraft=warn",
        _ => "trace",
    }
}

/// `--log-level`'s filter, with openraft quieted as [`level_filter`] does unless the
/// directive names it.
fn configured_filter(directive: &str) -> EnvFilter {
    let quiet = match directive {
        _ if directive.contains("openraft") => directive.to_string(),
        "trace" => directive.to_string(),
        "debug" => format!("{directive},openraft=warn"),
        _ => format!("{directive},openraft=error"),
    };
    EnvFilter::try_new(&quiet).unwrap_or_else(|_| EnvFilter::new(level_filter(0)))
}

/// Set up the global subscriber from the configuration.
pub(crate) fn init(cfg: &Config) -> Result<(), String> {
    let filter = configured_filter(&cfg.log_level);
    let level = match cfg.log_level.as_str() {
        "debug" => 1,
        "trace" => 2,
        _ => 0,
    };
    let (filter, handle) = reload::Layer::new(filter);
    let file = match &cfg.logpath {
        Some(path) => Some((
            path.clone(),
            Arc::new(Mutex::new(open_log(path, cfg.logappend)?)),
        )),
        None => None,
    };
    type Boxed =
        Box<dyn Layer<Layered<reload::Layer<EnvFilter, Registry>, Registry>> + Send + Sync>;
    let base = tracing_subscriber::fmt::layer().with_target(false);
    let layer: Boxed = match (&file, cfg.log_json) {
        (Some((_, f)), true) => Box::new(
            base.with_ansi(false)
                .with_writer(SharedFile(f.clone()))
                .event_format(MongoJson),
        ),
        (Some((_, f)), false) => Box::new(base.with_ansi(false).with_writer(SharedFile(f.clone()))),
        (None, true) => Box::new(
            base.with_ansi(false)
                .with_writer(io::stderr)
                .event_format(MongoJson),
        ),
        (None, false) => Box::new(
            base.with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
                .with_writer(io::stderr),
        ),
    };
    Registry::default()
        .with(filter)
        .with(layer)
        .try_init()
        .map_err(|e| format!("cannot set up the log: {e}"))?;
    let _ = CONTROL.set(Control {
        filter: handle,
        level: AtomicI32::new(level),
        file,
    });
    Ok(())
}

/// The current `logLevel` (0 before `init`).
pub(crate) fn level() -> i32 {
    CONTROL.get().map_or(0, |c| c.level.load(Ordering::Relaxed))
}

/// Set `logLevel`; the previous one.
pub(crate) fn set_level(level: i32) -> Result<i32, String> {
    let c = CONTROL.get().ok_or("the log is not set up")?;
    c.filter
        .reload(EnvFilter::new(level_filter(level)))
        .map_err(|e| format!("cannot change the log level: {e}"))?;
    Ok(c.level.swap(level, Ordering::Relaxed))
}

/// `logRotate`: the log file is renamed aside (`<path>.<timestamp>`, mongod's default
/// `rename` mode) and a new one opened in its place. `false` when the log goes to standard
/// error (there is nothing to rotate).
pub(crate) fn rotate() -> Result<bool, String> {
    let Some((path, file)) = CONTROL.get().and_then(|c| c.file.as_ref()) else {
        return Ok(false);
    };
    let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
    let new = open_log(path, false)?;
    *f = new;
    Ok(true)
}

/// Open `--logpath`: appended to with `--logappend`, else an existing file is renamed aside
/// (`<path>.<timestamp>`, as mongod does) and a new one begun.
fn open_log(path: &Path, append: bool) -> Result<File, String> {
    if !append && path.exists() {
        let stamp = log_stamp();
        let mut aside = format!("{}.{stamp}", path.display());
        // Two rotations in one second: the second file gets a counter, never overwriting.
        let mut n = 1;
        while Path::new(&aside).exists() {
            aside = format!("{}.{stamp}.{n}", path.display());
            n += 1;
        }
        std::fs::rename(path, &aside)
            .map_err(|e| format!("cannot rename the old log {} aside: {e}", path.display()))?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open the log file {}: {e}", path.display()))
}

/// `YYYY-MM-DDTHH-MM-SS` in UTC, for a renamed log.
fn log_stamp() -> String {
    let now = bson::DateTime::now()
        .try_to_rfc3339_string()
        .unwrap_or_default();
    now.chars()
        .take(19)
        .map(|c| if c == ':' { '-' } else { c })
        .collect()
}

/// MongoDB's structured log line.
pub(crate) struct MongoJson;

#[derive(Default)]
struct Fields {
    msg: String,
    attr: Map<String, Value>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let v = format!("{value:?}");
        if field.name() == "message" {
            self.msg = v;
        } else {
            self.attr.insert(field.name().to_string(), Value::String(v));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.msg = value.to_string();
        } else {
            self.attr
                .insert(field.name().to_string(), Value::String(value.to_string()));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.attr.insert(field.name().to_string(), json!(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.attr.insert(field.name().to_string(), json!(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.attr.insert(field.name().to_string(), json!(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.attr.insert(field.name().to_string(), json!(value));
    }
}

/// mongod's component for the module that logged.
fn component(target: &str) -> &'static str {
    let m = target.split("::").nth(1).unwrap_or("");
    if !target.starts_with("siltd") {
        return "STORAGE";
    }
    match m {
        "server" | "tls" | "metrics" => "NETWORK",
        "auth" => "ACCESS",
        "commands" | "state" | "ops" | "cursors" => "COMMAND",
        "transactions" | "sessions" => "TXN",
        "replset" => "REPL",
        "ttl" => "INDEX",
        "monitor" | "fast" => "STORAGE",
        _ => "CONTROL",
    }
}

/// A stable id per message text (FNV-1a folded into mongod's 7-digit range).
fn message_id(msg: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in msg.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    1_000_000 + h % 9_000_000
}

impl<S, N> FormatEvent<S, N> for MongoJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut f = Fields::default();
        event.record(&mut f);
        let severity = match *meta.level() {
            Level::ERROR => "E",
            Level::WARN => "W",
            Level::INFO => "I",
            Level::DEBUG => "D1",
            Level::TRACE => "D2",
        };
        let t = bson::DateTime::now()
            .try_to_rfc3339_string()
            .unwrap_or_default()
            .replace('Z', "+00:00");
        let ctx = std::thread::current().name().unwrap_or("main").to_string();
        let mut line = Map::new();
        line.insert("t".into(), json!({ "$date": t }));
        line.insert("s".into(), json!(severity));
        line.insert("c".into(), json!(component(meta.target())));
        line.insert("id".into(), json!(message_id(&f.msg)));
        line.insert("ctx".into(), json!(ctx));
        line.insert("msg".into(), json!(f.msg));
        if !f.attr.is_empty() {
            line.insert("attr".into(), Value::Object(f.attr));
        }
        writeln!(w, "{}", Value::Object(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_and_ids() {
        assert_eq!(component("siltd::server"), "NETWORK");
        assert_eq!(component("siltd::auth"), "ACCESS");
        assert_eq!(component("silt_storage::env"), "STORAGE");
        assert_eq!(message_id("a"), message_id("a"));
        assert!((1_000_000..10_000_000).contains(&message_id("connection accepted")));
    }
}
