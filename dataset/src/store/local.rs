//! A dataset directory on a local disk: the directory is the store.

use std::path::{Path, PathBuf};

use super::durable::{crash_point, sync_dir, temp_file, write_all_synced};
use super::{Entry, Store};
use crate::error::{io, Error, Result};

/// A dataset directory on a local disk; see the [module docs](super).
#[derive(Debug, Clone)]
pub struct LocalStore {
    dir: PathBuf,
}

impl LocalStore {
    /// The store of the dataset directory `dir` (which need not exist yet).
    pub fn new(dir: &Path) -> LocalStore {
        LocalStore { dir: dir.to_path_buf() }
    }

    /// The entries of `folder`, with their names; none when it does not exist.
    fn entries(&self, folder: &str) -> Result<Vec<std::fs::DirEntry>> {
        let path = self.dir.join(folder);
        let read = match std::fs::read_dir(&path) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&path, e)),
        };
        read.map(|e| e.map_err(|e| io(&path, e))).collect()
    }
}

impl Store for LocalStore {
    fn root(&self) -> &Path {
        &self.dir
    }

    fn url(&self) -> Option<&str> {
        None
    }

    fn fetch(&self, _rel: &str) -> Result<bool> {
        Ok(true)
    }

    fn data_file(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    fn list(&self, folder: &str) -> Result<Vec<String>> {
        let mut names: Vec<String> =
            self.entries(folder)?.iter().filter_map(|e| e.file_name().to_str().map(str::to_string)).collect();
        names.sort();
        Ok(names)
    }

    fn list_entries(&self, folder: &str) -> Result<Vec<Entry>> {
        let mut out = Vec::new();
        for entry in self.entries(folder)? {
            let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_file() {
                let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                out.push(Entry { name: format!("{folder}/{name}"), size: meta.len(), modified });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn read_fresh(&self, rel: &str) -> Result<Option<Vec<u8>>> {
        let path = self.dir.join(rel);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path, e)),
        }
    }

    fn put_new(&self, rel: &str, bytes: &[u8]) -> Result<bool> {
        let target = self.dir.join(rel);
        let folder = target.parent().unwrap_or(&self.dir).to_path_buf();
        std::fs::create_dir_all(&folder).map_err(|e| io(&folder, e))?;
        let tmp = temp_file(&self.dir)?;
        crash_point();
        write_all_synced(tmp.as_file(), bytes).map_err(|e| io(tmp.path(), e))?;
        crash_point();
        // link(2) creates the name only if it does not exist: the no-overwrite commit point.
        // The bytes are already durable, so the name never shows a partial file.
        match std::fs::hard_link(tmp.path(), &target) {
            Ok(()) => {
                crash_point();
                sync_dir(&folder);
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => Err(Error::InvalidArgument {
                what: format!("dataset directory {}", self.dir.display()),
                why: "its file system has no hard links, which commits need (no-overwrite publication)"
                    .into(),
            }),
            Err(e) => Err(io(&target, e)),
        }
    }

    fn put(&self, rel: &str, bytes: &[u8]) -> Result<()> {
        let target = self.dir.join(rel);
        let folder = target.parent().unwrap_or(&self.dir).to_path_buf();
        std::fs::create_dir_all(&folder).map_err(|e| io(&folder, e))?;
        let tmp = temp_file(&self.dir)?;
        write_all_synced(tmp.as_file(), bytes).map_err(|e| io(tmp.path(), e))?;
        tmp.persist(&target).map_err(|e| io(&target, e.error))?;
        sync_dir(&folder);
        Ok(())
    }

    fn remove(&self, rel: &str) -> Result<()> {
        let path = self.dir.join(rel);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&path, e)),
            _ => {
                sync_dir(path.parent().unwrap_or(&self.dir));
                Ok(())
            }
        }
    }

    fn upload_missing(&self, _rels: &[&str]) -> Result<()> {
        Ok(())
    }

    fn put_back<'a>(&self, _rels: &[&'a str]) -> Result<Option<&'a str>> {
        Ok(None)
    }

    fn published(&self, _rel: &str, _bytes: &[u8]) -> Result<()> {
        Ok(())
    }

    fn in_store(&self, _file: &Path) -> Option<String> {
        None
    }
}
