//! The ImageFolder layout (torchvision's `DatasetFolder`, which FFCV's `from_image_folder` uses):
//! one folder per class under a root, classes in sorted order, label = class index, the images of
//! a class found recursively, in torchvision's order (folders sorted by path, then files sorted by
//! name within each folder).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// torchvision's `IMG_EXTENSIONS`.
const IMAGE_EXTENSIONS: &[&str] =
    &[".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"];
/// The subset beton decodes.
const DECODED_EXTENSIONS: &[&str] = &[".jpg", ".jpeg", ".png"];

/// A scanned ImageFolder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFolder {
    /// Class names (folder names), sorted; a sample's label indexes this list.
    pub classes: Vec<String>,
    /// Every image (`root/class/...`) with its label, in class order, then in torchvision's order
    /// within a class.
    pub samples: Vec<(PathBuf, u32)>,
}

/// Scans `root` with torchvision's rules: sub-folders of `root` are the classes, sorted by name
/// (beton also skips hidden ones, whose names start with `.`); a class's samples are the files
/// under it, found recursively (following symbolic links) whose name ends, case-insensitively,
/// with one of torchvision's image extensions, in torchvision's order: folders sorted by path,
/// files sorted by name within a folder. Other files are ignored, as torchvision does.
///
/// The order of samples and the labels are then those FFCV's `from_image_folder` writes. A
/// class with no images is allowed (its label is simply unused).
///
/// # Errors
/// [`Error::Io`] for an unreadable folder; [`Error::InvalidArgument`] when there is no class or no
/// image at all, or an image in a format beton does not decode (it reads JPEG and PNG), naming
/// the file.
pub fn scan(root: &Path) -> Result<ImageFolder> {
    let mut classes = Vec::new();
    for entry in std::fs::read_dir(root).map_err(|e| Error::io(root, e))? {
        let entry = entry.map_err(|e| Error::io(root, e))?;
        let path = entry.path();
        let name = entry.file_name();
        if bytes(&name).starts_with(b".") || !path.is_dir() {
            continue;
        }
        match name.into_string() {
            Ok(name) => classes.push(name),
            Err(_) => return Err(invalid(&path, "is a class folder whose name is not valid UTF-8".into())),
        }
    }
    classes.sort();
    if classes.is_empty() {
        return Err(invalid(root, "has no class folders (expected ROOT/CLASS/IMAGE files)".into()));
    }
    let mut samples = Vec::new();
    for (label, class) in classes.iter().enumerate() {
        let mut folders = Vec::new();
        walk(&root.join(class), &mut Vec::new(), &mut folders)?;
        // torchvision: `for root, _, fnames in sorted(os.walk(dir)): for fname in sorted(fnames)`.
        folders.sort_by(|a, b| bytes(a.0.as_os_str()).cmp(bytes(b.0.as_os_str())));
        for (folder, mut names) in folders {
            names.sort_by(|a, b| bytes(a).cmp(bytes(b)));
            samples.extend(names.into_iter().map(|name| (folder.join(name), label as u32)));
        }
    }
    if samples.is_empty() {
        return Err(invalid(root, format!("has {} class folders but no images", classes.len())));
    }
    Ok(ImageFolder { classes, samples })
}

fn invalid(path: &Path, why: String) -> Error {
    Error::InvalidArgument { what: format!("image folder {}", path.display()), why }
}

fn bytes(s: &OsStr) -> &[u8] {
    s.as_encoded_bytes()
}

/// The image extension `name` ends with (lower case, with the dot), if any; torchvision tests
/// `filename.lower().endswith(IMG_EXTENSIONS)`, so `.JPG` and a bare `.png` count.
fn image_extension(name: &OsStr) -> Option<&'static str> {
    let lower = bytes(name).to_ascii_lowercase();
    IMAGE_EXTENSIONS.iter().copied().find(|ext| lower.ends_with(ext.as_bytes()))
}

