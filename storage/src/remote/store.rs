//! The [`Source`] of a replica: one object read with range requests through the `object_store`
//! crate, on a small process-wide tokio runtime.
//!
//! Stores are made from the URL's scheme with the usual configuration: `AWS_*` variables (and,
//! for what they leave unset, the profile `AWS_PROFILE` of `~/.aws/credentials` and
//! `~/.aws/config`: keys, session token, region, `endpoint_url`), `GOOGLE_*` for `gs://`,
//! `AZURE_*` for `az://`/`abfs://`; `http(s)://` and `file://` need none. Each request is retried
//! with exponential backoff on 5xx, timeouts and connection errors for up to
//! `RemoteOptions::retry_for`; 404 and 401/403 fail at once, naming the URL.

use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore};

use super::{ObjectInfo, RemoteOptions, Source};
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
    retry_for: Duration,
}

/// Opens `url`: makes its store, asks for the object's length and version.
pub(super) fn open(url: &str, options: &RemoteOptions) -> Result<(Box<dyn Source>, ObjectInfo)> {
    let (store, path) = make_store(url, options)?;
    let rt = runtime()?;
    let meta = with_retries(url, options.retry_for, "reading its metadata (HEAD)", || {
        rt.block_on(store.head(&path))
    })?;
    let version =
        meta.e_tag.clone().or(meta.version.clone()).unwrap_or_else(|| meta.last_modified.to_rfc3339());
    let source =
        ObjectSource { url: url.to_string(), store, path, e_tag: meta.e_tag, retry_for: options.retry_for };
    Ok((Box::new(source), ObjectInfo { len: meta.size, version }))
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
            let started = Instant::now();
            let mut attempt = 0u32;
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
                    Ok(b) => return Ok(b.to_vec()),
                    Err(e) if transient(&e) && started.elapsed() < self.retry_for => {
                        attempt += 1;
                        tokio::time::sleep(backoff(attempt)).await;
                    }
                    Err(e) => return Err(remote_error(&self.url, &what, e, attempt)),
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
    let got = with_retries(url, options.retry_for, "reading it", || {
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
pub(super) fn list_entries(url: &str, options: &RemoteOptions) -> Result<Vec<super::objects::Entry>> {
    let (store, prefix) = make_store(url, options)?;
    let rt = runtime()?;
    let metas = with_retries(url, options.retry_for, "listing it", || {
        rt.block_on(async {
            let mut out = Vec::new();
            let mut listing = store.list(Some(&prefix));
            while let Some(meta) = listing.next().await {
                out.push(meta?);
            }
            Ok(out)
        })
    })?;
    let mut entries: Vec<super::objects::Entry> = metas
        .into_iter()
        .filter_map(|meta| {
            let parts = meta.location.prefix_match(&prefix)?;
            let name = parts.map(|p| p.as_ref().to_string()).collect::<Vec<_>>().join("/");
            (!name.is_empty()).then(|| super::objects::Entry {
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
    match with_retries(url, options.retry_for, "deleting it", || rt.block_on(store.delete(&path))) {
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
    let started = Instant::now();
    let mut attempt = 0u32;
    loop {
        let opts = PutOptions { mode: mode.clone(), ..PutOptions::default() };
        match rt.block_on(store.put_opts(&path, payload.clone(), opts)) {
            Ok(_) => return Ok(true),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. })
                if if_absent =>
            {
                // Ours, from an earlier try whose answer was lost?
                return Ok(attempt > 0 && get_object(url, options)?.as_deref() == Some(bytes.as_slice()));
            }
            Err(e) if transient(&e) && started.elapsed() < options.retry_for => {
                attempt += 1;
                std::thread::sleep(backoff(attempt));
            }
            Err(e) => return Err(remote_error(url, "writing it", e, attempt)),
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
        let upload =
            store.put_multipart(&path).await.map_err(|e| remote_error(url, "starting an upload", e, 0))?;
        let mut writer = object_store::WriteMultipart::new_with_chunk_size(upload, PART);
        let mut buf = vec![0u8; PART];
        loop {
            let n = f.read(&mut buf).map_err(|e| Error::Io { path: file.to_path_buf(), source: e })?;
            if n == 0 {
                break;
            }
            writer.wait_for_capacity(4).await.map_err(|e| remote_error(url, "uploading a part", e, 0))?;
            writer.write(&buf[..n]);
        }
        writer.finish().await.map_err(|e| remote_error(url, "completing the upload", e, 0))?;
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

/// Errors worth another try: not a missing object, refused access, missing credentials, a
/// changed object or a bad request, which fail the same way every time.
fn transient(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    !no_credentials(e)
        && !matches!(
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
}

fn with_retries<T>(
    url: &str,
    retry_for: Duration,
    what: &str,
    mut f: impl FnMut() -> object_store::Result<T>,
) -> Result<T> {
    let started = Instant::now();
    let mut attempt = 0;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if transient(&e) && started.elapsed() < retry_for => {
                attempt += 1;
                std::thread::sleep(backoff(attempt));
            }
            Err(e) => return Err(remote_error(url, what, e, attempt)),
        }
    }
}

fn remote_error(url: &str, what: &str, e: object_store::Error, retries: u32) -> Error {
    use object_store::Error as E;
    match e {
        E::NotFound { .. } => Error::RemoteNotFound { url: url.to_string() },
        E::PermissionDenied { source, .. } | E::Unauthenticated { source, .. } => {
            Error::RemoteDenied {
                url: url.to_string(),
                what: format!(
                    "{}; check the credentials (AWS_*, GOOGLE_*, AZURE_* environment variables, ~/.aws/credentials)",
                    one_line(&*source)
                ),
            }
        }
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
        other => Error::Remote {
            url: url.to_string(),
            what: format!(
                "{what} failed{}: {}",
                if retries > 0 { format!(" after {retries} retries") } else { String::new() },
                one_line(&other)
            ),
        },
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
        .with_connect_timeout(Duration::from_secs(10).min(options.request_timeout));
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
