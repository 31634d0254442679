//! `bootc upgrade --download-only` on an in-process host: the tracked image pulled
//! again and its staged deployment locked, as the stand-in does it.

use bootc_node_agent::host::HostError;
use bootc_standin::ImageResolver;

use super::{MemoryHost, failed};

impl MemoryHost {
    /// Locks the staged deployment of the tracked image (staging it locked when the
    /// tracked image has moved), as `bootc upgrade --download-only` does.
    pub(super) async fn lock_staged(&self) -> Result<(), HostError> {
        let command = "bootc upgrade --download-only";
        self.step("lock", false).await;
        self.require_up(command)?;
        {
            let mut inner = self.lock();
            let image = inner
                .state
                .spec_image()
                .map(str::to_owned)
                .ok_or_else(|| failed(command, "error: no image source".to_owned()))?;
            let info = self
                .catalog
                .resolve(&image)
                .map_err(|e| failed(command, format!("error: {e}")))?;
            inner
                .state
                .upgrade(info, true)
                .map_err(|e| failed(command, format!("error: {e}")))?;
            Self::signal(&inner);
        }
        self.step("lock", true).await;
        Ok(())
    }
}
