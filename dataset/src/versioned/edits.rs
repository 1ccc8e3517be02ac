//! The edits of a version's cells and rows: set values (`update_rows`), add and drop columns,
//! save splits, delete rows. Each commits a new version through [`VersionedDataset::commit`].

use std::collections::BTreeMap;

use arrow_array::{Array, ArrayRef};
use beton_storage::FieldType;

use super::*;
use crate::error::{Error, Result};
use crate::index_set::IndexSet;

impl VersionedDataset {
    /// Sets field values of the rows at `rows` (indices in this version, ascending): each array
    /// has one value per row, or one value for all, of a type the field takes as it is (an int
    /// field takes integers, not `2.0`: the rules are `fit.rs`'s).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown field, values of the wrong count, with nulls
    /// or of a type the field does not take (naming the field, the type and the first row that
    /// does not fit), a row past the end; as [`VersionedDataset::commit`]. Nothing is committed
    /// on error.
    pub fn update_rows(
        &self,
        rows: &IndexSet,
        values: Vec<(String, ArrayRef)>,
        message: &str,
    ) -> Result<VersionedDataset> {
        self.update_rows_with(rows, values, None, None, message)
    }

    /// [`VersionedDataset::update_rows`], naming where the values come from: `exprs`, the
    /// expression each field's values were computed by (for messages), and `predicate`, the
    /// rows' predicate (recorded in the version's operation). beton-query's SQL `update` calls
    /// this.
    ///
    /// # Errors
    /// As [`VersionedDataset::update_rows`].
    pub fn update_rows_with(
        &self,
        rows: &IndexSet,
        values: Vec<(String, ArrayRef)>,
        exprs: Option<&[(String, String)]>,
        predicate: Option<&str>,
        message: &str,
    ) -> Result<VersionedDataset> {
        let _edit = lock::edit(self.dir())?;
        manifest::room_for_version(&self.manifest)?;
        self.check_indices(rows, "rows to update")?;
        let mut typed = Vec::new();
        for (k, (name, array)) in values.into_iter().enumerate() {
            let ty = self.column_field(&name)?;
            let source = match exprs.and_then(|e| e.get(k)) {
                Some((_, expr)) => format!("update: expression '{expr}'"),
                None => "update_rows: values".to_string(),
            };
            let target = fit::Target { source: &source, field: &name, ty: &ty, rows: Some(rows.as_slice()) };
            let array = fit::fit(&target, &array, rows.len())?;
            typed.push((name, ty, array));
        }
        let view = self.view()?;
        let mut files: Vec<(u64, ColumnFile)> = Vec::new();
        let mut touches = Touches::default();
        let mut done = 0usize;
        for (k, file_rows) in view.file_rows(rows) {
            let fragment = &self.manifest.fragments[k];
            // A patch: the rows changed and their new values, not the whole column.
            let positions: Vec<u64> = (done..done + file_rows.len()).map(|j| j as u64).collect();
            let mut columns: Vec<(String, ArrayRef)> = vec![(
                view::PATCH_ROWS.to_string(),
                std::sync::Arc::new(arrow_array::UInt64Array::from(file_rows.clone())),
            )];
            for (name, _, array) in &typed {
                let values = match array.len() {
                    1 => arrow_select::interleave::interleave(
                        &[array.as_ref()],
                        &vec![(0, 0); file_rows.len()],
                    )?,
                    _ => arrow_select::take::take(
                        array.as_ref(),
                        &arrow_array::UInt64Array::from(positions.clone()),
                        None,
                    )?,
                };
                columns.push((name.clone(), values));
                touches.cells.push((fragment.id, name.clone()));
            }
            done += file_rows.len();
            let mut file = view::write_column_file(self.dir(), columns)?;
            file.fields.retain(|f| f != view::PATCH_ROWS);
            files.push((fragment.id, file));
        }
        let operation = Operation::Update {
            predicate: predicate.map(str::to_string),
            fields: typed.iter().map(|(n, _, _)| n.clone()).collect(),
            rows: rows.len() as u64,
        };
        self.commit(operation, message, &touches, |_, new| {
            for (id, file) in &files {
                let f = new.fragments.find_mut(|f| f.id == *id).expect("checked by Touches");
                f.columns.push(file.clone());
            }
            Ok(())
        })
    }

    /// The type of schema field `name`, which column files can hold.
    pub(super) fn column_field(&self, name: &str) -> Result<FieldType> {
        self.schema_field(name)?.field_type()
    }

