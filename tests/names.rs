//! One word per idea (docs/CONTRIBUTING.md, "Names"): no two public types of the two crates
//! (`src/`, `services/src/`) share a name. Two `Outcome`s or `Scope`s in one codebase make every
//! reader ask which one a signature means; a name that is taken is a hint the new type wants its
//! own word. The scan reads the sources (a `pub struct|enum|trait|type` item, at any depth), so
//! it needs no server and no build of anything but this test.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The public type names a line declares: `pub struct X`, `pub enum X<T>`, `pub trait X:`,
/// `pub type X =`. `pub(crate)` and narrower are private to their crate and not counted.
fn declared(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("pub ")?;
    let rest = ["struct ", "enum ", "trait ", "type "]
        .iter()
        .find_map(|k| rest.strip_prefix(k))?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let name = &rest[..end];
    name.starts_with(|c: char| c.is_ascii_uppercase())
        .then_some(name)
}

#[test]
fn declared_names_are_read_from_the_item_line() {
    for (line, want) in [
        ("pub struct Scope {", Some("Scope")),
        ("    pub enum Outcome<D> {", Some("Outcome")),
        ("pub trait Cleaner: Send + Sync {", Some("Cleaner")),
        ("pub type Reason = Cow<'static, str>;", Some("Reason")),
        ("pub(crate) struct Hidden;", None),
        ("pub fn new() -> Self {", None),
        ("// pub struct InAComment", None),
    ] {
        assert_eq!(declared(line), want, "{line}");
    }
}

#[test]
fn no_two_public_types_share_a_name() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    sources(&root.join("services/src"), &mut files);
    assert!(files.len() > 100, "found only {} source files", files.len());
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source file");
        for (n, line) in text.lines().enumerate() {
            if let Some(name) = declared(line) {
                let at = file.strip_prefix(root).unwrap_or(file).display();
                seen.entry(name.to_string())
                    .or_default()
                    .push(format!("{at}:{}", n + 1));
            }
        }
    }
    assert!(seen.len() > 200, "found only {} public types", seen.len());
    let twice: Vec<String> = seen
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(name, at)| format!("{name}: {}", at.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "public type names declared more than once (give each idea its own word):\n{}",
        twice.join("\n")
    );
}
