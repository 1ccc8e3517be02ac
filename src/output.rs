//! Text the commands print alike: sizes in binary units and the class-name line.

/// Bytes in binary units: `8.0 MiB`.
pub(crate) fn human(bytes: u64) -> String {
    beton_query::explain::human_bytes(bytes)
}

/// `classes (6): cat, dog, ...`: the class names stored in a file or version, label order; the
/// first 20 of a long list.
pub(crate) fn classes_line(classes: &[String]) -> String {
    const SHOWN: usize = 20;
    let mut names = classes.iter().take(SHOWN).map(String::as_str).collect::<Vec<_>>().join(", ");
    if classes.len() > SHOWN {
        names.push_str(", ...");
    }
    format!("classes ({}): {names}", classes.len())
}
