//! Edits store what was asked or refuse (issue 36): appending an ImageFolder labels by class
//! name and keeps paths, class names are versioned, updates refuse values that do not fit their
//! field (a differential test against a plain model), new columns may not shadow derived ones.

use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray, UInt64Array};
use beton_query::versioned::{ImageFolderOptions, VersionRef, VersionedDataset};
use beton_query::IndexSet;
use beton_query::SqlEdits;
use beton_storage::{FieldType, SampleValue};
use beton_testkit::{image_folder, schema};
use proptest::prelude::*;

/// Every row's (label, path) in version `v`.
fn labels_and_paths(v: &VersionedDataset) -> Vec<(i64, String)> {
    let view = v.view().unwrap();
    let table = view.table().unwrap();
    let batch = beton_query::query(&table, "SELECT label, path FROM samples").unwrap();
    let labels = batch.column(0).as_primitive::<Int64Type>();
    let paths = batch.column(1).as_string::<i32>();
    (0..batch.num_rows()).map(|i| (labels.value(i), paths.value(i).to_string())).collect()
}

fn small_images() -> ImageFolderOptions {
    let mut options = ImageFolderOptions::default();
    options.image.max_resolution = Some(16);
    options.writer.num_threads = 1;
    options
}

#[test]
fn appending_an_imagefolder_labels_by_class_name_and_keeps_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, more) = (tmp.path().join("base"), tmp.path().join("more"));
    image_folder(&base, &["bird", "cat", "cow"], 2);
    image_folder(&more, &["cow", "dog"], 3);
    let schema = [
        ("image".to_string(), FieldType::RgbImage),
        ("label".to_string(), FieldType::Int),
        ("path".to_string(), FieldType::Text),
    ];
    let dir = tmp.path().join("ds");
    let empty = VersionedDataset::create(&dir, &schema).unwrap();
    // A dataset without class names takes the folder's.
    let (v2, report) = empty.append_imagefolder(&base, &small_images(), "base").unwrap();
    assert_eq!(v2.manifest().classes.as_deref().unwrap(), ["bird", "cat", "cow"]);
    assert!(report.with_path && report.write.num_samples == 6);

    let (v3, report) = v2.append_imagefolder(&more, &small_images(), "more").unwrap();
    assert_eq!(report.added_classes, ["dog"]);
    let classes = v3.manifest().classes.clone().unwrap();
    assert_eq!(classes, ["bird", "cat", "cow", "dog"]);
    let rows = labels_and_paths(&v3);
    assert_eq!(rows.len(), 12);
    for (label, path) in &rows {
        // Every row's label names its folder, and its path is relative to the appended folder.
        let folder = path.split('/').next().unwrap();
        assert_eq!(classes[*label as usize], folder, "{path}");
        assert!(path.ends_with(".jpg") && !path.starts_with('/'), "{path}");
    }
    assert_eq!(rows[6..].iter().map(|r| r.0).collect::<Vec<_>>(), [2, 2, 2, 3, 3, 3]);
    // The older version keeps its class names.
    let old = VersionedDataset::open(&dir, VersionRef::Number(2)).unwrap();
    assert_eq!(old.manifest().classes.as_deref().unwrap(), ["bird", "cat", "cow"]);

    // Without a path field, no path; an image field the schema lacks is refused up front.
    let plain = VersionedDataset::create(&tmp.path().join("plain"), &schema[..2]).unwrap();
    let (p2, report) = plain.append_imagefolder(&more, &small_images(), "").unwrap();
    assert!(!report.with_path && p2.num_rows() == 6);
    let options = ImageFolderOptions { image_field: "img".into(), ..small_images() };
    let e = p2.append_imagefolder(&more, &options, "").unwrap_err().to_string();
    assert!(e.contains("field 'img'") && e.contains("not in the schema"), "{e}");
    assert_eq!(VersionedDataset::open(&tmp.path().join("plain"), VersionRef::Latest).unwrap().version(), 2);
}

