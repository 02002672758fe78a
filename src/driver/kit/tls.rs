//! TLS for the drivers: one way to build the rustls client configuration (the ring
//! provider only, so the tree holds one crypto library), to read the `ca_file` and
//! `server_name` options, and to classify handshake failures for the error taxonomy.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{crypto, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use super::connect::Metered;
use super::io_error;
use super::options::Table;
use crate::driver::{Config, Failure, OptionError};
use crate::metrics::ErrorKind;

/// The rustls client configuration: trusts the certificates of the PEM file `ca_file`, or
/// the system's roots without one. `bad` turns a message into the error of the option.
pub fn client_config(
    ca_file: Option<&Path>,
    bad: impl Fn(String) -> OptionError,
) -> Result<Arc<ClientConfig>, OptionError> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| bad(format!("{}: {e}", path.display())))?;
            if certs.is_empty() {
                return Err(bad(format!("{}: no PEM certificate in it", path.display())));
            }
            for c in certs {
                roots
                    .add(c)
                    .map_err(|e| bad(format!("{}: {e}", path.display())))?;
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(native.certs);
            if roots.is_empty() {
                return Err(bad(
                    "no system CA certificates found; give the server's CA as `ca_file`".to_owned(),
                ));
            }
        }
    }
    let config = ClientConfig::builder_with_provider(Arc::new(crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(format!("TLS setup: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A driver's TLS client: the configuration and the name its server's certificate must
/// carry (SNI and verification).
#[derive(Clone)]
pub struct Client {
    connector: TlsConnector,
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// The TLS client of a driver whose URL is `wss://`/`…s://`, from the `ca_file` and
    /// `server_name` keys of its `[target.<driver>]` table (`None` for a plain URL, where
    /// both keys are refused). The server name defaults to the URL's host.
    pub fn from_options(config: &Config) -> Result<Option<Client>, OptionError> {
        let driver = config.spec.name;
        let t = Table::of(config);
        let text = |key: &str| -> Result<Option<&str>, OptionError> {
            match t.str(key)? {
                Some(s) if s.trim().is_empty() => {
                    Err(t.out_of_range(key, "a non-empty string", format!("{s:?}")))
                }
                s => Ok(s.map(str::trim)),
            }
        };
        let (ca_file, name) = (text("ca_file")?, text("server_name")?);
        let Some(ep) = config.endpoint.as_ref().filter(|ep| ep.tls()) else {
            if let Some(key) = [("ca_file", ca_file), ("server_name", name)]
                .iter()
                .find_map(|(k, v)| v.map(|_| *k))
            {
                return Err(OptionError::option(
                    driver,
                    key,
                    "only for a TLS URL (e.g. wss://); the target URL is plain",
                ));
            }
            return Ok(None);
        };
        let name = name.unwrap_or(ep.host.trim_start_matches('[').trim_end_matches(']'));
        let server_name = ServerName::try_from(name.to_owned())
            .map_err(|e| OptionError::option(driver, "server_name", format!("`{name}`: {e}")))?;
        let config = client_config(ca_file.map(Path::new), |msg| {
            OptionError::option(driver, "ca_file", msg)
        })?;
        Ok(Some(Client::with_name(config, server_name)))
    }

    /// The TLS client of `config` for a server whose certificate carries `name` (a
    /// protocol that names its server itself, as XMPP's domain); `Err` says why `name`
    /// is no server name.
    pub fn new(config: Arc<ClientConfig>, name: &str) -> Result<Client, String> {
        let server_name = ServerName::try_from(name.to_owned())
            .map_err(|e| format!("`{name}` as a TLS name: {e}"))?;
        Ok(Client::with_name(config, server_name))
    }

    fn with_name(config: Arc<ClientConfig>, server_name: ServerName<'static>) -> Client {
        Client {
            connector: TlsConnector::from(Arc::clone(&config)),
            config,
            server_name,
        }
    }

    /// The same client offering `protocols` by ALPN, preferred first (`h2` for HTTP/2).
    pub fn with_alpn(&self, protocols: &[&[u8]]) -> Client {
        let mut config = (*self.config).clone();
        config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        Client::with_name(Arc::new(config), self.server_name.clone())
    }

    /// The TLS handshake over `tcp`.
    pub async fn connect(&self, tcp: Metered) -> Result<TlsStream<Metered>, Failure> {
        self.connector
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| classify(&e))
    }
}

/// Classifies a failed TLS handshake: rustls' own errors (certificates, alerts, protocol)
/// are `tls`; the connection dropping underneath is the server closing it, and any other
/// socket failure is classified as every driver's are ([`io_error::classify`]).
pub fn classify(e: &std::io::Error) -> Failure {
    let rustls = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<tokio_rustls::rustls::Error>());
    match rustls {
        Some(err) => Failure::new(ErrorKind::Tls, format!("TLS handshake: {err}")),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => Failure::new(
            ErrorKind::ClosedByPeer,
            "connection closed during the TLS handshake",
        ),
        None => {
            let f = io_error::classify(e);
            Failure::new(f.kind, format!("TLS handshake: {}", f.detail))
        }
    }
}
