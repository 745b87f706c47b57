//! The map inside a grant row.

use std::cmp::Ordering;
use std::fmt;
use std::sync::LazyLock;

use crate::lattice::value::Value;

/// A capability kind name (`paths`, `commands`, an MCP argument name, ...).
pub type Kind = String;

/// A grant row's kinds and their values, kept sorted by kind: a map for a handful of entries.
///
/// Rows hold a few kinds and are compared far more often than they are built, so this is a sorted vector rather than
/// a tree: reading a row is a walk over a slice. The kinds the built-in algebras read on every comparison
/// ([`Known`]) are held as small tags, not strings (no allocation to build or copy a row of them) and found by index.
/// It behaves as a `BTreeMap<Kind, Value>` would: at most one entry per kind, iteration in kind order, and equality
/// and order are those of the `(kind, value)` sequence.
#[derive(Clone)]
pub struct RowMap {
    entries: Vec<(Key, Value)>,
    /// Where each [`Known`] kind sits in `entries` ([`ABSENT`] when it does not), and whether any other kind does.
    index: Index,
}

/// A kind as a row holds it: a [`Known`] tag, or any other name. `Other` never holds a known name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Known(Known),
    Other(Kind),
}

impl Key {
    fn new(kind: Kind) -> Key {
        match Known::of(&kind) {
            Some(known) => Key::Known(known),
            None => Key::Other(kind),
        }
    }

    #[inline]
    fn as_str(&self) -> &str {
        match self {
            Key::Known(k) => k.name(),
            Key::Other(s) => s,
        }
    }

    /// The kind as the `String` the map's API hands out.
    #[inline]
    fn kind(&self) -> &Kind {
        match self {
            Key::Known(k) => &KNOWN_NAMES[*k as usize],
            Key::Other(s) => s,
        }
    }

    fn into_kind(self) -> Kind {
        match self {
            Key::Known(k) => k.name().to_string(),
            Key::Other(s) => s,
        }
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> Ordering {
        match (self, other) {
            // the tags are declared in the order of their names
            (Key::Known(a), Key::Known(b)) => a.cmp(b),
            (Key::Other(a), Key::Other(b)) => a.cmp(b),
            _ => self.as_str().cmp(other.as_str()),
        }
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The names of the [`Known`] kinds as `String`s, so the map can lend them out as it lends out any other kind.
static KNOWN_NAMES: LazyLock<[Kind; Known::COUNT]> =
    LazyLock::new(|| Known::ALL.map(|k| k.name().to_string()));

const ABSENT: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Index {
    at: [u32; Known::COUNT],
    others: bool,
    /// A row too long to index (never in practice): [`RowMap::known`] searches instead.
    overflow: bool,
}

impl Index {
    const EMPTY: Index = Index {
        at: [ABSENT; Known::COUNT],
        others: false,
        overflow: false,
    };

    fn of(entries: &[(Key, Value)]) -> Index {
        let mut index = Index::EMPTY;
        for (i, (k, _)) in entries.iter().enumerate() {
            match k {
                Key::Known(known) => match u32::try_from(i) {
                    Ok(i) if i != ABSENT => index.at[*known as usize] = i,
                    _ => index.overflow = true,
                },
                Key::Other(_) => index.others = true,
            }
        }
        index
    }
}

/// The kinds the built-in algebras read on every row comparison, declared in the order of their names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Known {
    Commands,
    Env,
    Network,
    Paths,
    ReadPaths,
}

impl Known {
    pub(crate) const COUNT: usize = 5;
    const ALL: [Known; Known::COUNT] = [
        Known::Commands,
        Known::Env,
        Known::Network,
        Known::Paths,
        Known::ReadPaths,
    ];

    #[inline]
    pub(crate) fn name(self) -> &'static str {
        match self {
            Known::Commands => "commands",
            Known::Env => "env",
            Known::Network => "network",
            Known::Paths => "paths",
            Known::ReadPaths => "read_paths",
        }
    }

    #[inline]
    fn of(kind: &str) -> Option<Known> {
        Some(match kind {
            "commands" => Known::Commands,
            "env" => Known::Env,
            "network" => Known::Network,
            "paths" => Known::Paths,
            "read_paths" => Known::ReadPaths,
            _ => return None,
        })
    }
}

impl Default for RowMap {
    fn default() -> RowMap {
        RowMap::new()
    }
}

impl PartialEq for RowMap {
    fn eq(&self, other: &RowMap) -> bool {
        self.entries == other.entries
    }
}

impl Eq for RowMap {}

impl PartialOrd for RowMap {
    fn partial_cmp(&self, other: &RowMap) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RowMap {
    fn cmp(&self, other: &RowMap) -> Ordering {
        self.entries.cmp(&other.entries)
    }
}

impl RowMap {
    /// An empty map.
    pub fn new() -> RowMap {
        RowMap {
            entries: Vec::new(),
            index: Index::EMPTY,
        }
    }

