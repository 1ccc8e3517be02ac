//! Appending an ImageFolder (`ROOT/CLASS/IMAGE`) to a dataset directory, as `ds.append(FOLDER)`
//! and `beton append DIR FOLDER` do: its images are written into one new data file whose labels
//! are the dataset's for each class name ([`super::classes::plan`]; a class the dataset lacks is
//! added at the end of its list in the same version), with each image's path relative to `ROOT`
//! when the dataset has a path field, then appended as [`VersionedDataset::append_files`] does.

use std::path::{Path, PathBuf};

use beton_storage::{
    imagefolder, FieldSpec, FieldType, ImageOptions, ImageSource, SampleValue, WriteReport, Writer,
    WriterOptions,
};

use super::{classes, commit, VersionedDataset};
use crate::error::{Error, Result};

/// How [`VersionedDataset::append_imagefolder`] writes an ImageFolder.
#[derive(Debug, Clone)]
pub struct ImageFolderOptions {
    /// The dataset's image field (RGB or grey), which gets the images.
    pub image_field: String,
    /// The dataset's int field, which gets the labels.
    pub label_field: String,
    /// The text field that gets each image's path relative to the folder, when the dataset
    /// has it.
    pub path_field: String,
    /// How the images are encoded.
    pub image: ImageOptions,
    /// Threads, page size, seed, `skip_bad` and progress of the write (its room for splits is
    /// set to hold the class names).
    pub writer: WriterOptions,
}

impl Default for ImageFolderOptions {
    fn default() -> Self {
        ImageFolderOptions {
            image_field: "image".into(),
            label_field: "label".into(),
            path_field: "path".into(),
            image: ImageOptions::default(),
            writer: WriterOptions::default(),
        }
    }
}

/// What [`VersionedDataset::append_imagefolder`] did besides committing.
#[derive(Debug, Clone)]
pub struct ImageFolderReport {
    /// The data file's write (its path is gone: the file was moved into `data/`).
    pub write: WriteReport,
    /// Class names the folder added to the dataset's, in label order.
    pub added_classes: Vec<String>,
    /// The dataset's class names after the append.
    pub classes: Vec<String>,
    /// Whether each image's path went into the path field.
    pub with_path: bool,
}

impl VersionedDataset {
    /// Appends the images of the ImageFolder `root` as a new version: each image into the image
    /// field, the label of its class *by name* into the label field (a class the dataset has
    /// keeps its label; a new one is added at the end of the class names, in the same version),
    /// and, when the schema has a text field `options.path_field`, the image's path relative to
    /// `root`. Fields of the schema the folder does not fill are NULL in its rows, as in
    /// [`VersionedDataset::append_file`].
    ///
    /// A dataset without class names takes the folder's (labels numbered as FFCV's
    /// `from_image_folder` numbers them).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an image or label field the schema lacks or has with
    /// another type, a path field that is not text, a path that is not UTF-8; the storage errors
    /// of scanning and writing (a bad image names its file); [`Error::Conflict`] when another
    /// writer changed the class names meanwhile; as [`VersionedDataset::append_files`].
    /// Nothing is committed on error.
    pub fn append_imagefolder(
        &self,
        root: &Path,
        options: &ImageFolderOptions,
        message: &str,
    ) -> Result<(VersionedDataset, ImageFolderReport)> {
        let field_type = |name: &str| -> Result<Option<FieldType>> {
            self.manifest.schema.iter().find(|f| f.name == name).map(|f| f.field_type()).transpose()
        };
        let bad = |name: &str, why: String| Error::InvalidArgument {
            what: format!("appending ImageFolder {}: field '{name}'", root.display()),
            why,
        };
        let fields = self.manifest.schema.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ");
        let image = match field_type(&options.image_field)? {
            Some(FieldType::RgbImage) => FieldSpec::rgb_image(&options.image_field, options.image.clone()),
            Some(FieldType::GreyImage) => FieldSpec::grey_image(&options.image_field, options.image.clone()),
            Some(other) => {
                return Err(bad(&options.image_field, format!("is a {}, not an image field", other.name())))
            }
            None => return Err(bad(&options.image_field, format!("is not in the schema ({fields})"))),
        };
        match field_type(&options.label_field)? {
            Some(FieldType::Int) => {}
            Some(other) => {
                return Err(bad(
                    &options.label_field,
                    format!("is a {}, labels go into an int field", other.name()),
                ))
            }
            None => return Err(bad(&options.label_field, format!("is not in the schema ({fields})"))),
        }
        let with_path = match field_type(&options.path_field)? {
            Some(FieldType::Text) => true,
            Some(other) => {
                return Err(bad(&options.path_field, format!("is a {}; image paths are text", other.name())))
            }
            None => false,
        };
        let folder = imagefolder::scan(root)?;
        let rel_paths: Vec<String> = match with_path {
            true => folder
                .samples
                .iter()
                .map(|(path, _)| {
                    let rel = path.strip_prefix(root).unwrap_or(path);
                    rel.to_str().map(str::to_owned).ok_or_else(|| {
                        bad(
                            &options.path_field,
                            format!("{} is not valid UTF-8 (the field is text)", path.display()),
                        )
                    })
                })
                .collect::<Result<_>>()?,
            false => Vec::new(),
        };
        let plan = classes::plan(self.manifest.classes.as_deref(), &folder.classes);
        let mut specs = vec![image, FieldSpec::new(&options.label_field, FieldType::Int)];
        if with_path {
            specs.push(FieldSpec::new(&options.path_field, FieldType::Text));
        }
        let n = folder.samples.len() as u64;
        let writer_options = WriterOptions {
            // The default room for splits, plus the class names (twice: two slots).
            splits_reserve: Some(
                (64 << 10) + 2 * n + 2 * serde_json::to_vec(&plan.classes).map_or(0, |j| j.len()) as u64,
            ),
            ..options.writer.clone()
        };
        let tmp = self.dir().join(commit::TMP_DIR);
        std::fs::create_dir_all(&tmp).map_err(|e| commit::io(&tmp, e))?;
        let file: PathBuf = tmp.join(format!("imagefolder-{}.beton", commit::unique_name()));
        let written = Writer::new(&file, specs, writer_options).and_then(|w| {
            w.write_indexed(n, |i| {
                let (path, label) = &folder.samples[i as usize];
                let mut sample = vec![
                    SampleValue::Image(ImageSource::File(path.clone())),
                    SampleValue::Int(i64::from(plan.labels[*label as usize])),
                ];
                if let Some(rel) = rel_paths.get(i as usize) {
                    sample.push(SampleValue::Text(rel.clone()));
                }
                Ok(sample)
            })
        });
        let appended = written.map_err(Error::from).and_then(|write| {
            // The file says what its labels name, so that the append takes the new names.
            beton_storage::save_classes(&file, None, Some(&plan.classes))?;
            let version = self.append_files(std::slice::from_ref(&file), message)?;
            Ok((version, write))
        });
        // Linked into data/ (or uploaded) by now, or never to be.
        let _ = std::fs::remove_file(&file);
        let (version, write) = appended?;
        let report = ImageFolderReport {
            write,
            added_classes: plan.added,
            classes: version.manifest.classes.clone().unwrap_or_default(),
            with_path,
        };
        Ok((version, report))
    }
}
