//! How remote datasets are read ([`RemoteOptions`], from the environment) and the block size
//! everything is counted in. Their own file, so that the object-store client (`store.rs`) reads
//! them without depending on the replica (`mod.rs`) that drives it.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};

/// Bytes per block: the unit of presence, pinning and eviction (requests span many).
pub const BLOCK_SIZE: u64 = 256 << 10;

/// How remote datasets are read: from the environment, with these defaults.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// Where replicas live (`BETON_CACHE_DIR`; default `$XDG_CACHE_HOME/beton`, or
    /// `~/.cache/beton`).
    pub cache_dir: PathBuf,
    /// The bound on bytes present in this process's replicas (`BETON_CACHE_SIZE`, bytes or with
    /// a K/M/G/T suffix; default 10 GiB).
    pub cache_bytes: u64,
    /// Range requests one read may have in flight at once (`BETON_REMOTE_IN_FLIGHT`, default 16).
    pub in_flight: usize,
    /// Largest range request (`BETON_REMOTE_REQUEST_BYTES`, default 8 MiB).
    pub request_bytes: u64,
    /// How long one request may keep being retried (5xx, timeouts, resets) before the read
    /// fails (`BETON_REMOTE_RETRY_SECONDS`, default 60): the budget of a store that has
    /// answered this process before, so a network blip in the middle of an epoch is ridden out.
    pub retry_for: Duration,
    /// How long a request is retried while its store has never answered this process (its
    /// first requests: opening a dataset): connection refused, DNS failures, timeouts
    /// (`BETON_REMOTE_OPEN_RETRY_SECONDS`, default 5; never more than `retry_for`). A wrong
    /// endpoint or a store that is down then fails `open` in about this long (plus one
    /// connect timeout, 5 s, for a host that does not answer at all), naming what failed.
    pub open_retry_for: Duration,
    /// Timeout of one request (`BETON_REMOTE_TIMEOUT_SECONDS`, default 30).
    pub request_timeout: Duration,
}

impl RemoteOptions {
    /// The options the environment sets.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming a variable that does not parse.
    pub fn from_env() -> Result<RemoteOptions> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let bad = |name: &str, v: &str, want: &str| Error::InvalidArgument {
            what: name.to_string(),
            why: format!("{v:?} is not {want}"),
        };
        let cache_dir = match var("BETON_CACHE_DIR") {
            Some(d) => PathBuf::from(d),
            None => match (var("XDG_CACHE_HOME"), var("HOME")) {
                (Some(x), _) => PathBuf::from(x).join("beton"),
                (None, Some(h)) => PathBuf::from(h).join(".cache").join("beton"),
                (None, None) => std::env::temp_dir().join("beton-cache"),
            },
        };
        let cache_bytes = match var("BETON_CACHE_SIZE") {
            Some(v) => {
                parse_size(&v).ok_or_else(|| bad("BETON_CACHE_SIZE", &v, "a size such as 500M or 20G"))?
            }
            None => 10 << 30,
        };
        let number = |name: &str, default: u64| -> Result<u64> {
            match var(name) {
                Some(v) => v
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| bad(name, &v, "a positive integer")),
                None => Ok(default),
            }
        };
        Ok(RemoteOptions {
            cache_dir,
            cache_bytes,
            in_flight: number("BETON_REMOTE_IN_FLIGHT", 16)?.min(1024) as usize,
            request_bytes: match var("BETON_REMOTE_REQUEST_BYTES") {
                Some(v) => parse_size(&v)
                    .filter(|&n| n >= BLOCK_SIZE)
                    .ok_or_else(|| bad("BETON_REMOTE_REQUEST_BYTES", &v, "a size of at least 256K"))?,
                None => 8 << 20,
            },
            retry_for: Duration::from_secs(number("BETON_REMOTE_RETRY_SECONDS", 60)?),
            open_retry_for: Duration::from_secs(number("BETON_REMOTE_OPEN_RETRY_SECONDS", 5)?),
            request_timeout: Duration::from_secs(number("BETON_REMOTE_TIMEOUT_SECONDS", 30)?),
        })
    }
}

/// `123`, `500K`, `20M`, `1.5G`, `2T` (powers of 1024; an optional trailing `B`/`iB`).
pub(super) fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim().trim_end_matches(['B', 'b']).trim_end_matches('i');
    let (num, scale) = match v.chars().last()?.to_ascii_uppercase() {
        'K' => (&v[..v.len() - 1], 1u64 << 10),
        'M' => (&v[..v.len() - 1], 1 << 20),
        'G' => (&v[..v.len() - 1], 1 << 30),
        'T' => (&v[..v.len() - 1], 1 << 40),
        _ => (v, 1),
    };
    let n: f64 = num.trim().parse().ok()?;
    (n.is_finite() && n >= 0.0 && n * (scale as f64) < 1.8e19).then_some((n * scale as f64) as u64)
}
