//! The run's target: the embedded reference server started in this process when the plan
//! names no target, a check that a named one accepts connections at all, and the target
//! as reports show it.

use crate::error::{Error, Result};
use crate::scenario::Plan;

/// The embedded reference server, when the plan names no target.
#[cfg(feature = "serve")]
pub type Embedded = crate::serve::ServerHandle;
/// The embedded reference server, which a build without the `serve` feature never has.
#[cfg(not(feature = "serve"))]
#[derive(Debug)]
pub enum Embedded {}

#[cfg(not(feature = "serve"))]
impl Embedded {
    /// The token secret (never called: there is no value of this type).
    pub fn secret(&self) -> &str {
        match *self {}
    }

    /// Stops the server (never called: there is no value of this type).
    pub async fn shutdown(self) -> Result<()> {
        match self {}
    }
}

/// Starts the embedded server when the plan names no target (pointing the plan at it),
/// and checks that the target accepts connections at all (exit code 3 when it does not).
/// Returns the server, if any, and the target as reports show it (the URL, or the
/// in-process driver's name).
pub async fn prepare(
    plan: &mut Plan,
    notes: &mut Vec<String>,
) -> Result<(Option<Embedded>, String)> {
    let server = start_embedded(plan, notes).await?;
    let shown = match &plan.target.endpoint {
        Some(ep) => {
            crate::driver::probe(ep, plan.target.connect_timeout).await?;
            ep.url.clone()
        }
        None => format!("in-process {}", plan.target.driver.name),
    };
    Ok((server, shown))
}

/// Stops the embedded server, if any.
pub async fn stop(server: Option<Embedded>) -> Result<()> {
    match server {
        Some(server) => server
            .shutdown()
            .await
            .map_err(|e| Error::Server(format!("embedded server: {e}"))),
        None => Ok(()),
    }
}

/// The target `shown` as a result names it: marked `embedded` when the run's own server
/// was the target.
pub fn named(shown: String, embedded: bool) -> String {
    if embedded {
        format!("embedded {shown}")
    } else {
        shown
    }
}

/// Starts the reference server in this process when the plan names no target.
#[cfg(feature = "serve")]
async fn start_embedded(plan: &mut Plan, notes: &mut Vec<String>) -> Result<Option<Embedded>> {
    let driver = plan.target.driver;
    let (None, Some(path)) = (&plan.target.endpoint, driver.embedded_path) else {
        return Ok(None);
    };
    let handle = crate::serve::spawn(embedded_config(plan.max_body())).await?;
    let url = format!("ws://{}{path}", handle.addr());
    plan.target.endpoint = Some(
        crate::driver::Endpoint::parse(&url, driver)
            .map_err(|e| Error::Other(format!("embedded server: {e}")))?,
    );
    if driver.auth.contains(&crate::driver::AuthForm::Secret) {
        plan.target.auth = crate::scenario::Auth::Secret(handle.secret().to_owned());
    }
    notes.push(crate::report::findings::EMBEDDED_IN_GENERATOR.to_owned());
    Ok(Some(handle))
}

/// The embedded server's configuration for a run whose largest body is `body` bytes: its
/// defaults, with room for that body in a message, a frame and a connection's queue.
#[cfg(feature = "serve")]
fn embedded_config(body: usize) -> crate::serve::ServeConfig {
    let d = crate::serve::ServeConfig::default();
    // The frame around a body: the JSON of a push or a sync page holding it.
    let max_frame = d.max_frame.max(body + 64 * 1024);
    crate::serve::ServeConfig {
        max_body: d.max_body.max(body),
        max_frame,
        queue_bytes: d.queue_bytes.max(4 * max_frame),
        ..d
    }
}

/// Without the `serve` feature a plan without a target cannot run.
#[cfg(not(feature = "serve"))]
async fn start_embedded(plan: &mut Plan, _: &mut Vec<String>) -> Result<Option<Embedded>> {
    match (&plan.target.endpoint, plan.target.driver.embedded_path) {
        (None, Some(_)) => Err(Error::Usage(
            "target.url: this msgstorm was built without the embedded server (feature `serve`)"
                .to_owned(),
        )),
        _ => Ok(None),
    }
}
