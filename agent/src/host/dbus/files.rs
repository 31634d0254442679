//! Files the agent writes on the host.

use std::path::Path;

/// Writes `content` to `path` with mode 0600 through a temporary file in the same
/// directory (created 0700 when missing) and a rename, so readers never see half a
/// file; `None` removes `path`.
pub(crate) async fn write_private(path: &Path, content: Option<&[u8]>) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

    let Some(content) = content else {
        return match tokio::fs::remove_file(path).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    };
    let path = path.to_owned();
    let content = content.to_vec();
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let dir = path.parent().unwrap_or(Path::new("/"));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("auth");
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            // The mode of an existing temporary file is not changed by open().
            std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
            file.write_all(&content)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        let result = write();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    })
    .await
    .map_err(std::io::Error::other)?
}
