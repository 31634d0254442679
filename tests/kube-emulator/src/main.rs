//! `kube-emulator`: serves the in-memory Kubernetes API on loopback until interrupted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use kube_emulator::{Emulator, EmulatorOptions};

/// An in-memory Kubernetes API server for tests and demos (loopback only, no auth; HTTP or HTTPS).
#[derive(Debug, Parser)]
#[command(name = "kube-emulator", version)]
struct Args {
    /// Address to listen on; port 0 picks a free port (printed on start).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,

    /// Write a kubeconfig for this server here (for kubectl and kube-rs).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,

    /// Events kept for watches to resume from (older versions get 410 Gone).
    #[arg(long, default_value_t = 100_000)]
    history: usize,

    /// Serve HTTPS with a certificate authority made at start; the kubeconfig trusts it.
    #[arg(long)]
    tls: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let options = EmulatorOptions {
        listen: args.listen,
        history_limit: args.history,
        tls: args.tls,
        ..EmulatorOptions::default()
    };
    let emulator = match Emulator::start_with(options).await {
        Ok(e) => e,
        Err(e) => {
            eprintln!("kube-emulator: cannot listen on {}: {e}", args.listen);
            return ExitCode::FAILURE;
        }
    };
    if let Some(path) = &args.kubeconfig {
        if let Err(e) = emulator.write_kubeconfig(path) {
            eprintln!("kube-emulator: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("kubeconfig: {}", path.display());
    }
    println!("listening on {}", emulator.url());
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kube-emulator: cannot handle SIGTERM: {e}");
            return ExitCode::FAILURE;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    emulator.stop().await;
    ExitCode::SUCCESS
}
