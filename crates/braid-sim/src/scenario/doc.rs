//! The parsed TOML document with byte spans (`toml::de::DeTable`): finding the line of a key,
//! naming the key at an error's span, and setting a sweep key. Keeping spans (rather than a plain
//! `toml::Table`) is what lets errors in swept variants still point at a line.

use std::borrow::Cow;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue};

/// A whole parsed document.
pub(crate) type Doc<'i> = Spanned<DeTable<'i>>;

/// 1-based line of a byte offset into `text` (offsets past the end count as the last line).
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1
}

/// One step of a path into the document.
#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

/// Where a value is (or would be) in the document, with the dotted name errors show:
/// `link.wimax.down.loss.p`, array entries by their `name` key when they have one, else `[i]`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Loc {
    /// The name shown to the user.
    pub display: String,
    segs: Vec<Seg>,
}

impl Loc {
    /// The document itself.
    pub fn root() -> Self {
        Self::default()
    }

    /// The key `k` of this table.
    pub fn key(&self, k: &str) -> Self {
        let display = if self.display.is_empty() { k.to_string() } else { format!("{}.{k}", self.display) };
        let mut segs = self.segs.clone();
        segs.push(Seg::Key(k.to_string()));
        Loc { display, segs }
    }

    /// Entry `i` of this array, shown by `name` when given.
    pub fn elem(&self, i: usize, name: Option<&str>) -> Self {
        let display = match name {
            Some(n) if !n.is_empty() => format!("{}.{n}", self.display),
            _ => format!("{}[{i}]", self.display),
        };
        let mut segs = self.segs.clone();
        segs.push(Seg::Index(i));
        Loc { display, segs }
    }

    /// The name to show for this location (`(document)` for the root).
    pub fn name(&self) -> String {
        if self.display.is_empty() { "(document)".to_string() } else { self.display.clone() }
    }
}

/// The span of the deepest part of `loc` that exists: a key's own span, or an array entry's span.
/// A missing key thus points at its enclosing table.
pub(crate) fn span_of(doc: &Doc<'_>, loc: &Loc) -> Range<usize> {
    let mut span = doc.span().start..doc.span().start;
    let mut node: Option<&DeValue<'_>> = None;
    let mut table: Option<&DeTable<'_>> = Some(doc.get_ref());
    for seg in &loc.segs {
        let next = match (seg, table, node) {
            (Seg::Key(k), Some(t), _) => t.get_key_value(k.as_str()).map(|(key, v)| (key.span(), v)),
            (Seg::Index(i), None, Some(DeValue::Array(a))) => a.get(*i).map(|v| (v.span(), v)),
            _ => None,
        };
        let Some((s, v)) = next else { break };
        span = s;
        node = Some(v.get_ref());
        table = v.get_ref().as_table();
    }
    span
}

/// The deepest key or array entry whose span contains byte `pos`.
pub(crate) fn loc_at(doc: &Doc<'_>, pos: usize) -> Loc {
    let mut best = Loc::root();
    search_table(doc.get_ref(), &Loc::root(), pos, &mut best);
    best
}

fn contains(span: &Range<usize>, pos: usize) -> bool {
    span.start <= pos && (pos < span.end || span.start == span.end)
}

fn consider(here: &Loc, hit: bool, best: &mut Loc) {
    if hit && here.segs.len() > best.segs.len() {
        *best = here.clone();
    }
}

fn search_table(t: &DeTable<'_>, loc: &Loc, pos: usize, best: &mut Loc) {
    for (k, v) in t.iter() {
        let here = loc.key(k.get_ref());
        consider(&here, contains(&k.span(), pos) || contains(&v.span(), pos), best);
        search_value(v.get_ref(), &here, pos, best);
    }
}

fn search_value(v: &DeValue<'_>, loc: &Loc, pos: usize, best: &mut Loc) {
    match v {
        DeValue::Table(t) => search_table(t, loc, pos, best),
        DeValue::Array(a) => {
            for (i, e) in a.iter().enumerate() {
                let here = loc.elem(i, entry_name(e.get_ref()));
                consider(&here, contains(&e.span(), pos), best);
                search_value(e.get_ref(), &here, pos, best);
            }
        }
        _ => {}
    }
}

/// The `name` of an array entry that is a table with a string `name`.
pub(crate) fn entry_name<'a>(v: &'a DeValue<'_>) -> Option<&'a str> {
    v.as_table()?.get("name")?.get_ref().as_str()
}

/// The spans of an array's entries at `table.key`, if it is an array.
pub(crate) fn array_at<'a, 'i>(doc: &'a Doc<'i>, table: &str, key: &str) -> Option<&'a DeArray<'i>> {
    doc.get_ref().get(table)?.get_ref().as_table()?.get(key)?.get_ref().as_array()
}

/// Sets the dotted `key` to `value` in `doc`. Every table on the way must exist; an array of
/// tables (`link`, `scheme`) is entered by the `name` of one entry, given as the next segment. The
/// last key is replaced, or inserted with span `key_span` if absent (whether it is a valid key is
/// then up to deserialisation). Returns what is missing on failure.
pub(crate) fn set<'i>(
    doc: &mut Doc<'i>,
    key: &str,
    key_span: Range<usize>,
    value: Spanned<DeValue<'i>>,
) -> Result<(), String> {
    let segs: Vec<&str> = key.split('.').collect();
    if segs.iter().any(|s| s.is_empty()) {
        return Err("has an empty segment".into());
    }
    let mut table: &mut DeTable<'i> = doc.get_mut();
    let mut i = 0;
    loop {
        let seg = segs[i];
        let walked = segs[..i].join(".");
        let within = if walked.is_empty() { "the document".to_string() } else { format!("`{walked}`") };
        if i + 1 == segs.len() {
            match table.get_mut(seg) {
                Some(v) if v.get_ref().is_table() || v.get_ref().is_array() => {
                    return Err(format!("`{seg}` in {within} is a table or array, not a value"));
                }
                Some(v) => *v = value,
                None => {
                    table.insert(Spanned::new(key_span, Cow::Owned(seg.to_string())), value);
                }
            }
            return Ok(());
        }
        let Some(v) = table.get_mut(seg) else {
            return Err(format!("there is no `{seg}` in {within}"));
        };
        match v.get_mut() {
            DeValue::Table(t) => {
                table = t;
                i += 1;
            }
            DeValue::Array(a) => {
                let name = segs[i + 1];
                if i + 2 == segs.len() {
                    return Err(format!("`{seg}` is a list: name an entry, then a key in it"));
                }
                let found = a.iter_mut().find_map(|e| match e.get_mut() {
                    DeValue::Table(t) if t.get("name").and_then(|n| n.get_ref().as_str()) == Some(name) => Some(t),
                    _ => None,
                });
                let Some(t) = found else {
                    return Err(format!("there is no `{seg}` entry named `{name}`"));
                };
                table = t;
                i += 2;
            }
            _ => return Err(format!("`{seg}` in {within} is a value, not a table")),
        }
    }
}
