//! `pinprove demo`: real Filecoin proofs (2 KiB sectors unless asked for
//! another test size) end to end with nothing
//! configured. Seals a random sector, starts a daemon in this process
//! (best backend available, default configuration), and proves through its
//! gRPC service a WindowPoSt and a WinningPoSt of the sector (with `--all`
//! its PoRep and a SnapDeals update too); every proof is checked by
//! filecoin-proofs-api's verifier. Parameters are made on first use (all
//! four kinds' in about two minutes on a 2-core machine) and kept in the
//! standard parameter cache.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use clap::Args;
use pinprove_filecoin::sample::SampleSector;
use pinprove_filecoin::{ProofKind, ProofRequest};
use pinprove_server::pb;
use pinprove_stack::BackendKind;

use crate::remote::{self, InProcess};
use pinprove::units::{bytes, dur};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Also prove the sector's PoRep (C2) and a SnapDeals update.
    #[arg(long)]
    all: bool,
    /// The backend (auto: the GPU when there is one).
    #[arg(long, value_enum, default_value_t = BackendKind::Auto)]
    backend: BackendKind,
    /// Also write every request's inputs here, with the `pinprove prove`
    /// command lines that prove them (commands.txt).
    #[arg(long, value_name = "DIR")]
    save_inputs: Option<PathBuf>,
    /// The sector size: a test size (2KiB, 8MiB or 512MiB; parameters of
    /// the larger ones take much longer to make).
    #[arg(long, value_parser = pinprove_mem::parse_bytes, default_value = "2KiB")]
    sector_size: u64,
}
const MINER: u64 = 1000;

impl DemoArgs {
    /// One proof of every kind at 2 KiB on `backend`, nothing saved.
    pub fn every_kind(backend: BackendKind) -> DemoArgs {
        DemoArgs {
            all: true,
            backend,
            save_inputs: None,
            sector_size: 2 << 10,
        }
    }
}

