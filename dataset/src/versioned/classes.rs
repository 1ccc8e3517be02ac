//! Class names as versioned metadata: label `k` of a version names `classes[k]` of its manifest
//! (docs/FORMAT.md §13). The list only grows at its end or has a name changed in place, so a
//! label never comes to name another class: appended data whose labels number another list is
//! refused or relabelled by name ([`plan`]), and an edit that would drop or reorder names is
//! refused. An old version keeps its own list.

use super::{Operation, Touches, VersionedDataset};
use crate::error::{Error, Result};

/// How an ImageFolder's labels map onto a dataset's class names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelPlan {
    /// The dataset label of each of the folder's classes (`labels[k]` for the folder's sorted
    /// class `k`).
    pub labels: Vec<u32>,
    /// The dataset's class names once the folder is appended: its own, then the folder's new
    /// ones in sorted order.
    pub classes: Vec<String>,
    /// The names the folder adds.
    pub added: Vec<String>,
}

/// The labels an ImageFolder with sorted classes `folder` gets in a dataset whose class names
/// are `current`: each class its position in `current` by name, classes `current` lacks
/// appended at its end. A dataset without class names takes the folder's (labels as FFCV's
/// `from_image_folder` numbers them).
pub fn plan(current: Option<&[String]>, folder: &[String]) -> LabelPlan {
    let Some(current) = current else {
        let labels = (0..folder.len() as u32).collect();
        return LabelPlan { labels, classes: folder.to_vec(), added: folder.to_vec() };
    };
    let mut classes = current.to_vec();
    let mut added = Vec::new();
    let labels = folder
        .iter()
        .map(|name| match classes.iter().position(|c| c == name) {
            Some(k) => k as u32,
            None => {
                classes.push(name.clone());
                added.push(name.clone());
                (classes.len() - 1) as u32
            }
        })
        .collect();
    LabelPlan { labels, classes, added }
}

/// The class names of a version made by appending data whose labels name `appended` to a
/// version whose labels name `current`: one list must begin with the other (the longer one is
/// kept); data without class names keeps the dataset's, a dataset without them takes the
/// data's. `what` names the appended data in errors.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the first label the two lists give different names.
pub fn merged(
    current: Option<&[String]>,
    appended: Option<&[String]>,
    what: &str,
) -> Result<Option<Vec<String>>> {
    let (Some(current), Some(appended)) = (current, appended) else {
        return Ok(current.or(appended).map(<[String]>::to_vec));
    };
    match current.iter().zip(appended).position(|(a, b)| a != b) {
        None => Ok(Some(if appended.len() > current.len() { appended } else { current }.to_vec())),
        Some(k) => Err(Error::InvalidArgument {
            what: what.to_string(),
            why: format!(
                "numbers its labels by other class names than the dataset's: its label {k} is \
                 '{}', the dataset's is '{}' (its classes {}, the dataset's {}); appending it \
                 would make its labels name other classes. Append the ImageFolder itself \
                 (ds.append(FOLDER), beton append DIR FOLDER), which labels by class name",
                appended[k],
                current[k],
                listed(appended),
                listed(current)
            ),
        }),
    }
}

/// Names as `[a, b, c]`, at most 8 of them.
fn listed(names: &[String]) -> String {
    let shown: Vec<&str> = names.iter().take(8).map(String::as_str).collect();
    let more = if names.len() > 8 { format!(", ... {} in all", names.len()) } else { String::new() };
    format!("[{}{more}]", shown.join(", "))
}

/// Fails with [`Error::InvalidArgument`] for a class name that is empty or holds a control
/// character (`what` names it).
fn check_name(name: &str, what: &str) -> Result<()> {
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(Error::InvalidArgument {
            what: what.to_string(),
            why: format!("{name:?} is not a class name (empty or a control character)"),
        });
    }
    Ok(())
}

