//! TLS with rustls, in mongod's terms: `--tlsMode disabled|allowTLS|preferTLS|requireTLS`,
//! `--tlsCertificateKeyFile` (one PEM file holding the certificate chain and its key) and
//! `--tlsCAFile` (the authority client certificates must chain to; with it a client must
//! present one unless `--tlsAllowConnectionsWithoutCertificates`). Under `allowTLS` and
//! `preferTLS` one port serves both: the first bytes of a connection tell a TLS handshake
//! from a MongoDB message.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ServerConfig, ServerConnection, StreamOwned};

/// `net.tls.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Disabled,
    /// TLS accepted, plain connections too (mongod's `allowTLS` and `preferTLS`, which differ
    /// only in what a mongod connects out with).
    Allow,
    Prefer,
    Require,
}

impl Mode {
    pub(crate) fn parse(s: &str) -> Result<Mode, String> {
        match s {
            "disabled" => Ok(Mode::Disabled),
            "allowTLS" | "allowSSL" => Ok(Mode::Allow),
            "preferTLS" | "preferSSL" => Ok(Mode::Prefer),
            "requireTLS" | "requireSSL" => Ok(Mode::Require),
            other => Err(format!(
                "tlsMode `{other}` is not one of disabled, allowTLS, preferTLS, requireTLS"
            )),
        }
    }
}

/// The TLS settings of the configuration.
#[derive(Debug, Clone, Default)]
pub(crate) struct Settings {
    pub mode: Option<String>,
    pub cert_key_file: Option<std::path::PathBuf>,
    pub ca_file: Option<std::path::PathBuf>,
    pub allow_without_certs: bool,
}

/// What the listener needs: the mode, and the rustls configuration when TLS is on; and what
/// this server connects to the other members of its replica set with.
#[derive(Clone)]
pub(crate) struct Tls {
    pub mode: Mode,
    config: Option<Arc<ServerConfig>>,
    member_client: Option<Arc<ClientConfig>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("mode", &self.mode).finish()
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot parse the certificates in {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", path.display()));
    }
    Ok(certs)
}

impl Tls {
    /// Check the settings and load the files; an error names what is wrong.
    pub(crate) fn load(s: &Settings) -> Result<Tls, String> {
        let mode = match (&s.mode, &s.cert_key_file) {
            (Some(m), _) => Mode::parse(m)?,
            (None, Some(_)) => Mode::Require,
            (None, None) => Mode::Disabled,
        };
        if mode == Mode::Disabled {
            if s.cert_key_file.is_some() || s.ca_file.is_some() {
                return Err("tlsMode disabled with TLS files given; choose a tlsMode".into());
            }
            return Ok(Tls {
                mode,
                config: None,
                member_client: None,
            });
        }
        let Some(pem) = &s.cert_key_file else {
            return Err(format!(
                "tlsMode {mode:?} needs --tlsCertificateKeyFile (a PEM file with the certificate and its key)"
            ));
        };
        let chain = read_certs(pem)?;
        let key = PrivateKeyDer::from_pem_file(pem)
            .map_err(|e| format!("no usable private key in {}: {e}", pem.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match &s.ca_file {
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in read_certs(ca)? {
                    roots
                        .add(c)
                        .map_err(|e| format!("bad CA certificate in {}: {e}", ca.display()))?;
                }
                let v =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
                let v = if s.allow_without_certs {
                    v.allow_unauthenticated()
                } else {
                    v
                };
                builder.with_client_cert_verifier(v.build().map_err(|e| format!("TLS: {e}"))?)
            }
            None => builder.with_no_client_auth(),
        };
        // As mongod: under preferTLS and requireTLS this server connects to the other members
        // with TLS, presenting its own certificate, and checks theirs against the CA file
        // (without one, against its own certificate's issuer: members sharing a certificate
        // or an authority).
        let member_client = match mode {
            Mode::Prefer | Mode::Require => {
                let mut roots = rustls::RootCertStore::empty();
                let anchors = match &s.ca_file {
                    Some(ca) => read_certs(ca)?,
                    None => chain.last().cloned().into_iter().collect(),
                };
                for c in anchors {
                    roots
                        .add(c)
                        .map_err(|e| format!("TLS between members: {e}"))?;
                }
                let c = ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("TLS: {e}"))?
                    .with_root_certificates(roots)
                    .with_client_auth_cert(chain.clone(), key.clone_key())
                    .map_err(|e| format!("TLS between members: {e}"))?;
                Some(Arc::new(c))
            }
            _ => None,
        };
        let config = builder.with_single_cert(chain, key).map_err(|e| {
            format!(
                "the certificate and key of {} do not go together: {e}",
                pem.display()
            )
        })?;
        Ok(Tls {
            mode,
            config: Some(Arc::new(config)),
            member_client,
        })
    }

    /// What to connect to other members with: TLS under preferTLS and requireTLS.
    pub(crate) fn member_client(&self) -> Option<Arc<ClientConfig>> {
        self.member_client.clone()
    }

    /// Wrap an accepted socket: a TLS session when the client starts one (or must), the
    /// plain socket otherwise. `Err` closes the connection with the reason.
    pub(crate) fn accept(&self, stream: TcpStream) -> Result<Transport, String> {
        let Some(cfg) = &self.config else {
            return Ok(Transport::Plain(stream));
        };
        let tls = match self.mode {
            Mode::Require => true,
            _ => starts_tls(&stream)?,
        };
        if !tls {
            return Ok(Transport::Plain(stream));
        }
        let conn = ServerConnection::new(cfg.clone()).map_err(|e| format!("TLS: {e}"))?;
        let mut s = StreamOwned::new(conn, stream);
        // Finish the handshake now, so that a failure is logged as one.
        while s.conn.is_handshaking() {
            s.conn
                .complete_io(&mut s.sock)
                .map_err(|e| format!("TLS handshake failed: {e}"))?;
        }
        Ok(Transport::Tls(Box::new(s)))
    }
}

/// Whether the client's first bytes are a TLS handshake record (0x16, version 3.x). A
/// MongoDB message would have to be over 64 KiB long to begin that way, and a client's
/// first message is a small `hello`.
fn starts_tls(stream: &TcpStream) -> Result<bool, String> {
    let mut b = [0u8; 3];
    loop {
        let n = stream
            .peek(&mut b)
            .map_err(|e| format!("read error: {e}"))?;
        if n == 0 {
            return Ok(false);
        }
        if n >= 3 || b[0] != 0x16 || (n >= 2 && b[1] != 0x03) {
            return Ok(b[0] == 0x16 && b[1] == 0x03 && (1..=4).contains(&b[2]));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A connection's byte stream: plain TCP or a TLS session over it.
pub(crate) enum Transport {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Transport {
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            Transport::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
            Transport::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Transport::Plain(s) => s.flush(),
            Transport::Tls(s) => s.flush(),
        }
    }
}
