//! The [`Source`] of a replica: one object read with range requests through the `object_store`
//! crate, on a small process-wide tokio runtime.
//!
//! Stores are made from the URL's scheme with the usual configuration: `AWS_*` variables (and,
//! for what they leave unset, the profile `AWS_PROFILE` of `~/.aws/credentials` and
//! `~/.aws/config`: keys, session token, region, `endpoint_url`), `GOOGLE_*` for `gs://`,
//! `AZURE_*` for `az://`/`abfs://`; `http(s)://` and `file://` need none.
//!
//! Each request is retried with exponential backoff on 5xx (but 501, 505), 408, 429, timeouts
//! and connection errors; 404, 401/403 and other 4xx fail at once, naming the URL, whatever the
//! request (an object's `GET`/`HEAD` or a folder's listing: object_store reports a listing's
//! status only in its message, read by [`http_status`]). How long a request is retried depends
//! on whether its store (the URL's scheme, host and port: an S3 bucket, an HTTP server) has
//! answered this process before: a store that never has (a wrong endpoint, a store that is
//! down, a name that does not resolve) gets `RemoteOptions::open_retry_for` (5 s), so opening
//! fails in seconds saying what failed; one that has gets `RemoteOptions::retry_for` (60 s), so
//! a blip in the middle of an epoch does not end it. Giving up is
//! [`Error::RemoteUnavailable`], naming what was asked, the tries, the budget's variable and the
//! last error.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore};

use super::options::RemoteOptions;
use super::source::{Entry, ObjectInfo, Source};
use crate::error::{Error, Result};

/// The runtime every remote read runs on (its own threads: callers block on it, from any thread
/// that is not one of its own).
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("beton-remote")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Remote { url: String::new(), what: format!("cannot start the I/O runtime: {e}") })
}

struct ObjectSource {
    url: String,
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    /// The ETag seen at open: every range request is conditional on it.
    e_tag: Option<String>,
    options: RemoteOptions,
}

/// Opens `url`: makes its store, asks for the object's length and version.
pub(super) fn open(url: &str, options: &RemoteOptions) -> Result<(Box<dyn Source>, ObjectInfo)> {
    let (store, path) = make_store(url, options)?;
    let rt = runtime()?;
    let meta = with_retries(url, options, "reading its metadata (HEAD)", || rt.block_on(store.head(&path)))?;
    let version =
        meta.e_tag.clone().or(meta.version.clone()).unwrap_or_else(|| meta.last_modified.to_rfc3339());
    let source =
        ObjectSource { url: url.to_string(), store, path, e_tag: meta.e_tag, options: options.clone() };
    Ok((Box::new(source), ObjectInfo { len: meta.size, version }))
}

