//! [`SharedVec`]: a list whose clones share their items, so that copying a version's manifest
//! and changing one of its 10,000 fragments copies one fragment, not 10,000 (an append to a
//! dataset of 10,000 data files costs what an append to one of 10 costs).

use std::ops::{Index, IndexMut};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A list of `T` whose clones share the list and each item: a clone is one reference count, a
/// change ([`SharedVec::push`], [`SharedVec::get_mut`], `list[k] = ...`) copies the list of
/// item pointers once and the item it changes, never the others. Two lists compare equal when
/// their items do; items a list shares with another are equal without being compared
/// ([`SharedVec::same_item`] tells them apart from equal copies).
pub struct SharedVec<T>(Arc<Vec<Arc<T>>>);

/// The iterator of a [`SharedVec`]'s items.
pub type Iter<'a, T> = std::iter::Map<std::slice::Iter<'a, Arc<T>>, fn(&'a Arc<T>) -> &'a T>;

impl<T> SharedVec<T> {
    /// An empty list.
    pub fn new() -> SharedVec<T> {
        SharedVec(Arc::new(Vec::new()))
    }

    /// A list of the items `items` (shared with the lists that hold them).
    pub fn from_shared(items: Vec<Arc<T>>) -> SharedVec<T> {
        SharedVec(Arc::new(items))
    }

    /// The number of items.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there is no item.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The items, in order.
    pub fn iter(&self) -> Iter<'_, T> {
        self.0.iter().map(|a| &**a)
    }

    /// Item `k`, if there is one.
    pub fn get(&self, k: usize) -> Option<&T> {
        self.0.get(k).map(|a| &**a)
    }

    /// The first item.
    pub fn first(&self) -> Option<&T> {
        self.get(0)
    }

    /// The last item.
    pub fn last(&self) -> Option<&T> {
        self.0.last().map(|a| &**a)
    }

    /// The items as the shared pointers they are held by.
    pub fn shared(&self) -> &[Arc<T>] {
        &self.0
    }

    /// True when item `k` of this list and item `j` of `other` are one item, shared (not merely
    /// equal): what was not changed since one list was cloned from the other.
    pub fn same_item(&self, k: usize, other: &SharedVec<T>, j: usize) -> bool {
        match (self.0.get(k), other.0.get(j)) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Adds `item` at the end.
    pub fn push(&mut self, item: T) {
        Arc::make_mut(&mut self.0).push(Arc::new(item));
    }

    /// Keeps the items for which `keep` is true, in order.
    pub fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        let kept: Vec<bool> = self.iter().map(keep).collect();
        if kept.iter().all(|&k| k) {
            return;
        }
        let items = self.0.iter().zip(kept).filter(|&(_, k)| k).map(|(a, _)| Arc::clone(a)).collect();
        self.0 = Arc::new(items);
    }
}

impl<T: Clone> SharedVec<T> {
    /// Item `k`, to change: copied first when another list shares it.
    pub fn get_mut(&mut self, k: usize) -> Option<&mut T> {
        if k >= self.len() {
            return None;
        }
        Some(Arc::make_mut(&mut Arc::make_mut(&mut self.0)[k]))
    }

    /// The first item for which `pred` is true, to change: only that one is copied.
    pub fn find_mut(&mut self, mut pred: impl FnMut(&T) -> bool) -> Option<&mut T> {
        let k = self.iter().position(&mut pred)?;
        self.get_mut(k)
    }

    /// The items, copied into a `Vec`.
    pub fn to_vec(&self) -> Vec<T> {
        self.iter().cloned().collect()
    }
}

impl<T> Clone for SharedVec<T> {
    fn clone(&self) -> Self {
        SharedVec(Arc::clone(&self.0))
    }
}

impl<T> Default for SharedVec<T> {
    fn default() -> Self {
        SharedVec::new()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for SharedVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: PartialEq> PartialEq for SharedVec<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.len() == other.len()
                && self.0.iter().zip(other.0.iter()).all(|(a, b)| Arc::ptr_eq(a, b) || a == b))
    }
}

impl<T> Index<usize> for SharedVec<T> {
    type Output = T;

    fn index(&self, k: usize) -> &T {
        &self.0[k]
    }
}

impl<T: Clone> IndexMut<usize> for SharedVec<T> {
    fn index_mut(&mut self, k: usize) -> &mut T {
        let len = self.len();
        self.get_mut(k).unwrap_or_else(|| panic!("index {k} out of range for a list of {len}"))
    }
}

impl<T> FromIterator<T> for SharedVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        SharedVec(Arc::new(items.into_iter().map(Arc::new).collect()))
    }
}

impl<T> From<Vec<T>> for SharedVec<T> {
    fn from(items: Vec<T>) -> Self {
        items.into_iter().collect()
    }
}

impl<'a, T> IntoIterator for &'a SharedVec<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T: Serialize> Serialize for SharedVec<T> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for SharedVec<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Vec::<T>::deserialize(d).map(SharedVec::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_items_until_one_changes() {
        let a: SharedVec<String> = vec!["x".to_string(), "y".to_string()].into();
        let mut b = a.clone();
        b.push("z".into());
        assert!(b.same_item(0, &a, 0) && b.same_item(1, &a, 1));
        b[1].push('!');
        assert!(b.same_item(0, &a, 0), "an item not changed stays shared");
        assert!(!b.same_item(1, &a, 1));
        assert_eq!(a.to_vec(), ["x", "y"], "the original is untouched");
        assert_eq!(b.to_vec(), ["x", "y!", "z"]);
        assert!(!a.same_item(2, &b, 2), "past the end is no item");
    }

    #[test]
    fn equality_is_by_value() {
        let a: SharedVec<u32> = vec![1, 2, 3].into();
        let b: SharedVec<u32> = vec![1, 2, 3].into();
        assert!(a == b && !a.same_item(0, &b, 0));
        let mut c = a.clone();
        *c.find_mut(|&v| v == 2).unwrap() = 5;
        assert_ne!(a, c);
        assert_eq!(c.to_vec(), [1, 5, 3]);
        c.retain(|&v| v != 5);
        assert_eq!(c.to_vec(), [1, 3]);
        assert!(c.same_item(1, &a, 2), "retain keeps the items shared");
        assert_eq!(serde_json::to_string(&c).unwrap(), "[1,3]");
        let back: SharedVec<u32> = serde_json::from_str("[1,3]").unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn get_mut_past_the_end_is_none() {
        let mut a: SharedVec<u32> = vec![1, 2].into();
        assert!(a.get_mut(2).is_none());
        *a.get_mut(1).unwrap() = 3;
        assert_eq!(a.to_vec(), [1, 3]);
    }
}