/// Appends `(dir, image file names)` for `dir` and every folder below it. `ancestors` holds the
/// canonical paths of the folders being walked, so that a symbolic link back up is not followed
/// forever.
fn walk(dir: &Path, ancestors: &mut Vec<PathBuf>, out: &mut Vec<(PathBuf, Vec<OsString>)>) -> Result<()> {
    let canonical = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    if ancestors.contains(&canonical) {
        return Ok(());
    }
    ancestors.push(canonical);
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        if path.is_dir() {
            walk(&path, ancestors, out)?;
            continue;
        }
        let name = entry.file_name();
        match image_extension(&name) {
            Some(ext) if DECODED_EXTENSIONS.contains(&ext) => names.push(name),
            Some(ext) => {
                return Err(Error::InvalidArgument {
                    what: format!("image {}", path.display()),
                    why: format!(
                        "unsupported image format {ext}: beton reads JPEG and PNG (convert it, or remove it)"
                    ),
                })
            }
            None => {}
        }
    }
    ancestors.pop();
    out.push((dir.to_path_buf(), names));
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
        // torchvision's order: the files of `b` before those of `b/sub`.
        assert_eq!(rel, vec![("a/z.jpeg".into(), 0), ("b/x.JPG".into(), 1), ("b/sub/a.png".into(), 1)]);
    }

    fn touch(root: &Path, paths: &[&str]) {
        for p in paths {
            let path = root.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"").unwrap();
        }
    }

    fn relative(f: &ImageFolder, root: &Path) -> Vec<String> {
        f.samples.iter().map(|(p, _)| p.strip_prefix(root).unwrap().to_str().unwrap().to_string()).collect()
    }

    #[test]
    fn order_is_torchvisions_sorted_walk() {
        // sorted(os.walk(c)) sorts folders by their path string ("c" < "c/a" < "c/a b" < "c/a-b"
        // < "c/a/x" by code point), then each folder's files by name.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(
            root,
            &["c/b.png", "c/a.png", "c/a/x/1.png", "c/a/b.png", "c/a b/1.png", "c/a-b/1.png", "c/.png"],
        );
        touch(root, &["c/B.PNG", "c/.hidden/h.jpg", "c/readme.md", "c/a.png.txt"]);
        let f = scan(root).unwrap();
        assert_eq!(f.classes, ["c"]);
        let expected = [
            "c/.png",
            "c/B.PNG",
            "c/a.png",
            "c/b.png",
            "c/.hidden/h.jpg",
            "c/a/b.png",
            "c/a b/1.png",
            "c/a-b/1.png",
            "c/a/x/1.png",
        ];
        assert_eq!(relative(&f, root), expected);
    }

    #[test]
    fn empty_classes_keep_their_label() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), &["b/1.jpg"]);
        std::fs::create_dir(dir.path().join("a")).unwrap();
        let f = scan(dir.path()).unwrap();
        assert_eq!(f.classes, ["a", "b"]);
        assert_eq!(f.samples[0].1, 1);
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_followed_but_loops_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        touch(&root, &["c/1.png"]);
        touch(dir.path(), &["elsewhere/2.png"]);
        std::os::unix::fs::symlink(&root, root.join("c/up")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), root.join("c/linked")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), root.join("d")).unwrap();
        let f = scan(&root).unwrap();
        assert_eq!(f.classes, ["c", "d"]);
        // `c/up` leads back to the root: its `c` is an ancestor and is not walked again, but its `d` is.
        assert_eq!(relative(&f, &root), ["c/1.png", "c/linked/2.png", "c/up/d/2.png", "d/2.png"]);
    }

    #[test]
    fn unsupported_formats_and_empty_folders_are_named() {
        let dir = tempfile::tempdir().unwrap();
        assert!(scan(dir.path()).unwrap_err().to_string().contains("no class folders"));
        std::fs::create_dir(dir.path().join("c")).unwrap();
        assert!(scan(dir.path()).unwrap_err().to_string().contains("no images"));
        std::fs::write(dir.path().join("c/x.webp"), b"").unwrap();
        let err = scan(dir.path()).unwrap_err().to_string();
        assert!(err.contains("x.webp") && err.contains("unsupported image format .webp"), "{err}");
        assert!(err.contains("beton reads JPEG and PNG"), "{err}");
        assert!(scan(&dir.path().join("missing")).is_err());
    }
}
