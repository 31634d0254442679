//! `kubectl bootc status -w`: print, then watch pools, BootcNodes and Nodes from the
//! versions listed, and print again when what would be printed changed. No deadline: it
//! ends on Ctrl-C (exit 0) or when reading or watching fails (an error, exit 1). A watch
//! the server closes, or one whose version has expired (410), is started again from a
//! fresh list.

use std::pin::Pin;

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use futures::stream::{self, Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, WatchEvent, WatchParams};

use crate::error::{CliError, Result};
use crate::objects::{self, Versions};
use crate::output::{Output, print, show};

/// Seconds a watch asks the server to keep it open (kubectl's client asks for about as
/// long); the list and watch start again after.
const WATCH_SECONDS: u32 = 290;

/// What one watch said.
#[derive(Debug)]
enum Change {
    /// An object was added, changed or deleted.
    Object,
    /// Nothing changed (a bookmark).
    Nothing,
    /// The watch ended, or its version expired: list again.
    Relist,
}

type Changes = Pin<Box<dyn Stream<Item = Result<Change>> + Send>>;

/// Prints `status` and again on every change, until Ctrl-C or an error.
pub async fn run(client: &Client, pool: Option<&str>, output: Option<Output>) -> Result<()> {
    tokio::select! {
        result = follow(client, pool, output) => result,
        interrupted = tokio::signal::ctrl_c() => interrupted
            .map_err(|e| CliError::msg(format!("cannot wait for Ctrl-C: {e}"))),
    }
}

async fn follow(client: &Client, pool: Option<&str>, output: Option<Output>) -> Result<()> {
    let mut last: Option<String> = None;
    loop {
        let cluster = objects::read(client).await?;
        let text = show(&cluster, pool, output)?;
        if last.as_deref() != Some(text.as_str()) {
            if last.is_some() && output.is_none() {
                print("\n")?;
            }
            print(&text)?;
            last = Some(text);
        }
        next_change(client, &cluster.versions).await?;
    }
}

/// Waits until one of the three watches reports a change or ends.
async fn next_change(client: &Client, versions: &Versions) -> Result<()> {
    let pools = changes(
        client,
        &ApiResource::erase::<BootcNodePool>(&()),
        &versions.pools,
    )
    .await?;
    let bootc = changes(
        client,
        &ApiResource::erase::<BootcNode>(&()),
        &versions.bootc_nodes,
    )
    .await?;
    let nodes = changes(client, &ApiResource::erase::<Node>(&()), &versions.nodes).await?;
    let mut all = stream::select_all([pools, bootc, nodes]);
    while let Some(change) = all.next().await {
        match change? {
            Change::Nothing => {}
            Change::Object | Change::Relist => return Ok(()),
        }
    }
    Ok(())
}

/// One resource's watch from `version`, as changes, ending with [`Change::Relist`].
async fn changes(client: &Client, resource: &ApiResource, version: &str) -> Result<Changes> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let params = WatchParams::default().timeout(WATCH_SECONDS);
    let plural = resource.plural.clone();
    let events = api
        .watch(&params, version)
        .await
        .map_err(|e| CliError::api(&format!("watch {plural}"), e))?;
    let changes = events
        .map(move |event| match event {
            Ok(WatchEvent::Added(_) | WatchEvent::Modified(_) | WatchEvent::Deleted(_)) => {
                Ok(Change::Object)
            }
            Ok(WatchEvent::Bookmark(_)) => Ok(Change::Nothing),
            Ok(WatchEvent::Error(status)) if status.code == 410 => Ok(Change::Relist),
            Ok(WatchEvent::Error(status)) => {
                Err(CliError::msg(format!("watch {plural}: {}", status.message)))
            }
            Err(e) => Err(CliError::api(&format!("watch {plural}"), e)),
        })
        .chain(stream::once(async { Ok(Change::Relist) }));
    Ok(Box::pin(changes))
}
