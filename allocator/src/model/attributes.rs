//! [`Attributes`]: a device's attributes by name, as a list sorted by name and sized to fit.
//!
//! A device carries a handful of attributes, and an inventory holds every device of thousands
//! of nodes: a B-tree map would give each device a node of eleven slots. The sorted list has a
//! map's meaning (one value per name, ordered by name, so that equal sets compare and hash
//! equal) and its wire form (a JSON object, a postcard map). Pure data; no I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::AttributeValue;

/// Attributes of a device by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Attributes(Vec<(String, AttributeValue)>);

impl Attributes {
    /// No attributes.
    pub fn new() -> Self {
        Attributes(Vec::new())
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(n, _)| n.as_str().cmp(name))
    }

    /// Sets attribute `name`, returning its earlier value.
    pub fn insert(&mut self, name: String, value: AttributeValue) -> Option<AttributeValue> {
        match self.position(&name) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.reserve_exact(1);
                self.0.insert(i, (name, value));
                None
            }
        }
    }

    /// Removes attribute `name`, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<AttributeValue> {
        let i = self.position(name).ok()?;
        Some(self.0.remove(i).1)
    }

    /// The value of attribute `name`.
    pub fn get(&self, name: &str) -> Option<&AttributeValue> {
        self.position(name).ok().map(|i| &self.0[i].1)
    }

    /// Whether the device carries attribute `name`.
    pub fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_ok()
    }

    /// How many attributes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Name and value of each attribute, in name order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&String, &AttributeValue)> + Clone {
        self.0.iter().map(|(name, value)| (name, value))
    }

    /// The names, in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &String> + Clone {
        self.0.iter().map(|(name, _)| name)
    }

    /// The values, in name order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &AttributeValue> + Clone {
        self.0.iter().map(|(_, value)| value)
    }
}

impl std::ops::Index<&str> for Attributes {
    type Output = AttributeValue;

    /// The value of attribute `name`; panics when the device does not carry it, as a map's
    /// index does.
    fn index(&self, name: &str) -> &AttributeValue {
        self.get(name)
            .unwrap_or_else(|| panic!("no attribute {name:?}"))
    }
}

impl FromIterator<(String, AttributeValue)> for Attributes {
    /// As a map would collect them: a later value of a name replaces an earlier one.
    fn from_iter<I: IntoIterator<Item = (String, AttributeValue)>>(iter: I) -> Self {
        let mut list: Vec<(String, AttributeValue)> = iter.into_iter().collect();
        // Stable: equal names keep their order, and the last of each run wins below.
        list.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, AttributeValue)> = Vec::with_capacity(list.len());
        for (name, value) in list {
            match out.last_mut() {
                Some(previous) if previous.0 == name => previous.1 = value,
                _ => out.push((name, value)),
            }
        }
        out.shrink_to_fit();
        Attributes(out)
    }
}

impl<const N: usize> From<[(String, AttributeValue); N]> for Attributes {
    fn from(items: [(String, AttributeValue); N]) -> Self {
        items.into_iter().collect()
    }
}

impl From<BTreeMap<String, AttributeValue>> for Attributes {
    fn from(map: BTreeMap<String, AttributeValue>) -> Self {
        let mut list: Vec<(String, AttributeValue)> = map.into_iter().collect();
        list.shrink_to_fit();
        Attributes(list)
    }
}

impl Extend<(String, AttributeValue)> for Attributes {
    fn extend<I: IntoIterator<Item = (String, AttributeValue)>>(&mut self, iter: I) {
        for (name, value) in iter {
            self.insert(name, value);
        }
    }
}

impl IntoIterator for Attributes {
    type Item = (String, AttributeValue);
    type IntoIter = std::vec::IntoIter<(String, AttributeValue)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Attributes {
    type Item = (&'a String, &'a AttributeValue);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, AttributeValue)>,
        fn(&'a (String, AttributeValue)) -> (&'a String, &'a AttributeValue),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(name, value)| (name, value))
    }
}

impl Serialize for Attributes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Attributes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        BTreeMap::<String, AttributeValue>::deserialize(deserializer).map(Attributes::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(i: i64) -> AttributeValue {
        AttributeValue::Int(i)
    }

    #[test]
    fn attributes_behave_as_a_map_ordered_by_name() {
        let mut a = Attributes::new();
        assert_eq!(a.insert("numa".into(), int(1)), None);
        assert_eq!(a.insert("index".into(), int(0)), None);
        assert_eq!(a.insert("numa".into(), int(2)), Some(int(1)));
        assert_eq!(a.len(), 2);
        assert_eq!(a.get("numa"), Some(&int(2)));
        assert!(a.contains_key("index") && !a.contains_key("model"));
        assert_eq!(a.keys().collect::<Vec<_>>(), ["index", "numa"]);
        let collected: Attributes = [
            ("numa".to_owned(), int(1)),
            ("index".to_owned(), int(0)),
            ("numa".to_owned(), int(2)),
        ]
        .into_iter()
        .collect();
        assert_eq!(collected, a, "the later value of a name wins, in any order");
        let map: BTreeMap<String, AttributeValue> = a.clone().into_iter().collect();
        assert_eq!(Attributes::from(map), a);
        assert_eq!(a.remove("index"), Some(int(0)));
        assert_eq!(a.remove("index"), None);
        assert_eq!(a.iter().count(), 1);
    }

    #[test]
    fn attributes_keep_the_wire_form_of_a_map() {
        let a: Attributes = [
            ("b".to_owned(), int(2)),
            ("a".to_owned(), AttributeValue::String("x".to_owned())),
        ]
        .into();
        let map: BTreeMap<String, AttributeValue> = a.clone().into_iter().collect();
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json, serde_json::to_value(&map).unwrap());
        assert_eq!(serde_json::from_value::<Attributes>(json).unwrap(), a);
        let packed = postcard::to_allocvec(&a).unwrap();
        assert_eq!(packed, postcard::to_allocvec(&map).unwrap());
        assert_eq!(postcard::from_bytes::<Attributes>(&packed).unwrap(), a);
    }
}