    /// Schema field `name`.
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`] listing the schema's fields.
    pub(super) fn schema_field(&self, name: &str) -> Result<&SchemaField> {
        let schema = &self.manifest.schema;
        schema.iter().find(|f| f.name == name).ok_or_else(|| Error::NoSuchColumn {
            name: name.to_string(),
            available: schema.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// Adds field `name` of type `ty` with one value per row of this version (in index order),
    /// as a new version: the values go to a column file per data file.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a name in use, not 1–16 ASCII bytes, or one SQL would
    /// resolve to another column (`index`, `row_id`, `image.width`, any of them in another
    /// case); values of the wrong count, with nulls or of a type the field does not take as it
    /// is (the rules of [`VersionedDataset::update_rows`]); as [`VersionedDataset::commit`].
    pub fn add_column(
        &self,
        name: &str,
        ty: &FieldType,
        values: &ArrayRef,
        message: &str,
    ) -> Result<VersionedDataset> {
        fit::check_new_column(&self.manifest.schema, name, ty)?;
        let target = fit::Target { source: "add_column: values", field: name, ty, rows: None };
        let values = fit::fit(&target, values, self.num_rows() as usize)?;
        let _edit = lock::edit(self.dir())?;
        manifest::room_for_version(&self.manifest)?;
        let default = default_value(ty);
        let mut files = Vec::new();
        let mut first = 0usize;
        for f in &self.manifest.fragments {
            let deleted = self.fragment_deletions(f)?;
            let mut deleted = deleted.iter().peekable();
            let mut picks = Vec::with_capacity(f.num_rows as usize);
            for r in 0..f.num_rows {
                if deleted.next_if_eq(&r).is_some() {
                    picks.push((1, 0));
                } else {
                    picks.push((0, first));
                    first += 1;
                }
            }
            let column = arrow_select::interleave::interleave(&[values.as_ref(), default.as_ref()], &picks)?;
            files.push((f.id, view::write_column_file(self.dir(), vec![(name.to_string(), column)])?));
        }
        let touches = Touches { everything: true, ..Touches::default() };
        let field = SchemaField::new(name, ty);
        self.commit(Operation::AddColumn { name: name.to_string() }, message, &touches, |_, new| {
            new.schema.push(field.clone());
            for (id, file) in &files {
                let f = new.fragments.find_mut(|f| f.id == *id).expect("checked by Touches");
                f.columns.push(file.clone());
            }
            Ok(())
        })
    }

    /// Checks that a field `name` of type `ty` could be added: the checks of
    /// [`VersionedDataset::add_column`] before it reads its values.
    ///
    /// # Errors
    /// As [`VersionedDataset::add_column`], for the name.
    pub fn check_new_column(&self, name: &str, ty: &FieldType) -> Result<()> {
        fit::check_new_column(&self.manifest.schema, name, ty)
    }

    /// Removes field `name` from the schema, as a new version (its bytes stay in the data files;
    /// older versions still show it).
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`]; as [`VersionedDataset::commit`].
    pub fn drop_column(&self, name: &str, message: &str) -> Result<VersionedDataset> {
        self.schema_field(name)?;
        let touches = Touches { everything: true, ..Touches::default() };
        self.commit(Operation::DropColumn { name: name.to_string() }, message, &touches, |_, new| {
            drop_field(new, name);
            Ok(())
        })
    }

    /// Saves named splits `save` (sets of this version's indices; replacing splits of the same
    /// name) and removes splits `remove`, as a new version. Splits are stored as row ids, so
    /// they keep their rows through later edits.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad name or an index past the end; [`Error::NoSuchSplit`]
    /// for a split to remove that does not exist; as [`VersionedDataset::commit`].
    pub fn save_splits(
        &self,
        save: &BTreeMap<String, IndexSet>,
        remove: &[String],
        message: &str,
    ) -> Result<VersionedDataset> {
        for name in remove {
            if !self.manifest.splits.contains_key(name) {
                return Err(crate::splits::no_such_split(name, self.manifest.splits.keys()));
            }
        }
        let _edit = lock::edit(self.dir())?;
        manifest::room_for_version(&self.manifest)?;
        let ids = {
            let view = self.view()?;
            let table = view.table()?;
            table.row_ids()?
        };
        let mut files = BTreeMap::new();
        for (name, set) in save {
            crate::splits::check_name(name)?;
            self.check_indices(set, &format!("split '{name}'"))?;
            let mut row_ids: Vec<u64> = set.iter().map(|i| ids[i as usize]).collect();
            row_ids.sort_unstable();
            files.insert(
                name.clone(),
                write_index_file(self.dir(), SPLITS_DIR, &IndexSet::from_sorted(row_ids)?)?,
            );
        }
        let operation = Operation::Splits { saved: save.keys().cloned().collect(), removed: remove.to_vec() };
        self.commit(operation, message, &Touches::default(), |_, new| {
            for name in remove {
                new.splits.remove(name);
            }
            new.splits.extend(files.clone());
            Ok(())
        })
    }

    /// Fails with [`Error::InvalidArgument`] naming `what` when `rows` holds an index past the
    /// end of this version.
    pub(super) fn check_indices(&self, rows: &IndexSet, what: &str) -> Result<()> {
        check_indices(rows, what, self.version(), self.num_rows())
    }

    /// Deletes the rows at `positions` (indices in this version), as a new version.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a position past the end; as [`VersionedDataset::commit`].
    pub fn delete(
        &self,
        positions: &IndexSet,
        predicate: Option<&str>,
        message: &str,
    ) -> Result<VersionedDataset> {
        self.check_indices(positions, "rows to delete")?;
        // Positions → rows of each data file (stable: data files never change).
        let per_fragment: Vec<(u64, Vec<u64>)> = self
            .view()?
            .file_rows(positions)
            .into_iter()
            .map(|(k, rows)| (self.manifest.fragments[k].id, rows))
            .collect();
        let touches =
            Touches { deletes_in: per_fragment.iter().map(|(id, _)| *id).collect(), ..Touches::default() };
        let operation =
            Operation::Delete { predicate: predicate.map(str::to_string), rows: positions.len() as u64 };
        let store = &*self.store;
        self.commit(operation, message, &touches, |_, new| {
            for (id, rows) in &per_fragment {
                let f = new.fragments.find_mut(|f| f.id == *id).expect("checked by Touches");
                let set = fragment_deletions(store, f)?.union(&IndexSet::from_sorted(rows.clone())?);
                f.deletions = Some(write_index_file(store.root(), DELETIONS_DIR, &set)?);
            }
            Ok(())
        })
    }
}