/// A `.beton` file of labels 0..n with class names `classes` stored in it.
fn labelled_file(path: &Path, n: u64, classes: &[&str]) {
    beton_testkit::write(path, schema("label:int"), n, |i| {
        vec![SampleValue::Int(i as i64 % classes.len() as i64)]
    });
    let classes: Vec<String> = classes.iter().map(|c| c.to_string()).collect();
    beton_storage::save_classes(path, None, Some(&classes)).unwrap();
}

#[test]
fn class_names_are_versioned_and_only_grow_or_rename() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a.beton");
    labelled_file(&file, 6, &["bird", "cat"]);
    let dir = tmp.path().join("ds");
    let v1 = VersionedDataset::import(&dir, &file).unwrap();
    let names = |v: &VersionedDataset| v.manifest().classes.clone().unwrap();
    let v2 = v1.set_classes(&["bird".into(), "cat".into(), "dog".into()], "dogs").unwrap();
    assert_eq!((v2.version(), names(&v2)), (2, vec!["bird".to_string(), "cat".into(), "dog".into()]));
    assert_eq!(v2.manifest().operation.name(), "classes");
    let v3 = v2.rename_class("cat", "kitten", "").unwrap();
    assert_eq!(names(&v3), ["bird", "kitten", "dog"]);
    assert_eq!(names(&VersionedDataset::open(&dir, VersionRef::Number(2)).unwrap()), ["bird", "cat", "dog"]);
    // Unchanged: nothing committed.
    assert_eq!(v3.set_classes(&names(&v3), "").unwrap().version(), 3);
    for (bad, why) in [
        (vec!["kitten", "bird", "dog"], "class 0 is 'bird'"),
        (vec!["bird", "kitten"], "the new list has 2 names"),
        (vec!["bird", "kitten", "dog", "dog"], "class 2 and class 3"),
        (vec!["bird", "kitten", "dog", ""], "not a class name"),
    ] {
        let list: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
        let e = v3.set_classes(&list, "").unwrap_err().to_string();
        assert!(e.contains(why), "{bad:?}: {e}");
    }
    assert!(v3.rename_class("cow", "x", "").unwrap_err().to_string().contains("no such class"));
    assert!(v3.rename_class("bird", "dog", "").unwrap_err().to_string().contains("class 2 already"));
    // A writer that read version 2's names loses against the rename.
    let e = v2.set_classes(&["bird".into(), "cat".into(), "dog".into(), "elk".into()], "").unwrap_err();
    assert!(matches!(e, beton_query::Error::Conflict { .. }), "{e}");
    assert_eq!(VersionedDataset::open(&dir, VersionRef::Latest).unwrap().version(), 3);

    // A .beton file whose labels number other names is refused; one whose list begins with the
    // dataset's (or is begun by it) is appended.
    let other = tmp.path().join("other.beton");
    labelled_file(&other, 4, &["bird", "dog"]);
    let e = v3.append_file(&other, "").unwrap_err().to_string();
    assert!(e.contains("label 1 is 'dog', the dataset's is 'kitten'") && e.contains("ImageFolder"), "{e}");
    let longer = tmp.path().join("longer.beton");
    labelled_file(&longer, 4, &["bird", "kitten", "dog", "eel"]);
    let v4 = v3.append_file(&longer, "").unwrap();
    assert_eq!(names(&v4), ["bird", "kitten", "dog", "eel"]);
    assert_eq!(VersionedDataset::open(&dir, VersionRef::Latest).unwrap().version(), 4);
}

// ---- Updates store what was asked or refuse.

const N: usize = 12;

/// The plain model of the table: label (int), score (float), flag (bool), caption (text).
#[derive(Debug, Clone, PartialEq)]
struct Model {
    label: Vec<i64>,
    score: Vec<f64>,
    flag: Vec<bool>,
    caption: Vec<String>,
}

fn dataset(dir: &Path) -> (VersionedDataset, Model) {
    let file = dir.join("t.beton");
    let model = Model {
        label: (0..N as i64).map(|i| i % 5).collect(),
        score: (0..N).map(|i| i as f64 * 0.25 - 1.0).collect(),
        flag: (0..N).map(|i| i % 3 == 0).collect(),
        caption: (0..N).map(|i| format!("c{i}")).collect(),
    };
    let m = model.clone();
    beton_testkit::write(&file, schema("label:int score:float flag:bool caption:text"), N as u64, |i| {
        let i = i as usize;
        vec![
            SampleValue::Int(m.label[i]),
            SampleValue::Float(m.score[i]),
            SampleValue::Bool(m.flag[i]),
            SampleValue::Text(m.caption[i].clone()),
        ]
    });
    (VersionedDataset::import(&dir.join("ds"), &file).unwrap(), model)
}

