//! The log: text or JSON lines on stderr, filtered by `PINPROVE_LOG` when
//! it is set, else by the command's (or the daemon config's) level.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The libraries under the Filecoin front log every step of every proof at
/// info; a daemon's log keeps to what pinprove says unless asked.
pub const QUIET_LIBRARIES: &str = "bellperson=warn,filecoin_proofs=warn,filecoin_proofs_api=warn,\
storage_proofs_core=warn,storage_proofs_porep=warn,storage_proofs_post=warn,storage_proofs_update=warn";

/// Starts logging at `level` (a tracing filter), JSON lines when `json`.
pub fn init(level: &str, json: bool) -> anyhow::Result<()> {
    let filter = match std::env::var("PINPROVE_LOG") {
        Ok(v) => EnvFilter::try_new(&v).map_err(|e| anyhow::anyhow!("PINPROVE_LOG={v:?}: {e}"))?,
        Err(_) => EnvFilter::try_new(format!("{QUIET_LIBRARIES},{level}"))
            .map_err(|e| anyhow::anyhow!("log level {level:?}: {e}"))?,
    };
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let done = if json {
        fmt.json().try_init()
    } else {
        fmt.with_ansi(std::io::stderr().is_terminal()).try_init()
    };
    done.map_err(|e| anyhow::anyhow!("starting the log: {e}"))
}