pub fn run(args: &DemoArgs) -> Result<()> {
    let work = std::env::temp_dir().join(format!("pinprove-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let result = demo(args, &work);
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn demo(args: &DemoArgs, work: &Path) -> Result<()> {
    println!(
        "pinprove demo: {} Filecoin proofs through a daemon in this process",
        bytes(args.sector_size)
    );
    let t = Instant::now();
    let mut sector = SampleSector::seal(&work.join("sector"), args.sector_size, 1, MINER, 1)?;
    println!(
        "sealed sector 1 of miner {MINER} ({}) in {}",
        bytes(args.sector_size),
        dur(t.elapsed())
    );
    let mut config = pinprove_server::Config::default();
    config.gpu.backend = args.backend;
    // A few proofs of a short run: buffers prepared for circuits proved
    // before would only add memory.
    config.memory.warm_hinted = false;
    // The demo's sector sizes are test sizes: it makes their parameters
    // when the cache lacks them (a daemon does only when told to).
    config.filecoin.generate_parameters = true;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let local = InProcess::start(config).await?;
        let proved = prove_all(args, &local, &mut sector, work).await;
        let engine = local.daemon.prover().engine();
        let pool = engine.pool().stats();
        let status = engine.status();
        println!(
            "memory: budget {}, pool {} in {} buffers ({}), {} reuses and {} fresh allocations; peak resident {}",
            bytes(status.budget_total),
            bytes(pool.allocated_bytes),
            pool.idle_buffers + pool.checked_out_buffers,
            pool.kind,
            pool.reuse_hits,
            pool.fresh_allocations,
            peak_rss().map_or_else(|| "unknown".into(), bytes),
        );
        local.stop().await?;
        proved
    })
}

async fn prove_all(args: &DemoArgs, local: &InProcess, sector: &mut SampleSector, work: &Path) -> Result<()> {
    let engine = local.daemon.prover().engine();
    let backends: Vec<&str> = engine.status().devices.iter().map(|d| d.backend).collect();
    println!(
        "daemon: {} backend, parameters in {}",
        backends.first().copied().unwrap_or("no"),
        local.daemon.prover().params().dir().display()
    );
    let mut c = local.client().await?;
    let mut saved = Saved::new(args.save_inputs.as_deref())?;

    let sectors = [1, 2, 3];
    let r = sector.randomness();
    let window = sector.window_post_requests(&sectors, r)?;
    let partitions = window.len();
    let mut merged = Vec::new();
    for (i, req) in window.into_iter().enumerate() {
        saved.add(&format!("wpost-{i}"), &req)?;
        merged.extend(proof(&mut c, &format!("demo-wdpost-{MINER}-0"), req).await?);
    }
    ensure!(
        sector.verify_window_post(&sectors, r, &merged)?,
        "filecoin-proofs-api rejects the WindowPoSt"
    );
    println!("  WindowPoSt of sectors {sectors:?} in {partitions} partitions: verified by filecoin-proofs-api");

    let r = sector.randomness();
    let req = sector.winning_post_request(r)?;
    saved.add("winning", &req)?;
    let p = proof(&mut c, &format!("demo-winpost-{MINER}"), req).await?;
    ensure!(
        sector.verify_winning_post(r, &p)?,
        "filecoin-proofs-api rejects the WinningPoSt"
    );
    println!("  WinningPoSt: verified by filecoin-proofs-api");

    if args.all {
        let req = sector.porep_request();
        saved.add("porep", &req)?;
        let p = proof(&mut c, &format!("demo-porep-{MINER}-1"), req).await?;
        ensure!(sector.verify_seal(&p)?, "filecoin-proofs-api rejects the PoRep");
        println!("  PoRep: verified by filecoin-proofs-api");
        let req = sector.snap_update(&work.join("update"))?;
        saved.add("snap", &req)?;
        let p = proof(&mut c, &format!("demo-snap-{MINER}-1"), req.clone()).await?;
        ensure!(
            SampleSector::verify_update(&req, &p)?,
            "filecoin-proofs-api rejects the SnapDeals proof"
        );
        println!("  SnapDeals: verified by filecoin-proofs-api");
    } else {
        println!("(--all adds PoRep and SnapDeals; their parameters take about two minutes to make the first time)");
    }
    saved.finish()
}

/// Makes sure the parameters are there (saying how long that took: minutes
/// when they are made), then proves `req`.
async fn proof(c: &mut pinprove_server::client::Client, request_id: &str, req: ProofRequest) -> Result<Vec<u8>> {
    let circuit = pinprove_filecoin::kind::circuit_id(req.kind, req.sector_size)?;
    let t = Instant::now();
    let loaded = c
        .preload_srs(pb::PreloadSrsRequest {
            circuit_id: circuit.clone(),
        })
        .await
        .map_err(remote::status_error)?
        .into_inner();
    if !loaded.already_loaded {
        println!("parameters {circuit}: ready in {}", dur(t.elapsed()));
    }
    let r = remote::prove(c, request_id, req).await?;
    println!("{}: {}", r.job_id, remote::timings(&r));
    Ok(r.proof)
}

/// Inputs written for `pinprove prove`, and the command lines using them.
struct Saved {
    dir: Option<PathBuf>,
    commands: String,
}

impl Saved {
    fn new(dir: Option<&Path>) -> Result<Saved> {
        if let Some(d) = dir {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        Ok(Saved {
            dir: dir.map(Path::to_path_buf),
            commands: String::new(),
        })
    }

    fn add(&mut self, name: &str, req: &ProofRequest) -> Result<()> {
        let Some(dir) = &self.dir else { return Ok(()) };
        let write = |file: String, data: &[u8]| -> Result<String> {
            let p = dir.join(file);
            std::fs::write(&p, data).with_context(|| format!("writing {}", p.display()))?;
            Ok(p.display().to_string())
        };
        let mut cmd = format!(
            "pinprove prove --kind {} --sector-size {} --registered-proof {}",
            req.kind, req.sector_size, req.registered_proof
        );
        if req.kind == ProofKind::PoRep {
            let f = write(format!("{name}.c1.json"), &req.vanilla_proof)?;
            write!(cmd, " --vanilla-proof {f} --sector-number {}", req.sector_number)?;
        } else {
            cmd += " --vanilla-proofs";
            for (i, v) in req.vanilla_proofs.iter().enumerate() {
                write!(cmd, " {}", write(format!("{name}.vanilla-{i}.bin"), v)?)?;
            }
        }
        write!(cmd, " --miner-id {}", req.miner_id)?;
        match req.kind {
            ProofKind::WindowPoSt | ProofKind::WinningPoSt => {
                write!(cmd, " --randomness {}", hex::encode(&req.randomness))?;
                if req.kind == ProofKind::WindowPoSt {
                    write!(cmd, " --partition {}", req.partition_index)?;
                }
            }
            ProofKind::SnapDeals => write!(
                cmd,
                " --comm-r-old {} --comm-r-new {} --comm-d-new {}",
                hex::encode(&req.comm_r_old),
                hex::encode(&req.comm_r_new),
                hex::encode(&req.comm_d_new)
            )?,
            ProofKind::PoRep => {}
        }
        writeln!(cmd, " --out {}", dir.join(format!("{name}.proof")).display())?;
        self.commands += &cmd;
        Ok(())
    }

    fn finish(self) -> Result<()> {
        if let Some(dir) = self.dir {
            let f = dir.join("commands.txt");
            std::fs::write(&f, &self.commands).with_context(|| format!("writing {}", f.display()))?;
            println!("inputs and the commands that prove them: {}", f.display());
        }
        Ok(())
    }
}

/// The process's peak resident memory (Linux).
fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = s.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    kb.trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()
        .map(|k| k << 10)
}