fn read(v: &VersionedDataset) -> Model {
    let view = v.view().unwrap();
    let table = view.table().unwrap();
    let b = beton_query::query(&table, "SELECT label, score, flag, caption FROM samples").unwrap();
    Model {
        label: b.column(0).as_primitive::<Int64Type>().values().to_vec(),
        score: b.column(1).as_primitive::<Float64Type>().values().to_vec(),
        flag: b.column(2).as_boolean().iter().map(Option::unwrap).collect(),
        caption: b.column(3).as_string::<i32>().iter().map(|s| s.unwrap().to_string()).collect(),
    }
}

fn latest(v: &VersionedDataset) -> u64 {
    VersionedDataset::open(v.dir(), VersionRef::Latest).unwrap().version()
}

#[test]
fn updates_refuse_values_that_do_not_fit_and_commit_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, model) = dataset(tmp.path());
    // Refused, and the latest version is still `at`.
    let refused_at = |at: u64, r: beton_query::Result<VersionedDataset>, want: &[&str]| {
        let e = r.unwrap_err().to_string();
        for w in want {
            assert!(e.contains(w), "{e} lacks {w}");
        }
        assert_eq!(latest(&v1), at, "{e}");
    };
    let refused = |r, want: &[&str]| refused_at(1, r, want);
    let set = |f: &str, e: &str| vec![(f.to_string(), e.to_string())];
    refused(v1.update(None, &set("label", "1.5"), ""), &["field 'label'", "Float64", "row 0: 1.5", "CAST"]);
    refused(v1.update(Some("index >= 5"), &set("label", "score"), ""), &["'score'", "row 5: 0.25"]);
    refused(v1.update(None, &set("flag", "label"), ""), &["field 'flag'", "Int64", "not even 0 or 1"]);
    refused(v1.update(None, &set("caption", "label"), ""), &["field 'caption'", "CAST(x AS VARCHAR)"]);
    let rows = IndexSet::from_sorted(vec![2, 5]).unwrap();
    let floats: ArrayRef = Arc::new(Float64Array::from(vec![2.9]));
    refused(v1.update_rows(&rows, vec![("label".into(), floats)], ""), &["update_rows", "row 2: 2.9"]);
    let big: ArrayRef = Arc::new(UInt64Array::from(vec![1, u64::MAX]));
    refused(v1.update_rows(&rows, vec![("label".into(), big)], ""), &["row 5", "int64"]);
    let past = IndexSet::from_sorted(vec![3, N as u64]).unwrap();
    let ints: ArrayRef = Arc::new(Int64Array::from(vec![1]));
    refused(v1.update_rows(&past, vec![("label".into(), ints)], ""), &["rows to update", "index 12"]);
    assert_eq!(read(&v1), model);

    // Explicit conversions store what they say: CAST truncates toward zero, round() rounds half
    // away from zero and keeps a float a float.
    let v2 = v1.update(None, &set("label", "CAST(score AS BIGINT)"), "").unwrap();
    let truncated: Vec<i64> = model.score.iter().map(|s| s.trunc() as i64).collect();
    assert_eq!(read(&v2).label, truncated);
    let v3 = v2.update(None, &set("label", "CAST(round(score * 2) AS BIGINT)"), "").unwrap();
    let rounded: Vec<i64> = model.score.iter().map(|s| (s * 2.0).round() as i64).collect();
    assert_eq!(read(&v3).label, rounded);
    refused_at(3, v3.update(None, &set("label", "round(score)"), ""), &["Float64"]);
}

