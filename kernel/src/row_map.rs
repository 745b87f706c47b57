//! The map inside a grant row.

use std::fmt;

use crate::grant::Kind;
use crate::value::Value;

/// A grant row's kinds and their values, kept sorted by kind: a map for a handful of entries.
///
/// Rows hold a few kinds and are compared far more often than they are built, so this is a sorted vector rather than
/// a tree: reading a row is a walk over a slice, and the kinds the built-in algebras read on every comparison
/// ([`Known`]) are found by index, without comparing strings. It behaves as a `BTreeMap<Kind, Value>` would: at most
/// one entry per kind, iteration in kind order, and equality and order are those of the entry sequence.
#[derive(Clone)]
pub struct RowMap {
    entries: Vec<(Kind, Value)>,
    /// Where each [`Known`] kind sits in `entries` ([`ABSENT`] when it does not), and whether any other kind does.
    index: Index,
}

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

    fn of(entries: &[(Kind, Value)]) -> Index {
        let mut index = Index::EMPTY;
        for (i, (k, _)) in entries.iter().enumerate() {
            match Known::of(k) {
                Some(known) => match u32::try_from(i) {
                    Ok(i) if i != ABSENT => index.at[known as usize] = i,
                    _ => index.overflow = true,
                },
                None => index.others = true,
            }
        }
        index
    }
}

/// The kinds the built-in algebras read on every row comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    Commands,
    Env,
    Network,
    Paths,
    ReadPaths,
}

impl Known {
    const COUNT: usize = 5;
    fn name(self) -> &'static str {
        match self {
            Known::Commands => "commands",
            Known::Env => "env",
            Known::Network => "network",
            Known::Paths => "paths",
            Known::ReadPaths => "read_paths",
        }
    }

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
    fn partial_cmp(&self, other: &RowMap) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RowMap {
    fn cmp(&self, other: &RowMap) -> std::cmp::Ordering {
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

    /// Entries sorted by kind, each kind once.
    fn from_sorted(entries: Vec<(Kind, Value)>) -> RowMap {
        RowMap {
            index: Index::of(&entries),
            entries,
        }
    }

    /// The number of kinds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there is no kind at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of a [`Known`] kind, found by index.
    pub(crate) fn known(&self, kind: Known) -> Option<&Value> {
        if self.index.overflow {
            return self.get(kind.name());
        }
        let at = usize::try_from(self.index.at[kind as usize]).ok()?;
        self.entries.get(at).map(|(_, v)| v)
    }

    /// True when the map has a kind that is not [`Known`].
    pub(crate) fn has_others(&self) -> bool {
        self.index.others
    }

    fn position(&self, kind: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.as_str().cmp(kind))
    }

    /// The value of `kind`, if any.
    pub fn get(&self, kind: &str) -> Option<&Value> {
        // kinds are few and mostly differ in length, so equality beats a binary search's byte comparisons
        self.entries.iter().find(|(k, _)| k == kind).map(|(_, v)| v)
    }

    /// The value of `kind`, mutably.
    pub fn get_mut(&mut self, kind: &str) -> Option<&mut Value> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == kind)
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
                self.entries.insert(i, (kind, value));
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
    pub fn iter(&self) -> RowIter<'_> {
        RowIter(self.entries.iter())
    }

    /// The kinds, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &Kind> + ExactSizeIterator + Clone {
        self.entries.iter().map(|(k, _)| k)
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
pub struct RowIter<'a>(std::slice::Iter<'a, (Kind, Value)>);

impl<'a> Iterator for RowIter<'a> {
    type Item = (&'a Kind, &'a Value);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for RowIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(k, v)| (k, v))
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
    type IntoIter = std::vec::IntoIter<(Kind, Value)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl FromIterator<(Kind, Value)> for RowMap {
    /// Collects entries; of several with the same kind, the last wins (as with a `BTreeMap`).
    fn from_iter<I: IntoIterator<Item = (Kind, Value)>>(iter: I) -> RowMap {
        let mut entries: Vec<(Kind, Value)> = iter.into_iter().collect();
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
        RowMap::from_sorted(entries)
    }
}

impl From<std::collections::BTreeMap<Kind, Value>> for RowMap {
    fn from(map: std::collections::BTreeMap<Kind, Value>) -> RowMap {
        // already sorted and unique
        RowMap::from_sorted(map.into_iter().collect())
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
            assert_eq!(map.len(), tree.len());
            assert_eq!(format!("{map:?}"), format!("{tree:?}"));
            for k in ["a", "commands", "env", "paths", "x", ""] {
                assert_eq!(map.get(k), tree.get(k), "{k}");
                assert_eq!(map.contains_key(k), tree.contains_key(k), "{k}");
            }
        }
        assert_eq!(collected, inserted);
        let mut m = collected.clone();
        assert_eq!(m.remove("env"), Some(Value::Int(3)));
        assert_eq!(m.remove("env"), None);
        assert!(!m.contains_key("env"));
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
}
