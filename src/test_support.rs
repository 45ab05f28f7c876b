/*!
Helpers the library's unit tests share across primitives.
*/

use std::path::Path;

/// The names in `dir`, sorted: what a test compares with the files a protocol leaves.
pub(crate) fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