    /// A map of [`Known`] kinds, `slots[k as usize]` the value of kind `k` if any: no name to allocate, nothing to sort.
    pub(crate) fn of_known(slots: [Option<Value>; Known::COUNT]) -> RowMap {
        let mut entries = Vec::with_capacity(slots.iter().flatten().count());
        for (k, v) in Known::ALL.into_iter().zip(slots) {
            if let Some(v) = v {
                entries.push((Key::Known(k), v));
            }
        }
        RowMap {
            index: Index::of(&entries),
            entries,
        }
    }

    fn from_keys(entries: impl IntoIterator<Item = (Key, Value)>) -> RowMap {
        let mut entries: Vec<(Key, Value)> = entries.into_iter().collect();
        if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
            // stable, so entries of one kind keep their order and the last can win
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    std::mem::swap(later, kept);
                }
                same
            });
        }
        RowMap {
            index: Index::of(&entries),
            entries,
        }
    }

    /// The number of kinds.
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there is no kind at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of a [`Known`] kind, found by index.
    #[inline]
    pub(crate) fn known(&self, kind: Known) -> Option<&Value> {
        if self.index.overflow {
            let key = Key::Known(kind);
            return self.entries.iter().find(|(k, _)| *k == key).map(|(_, v)| v);
        }
        let at = usize::try_from(self.index.at[kind as usize]).ok()?;
        self.entries.get(at).map(|(_, v)| v)
    }

    /// True when the map has a kind that is not [`Known`].
    #[inline]
    pub(crate) fn has_others(&self) -> bool {
        self.index.others
    }

    fn position(&self, kind: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.as_str().cmp(kind))
    }

    /// The value of `kind`, if any.
    #[inline]
    pub fn get(&self, kind: &str) -> Option<&Value> {
        match Known::of(kind) {
            Some(known) => self.known(known),
            None if self.index.others => self
                .entries
                .iter()
                .find_map(|(k, v)| matches!(k, Key::Other(s) if s == kind).then_some(v)),
            None => None,
        }
    }

    /// True when every kind of `sub` is a kind of this map too and `f(this map's value, sub's value)` holds for each:
    /// one walk over both sorted maps instead of a search per kind.
    pub(crate) fn covers_each(&self, sub: &RowMap, f: impl Fn(&Value, &Value) -> bool) -> bool {
        let mut sups = self.entries.iter();
        'next: for (kind, v) in &sub.entries {
            for (sup_kind, sup_v) in sups.by_ref() {
                match sup_kind.cmp(kind) {
                    Ordering::Less => continue,
                    Ordering::Equal if f(sup_v, v) => continue 'next,
                    _ => return false,
                }
            }
            return false;
        }
        true
    }

    /// The value of `kind`, mutably.
    pub fn get_mut(&mut self, kind: &str) -> Option<&mut Value> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k.as_str() == kind)
            .map(|(_, v)| v)
    }

    /// True when the map has `kind`.
    pub fn contains_key(&self, kind: &str) -> bool {
        self.get(kind).is_some()
    }

    /// Sets the value of `kind`, returning the value it replaces.
    pub fn insert(&mut self, kind: Kind, value: Value) -> Option<Value> {
        match self.position(&kind) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (Key::new(kind), value));
                self.index = Index::of(&self.entries);
                None
            }
        }
    }

    /// Removes `kind`, returning its value.
    pub fn remove(&mut self, kind: &str) -> Option<Value> {
        let i = self.position(kind).ok()?;
        let (_, value) = self.entries.remove(i);
        self.index = Index::of(&self.entries);
        Some(value)
    }

    /// The entries in kind order.
    #[inline]
    pub fn iter(&self) -> RowIter<'_> {
        RowIter(self.entries.iter())
    }

    /// The kinds, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &Kind> + ExactSizeIterator + Clone {
        self.entries.iter().map(|(k, _)| k.kind())
    }

    /// The values, in kind order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator + Clone {
        self.entries.iter().map(|(_, v)| v)
    }

    /// The values, mutably, in kind order.
    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut Value> + ExactSizeIterator {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

/// An iterator over a [`RowMap`]'s entries, in kind order.
#[derive(Debug, Clone)]
pub struct RowIter<'a>(std::slice::Iter<'a, (Key, Value)>);

impl<'a> Iterator for RowIter<'a> {
    type Item = (&'a Kind, &'a Value);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k.kind(), v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for RowIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(k, v)| (k.kind(), v))
    }
}

impl ExactSizeIterator for RowIter<'_> {}

impl<'a> IntoIterator for &'a RowMap {
    type Item = (&'a Kind, &'a Value);
    type IntoIter = RowIter<'a>;

    fn into_iter(self) -> RowIter<'a> {
        self.iter()
    }
}

impl IntoIterator for RowMap {
    type Item = (Kind, Value);
    type IntoIter = RowIntoIter;

