//! The cluster secret: what data nodes and the control plane present to
//! each other (and operators to the data nodes' internal API).

use std::path::Path;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The shared secret of a cluster: whoever presents it is the control plane
/// or an operator. Never printed, compared in constant time.
#[derive(Clone)]
pub struct ClusterSecret(Arc<str>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(…)")
    }
}

/// Fewest characters a cluster secret may have.
pub const MIN_SECRET_LEN: usize = 32;

impl ClusterSecret {
    pub fn new(secret: &str) -> Result<ClusterSecret, String> {
        let secret = secret.trim();
        if secret.len() < MIN_SECRET_LEN {
            return Err(format!(
                "a cluster secret needs at least {MIN_SECRET_LEN} characters"
            ));
        }
        if !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("a cluster secret is printable ASCII without spaces".into());
        }
        Ok(ClusterSecret(secret.into()))
    }

    /// A new random secret: 32 bytes as hex.
    pub fn generate() -> std::io::Result<ClusterSecret> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(ClusterSecret(hex.into()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is the secret, in time that does not depend on
    /// where they first differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        bool::from(self.0.as_bytes().ct_eq(presented))
    }

    /// Reads the secret from `path`, or writes a new random one there
    /// (readable by its owner only) if the file does not exist. Errors say
    /// what is wrong, without the secret.
    pub fn load_or_create(path: &Path) -> Result<ClusterSecret, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => ClusterSecret::new(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let secret = ClusterSecret::generate().map_err(|e| e.to_string())?;
                write_private(path, secret.expose()).map_err(|e| e.to_string())?;
                Ok(secret)
            }
            Err(e) => Err(e.to_string()),
        }
    }
}

fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}
