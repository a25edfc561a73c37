//! Conditions evaluated while an update runs: `$pull` conditions and `arrayFilters`.
//!
//! Both are compiled into the query [`Matcher`] when the update is parsed, so a condition the
//! matcher rejects (a bad regex, an unknown operator) fails the update before anything is
//! written, on every path that parses it, and the same evaluator decides on every path that
//! applies it (a normal read-modify-write and a fast update's message alike). As in MongoDB,
//! neither may use `$expr`, `$where`, `$text` or geo queries.

use bson::{Bson, Document};
use silt_bson::compare::collated_equal as values_equal;

use crate::error::QResult;
use crate::matcher::{Matcher, FIELD_OPS};

/// The field an element is wrapped in when a condition applies to the element itself.
const WRAP: &str = "v";

/// How a `$pull` decides which elements to remove (MongoDB's `PullNode` matchers).
#[derive(Clone, Debug)]
pub(crate) enum PullCond {
    /// A plain value: elements equal to it.
    Equal(Bson),
    /// A document whose first field is not an operator: a query run against elements that
    /// are documents.
    Query(Matcher),
    /// An operator document (`{$gte: 6}`) or a regex, matched as `{v: <condition>}` against
    /// `{v: <element>}`.
    Wrapped(Matcher),
}

impl PullCond {
    pub(crate) fn new(v: &Bson) -> QResult<PullCond> {
        let wrapped = || {
            let mut q = Document::new();
            q.insert(WRAP, v.clone());
            Matcher::new(&q).map(PullCond::Wrapped)
        };
        match v {
            Bson::Document(d) => match d.keys().next() {
                // An operator that takes a path applies to the element itself.
                Some(k) if FIELD_OPS.contains(&k.as_str()) => wrapped(),
                _ => Matcher::new(d).map(PullCond::Query),
            },
            Bson::RegularExpression(_) => wrapped(),
            _ => Ok(PullCond::Equal(v.clone())),
        }
    }

    pub(crate) fn matches(&self, elem: &Bson) -> QResult<bool> {
        match self {
            PullCond::Equal(v) => Ok(values_equal(elem, v)),
            PullCond::Query(m) => match elem {
                Bson::Document(d) => m.try_matches(d),
                _ => Ok(false),
            },
            PullCond::Wrapped(m) => {
                let mut d = Document::new();
                d.insert(WRAP, elem.clone());
                m.try_matches(&d)
            }
        }
    }
}

/// One compiled array filter: its identifier's top-level field and the matcher.
#[derive(Clone, Debug)]
pub(crate) struct ArrayFilter {
    ident: String,
    matcher: Matcher,
}

impl ArrayFilter {
    pub(crate) fn new(ident: String, filter: &Document) -> QResult<ArrayFilter> {
        Ok(ArrayFilter {
            ident,
            matcher: Matcher::new(filter)?,
        })
    }

    /// Does the filter match `elem` (seen as `{<ident>: elem}`)?
    pub(crate) fn matches(&self, elem: &Bson) -> QResult<bool> {
        let mut d = Document::new();
        d.insert(self.ident.as_str(), elem.clone());
        self.matcher.try_matches(&d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    #[test]
    fn pull_condition_kinds() {
        let m = |c: Bson, e: Bson| PullCond::new(&c).unwrap().matches(&e).unwrap();
        assert!(m(bson!(3), bson!(3.0)));
        assert!(m(bson!({"$gte": 6}), bson!(7)));
        assert!(!m(bson!({"$gte": 6}), bson!(5)));
        assert!(m(bson!({"x": 1}), bson!({"x": 1, "y": 2})));
        assert!(!m(bson!({"x": 1}), bson!(1)));
        assert!(m(bson!([1, 2]), bson!([1, 2])));
        assert!(!m(bson!({"x": 1}), bson!({"x": 2})));
        let re = Bson::RegularExpression(bson::Regex {
            pattern: "^a".into(),
            options: String::new(),
        });
        assert!(m(re.clone(), bson!("apple")));
        assert!(!m(re.clone(), bson!("pear")));
        assert!(m(bson!({"$in": [re]}), bson!("avocado")));
        assert!(m(bson!({"$elemMatch": {"b": 1}}), bson!([{"b": 1}])));
        assert!(m(bson!({"s": {"$regex": "^x"}}), bson!({"s": "xy"})));
    }

    #[test]
    fn bad_conditions_fail_when_parsed() {
        assert!(PullCond::new(&bson!({"$foo": 1})).is_err());
        assert!(PullCond::new(&bson!({"a": {"$regex": "("}})).is_err());
        assert!(ArrayFilter::new("e".into(), &doc! {"e": {"$bogus": 1}}).is_err());
    }

    #[test]
    fn array_filters_wrap_the_element() {
        let f = ArrayFilter::new("e".into(), &doc! {"e.n": {"$regex": "^x"}}).unwrap();
        assert!(f.matches(&bson!({"n": "xa"})).unwrap());
        assert!(!f.matches(&bson!({"n": "b"})).unwrap());
    }
}