/// Whether there is an object at `url` (`HEAD`).
pub(super) fn object_exists(url: &str, options: &RemoteOptions) -> Result<bool> {
    let (store, path) = make_store(url, options)?;
    let rt = runtime()?;
    match with_retries(url, options, "reading its metadata (HEAD)", || rt.block_on(store.head(&path))) {
        Ok(_) => Ok(true),
        Err(Error::RemoteNotFound { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

impl Source for ObjectSource {
    fn url(&self) -> &str {
        &self.url
    }

    fn fetch(
        &self,
        ranges: &[Range<u64>],
        in_flight: usize,
        done: &mut dyn FnMut(usize, Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        let rt = runtime()?;
        let one = |range: Range<u64>| async move {
            let what = format!("reading bytes {}..{}", range.start, range.end);
            let mut tries = Tries::new(&self.url, &self.options);
            loop {
                let options = GetOptions {
                    if_match: self.e_tag.clone(),
                    range: Some(GetRange::Bounded(range.clone())),
                    ..GetOptions::default()
                };
                let got = match self.store.get_opts(&self.path, options).await {
                    Ok(r) => r.bytes().await,
                    Err(e) => Err(e),
                };
                match got {
                    Ok(b) => {
                        tries.answered();
                        return Ok(b.to_vec());
                    }
                    Err(e) => match tries.again(&e) {
                        Some(wait) => tokio::time::sleep(wait).await,
                        None => return Err(tries.error(&what, e)),
                    },
                }
            }
        };
        rt.block_on(async {
            let mut arrivals = futures::stream::iter(ranges.iter().cloned().enumerate())
                .map(|(i, range)| async move { (i, one(range).await) })
                .buffer_unordered(in_flight.max(1));
            while let Some((i, bytes)) = arrivals.next().await {
                done(i, bytes?)?;
            }
            Ok(())
        })
    }
}

/// The whole object at `url`; `None` when there is none.
pub(super) fn get_object(url: &str, options: &RemoteOptions) -> Result<Option<Vec<u8>>> {
    let (store, path) = make_store(url, options)?;
    let rt = runtime()?;
    let got = with_retries(url, options, "reading it", || {
        rt.block_on(async { store.get(&path).await?.bytes().await })
    });
    match got {
        Ok(b) => Ok(Some(b.to_vec())),
        Err(Error::RemoteNotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The names of the objects under the folder `url` (a prefix ending at a `/`), relative to
/// it, sorted.
pub(super) fn list_objects(url: &str, options: &RemoteOptions) -> Result<Vec<String>> {
    Ok(list_entries(url, options)?.into_iter().map(|e| e.name).collect())
}

/// The objects under the folder `url` with their sizes and last-modified times, names relative
/// to it, sorted.
pub(super) fn list_entries(url: &str, options: &RemoteOptions) -> Result<Vec<Entry>> {
    let (store, prefix) = make_store(url, options)?;
    let rt = runtime()?;
    let metas = with_retries(url, options, "listing it", || {
        rt.block_on(async {
            let mut out = Vec::new();
            let mut listing = store.list(Some(&prefix));
            while let Some(meta) = listing.next().await {
                out.push(meta?);
            }
            Ok(out)
        })
    })?;
    let mut entries: Vec<Entry> = metas
        .into_iter()
        .filter_map(|meta| {
            let parts = meta.location.prefix_match(&prefix)?;
            let name = parts.map(|p| p.as_ref().to_string()).collect::<Vec<_>>().join("/");
            (!name.is_empty()).then(|| Entry {
                name,
                size: meta.size,
                modified: std::time::SystemTime::from(meta.last_modified),
            })
        })
        .collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// Deletes the object `url`; one that is not there counts as deleted.
pub(super) fn delete_object(url: &str, options: &RemoteOptions) -> Result<()> {
    let (store, path) = make_store(url, options)?;
    let rt = runtime()?;
    match with_retries(url, options, "deleting it", || rt.block_on(store.delete(&path))) {
        Ok(()) | Err(Error::RemoteNotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes `bytes` as the object `url`. With `if_absent`, only when no object has that name
/// (`If-None-Match: *` on S3): `Ok(false)` when one does. A retried conditional put that finds
/// the object holding these very bytes counts as done (its first try landed).
pub(super) fn put_object(
    url: &str,
    bytes: Vec<u8>,
    if_absent: bool,
    options: &RemoteOptions,
) -> Result<bool> {
    use object_store::{PutMode, PutOptions, PutPayload};
    let (store, path) = make_store(url, options)?;
    let rt = runtime()?;
    let mode = if if_absent { PutMode::Create } else { PutMode::Overwrite };
    let payload = PutPayload::from(bytes.clone());
    let mut tries = Tries::new(url, options);
    loop {
        let opts = PutOptions { mode: mode.clone(), ..PutOptions::default() };
        match rt.block_on(store.put_opts(&path, payload.clone(), opts)) {
            Ok(_) => {
                tries.answered();
                return Ok(true);
            }
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. })
                if if_absent =>
            {
                tries.answered();
                // Ours, from an earlier try whose answer was lost?
                return Ok(
                    tries.retries > 0 && get_object(url, options)?.as_deref() == Some(bytes.as_slice())
                );
            }
            Err(e) => match tries.again(&e) {
                Some(wait) => std::thread::sleep(wait),
                None => return Err(tries.error("writing it", e)),
            },
        }
    }
}

/// Uploads the file `file` as the object `url`: one request up to 16 MiB, a multipart upload
/// of 16 MiB parts (four in flight) above.
pub(super) fn upload_file(url: &str, file: &std::path::Path, options: &RemoteOptions) -> Result<()> {
    use std::io::Read;
    const PART: usize = 16 << 20;
    let len = std::fs::metadata(file).map_err(|e| Error::Io { path: file.to_path_buf(), source: e })?.len();
    if len <= PART as u64 {
        let bytes = std::fs::read(file).map_err(|e| Error::Io { path: file.to_path_buf(), source: e })?;
        put_object(url, bytes, false, options)?;
        return Ok(());
    }
    let (store, path) = make_store(url, options)?;
    let rt = runtime()?;
    let mut f = std::fs::File::open(file).map_err(|e| Error::Io { path: file.to_path_buf(), source: e })?;
    rt.block_on(async {
        let upload = store
            .put_multipart(&path)
            .await
            .map_err(|e| Tries::new(url, options).error("starting an upload", e))?;
        let mut writer = object_store::WriteMultipart::new_with_chunk_size(upload, PART);
        let mut buf = vec![0u8; PART];
        loop {
            let n = f.read(&mut buf).map_err(|e| Error::Io { path: file.to_path_buf(), source: e })?;
            if n == 0 {
                break;
            }
            writer
                .wait_for_capacity(4)
                .await
                .map_err(|e| Tries::new(url, options).error("uploading a part", e))?;
            writer.write(&buf[..n]);
        }
        writer.finish().await.map_err(|e| Tries::new(url, options).error("completing the upload", e))?;
        Ok(())
    })
}

/// 50 ms, doubling, at most 2 s, with jitter from the clock.
fn backoff(attempt: u32) -> Duration {
    let base = 50u64 << attempt.min(6);
    let jitter = u64::from(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos()),
    ) % (base / 2 + 1);
    Duration::from_millis((base + jitter).min(2000))
}

/// Whether `e` is the failure to find credentials: with none configured, object_store asks the
/// cloud's instance metadata service (169.254.169.254 for AWS), which off the cloud fails.
fn no_credentials(e: &object_store::Error) -> bool {
    let text = one_line(e).to_ascii_lowercase();
    text.contains("169.254.169.254")
        || text.contains("metadata.google.internal")
        || text.contains("credential")
}

/// The HTTP status of a failed request, when the server answered one: object_store maps the
/// status of an object's `GET`/`HEAD` to variants, but leaves a listing's (and others') in the
/// message of a `Generic` error ("... status code: 403 Forbidden: ...").
fn http_status(e: &object_store::Error) -> Option<u16> {
    use object_store::Error as E;
    match e {
        E::NotFound { .. } => return Some(404),
        E::PermissionDenied { .. } => return Some(403),
        E::Unauthenticated { .. } => return Some(401),
        E::Precondition { .. } => return Some(412),
        E::NotModified { .. } => return Some(304),
        E::AlreadyExists { .. } => return Some(409),
        _ => {}
    }
    const AT: &str = "status code: ";
    let text = one_line(e);
    let at = text.find(AT)? + AT.len();
    text.get(at..at + 3)?.parse().ok().filter(|s| (100..600).contains(s))
}

/// Errors worth another try: no answer (connection refused, DNS failure, a timeout, a reset)
/// or one that says to come back (5xx but 501 and 505, 408, 429). Not a missing object,
/// refused access, missing credentials, a changed object or another 4xx, which fail the same
/// way every time.
fn transient(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    if no_credentials(e)
        || matches!(
            e,
            E::NotFound { .. }
                | E::PermissionDenied { .. }
                | E::Unauthenticated { .. }
                | E::Precondition { .. }
                | E::NotSupported { .. }
                | E::InvalidPath { .. }
                | E::UnknownConfigurationKey { .. }
                | E::NotImplemented
        )
    {
        return false;
    }
    match http_status(e) {
        Some(s) => matches!(s, 408 | 429) || ((500..600).contains(&s) && !matches!(s, 501 | 505)),
        None => true,
    }
}

/// The stores (scheme, host and port of their URLs) that answered this process at least once:
/// their requests get the long retry budget (see the module docs).
fn answered_stores() -> &'static Mutex<HashSet<String>> {
    static ANSWERED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    ANSWERED.get_or_init(|| Mutex::new(HashSet::new()))
}

/// The store of `url`: `scheme://host:port` (an HTTP server; a bucket or container), with the
/// endpoint the environment names for S3 (`AWS_ENDPOINT_URL`: the same bucket name at another
/// endpoint is another store), or the URL.
fn store_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => {
            let endpoint = match u.scheme() {
                "s3" | "s3a" => std::env::var("AWS_ENDPOINT_URL")
                    .or_else(|_| std::env::var("AWS_ENDPOINT"))
                    .unwrap_or_default(),
                _ => String::new(),
            };
            format!("{}://{}:{} {endpoint}", u.scheme(), u.host_str().unwrap_or(""), u.port().unwrap_or(0))
        }
        Err(_) => url.to_string(),
    }
}

/// The retries of one request: how many, since when, and whether to go on.
struct Tries<'a> {
    url: &'a str,
    options: &'a RemoteOptions,
    started: Instant,
    retries: u32,
}

impl<'a> Tries<'a> {
    fn new(url: &'a str, options: &'a RemoteOptions) -> Self {
        Tries { url, options, started: Instant::now(), retries: 0 }
    }

    /// Notes that the store answered (a request succeeded or got an HTTP status).
    fn answered(&self) {
        answered_stores().lock().unwrap_or_else(|e| e.into_inner()).insert(store_of(self.url));
    }

    /// Whether the store of this request has ever answered this process.
    fn store_answered(&self) -> bool {
        answered_stores().lock().unwrap_or_else(|e| e.into_inner()).contains(&store_of(self.url))
    }

    /// The budget: `(seconds, its variable)`.
    fn budget(&self) -> (Duration, &'static str) {
        if self.store_answered() {
            (self.options.retry_for, "BETON_REMOTE_RETRY_SECONDS")
        } else {
            (self.options.open_retry_for.min(self.options.retry_for), "BETON_REMOTE_OPEN_RETRY_SECONDS")
        }
    }

    /// After failure `e`: how long to wait before trying again, or `None` to give up.
    fn again(&mut self, e: &object_store::Error) -> Option<Duration> {
        if http_status(e).is_some() {
            self.answered();
        }
        let (budget, elapsed) = (self.budget().0, self.started.elapsed());
        if !transient(e) || elapsed >= budget {
            return None;
        }
        self.retries += 1;
        // The last wait ends with the budget, so the error comes when the budget says.
        Some(backoff(self.retries).min(budget - elapsed))
    }

    /// The error for giving up on `what` (`"listing it"`) after failure `e`.
    fn error(&self, what: &str, e: object_store::Error) -> Error {
        remote_error(self, what, e)
    }
}

fn with_retries<T>(
    url: &str,
    options: &RemoteOptions,
    what: &str,
    mut f: impl FnMut() -> object_store::Result<T>,
) -> Result<T> {
    let mut tries = Tries::new(url, options);
    loop {
        match f() {
            Ok(v) => {
                tries.answered();
                return Ok(v);
            }
            Err(e) => match tries.again(&e) {
                Some(wait) => std::thread::sleep(wait),
                None => return Err(tries.error(what, e)),
            },
        }
    }
}

fn remote_error(tries: &Tries<'_>, what: &str, e: object_store::Error) -> Error {
    use object_store::Error as E;
    let url = tries.url;
    let denied = |said: String| Error::RemoteDenied {
        url: url.to_string(),
        what: format!(
            "{what}: {said}; check the credentials (AWS_*, GOOGLE_*, AZURE_* environment variables, \
             ~/.aws/credentials) and that they may do this"
        ),
    };
    match e {
        E::NotFound { .. } => Error::RemoteNotFound { url: url.to_string() },
        E::PermissionDenied { source, .. } | E::Unauthenticated { source, .. } => denied(one_line(&*source)),
        // A listing's (or another request's) 401/403/404, which object_store leaves generic.
        e if matches!(http_status(&e), Some(401 | 403)) => denied(one_line(&e)),
        e if http_status(&e) == Some(404) => Error::RemoteNotFound { url: url.to_string() },
        e if no_credentials(&e) => Error::RemoteDenied {
            url: url.to_string(),
            what: format!(
                "no credentials found ({}): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile in \
                 ~/.aws/credentials, GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_ACCOUNT_KEY), or \
                 AWS_SKIP_SIGNATURE=true for a public bucket",
                one_line(&e)
            ),
        },
        E::Precondition { .. } => Error::Remote {
            url: url.to_string(),
            what: format!("{what}: the object changed since it was opened (its ETag differs); reopen it"),
        },
        e if transient(&e) => {
            let (budget, variable) = tries.budget();
            let answered = tries.store_answered();
            Error::RemoteUnavailable {
                url: url.to_string(),
                what: format!(
                    "{what} failed after {} tries in {:.1} s ({}; tried for up to {} s, set by \
                     {variable}): {}",
                    tries.retries + 1,
                    tries.started.elapsed().as_secs_f64(),
                    if answered {
                        "the store stopped answering or kept failing"
                    } else {
                        "the store never answered: is the endpoint right and up?"
                    },
                    budget.as_secs(),
                    one_line(&e)
                ),
            }
        }
        other => Error::Remote { url: url.to_string(), what: format!("{what} failed: {}", one_line(&other)) },
    }
}

/// An error and its sources on one line.
fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(next) = cur {
        let t = next.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = next.source();
    }
    s
}

fn make_store(url: &str, options: &RemoteOptions) -> Result<(Arc<dyn ObjectStore>, ObjectPath)> {
    let bad = |why: String| Error::Remote { url: url.to_string(), what: why };
    let parsed = url::Url::parse(url).map_err(|e| bad(format!("not a valid URL: {e}")))?;
    let client = ClientOptions::new()
        .with_timeout(options.request_timeout)
        // Connecting takes milliseconds, or a second or three over a bad link; a host that does
        // not answer at all should not hold an open for long.
        .with_connect_timeout(Duration::from_secs(5).min(options.request_timeout));
    // Retries are this module's own (they cover reading the body too).
    let retry = object_store::RetryConfig { max_retries: 0, ..Default::default() };
    // The object's key: the URL's path. The host is the bucket or container (az://container/key,
    // as object_store's Azure builder reads it; its `ObjectStoreScheme::parse` would drop the
    // path's first segment for az://) or, for http(s), the server.
    let key =
        || ObjectPath::from_url_path(parsed.path()).map_err(|e| bad(format!("not a valid object path: {e}")));
    let store: Arc<dyn ObjectStore> = match parsed.scheme() {
        "s3" | "s3a" => {
            use object_store::aws::AmazonS3Builder;
            let mut b =
                AmazonS3Builder::from_env().with_url(url).with_client_options(client).with_retry(retry);
            for (k, v) in aws_profile() {
                b = b.with_config(k, v);
            }
            let endpoint_http = std::env::var("AWS_ENDPOINT_URL")
                .or_else(|_| std::env::var("AWS_ENDPOINT"))
                .ok()
                .or_else(|| {
                    aws_profile()
                        .into_iter()
                        .find(|(k, _)| *k == object_store::aws::AmazonS3ConfigKey::Endpoint)
                        .map(|(_, v)| v)
                })
                .is_some_and(|e| e.starts_with("http://"));
            if endpoint_http {
                b = b.with_allow_http(true);
            }
            Arc::new(b.build().map_err(|e| bad(one_line(&e)))?)
        }
        "gs" => Arc::new(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_url(url)
                .with_client_options(client)
                .with_retry(retry)
                .build()
                .map_err(|e| bad(one_line(&e)))?,
        ),
        "az" | "azure" | "abfs" | "abfss" | "adl" => Arc::new(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_url(url)
                .with_client_options(client)
                .with_retry(retry)
                .build()
                .map_err(|e| bad(one_line(&e)))?,
        ),
        "http" | "https" => {
            let base = format!("{}://{}", parsed.scheme(), parsed.host_str().unwrap_or_default())
                + &parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
            let client = client.with_allow_http(true);
            Arc::new(
                object_store::http::HttpBuilder::new()
                    .with_url(base)
                    .with_client_options(client)
                    .with_retry(retry)
                    .build()
                    .map_err(|e| bad(one_line(&e)))?,
            )
        }
        "file" => {
            let path = parsed.to_file_path().map_err(|()| bad("not a local file URL".into()))?;
            let path = ObjectPath::from_absolute_path(&path).map_err(|e| bad(one_line(&e)))?;
            return Ok((Arc::new(object_store::local::LocalFileSystem::new()), path));
        }
        other => {
            return Err(bad(format!(
            "unknown scheme '{other}://' (beton reads s3://, gs://, az://, abfs://, http(s):// and file://)"
        )))
        }
    };
    let key = key()?;
    if key.as_ref().is_empty() {
        return Err(bad("the URL names a bucket or host but no object in it".into()));
    }
    Ok((store, key))
}

/// Settings of the AWS profile (`AWS_PROFILE`, default `default`) from `~/.aws/credentials`
/// and `~/.aws/config` that the environment does not set, as S3 configuration keys.
fn aws_profile() -> Vec<(object_store::aws::AmazonS3ConfigKey, String)> {
    use object_store::aws::AmazonS3ConfigKey as K;
    let home = match std::env::var_os("HOME") {
        Some(h) => std::path::PathBuf::from(h),
        None => return Vec::new(),
    };
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".to_string());
    let credentials = std::env::var_os("AWS_SHARED_CREDENTIALS_FILE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| home.join(".aws").join("credentials"));
    let config = std::env::var_os("AWS_CONFIG_FILE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| home.join(".aws").join("config"));
    let mut out = Vec::new();
    let mut add = |file: &std::path::Path, section: &str, keys: &[(&str, K, &str)]| {
        let Ok(text) = std::fs::read_to_string(file) else { return };
        for (name, key, env) in keys {
            if std::env::var_os(env).is_some() {
                continue;
            }
            if let Some(v) = ini_value(&text, section, name) {
                out.push((*key, v));
            }
        }
    };
    add(
        &credentials,
        &profile,
        &[
            ("aws_access_key_id", K::AccessKeyId, "AWS_ACCESS_KEY_ID"),
            ("aws_secret_access_key", K::SecretAccessKey, "AWS_SECRET_ACCESS_KEY"),
            ("aws_session_token", K::Token, "AWS_SESSION_TOKEN"),
        ],
    );
    let section = if profile == "default" { profile.clone() } else { format!("profile {profile}") };
    add(
        &config,
        &section,
        &[
            ("region", K::Region, "AWS_REGION"),
            ("endpoint_url", K::Endpoint, "AWS_ENDPOINT_URL"),
            ("aws_access_key_id", K::AccessKeyId, "AWS_ACCESS_KEY_ID"),
            ("aws_secret_access_key", K::SecretAccessKey, "AWS_SECRET_ACCESS_KEY"),
        ],
    );
    // A key from the credentials file wins over the same key in the config file.
    let mut seen = Vec::new();
    out.retain(|(k, _)| {
        let first = !seen.contains(k);
        seen.push(*k);
        first
    });
    out
}

/// `key = value` in `[section]` of an INI text (AWS's files: `#`/`;` comments).
fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == section;
            continue;
        }
        if inside {
            if let Some((k, v)) = line.split_once('=') {
                if k.trim() == key {
                    return Some(v.trim().to_string());
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ini_values_by_section() {
        let text = "# c\n[default]\naws_access_key_id = A\n[profile dev]\nregion=eu-west-1\nendpoint_url = http://x\n";
        assert_eq!(ini_value(text, "default", "aws_access_key_id").as_deref(), Some("A"));
        assert_eq!(ini_value(text, "profile dev", "region").as_deref(), Some("eu-west-1"));
        assert_eq!(ini_value(text, "profile dev", "aws_access_key_id"), None);
        assert_eq!(ini_value(text, "nope", "region"), None);
    }

    /// An HTTP server on 127.0.0.1 answering every request with `status` and S3's access-denied
    /// body: its URL and how many requests it answered.
    fn answering(status: &'static str) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        beton_testkit::answering(status, "<Error><Code>AccessDenied</Code></Error>")
    }

    fn budgets(retry_for: u64, open_retry_for: u64) -> RemoteOptions {
        RemoteOptions {
            retry_for: Duration::from_secs(retry_for),
            open_retry_for: Duration::from_secs(open_retry_for),
            ..RemoteOptions::from_env().unwrap()
        }
    }

    #[test]
    fn a_refused_listing_is_access_denied_at_once_naming_the_listing() {
        let (base, count) = answering("403 Forbidden");
        let url = format!("{base}/ds/_versions/");
        // A budget of a minute that a refusal must not wait for: one request, then the error.
        match list_objects(&url, &budgets(60, 60)) {
            Err(Error::RemoteDenied { url: u, what }) => {
                assert_eq!(u, url);
                assert!(what.starts_with("listing it: ") && what.contains("403"), "{what}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
        let file = format!("{base}/ds/x.beton");
        assert!(matches!(open(&file, &budgets(60, 60)).map(|_| ()), Err(Error::RemoteDenied { .. })));
        assert!(matches!(object_exists(&file, &budgets(60, 60)), Err(Error::RemoteDenied { .. })));
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[test]
    fn statuses_another_try_would_not_change_are_not_retried_and_5xx_are() {
        for status in ["405 Method Not Allowed", "501 Not Implemented", "400 Bad Request"] {
            let (base, count) = answering(status);
            let url = format!("{base}/ds/_versions/");
            match list_objects(&url, &budgets(60, 60)) {
                Err(Error::Remote { url: u, what }) => {
                    assert_eq!(u, url);
                    assert!(what.starts_with("listing it failed: ") && what.contains(&status[..3]), "{what}");
                }
                other => panic!("{status}: {other:?}"),
            }
            assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1, "{status}");
        }
        // A 503 answers: the store is up and says to come back, so the long budget (1 s here).
        let (base, count) = answering("503 Service Unavailable");
        let url = format!("{base}/ds/_versions/");
        match list_objects(&url, &budgets(1, 1)) {
            Err(Error::RemoteUnavailable { url: u, what }) => {
                assert_eq!(u, url);
                assert!(what.starts_with("listing it failed after ") && what.contains("503"), "{what}");
                assert!(
                    what.contains("kept failing") && what.contains("BETON_REMOTE_RETRY_SECONDS"),
                    "{what}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(count.load(std::sync::atomic::Ordering::SeqCst) > 1);
    }

    #[test]
    fn a_store_that_never_answered_fails_within_the_open_budget_saying_what_failed() {
        // Nothing listens there (the servers of these tests are on 127.0.0.1): refused.
        let port = std::net::TcpListener::bind("127.0.0.2:0").unwrap().local_addr().unwrap().port();
        let base = format!("http://127.0.0.2:{port}");
        let options = budgets(60, 1);
        let url = format!("{base}/ds/_versions/");
        let started = Instant::now();
        let e = list_objects(&url, &options).unwrap_err();
        // Far from the minute a store that answered before would get.
        assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
        match e {
            Error::RemoteUnavailable { url: u, what } => {
                assert_eq!(u, url);
                assert!(what.starts_with("listing it failed after "), "{what}");
                assert!(
                    what.contains("never answered") && what.contains("BETON_REMOTE_OPEN_RETRY_SECONDS"),
                    "{what}"
                );
                assert!(what.to_ascii_lowercase().contains("connect"), "the last error: {what}");
            }
            other => panic!("{other:?}"),
        }
        let file = format!("{base}/x.beton");
        match open(&file, &options).map(|_| ()) {
            Err(Error::RemoteUnavailable { url, what }) => {
                assert_eq!(url, file);
                assert!(what.starts_with("reading its metadata (HEAD) failed after "), "{what}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_store_that_answered_gets_the_long_budget() {
        let options = budgets(60, 2);
        let tries = Tries::new("s3://budget-test-bucket/ds/x.beton", &options);
        assert_eq!(tries.budget(), (Duration::from_secs(2), "BETON_REMOTE_OPEN_RETRY_SECONDS"));
        tries.answered();
        // Any object of the same bucket.
        let other = Tries::new("s3://budget-test-bucket/other/y.beton", &options);
        assert_eq!(other.budget(), (Duration::from_secs(60), "BETON_REMOTE_RETRY_SECONDS"));
        // Never more than the long budget.
        let short = budgets(3, 10);
        assert_eq!(Tries::new("s3://budget-test-other/x", &short).budget().0, Duration::from_secs(3));
    }

    #[test]
    fn missing_files_and_bad_urls_are_errors_naming_the_url() {
        let options = RemoteOptions::from_env().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}/absent.beton", dir.path().display());
        match open(&url, &options) {
            Err(Error::RemoteNotFound { url: u }) => assert_eq!(u, url),
            other => panic!("{:?}", other.map(|(_, i)| i)),
        }
        for bad in ["ftp://host/x.beton", "s3://bucket", "file://relative"] {
            let e = open(bad, &options).map(|(_, i)| i).unwrap_err().to_string();
            assert!(e.starts_with(bad), "{e}");
        }
    }
}