    fn into_iter(self) -> RowIntoIter {
        RowIntoIter(self.entries.into_iter())
    }
}

/// An iterator over a [`RowMap`]'s entries by value, in kind order.
#[derive(Debug)]
pub struct RowIntoIter(std::vec::IntoIter<(Key, Value)>);

impl Iterator for RowIntoIter {
    type Item = (Kind, Value);

    fn next(&mut self) -> Option<(Kind, Value)> {
        self.0.next().map(|(k, v)| (k.into_kind(), v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl FromIterator<(Kind, Value)> for RowMap {
    /// Collects entries; of several with the same kind, the last wins (as with a `BTreeMap`).
    fn from_iter<I: IntoIterator<Item = (Kind, Value)>>(iter: I) -> RowMap {
        RowMap::from_keys(iter.into_iter().map(|(k, v)| (Key::new(k), v)))
    }
}

impl From<std::collections::BTreeMap<Kind, Value>> for RowMap {
    fn from(map: std::collections::BTreeMap<Kind, Value>) -> RowMap {
        map.into_iter().collect()
    }
}

impl fmt::Debug for RowMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn pairs(items: &[(&str, i64)]) -> Vec<(Kind, Value)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), Value::Int(*v)))
            .collect()
    }

    #[test]
    fn behaves_as_a_btree_map() {
        let items = pairs(&[
            ("paths", 1),
            ("commands", 2),
            ("env", 3),
            ("paths", 4),
            ("a", 5),
            ("read_pathsx", 6),
            ("network", 7),
            ("z", 8),
            ("read_paths", 9),
        ]);
        let tree: BTreeMap<Kind, Value> = items.iter().cloned().collect();
        let collected: RowMap = items.iter().cloned().collect();
        let mut inserted = RowMap::new();
        for (k, v) in items.iter().cloned() {
            inserted.insert(k, v);
        }
        let converted = RowMap::from(tree.clone());
        for map in [&collected, &inserted, &converted] {
            assert!(map.iter().eq(tree.iter()), "{map:?}");
            assert!(map.keys().eq(tree.keys()), "{map:?}");
            assert!(map.clone().into_iter().eq(tree.clone()), "{map:?}");
            assert_eq!(map.len(), tree.len());
            assert_eq!(format!("{map:?}"), format!("{tree:?}"));
            for k in [
                "a",
                "commands",
                "env",
                "paths",
                "read_paths",
                "read_pathsx",
                "x",
                "",
            ] {
                assert_eq!(map.get(k), tree.get(k), "{k}");
                assert_eq!(map.contains_key(k), tree.contains_key(k), "{k}");
            }
        }
        assert_eq!(collected, inserted);
        let mut m = collected.clone();
        assert_eq!(m.remove("env"), Some(Value::Int(3)));
        assert_eq!(m.remove("env"), None);
        assert!(!m.contains_key("env"));
        assert_eq!(m.get("network"), Some(&Value::Int(7)));
        let known = RowMap::of_known([Some(Value::Int(2)), None, None, Some(Value::Int(3)), None]);
        assert_eq!(
            known,
            pairs(&[("commands", 2), ("paths", 3)])
                .into_iter()
                .collect()
        );
    }

    #[test]
    fn order_is_the_order_of_entry_sequences() {
        let maps: Vec<Vec<(Kind, Value)>> = vec![
            pairs(&[]),
            pairs(&[("a", 1)]),
            pairs(&[("a", 1), ("b", 1)]),
            pairs(&[("a", 2)]),
            pairs(&[("b", 0)]),
            pairs(&[("ab", 0)]),
            pairs(&[("commands", 0)]),
            pairs(&[("commandsx", 0)]),
            pairs(&[("env", 0)]),
            pairs(&[("en", 0)]),
            pairs(&[("paths", 0), ("read_paths", 0)]),
            pairs(&[("paths", 0), ("q", 0)]),
            pairs(&[("read_paths", 0)]),
            pairs(&[("read_path", 0)]),
            pairs(&[("network", 1)]),
        ];
        for x in &maps {
            for y in &maps {
                let (tx, ty): (BTreeMap<_, _>, BTreeMap<_, _>) =
                    (x.iter().cloned().collect(), y.iter().cloned().collect());
                let (rx, ry): (RowMap, RowMap) =
                    (x.iter().cloned().collect(), y.iter().cloned().collect());
                assert_eq!(rx.cmp(&ry), tx.cmp(&ty), "{x:?} {y:?}");
                assert_eq!(rx == ry, tx == ty, "{x:?} {y:?}");
            }
        }
    }

    #[test]
    fn known_kinds_are_declared_in_name_order() {
        for w in Known::ALL.windows(2) {
            assert!(w[0].name() < w[1].name());
            assert!(w[0] < w[1]);
        }
        for k in Known::ALL {
            assert_eq!(Known::of(k.name()), Some(k));
        }
    }
}