#[test]
fn new_columns_may_not_shadow_derived_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let schema = [("image".to_string(), FieldType::RgbImage), ("label".to_string(), FieldType::Int)];
    let v = VersionedDataset::create(&dir, &schema).unwrap();
    let none: ArrayRef = Arc::new(Int64Array::from(Vec::<i64>::new()));
    for (name, why) in [
        ("image.width", "column 'image.width' of field 'image'"),
        ("IMAGE.mode", "case-insensitively"),
        ("index", "own column 'index'"),
        ("row_id", "own column 'row_id'"),
        ("Label", "field 'label'"),
        ("samples.label", "table samples"),
    ] {
        let e = v.add_column(name, &FieldType::Int, &none, "").unwrap_err().to_string();
        assert!(e.contains(why), "{name}: {e}");
        let e = v.add_column_sql(name, "1", "").unwrap_err().to_string();
        assert!(e.contains(why), "{name}: {e}");
    }
    assert_eq!(latest(&v), 1);
    assert_eq!(v.add_column("width", &FieldType::Int, &none, "").unwrap().version(), 2);
}

/// An update as the model sees it.
#[derive(Debug, Clone)]
enum Op {
    /// `update_rows(rows, {field: values})`.
    Rows { rows: Vec<u64>, field: usize, values: Values },
    /// `update(where, {field: expr})`.
    Sql { predicate: usize, field: usize, expr: usize },
}

/// Values given to `update_rows`, by Arrow type.
#[derive(Debug, Clone)]
enum Values {
    Int(Vec<i64>),
    Int32(Vec<i32>),
    Float(Vec<f64>),
    Bool(Vec<bool>),
    Text(Vec<String>),
}

const FIELDS: [&str; 4] = ["label", "score", "flag", "caption"];
const PREDICATES: [Option<&str>; 3] = [None, Some("label = 1"), Some("index < 5")];
const EXPRS: [&str; 9] = [
    "label + 1",
    "score * 2",
    "CAST(score AS BIGINT)",
    "CAST(round(score) AS BIGINT)",
    "label > 2",
    "'x'",
    "1.5",
    "caption",
    "CAST(label AS DOUBLE)",
];

/// One cell value the model computes.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
}

impl Model {
    /// Expression `e` on row `i`.
    fn eval(&self, e: usize, i: usize) -> Cell {
        let (l, s) = (self.label[i], self.score[i]);
        match EXPRS[e] {
            "label + 1" => Cell::Int(l + 1),
            "score * 2" => Cell::Float(s * 2.0),
            "CAST(score AS BIGINT)" => Cell::Int(s.trunc() as i64),
            "CAST(round(score) AS BIGINT)" => Cell::Int(s.round() as i64),
            "label > 2" => Cell::Bool(l > 2),
            "'x'" => Cell::Text("x".into()),
            "1.5" => Cell::Float(1.5),
            "caption" => Cell::Text(self.caption[i].clone()),
            _ => Cell::Float(l as f64),
        }
    }

    fn picks(&self, p: usize) -> Vec<usize> {
        (0..self.label.len())
            .filter(|&i| match PREDICATES[p] {
                None => true,
                Some("label = 1") => self.label[i] == 1,
                _ => i < 5,
            })
            .collect()
    }

    /// Stores `cell` into field `f` of row `i` if it fits (the rules of fit.rs); false if not.
    fn store(&mut self, f: usize, i: usize, cell: &Cell) -> bool {
        match (f, cell) {
            (0, Cell::Int(v)) => self.label[i] = *v,
            (1, Cell::Float(v)) => self.score[i] = *v,
            (1, Cell::Int(v)) if (*v as f64) as i64 == *v => self.score[i] = *v as f64,
            (2, Cell::Bool(v)) => self.flag[i] = *v,
            (3, Cell::Text(v)) => self.caption[i] = v.clone(),
            _ => return false,
        }
        true
    }
}

impl Values {
    fn len(&self) -> usize {
        match self {
            Values::Int(v) => v.len(),
            Values::Int32(v) => v.len(),
            Values::Float(v) => v.len(),
            Values::Bool(v) => v.len(),
            Values::Text(v) => v.len(),
        }
    }

