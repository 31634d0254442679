//! A loopback TCP proxy that slows what a server sends back to a set rate, so that a
//! pull from the test registry takes long enough to watch its progress.
//!
//! Requests pass at full speed; responses go out in chunks of at most 64 KiB, each
//! followed by the pause that keeps the connection at the rate. Dropping the proxy stops
//! it and every connection it carries.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const CHUNK: usize = 64 * 1024;

/// The proxy; it listens on `127.0.0.1:<port>` until dropped.
#[derive(Debug)]
pub struct Throttle {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Throttle {
    /// Proxies `127.0.0.1:<new port>` to `target`, sending responses at about
    /// `bytes_per_second` per connection.
    pub async fn start(target: SocketAddr, bytes_per_second: u64) -> std::io::Result<Throttle> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let rate = bytes_per_second.max(1);
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                connections.spawn(async move {
                    if let Ok(server) = TcpStream::connect(target).await {
                        carry(client, server, rate).await;
                    }
                });
            }
        });
        Ok(Throttle { addr, task })
    }

    /// `127.0.0.1:<port>`, as an image reference's registry part.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn carry(client: TcpStream, server: TcpStream, rate: u64) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = async move {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        let _ = server_write.shutdown().await;
    };
    let down = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if client_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
            let pause = Duration::from_secs_f64(n as f64 / rate as f64);
            tokio::time::sleep(pause).await;
        }
        let _ = client_write.shutdown().await;
    };
    tokio::join!(up, down);
}