impl VersionedDataset {
    /// Sets the class names to `classes`, as a new version: the current names must stay where
    /// they are (labels name classes by position), so `classes` is the current list with names
    /// added at its end, or any list for a dataset without class names. A list equal to the
    /// current one commits nothing and returns this version.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a list that drops, reorders or changes a current name
    /// (naming the first; [`VersionedDataset::rename_class`] renames), repeats a name or holds
    /// an empty one; [`Error::Conflict`] when another writer changed the class names meanwhile;
    /// as [`VersionedDataset::commit`].
    pub fn set_classes(&self, classes: &[String], message: &str) -> Result<VersionedDataset> {
        let bad = |why: String| Error::InvalidArgument { what: "set_classes".into(), why };
        for (k, name) in classes.iter().enumerate() {
            check_name(name, &format!("set_classes: class {k}"))?;
            if let Some(j) = classes[..k].iter().position(|c| c == name) {
                return Err(bad(format!("'{name}' is class {j} and class {k}: class names are unique")));
            }
        }
        let current = self.manifest.classes.as_deref().unwrap_or_default();
        if let Some(k) = (0..current.len()).find(|&k| classes.get(k) != Some(&current[k])) {
            let now = match classes.get(k) {
                Some(name) => format!("the new list has '{name}' there"),
                None => format!("the new list has {} names", classes.len()),
            };
            return Err(bad(format!(
                "class {k} is '{}' and {now}: labels name classes by position, so names cannot be \
                 dropped or reordered; add names at the end, or rename one with rename_class",
                current[k]
            )));
        }
        if self.manifest.classes.as_deref() == Some(classes) {
            return Ok(self.clone());
        }
        let added = classes[current.len()..].to_vec();
        let operation = Operation::Classes { added, renamed: Vec::new() };
        self.commit_classes(operation, message, classes.to_vec())
    }

    /// Renames class `old` to `new`, as a new version: every label that named `old` names `new`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a dataset without class names, an `old` it lacks, a `new`
    /// it has already or that is empty; [`Error::Conflict`] when another writer changed the
    /// class names meanwhile; as [`VersionedDataset::commit`].
    pub fn rename_class(&self, old: &str, new: &str, message: &str) -> Result<VersionedDataset> {
        let bad = |why: String| Error::InvalidArgument { what: format!("rename_class '{old}'"), why };
        check_name(new, &format!("rename_class '{old}'"))?;
        let Some(current) = self.manifest.classes.as_deref() else {
            return Err(bad("the dataset has no class names; set them with set_classes".into()));
        };
        let Some(k) = current.iter().position(|c| c == old) else {
            return Err(bad(format!("no such class; the classes are {}", listed(current))));
        };
        if let Some(j) = current.iter().position(|c| c == new) {
            return Err(bad(format!("'{new}' is class {j} already")));
        }
        let mut classes = current.to_vec();
        classes[k] = new.to_string();
        let operation = Operation::Classes { added: Vec::new(), renamed: vec![(old.into(), new.into())] };
        self.commit_classes(operation, message, classes)
    }

    /// Commits `operation`, which makes the class names `classes`, unless another writer
    /// changed the class names since this version.
    fn commit_classes(
        &self,
        operation: Operation,
        message: &str,
        classes: Vec<String>,
    ) -> Result<VersionedDataset> {
        let read = self.manifest.classes.clone();
        self.commit(operation, message, &Touches::default(), |base, new| {
            if base.classes != read {
                return Err(Error::Conflict {
                    version: base.version,
                    why: format!(
                        "version {} ({}) changed the class names",
                        base.version,
                        base.operation.name()
                    ),
                });
            }
            new.classes = Some(classes.clone());
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plan_labels_by_name_and_appends_new_names() {
        let current = names(&["bird", "cat", "cow"]);
        let p = plan(Some(&current), &names(&["cow", "dog"]));
        assert_eq!(p.labels, [2, 3]);
        assert_eq!(p.classes, names(&["bird", "cat", "cow", "dog"]));
        assert_eq!(p.added, names(&["dog"]));
        let p = plan(None, &names(&["cow", "dog"]));
        assert_eq!((p.labels, p.classes), (vec![0, 1], names(&["cow", "dog"])));
    }

    #[test]
    fn merged_keeps_the_longer_of_two_lists_one_beginning_the_other() {
        let abc = names(&["a", "b", "c"]);
        let ab = names(&["a", "b"]);
        assert_eq!(merged(Some(&ab), Some(&abc), "f").unwrap(), Some(abc.clone()));
        assert_eq!(merged(Some(&abc), Some(&ab), "f").unwrap(), Some(abc.clone()));
        assert_eq!(merged(None, Some(&ab), "f").unwrap(), Some(ab.clone()));
        assert_eq!(merged(Some(&ab), None, "f").unwrap(), Some(ab.clone()));
        assert_eq!(merged(None, None, "f").unwrap(), None);
        let e = merged(Some(&abc), Some(&names(&["a", "c"])), "file x.beton").unwrap_err().to_string();
        assert!(e.contains("file x.beton") && e.contains("label 1 is 'c', the dataset's is 'b'"), "{e}");
    }
}
