//! The ImageFolder layout (torchvision's `DatasetFolder`, which FFCV's `from_image_folder` uses):
//! one folder per class under a root, classes in sorted order, label = class index, the images of
//! a class found recursively and sorted by path.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// torchvision's `IMG_EXTENSIONS`.
const IMAGE_EXTENSIONS: &[&str] = &["jpg", "jpeg", "png", "ppm", "bmp", "pgm", "tif", "tiff", "webp"];
/// The subset beton decodes.
const DECODED_EXTENSIONS: &[&str] = &["jpg", "jpeg", "png"];

/// A scanned ImageFolder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFolder {
    /// Class names (folder names), sorted; a sample's label indexes this list.
    pub classes: Vec<String>,
    /// Every image with its label, in class order then path order.
    pub samples: Vec<(PathBuf, u32)>,
}

/// Scans `root`: sub-folders not starting with `.` are classes (sorted by name); files with an
/// image extension (case-insensitive) found recursively under a class are its samples, sorted by
/// path. Other files are ignored, as torchvision does.
///
/// # Errors
/// [`Error::Io`] for an unreadable folder; [`Error::InvalidArgument`] when there is no class or no
/// image at all, or an image in a format beton does not decode (it reads JPEG and PNG), naming
/// the file.
pub fn scan(root: &Path) -> Result<ImageFolder> {
    let mut classes = Vec::new();
    for entry in std::fs::read_dir(root).map_err(|e| Error::io(root, e))? {
        let entry = entry.map_err(|e| Error::io(root, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir =
            entry.file_type().map_err(|e| Error::io(entry.path(), e))?.is_dir() || entry.path().is_dir();
        if is_dir && !name.starts_with('.') {
            classes.push(name);
        }
    }
    classes.sort();
    if classes.is_empty() {
        return Err(invalid(root, "has no class folders (expected ROOT/CLASS/IMAGE files)".into()));
    }
    let mut samples = Vec::new();
    for (label, class) in classes.iter().enumerate() {
        let mut files = Vec::new();
        collect_images(&root.join(class), &mut files)?;
        files.sort();
        samples.extend(files.into_iter().map(|p| (p, label as u32)));
    }
    if samples.is_empty() {
        return Err(invalid(root, format!("has {} class folders but no images", classes.len())));
    }
    Ok(ImageFolder { classes, samples })
}

fn invalid(path: &Path, why: String) -> Error {
    Error::InvalidArgument { what: format!("image folder {}", path.display()), why }
}

fn collect_images(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        if path.is_dir() {
            collect_images(&path, out)?;
            continue;
        }
        let ext = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        if DECODED_EXTENSIONS.contains(&ext.as_str()) {
            out.push(path);
        } else if IMAGE_EXTENSIONS.contains(&ext.as_str()) {
            return Err(invalid(
                &path,
                format!("is a .{ext} image; beton reads JPEG and PNG (convert it, or remove it)"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_sorted_images_recursive_others_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for p in ["b/x.JPG", "b/sub/a.png", "a/z.jpeg", "a/notes.txt", ".hidden/q.jpg"] {
            let path = root.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"").unwrap();
        }
        std::fs::write(root.join("top.jpg"), b"").unwrap();
        let f = scan(root).unwrap();
        assert_eq!(f.classes, vec!["a", "b"]);
        let rel: Vec<_> =
            f.samples.iter().map(|(p, l)| (p.strip_prefix(root).unwrap().to_path_buf(), *l)).collect();
        assert_eq!(rel, vec![("a/z.jpeg".into(), 0), ("b/sub/a.png".into(), 1), ("b/x.JPG".into(), 1)]);
    }

    #[test]
    fn unsupported_formats_and_empty_folders_are_named() {
        let dir = tempfile::tempdir().unwrap();
        assert!(scan(dir.path()).unwrap_err().to_string().contains("no class folders"));
        std::fs::create_dir(dir.path().join("c")).unwrap();
        assert!(scan(dir.path()).unwrap_err().to_string().contains("no images"));
        std::fs::write(dir.path().join("c/x.webp"), b"").unwrap();
        let err = scan(dir.path()).unwrap_err().to_string();
        assert!(err.contains("x.webp") && err.contains("JPEG and PNG"), "{err}");
        assert!(scan(&dir.path().join("missing")).is_err());
    }
}