    fn cell(&self, k: usize) -> Cell {
        match self {
            Values::Int(v) => Cell::Int(v[k]),
            Values::Int32(v) => Cell::Int(v[k].into()),
            Values::Float(v) => Cell::Float(v[k]),
            Values::Bool(v) => Cell::Bool(v[k]),
            Values::Text(v) => Cell::Text(v[k].clone()),
        }
    }

    fn array(&self) -> ArrayRef {
        match self {
            Values::Int(v) => Arc::new(Int64Array::from(v.clone())),
            Values::Int32(v) => Arc::new(Int32Array::from(v.clone())),
            Values::Float(v) => Arc::new(Float64Array::from(v.clone())),
            Values::Bool(v) => Arc::new(BooleanArray::from(v.clone())),
            Values::Text(v) => Arc::new(StringArray::from(v.clone())),
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    let rows = proptest::sample::subsequence((0..N as u64).collect::<Vec<_>>(), 1..5);
    let values = |n: usize| {
        prop_oneof![
            proptest::collection::vec(-(1i64 << 54)..(1i64 << 54), n).prop_map(Values::Int),
            proptest::collection::vec(-9i64..9, n).prop_map(Values::Int),
            proptest::collection::vec(any::<i32>(), n).prop_map(Values::Int32),
            proptest::collection::vec(-4.0f64..4.0, n).prop_map(Values::Float),
            proptest::collection::vec(-3i32..3, n)
                .prop_map(|v| Values::Float(v.into_iter().map(f64::from).collect())),
            proptest::collection::vec(any::<bool>(), n).prop_map(Values::Bool),
            proptest::collection::vec("[a-z]{0,3}", n).prop_map(Values::Text),
        ]
    };
    prop_oneof![
        (rows, 0..4usize, any::<bool>())
            .prop_flat_map(move |(rows, field, one)| {
                let n = if one { 1 } else { rows.len() };
                (Just(rows), Just(field), values(n))
            })
            .prop_map(|(rows, field, values)| Op::Rows { rows, field, values }),
        (0..PREDICATES.len(), 0..4usize, 0..EXPRS.len()).prop_map(|(predicate, field, expr)| Op::Sql {
            predicate,
            field,
            expr
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random updates against the plain model: a valid one stores exactly what the model
    /// stores, a refused one commits nothing and leaves the table as it was.
    #[test]
    fn updates_match_a_plain_model(ops in proptest::collection::vec(op(), 1..6)) {
        let tmp = tempfile::tempdir().unwrap();
        let (mut v, mut model) = dataset(tmp.path());
        for op in ops {
            let mut next = model.clone();
            let (fits, result) = match &op {
                Op::Rows { rows, field, values } => {
                    let fits = rows.iter().enumerate().all(|(k, &i)| {
                        let k = if values.len() == 1 { 0 } else { k };
                        next.store(*field, i as usize, &values.cell(k))
                    });
                    let set = IndexSet::from_sorted(rows.clone()).unwrap();
                    (fits, v.update_rows(&set, vec![(FIELDS[*field].to_string(), values.array())], ""))
                }
                Op::Sql { predicate, field, expr } => {
                    // The expression's type decides, whether or not a row matches.
                    let typed = model.clone().store(*field, 0, &model.eval(*expr, 0));
                    let picked = model.picks(*predicate);
                    let fits = typed && picked.iter().all(|&i| next.store(*field, i, &model.eval(*expr, i)));
                    let set = vec![(FIELDS[*field].to_string(), EXPRS[*expr].to_string())];
                    (fits, v.update(PREDICATES[*predicate], &set, ""))
                }
            };
            match result {
                Ok(after) => {
                    prop_assert!(fits, "{op:?} was committed; the model refuses it");
                    prop_assert_eq!(read(&after), next.clone(), "{:?}", op);
                    v = after;
                    model = next;
                }
                Err(e) => {
                    prop_assert!(!fits, "{op:?} refused: {e}");
                    prop_assert!(e.to_string().contains(FIELDS[match &op { Op::Rows { field, .. } | Op::Sql { field, .. } => *field }]), "{e}");
                    prop_assert_eq!(latest(&v), v.version());
                    prop_assert_eq!(read(&v), model.clone());
                }
            }
        }
    }
}
