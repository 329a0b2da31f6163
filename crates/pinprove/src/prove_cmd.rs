//! `pinprove prove`: one Filecoin proof from the files Curio's inputs are
//! made of, through a daemon or in this process.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use pinprove_engine::Priority;
use pinprove_filecoin::{ProofKind, ProofRequest};
use pinprove_server::Config;
use serde::Serialize;

use crate::remote::{self, InProcess};

#[derive(Args, Debug)]
pub struct ProveArgs {
    /// What to prove: porep, snap, wpost or winning.
    #[arg(long)]
    kind: ProofKind,
    /// PoRep: the C1 output, as Curio sends it (filecoin-ffi's JSON, bare
    /// or in the `{SectorNum, Phase1Out, SectorSize}` wrapper).
    #[arg(long, value_name = "FILE")]
    vanilla_proof: Option<PathBuf>,
    /// PoSt and SnapDeals: the vanilla proofs, one file each, in order
    /// (bincode, as filecoin-proofs-api writes them).
    #[arg(long, value_name = "FILE", num_args = 1..)]
    vanilla_proofs: Vec<PathBuf>,
    /// The sector size (2KiB, 32GiB, …); the registered proof says it when
    /// left out.
    #[arg(long, value_parser = pinprove_mem::parse_bytes)]
    sector_size: Option<u64>,
    /// Filecoin's number of the registered seal, PoSt or update proof.
    #[arg(long)]
    registered_proof: Option<u64>,
    /// PoRep: the sector number.
    #[arg(long, default_value_t = 0)]
    sector_number: u64,
    /// The miner actor's id (PoRep, PoSt).
    #[arg(long, default_value_t = 0)]
    miner_id: u64,
    /// PoSt: the challenge randomness, 32 bytes in hex.
    #[arg(long, value_parser = hex32)]
    randomness: Option<Hex32>,
    /// WindowPoSt: the partition proved.
    #[arg(long, default_value_t = 0)]
    partition: u32,
    /// SnapDeals: the old replica commitment, 32 bytes in hex.
    #[arg(long, value_parser = hex32)]
    comm_r_old: Option<Hex32>,
    /// SnapDeals: the new replica commitment, 32 bytes in hex.
    #[arg(long, value_parser = hex32)]
    comm_r_new: Option<Hex32>,
    /// SnapDeals: the new data commitment, 32 bytes in hex.
    #[arg(long, value_parser = hex32)]
    comm_d_new: Option<Hex32>,
    /// low, normal, high or critical; the kind's own when left out.
    #[arg(long, value_parser = priority)]
    priority: Option<Priority>,
    /// The request id (a retry key: the same id and inputs find the same job).
    #[arg(long)]
    request_id: Option<String>,
    /// Where to write the proof (the bytes filecoin-proofs returns); printed
    /// in hex when left out.
    #[arg(long, short)]
    out: Option<PathBuf>,
    /// The daemon to send it to (host:port, http://host:port or
    /// unix:///path); proved in this process when left out.
    #[arg(long)]
    daemon: Option<String>,
    /// A file holding the daemon's bearer token.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// In this process: the daemon configuration to prove with (defaults
    /// otherwise).
    #[arg(long, conflicts_with = "daemon")]
    config: Option<PathBuf>,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

/// 32 bytes given in hex.
#[derive(Clone, Debug)]
struct Hex32([u8; 32]);

fn hex32(s: &str) -> Result<Hex32, String> {
    let b = hex::decode(s.trim().trim_start_matches("0x")).map_err(|e| format!("not hex: {e}"))?;
    let n = b.len();
    Ok(Hex32(b.try_into().map_err(|_| format!("{n} bytes, not 32"))?))
}

fn priority(s: &str) -> Result<Priority, String> {
    [Priority::Low, Priority::Normal, Priority::High, Priority::Critical]
        .into_iter()
        .find(|p| p.as_str().eq_ignore_ascii_case(s.trim()))
        .ok_or_else(|| format!("unknown priority {s:?} (low, normal, high or critical)"))
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

impl ProveArgs {
    /// The request the arguments describe, its files read.
    fn request(&self) -> Result<ProofRequest> {
        let kind = self.kind;
        match kind {
            ProofKind::PoRep => {
                ensure!(
                    self.vanilla_proof.is_some(),
                    "porep needs --vanilla-proof (the C1 output)"
                );
                ensure!(
                    self.vanilla_proofs.is_empty(),
                    "porep takes --vanilla-proof, not --vanilla-proofs"
                );
            }
            _ => {
                ensure!(!self.vanilla_proofs.is_empty(), "{kind} needs --vanilla-proofs");
                ensure!(
                    self.vanilla_proof.is_none(),
                    "{kind} takes --vanilla-proofs, not --vanilla-proof"
                );
            }
        }
        let needs = |what: &str, v: &Option<Hex32>| -> Result<Vec<u8>> {
            v.as_ref()
                .map(|h| h.0.to_vec())
                .with_context(|| format!("{kind} needs --{what}"))
        };
        let mut req = ProofRequest {
            sector_size: self.sector_size.unwrap_or(0),
            priority: self.priority,
            sector_number: self.sector_number,
            miner_id: self.miner_id,
            partition_index: self.partition,
            vanilla_proof: self.vanilla_proof.as_deref().map(read).transpose()?.unwrap_or_default(),
            vanilla_proofs: self.vanilla_proofs.iter().map(|p| read(p)).collect::<Result<_>>()?,
            ..ProofRequest::new(kind)
        };
        match kind {
            ProofKind::PoRep => {}
            ProofKind::WindowPoSt | ProofKind::WinningPoSt => req.randomness = needs("randomness", &self.randomness)?,
            ProofKind::SnapDeals => {
                req.comm_r_old = needs("comm-r-old", &self.comm_r_old)?;
                req.comm_r_new = needs("comm-r-new", &self.comm_r_new)?;
                req.comm_d_new = needs("comm-d-new", &self.comm_d_new)?;
            }
        }
        req.registered_proof = match (self.registered_proof, kind) {
            (Some(n), _) => n,
            // The C1 output names its own seal proof.
            (None, ProofKind::PoRep) => pinprove_filecoin::registered_proof_of(&req.vanilla_proof)
                .context("reading the seal proof the C1 output names")?,
            (None, _) => bail!("{kind} needs --registered-proof"),
        };
        Ok(req)
    }
}

#[derive(Serialize)]
struct ProveReport {
    job_id: String,
    kind: &'static str,
    proof_bytes: usize,
    out: Option<PathBuf>,
    proof_hex: Option<String>,
    queue_wait_ms: u64,
    srs_load_ms: u64,
    synthesis_ms: u64,
    proving_ms: u64,
    total_ms: u64,
}

pub fn run(args: &ProveArgs) -> Result<()> {
    let req = args.request()?;
    let kind = req.kind;
    let request_id = args
        .request_id
        .clone()
        .unwrap_or_else(|| format!("cli-{kind}-{}", std::process::id()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let r = runtime.block_on(async {
        match &args.daemon {
            Some(addr) => {
                let token = remote::token(args.token_file.as_deref())?;
                let mut c = pinprove_server::client::connect(addr, token.as_deref()).await?;
                remote::prove(&mut c, &request_id, req).await
            }
            None => {
                let config = match &args.config {
                    Some(p) => Config::load(p)?,
                    // A one-off proof in this process: test sizes'
                    // parameters are made if missing, as the demo does.
                    None => {
                        let mut c = Config::default();
                        c.filecoin.generate_parameters = true;
                        c
                    }
                };
                let local = InProcess::start(config).await?;
                let r = match local.client().await {
                    Ok(mut c) => remote::prove(&mut c, &request_id, req).await,
                    Err(e) => Err(e),
                };
                local.stop().await?;
                r
            }
        }
    })?;
    if let Some(out) = &args.out {
        std::fs::write(out, &r.proof).with_context(|| format!("writing {}", out.display()))?;
    }
    let report = ProveReport {
        job_id: r.job_id.clone(),
        kind: kind.name(),
        proof_bytes: r.proof.len(),
        out: args.out.clone(),
        proof_hex: args.out.is_none().then(|| hex::encode(&r.proof)),
        queue_wait_ms: r.queue_wait_ms,
        srs_load_ms: r.srs_load_ms,
        synthesis_ms: r.synthesis_ms,
        proving_ms: r.gpu_compute_ms,
        total_ms: r.total_ms,
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!("{kind} {}: {}", r.job_id, remote::timings(&r));
        match &args.out {
            Some(out) => println!("{} bytes of proof written to {}", r.proof.len(), out.display()),
            None => println!("{}", hex::encode(&r.proof)),
        }
    }
    Ok(())
}
