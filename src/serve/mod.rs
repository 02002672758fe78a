//! The reference IM server (`msgstorm serve`). Being built in issue #3 on branch `serve`.

use crate::error::{Error, Result};

/// Command-line options of `msgstorm serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub listen: std::net::SocketAddr,
}

/// Runs `msgstorm serve` until SIGTERM or Ctrl-C.
pub async fn serve_command(args: ServeArgs) -> Result<()> {
    Err(Error::Server(format!(
        "cannot listen on {}: not built yet",
        args.listen
    )))
}

/// A login token for `user` under `secret`.
pub fn token(user: &str, secret: &str) -> String {
    format!("{user}.{secret}")
}