/// Removes field `name` from `m`'s schema and from its column files, so that a column of this
/// name added later does not pick up these values (only the fragments with such a column file
/// change, and are copied). A drop and a merge that drops a column share it.
pub(super) fn drop_field(m: &mut Manifest, name: &str) {
    m.schema.retain(|f| f.name != name);
    for k in 0..m.fragments.len() {
        if !m.fragments[k].columns.iter().any(|c| c.fields.iter().any(|n| n == name)) {
            continue;
        }
        let f = &mut m.fragments[k];
        for c in &mut f.columns {
            c.fields.retain(|n| n != name);
        }
        f.columns.retain(|c| !c.fields.is_empty());
    }
}

/// The value deleted rows get in an added column (never visible): the type's zero
/// ([`FieldKind::zero`](beton_storage::FieldKind::zero)), but 0.0 for floats and an empty raw
/// image for images.
pub(super) fn default_value(ty: &FieldType) -> ArrayRef {
    let mut b = values::ValuesBuilder::new(ty);
    match ty.kind().value_kind() {
        beton_storage::ValueKind::Float => {
            return std::sync::Arc::new(arrow_array::Float64Array::from(vec![0.0]))
        }
        beton_storage::ValueKind::Image => {
            let empty = beton_storage::ImageRef {
                mode: beton_storage::ImageMode::Raw,
                width: 0,
                height: 0,
                channels: beton_storage::Channels::Rgb,
                data: &[],
            };
            b.push(&beton_storage::Value::Image(empty)).expect("an image value for an image field");
        }
        _ => {
            let (zero, _) = ty.kind().zero();
            b.encode(zero, &beton_storage::ImageOptions::default(), 0.0)
                .expect("a type's zero is one of its values");
        }
    }
    b.finish()
}

/// [`Error::InvalidArgument`] naming `what` when an index of `rows` is past the `num_rows` of
/// `version`.
pub(super) fn check_indices(rows: &IndexSet, what: &str, version: u64, num_rows: u64) -> Result<()> {
    match rows.max_id().filter(|&m| m >= num_rows) {
        Some(max) => Err(Error::InvalidArgument {
            what: what.to_string(),
            why: format!("index {max} is past the end of version {version} ({num_rows} rows)"),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, LargeBinaryArray};
    use beton_storage::{ArraySpec, CustomField, DType, Slot};

    use super::*;

    #[test]
    fn deleted_rows_get_zeros_of_the_right_size() {
        let spec = ArraySpec::new(DType::parse("<f4").unwrap(), vec![2, 3]).unwrap();
        let binary =
            |n: usize| -> ArrayRef { Arc::new(LargeBinaryArray::from(vec![vec![0u8; n].as_slice()])) };
        let custom = CustomField { slot: Slot { size: 6, align: 1 }, arguments: Box::new([0; 1024]) };
        let cases: Vec<(FieldType, ArrayRef)> = vec![
            (FieldType::Int, Arc::new(arrow_array::Int64Array::from(vec![0]))),
            (FieldType::Float, Arc::new(arrow_array::Float64Array::from(vec![0.0]))),
            (FieldType::Bool, Arc::new(arrow_array::BooleanArray::from(vec![false]))),
            (FieldType::Text, Arc::new(arrow_array::StringArray::from(vec![""]))),
            (FieldType::Json, Arc::new(arrow_array::LargeStringArray::from(vec!["null"]))),
            (FieldType::Bytes, binary(0)),
            (FieldType::Array(DType::parse("<i2").unwrap()), binary(0)),
            (FieldType::NDArray(spec.clone()), binary(24)),
            (FieldType::TorchTensor(spec), binary(24)),
            (FieldType::Custom(custom), binary(6)),
        ];
        for (ty, want) in cases {
            assert_eq!(&*default_value(&ty), &*want as &dyn Array, "{ty:?}");
        }
        for ty in [FieldType::RgbImage, FieldType::GreyImage] {
            let array = default_value(&ty);
            let cell = values::cell(&array, &ty, 0).unwrap().unwrap();
            let img = cell.as_image().unwrap();
            assert_eq!(
                (img.mode, img.width, img.height, img.data),
                (beton_storage::ImageMode::Raw, 0, 0, &[][..])
            );
        }
    }
}
