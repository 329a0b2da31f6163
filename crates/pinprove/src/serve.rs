//! `pinprove serve`: the daemon Curio points at.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use pinprove_server::{Config, Daemon};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The configuration file (TOML; every key has a default, see
    /// `--print-config`).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// The gRPC address, overriding the file's `listen`: host:port or
    /// unix:///path.
    #[arg(long)]
    listen: Option<String>,
    /// The HTTP status address, overriding the file's `http_listen` ("" to
    /// turn it off).
    #[arg(long)]
    http_listen: Option<String>,
    /// The GPUs to prove on, overriding the file's `[gpu] devices`: "all"
    /// or CUDA ordinals such as 0,1.
    #[arg(long)]
    devices: Option<pinprove_stack::DeviceSelection>,
    /// The most memory pinprove takes of each GPU, overriding the file's
    /// `[gpu] memory_limit` ("22GiB").
    #[arg(long)]
    gpu_memory_limit: Option<pinprove_server::config::ByteSize>,
    /// Print the effective configuration as TOML and exit.
    #[arg(long)]
    print_config: bool,
}

/// The configuration `args` describe.
pub fn config(args: &ServeArgs) -> Result<Config> {
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if let Some(l) = &args.listen {
        config.listen = l.clone();
    }
    if let Some(l) = &args.http_listen {
        config.http_listen = l.clone();
    }
    if let Some(d) = &args.devices {
        config.gpu.devices = d.clone();
    }
    if let Some(l) = args.gpu_memory_limit {
        config.gpu.memory_limit = Some(l);
    }
    Ok(config)
}

pub fn run(args: &ServeArgs) -> Result<()> {
    let config = config(args)?;
    if args.print_config {
        print!("{}", config.to_toml());
        return Ok(());
    }
    pinprove::logging::init(&config.log.level, config.log.json)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("pinprove-serve")
        .build()
        .context("starting the async runtime")?;
    let served = runtime.block_on(async {
        let daemon = Daemon::start(config).await?;
        daemon.run_until(pinprove_server::termination()).await?;
        anyhow::Ok(())
    });
    // Work that cannot be interrupted (a parameter generation a cancelled
    // job waited for) is not waited for: the daemon has stopped.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    served
}
