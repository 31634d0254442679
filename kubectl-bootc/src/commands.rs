//! The commands: each reads what it needs, writes what it changes (merge patches, as
//! `kubectl patch --type merge`), and prints what it did.

use std::io::Write;
use std::process::ExitCode;

use bootc_crds::HOLD_LABEL;
use bootc_crds::pool::BootcNodePool;
use clap::Parser;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::cli::{Cli, Command};
use crate::error::{CliError, Result};
use crate::objects::{self, hold_value};
use crate::output::{print, show};
use crate::{history, rollback, watch, why};

/// How pools are named in what the commands print, as kubectl names them.
pub const POOL_KIND: &str = "bootcnodepool.node.bootc.dev";

/// Parses the arguments, runs the command and gives the exit code: 0, or 1 after
/// `error: …` on stderr (usage errors included, as kubectl does).
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let ok = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
            // clap words its errors `error: …` itself.
            let _ = e.print();
            return if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one command.
pub async fn run(cli: Cli) -> Result<()> {
    let client = crate::client::client(&cli.global.target()).await?;
    match cli.command {
        Command::Status {
            pool,
            output,
            watch: true,
        } => watch::run(&client, pool.as_deref(), output).await,
        Command::Status { pool, output, .. } => {
            let cluster = objects::read(&client).await?;
            print(&show(&cluster, pool.as_deref(), output)?)
        }
        Command::History { pool } => {
            let pool = get_pool(&client, &pool).await?;
            print(&history::render(&pool, chrono::Utc::now()))
        }
        Command::Pause { pool } => set_paused(&client, &pool, true).await,
        Command::Resume { pool } => set_paused(&client, &pool, false).await,
        Command::Rollback { pool, to, yes } => roll_back(&client, &pool, to.as_deref(), yes).await,
        Command::Hold { node } => set_hold(&client, &node, true).await,
        Command::Release { node } => set_hold(&client, &node, false).await,
        Command::Why { name } => {
            let cluster = objects::read(&client).await?;
            print(&why::why(&cluster, &name)?)
        }
    }
}

async fn get_pool(client: &Client, name: &str) -> Result<BootcNodePool> {
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    pools
        .get(name)
        .await
        .map_err(|e| CliError::api(&format!("get bootcnodepool {name}"), e))
}

async fn patch_pool(client: &Client, name: &str, patch: &Value) -> Result<BootcNodePool> {
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    pools
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| CliError::api(&format!("patch bootcnodepool {name}"), e))
}

/// `pause` and `resume`: `spec.rollout.paused`.
async fn set_paused(client: &Client, name: &str, paused: bool) -> Result<()> {
    let pool = get_pool(client, name).await?;
    let word = if paused { "paused" } else { "resumed" };
    if pool.spec.rollout.paused == paused {
        let state = if paused { "paused" } else { "not paused" };
        return print(&format!(
            "{POOL_KIND}/{name} is already {state} (no change)\n"
        ));
    }
    patch_pool(
        client,
        name,
        &json!({"spec": {"rollout": {"paused": paused}}}),
    )
    .await?;
    print(&format!("{POOL_KIND}/{name} {word}\n"))
}

/// `rollback`: shows the `deployHistory` digest chosen, asks (unless `yes`), then pins
/// `spec.image.ref` to it.
async fn roll_back(client: &Client, name: &str, to: Option<&str>, yes: bool) -> Result<()> {
    use std::io::IsTerminal;

    let pool = get_pool(client, name).await?;
    let decision = rollback::choose(&pool, to)?;
    let mut stderr = std::io::stderr().lock();
    let shown =
        stderr.write_all(rollback::preview(&pool, &decision, chrono::Utc::now()).as_bytes());
    shown.map_err(|e| CliError::msg(format!("cannot write to stderr: {e}")))?;
    let stdin = std::io::stdin();
    let terminal = stdin.is_terminal();
    if !rollback::confirm(yes, terminal, &mut stdin.lock(), &mut stderr)? {
        drop(stderr);
        return print(&format!("{POOL_KIND}/{name} not rolled back\n"));
    }
    drop(stderr);
    let patch = rollback::patch(&decision, pool.resource_version().as_deref());
    patch_pool(client, name, &patch).await?;
    print(&rollback::report(&decision))
}

/// `hold` and `release`: the Node's hold label.
async fn set_hold(client: &Client, name: &str, hold: bool) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .get(name)
        .await
        .map_err(|e| CliError::api(&format!("get node {name}"), e))?;
    let current = hold_value(node.labels());
    let (value, done) = if hold {
        (Value::String("true".to_owned()), current == Some("true"))
    } else {
        (Value::Null, current.is_none())
    };
    if done {
        let state = if hold { "already held" } else { "not held" };
        return print(&format!("node/{name} is {state} (no change)\n"));
    }
    nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {HOLD_LABEL: value}}})),
        )
        .await
        .map_err(|e| CliError::api(&format!("patch node {name}"), e))?;
    let message = if hold {
        format!(
            "node/{name} held: labelled {HOLD_LABEL}=true; it is not staged or rebooted until `kubectl bootc release {name}`\n"
        )
    } else {
        format!("node/{name} released: label {HOLD_LABEL} removed\n")
    };
    print(&message)
}
