//! The house's shape, checked on the source: no function over 80 lines in the layers that
//! orchestrate (`engine/`, `scenario/`, `cli/`, `run/`), in the report and in the drivers
//! (`report/`, `driver/`); and no import cycle between the crate's top-level modules, nor
//! between the modules of `scenario/`, of `report/` (model → words → renderers, one way),
//! of `cli/` or of any one driver's folder. Each reads the source with `syn`, as the
//! compiler would, skipping `#[cfg(test)]` code and test modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The longest a function may be, in lines from `fn` to its closing brace.
const MAX_LINES: usize = 80;

/// Functions allowed to be longer, each with why.
const KEPT_LONG: &[(&str, &str)] = &[
    (
        "src/scenario/validate.rs::checks",
        "a flat table: one arm per `[checks]` key with its bound's parser",
    ),
    (
        "src/report/reason.rs::of",
        "a flat table: one arm per check metric with its one-line reason",
    ),
    (
        "src/driver/script/session.rs::operation",
        "a flat table: one arm per operation an adapter script yields (`wait`, `upto`, …)",
    ),
];

/// Every `.rs` file under `dir`, except test modules (`tests.rs`, `tests/`).
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let entries = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name == "tests" || name == "tests.rs" {
                continue;
            }
            if path.is_dir() {
                todo.push(path);
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn parse(path: &Path) -> syn::File {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether `attrs` hold `#[cfg(test)]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// Collects each function's name and length in lines.
#[derive(Default)]
struct Lengths(Vec<(String, usize)>);

impl Lengths {
    fn add(&mut self, sig: &syn::Signature, block: &syn::Block) {
        let start = sig.fn_token.span.start().line;
        let end = block.brace_token.span.close().end().line;
        self.0.push((sig.ident.to_string(), end + 1 - start));
    }
}

impl<'a> Visit<'a> for Lengths {
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        if !is_test(&f.attrs) {
            self.add(&f.sig, &f.block);
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            self.add(&f.sig, &f.block);
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.add(&f.sig, block);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// The functions over [`MAX_LINES`] in `dirs` that [`KEPT_LONG`] does not keep, and the
/// kept ones found there.
fn long_functions(dirs: &[&str]) -> (Vec<String>, BTreeSet<String>) {
    let mut long = Vec::new();
    let mut kept = BTreeSet::new();
    for dir in dirs {
        for file in sources(Path::new(dir)) {
            let mut lengths = Lengths::default();
            lengths.visit_file(&parse(&file));
            for (name, lines) in lengths.0 {
                let key = format!("{}::{name}", file.display());
                if lines <= MAX_LINES {
                    continue;
                }
                if KEPT_LONG.iter().any(|(k, _)| *k == key) {
                    kept.insert(key);
                } else {
                    long.push(format!("{key}: {lines} lines"));
                }
            }
        }
    }
    (long, kept)
}

#[test]
fn no_function_over_80_lines_where_the_run_is_orchestrated_reported_or_driven() {
    let (long, kept) = long_functions(&[
        "src/engine",
        "src/scenario",
        "src/cli",
        "src/run",
        "src/report",
        "src/driver",
    ]);
    assert!(
        long.is_empty(),
        "functions over {MAX_LINES} lines (split them, or keep one in KEPT_LONG saying why):\n{}",
        long.join("\n")
    );
    let stale: Vec<_> = KEPT_LONG
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !kept.contains(*k))
        .collect();
    assert!(
        stale.is_empty(),
        "KEPT_LONG names functions no longer over {MAX_LINES} lines: {stale:?}"
    );
}

/// One module of `scenario/`: its path (`["scenario", "kinds", "flow"]`), the names it
/// defines, what it re-exports, and the paths it refers to.
struct Module {
    path: Vec<String>,
    defines: BTreeSet<String>,
    reexports: BTreeMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
    refs: Vec<Vec<String>>,
}

/// The module path of a file under `src/`: `src/scenario/kinds/mod.rs` → scenario::kinds.
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix("src").expect("under src/");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Reads what [`Module`] needs from one file's syntax.
struct Reader<'m> {
    module: &'m mut Module,
}

impl Reader<'_> {
    /// `path` as written inside the module, made absolute when it starts with `crate`,
    /// `super` or `self` (other paths are kept as written, resolved later).
    fn absolute(&self, segments: &[String]) -> Vec<String> {
        let mut base = self.module.path.clone();
        let mut rest = segments;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            _ => return segments.to_vec(),
        }
        base.extend(rest.iter().cloned());
        base
    }

    /// Every path a `use` tree names: (path, the name it binds or `*`).
    fn use_paths(
        tree: &syn::UseTree,
        prefix: &mut Vec<String>,
        out: &mut Vec<(Vec<String>, String)>,
    ) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                Self::use_paths(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut p = prefix.clone();
                p.push(n.ident.to_string());
                out.push((p, n.ident.to_string()));
            }
            syn::UseTree::Rename(r) => {
                let mut p = prefix.clone();
                p.push(r.ident.to_string());
                out.push((p, r.rename.to_string()));
            }
            syn::UseTree::Glob(_) => out.push((prefix.clone(), "*".into())),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    Self::use_paths(t, prefix, out);
                }
            }
        }
    }
}

impl<'a> Visit<'a> for Reader<'_> {
    fn visit_item(&mut self, item: &'a syn::Item) {
        let ident = match item {
            syn::Item::Const(i) => Some(&i.ident),
            syn::Item::Enum(i) => Some(&i.ident),
            syn::Item::Fn(i) => Some(&i.sig.ident),
            syn::Item::Static(i) => Some(&i.ident),
            syn::Item::Struct(i) => Some(&i.ident),
            syn::Item::Trait(i) => Some(&i.ident),
            syn::Item::Type(i) => Some(&i.ident),
            _ => None,
        };
        if let Some(ident) = ident {
            self.module.defines.insert(ident.to_string());
        }
        syn::visit::visit_item(self, item);
    }
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        if is_test(&u.attrs) {
            return;
        }
        let mut paths = Vec::new();
        Self::use_paths(&u.tree, &mut Vec::new(), &mut paths);
        let public = matches!(
            u.vis,
            syn::Visibility::Public(_) | syn::Visibility::Restricted(_)
        );
        for (path, bound) in paths {
            let path = self.absolute(&path);
            if public && bound == "*" {
                self.module.globs.push(path.clone());
            } else if public {
                self.module.reexports.insert(bound, path.clone());
            }
            self.module.refs.push(path);
        }
    }
    fn visit_path(&mut self, p: &'a syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        let path = self.absolute(&segments);
        self.module.refs.push(path);
        syn::visit::visit_path(self, p);
    }
}

/// The modules of `scenario/`, by path.
fn scenario_modules() -> BTreeMap<Vec<String>, Module> {
    crate_modules("src/scenario")
}

/// The module of `scenario/` that defines what `path` names, following re-exports
/// (`None` outside `scenario/`). A relative path starting with a child module's name is
/// taken from `from`.
fn owner(
    modules: &BTreeMap<Vec<String>, Module>,
    from: &[String],
    path: &[String],
    depth: usize,
) -> Option<Vec<String>> {
    let mut child = from.to_vec();
    child.extend(path.first().cloned());
    let path: Vec<String> =
        if path.first().is_some_and(|s| s != "scenario") && modules.contains_key(&child) {
            from.iter().chain(path).cloned().collect()
        } else {
            path.to_vec()
        };
    let module = (1..=path.len())
        .rev()
        .map(|n| &path[..n])
        .find(|prefix| modules.contains_key(*prefix))?;
    let Some(name) = path.get(module.len()) else {
        return Some(module.to_vec());
    };
    let m = &modules[module];
    if depth > 8 || m.defines.contains(name) {
        return Some(module.to_vec());
    }
    if let Some(target) = m.reexports.get(name) {
        return owner(modules, module, target, depth + 1).or(Some(module.to_vec()));
    }
    for glob in &m.globs {
        let mut target = glob.clone();
        target.push(name.clone());
        if let Some(found) = owner(modules, module, &target, depth + 1) {
            if found != module {
                return Some(found);
            }
        }
    }
    Some(module.to_vec())
}

#[test]
fn scenario_modules_import_each_other_without_a_cycle() {
    let modules = scenario_modules();
    assert!(
        modules.len() > 10,
        "scenario/ has more modules than this found: {:?}",
        modules.keys().collect::<Vec<_>>()
    );
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (path, m) in &modules {
        for r in &m.refs {
            if let Some(to) = owner(&modules, path, r, 0) {
                // A module's use of its own items is no import.
                if &to != path {
                    edges.entry(path.clone()).or_default().insert(to);
                }
            }
        }
    }
    assert_one_way(&edges, 40, "inside scenario/");
}

/// A cycle in `edges`, as the modules along it, if there is one.
fn find_cycle(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<Vec<String>>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn walk(
        node: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        marks: &mut BTreeMap<Vec<String>, Mark>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|n| n == node).unwrap_or(0);
                let mut cycle = stack[from..].to_vec();
                cycle.push(node.clone());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.clone(), Mark::Open);
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(c) = walk(next, edges, marks, stack) {
                return Some(c);
            }
        }
        stack.pop();
        marks.insert(node.clone(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    edges
        .keys()
        .find_map(|n| walk(n, edges, &mut marks, &mut Vec::new()))
}

#[test]
fn a_cycle_is_found_and_named() {
    let node = |s: &str| vec!["scenario".to_owned(), s.to_owned()];
    let mut edges = BTreeMap::from([
        (
            node("validate"),
            BTreeSet::from([node("traffic"), node("values")]),
        ),
        (node("traffic"), BTreeSet::from([node("values")])),
    ]);
    assert_eq!(find_cycle(&edges), None);
    edges.insert(node("values"), BTreeSet::from([node("validate")]));
    let cycle = find_cycle(&edges).expect("validate → traffic → values → validate");
    assert_eq!(cycle.first(), cycle.last());
    assert_eq!(cycle.len(), 4, "{cycle:?}");
}

/// The modules of the crate under `src/`, by path (not `lib.rs`, `main.rs` or tests).
fn crate_modules(dir: &str) -> BTreeMap<Vec<String>, Module> {
    let mut modules = BTreeMap::new();
    for file in sources(Path::new(dir)) {
        let path = module_path(&file);
        if path == ["lib"] || path == ["main"] {
            continue;
        }
        let mut module = Module {
            path,
            defines: BTreeSet::new(),
            reexports: BTreeMap::new(),
            globs: Vec::new(),
            refs: Vec::new(),
        };
        Reader {
            module: &mut module,
        }
        .visit_file(&parse(&file));
        modules.insert(module.path.clone(), module);
    }
    modules
}

/// The imports between the modules `depth` segments deep (1: the top-level ones) of
/// `modules`: what each names by an absolute path (`crate::…`, `super::…`), outside itself.
fn imports_at(
    modules: &BTreeMap<Vec<String>, Module>,
    depth: usize,
) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let tops: BTreeSet<Vec<String>> = modules
        .keys()
        .filter(|p| p.len() >= depth)
        .map(|p| p[..depth].to_vec())
        .collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (path, m) in modules.iter().filter(|(p, _)| p.len() >= depth) {
        let from = path[..depth].to_vec();
        // A one-word path is a local name (a variable, a type in scope), not a module's.
        for r in m.refs.iter().filter(|r| r.len() > depth) {
            // A path that starts with a child module's name is that child's.
            let mut child = path.clone();
            child.push(r[0].clone());
            if modules.contains_key(&child) {
                continue;
            }
            let to = r[..depth].to_vec();
            if to != from && tops.contains(&to) && r[..depth - 1] == from[..depth - 1] {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    edges
}

/// Fails naming the cycle when `edges` (more than `at_least` imports, or the reading
/// missed them) have one; `place` says where the modules are.
fn assert_one_way(
    edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    at_least: usize,
    place: &str,
) {
    let count: usize = edges.values().map(BTreeSet::len).sum();
    assert!(
        count > at_least,
        "too few imports found to trust the check: {edges:?}"
    );
    let cycle = named_cycle(edges);
    assert!(cycle.is_none(), "an import cycle {place}: {cycle:?}");
}

/// A cycle in `edges` as `a → b → a`, if there is one.
fn named_cycle(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<String> {
    find_cycle(edges).map(|c| {
        c.iter()
            .map(|p| p.join("::"))
            .collect::<Vec<_>>()
            .join(" → ")
    })
}

#[test]
fn top_level_modules_import_each_other_one_way() {
    let edges = imports_at(&crate_modules("src"), 1);
    assert_one_way(&edges, 40, "between top-level modules");
}

#[test]
fn report_modules_import_each_other_one_way() {
    let edges = imports_at(&crate_modules("src/report"), 2);
    assert_one_way(&edges, 20, "inside report/");
}

#[test]
fn cli_modules_import_each_other_one_way() {
    let edges = imports_at(&crate_modules("src/cli"), 2);
    assert_one_way(&edges, 10, "inside cli/");
}

#[test]
fn each_drivers_modules_import_each_other_one_way() {
    let mut folders: Vec<PathBuf> = std::fs::read_dir("src/driver")
        .expect("src/driver reads")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    assert!(folders.len() > 5, "driver folders: {folders:?}");
    for folder in folders {
        let place = format!("inside {}", folder.display());
        let edges = imports_at(&crate_modules(&folder.to_string_lossy()), 3);
        let cycle = named_cycle(&edges);
        assert!(cycle.is_none(), "an import cycle {place}: {cycle:?}");
    }
    let xmpp = imports_at(&crate_modules("src/driver/xmpp"), 3);
    assert_one_way(&xmpp, 8, "inside src/driver/xmpp");
}
