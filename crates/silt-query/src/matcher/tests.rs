//! Table-driven tests of filters against documents, after MongoDB's documented behaviour.

use super::*;
use bson::{bson, doc, oid::ObjectId, Binary};
use silt_bson::compare::{cmp_values, type_rank};

fn m(filter: Document) -> Matcher {
    Matcher::new(&filter).unwrap_or_else(|e| panic!("{filter}: {e}"))
}

/// Each case: filter, then (document, expected) pairs.
fn check(cases: Vec<(Document, Vec<(Document, bool)>)>) {
    for (filter, docs) in cases {
        let matcher = m(filter.clone());
        for (d, want) in docs {
            assert_eq!(matcher.matches(&d), want, "filter {filter} on {d}");
            assert_raw_agrees(&matcher, &d);
        }
    }
}

/// The raw path, where it decides, decides as the decoded one.
fn assert_raw_agrees(matcher: &Matcher, d: &Document) {
    let bytes = bson::to_vec(d).expect("encodes");
    let raw = bson::RawDocument::from_bytes(&bytes).expect("valid");
    if let Some(hit) = matcher.matches_raw(raw) {
        assert_eq!(
            hit,
            matcher.matches(d),
            "raw path on {d} with {:?}",
            matcher.expr()
        );
    }
}

fn err(filter: Document) -> QueryError {
    match Matcher::new(&filter) {
        Ok(_) => panic!("{filter} should not parse"),
        Err(e) => e,
    }
}

#[test]
fn implicit_equality() {
    check(vec![
        (
            doc! {"a": 1},
            vec![
                (doc! {"a": 1}, true),
                (doc! {"a": 1.0}, true),
                (doc! {"a": Bson::Int64(1)}, true),
                (doc! {"a": 2}, false),
                (doc! {"a": "1"}, false),
                (doc! {"b": 1}, false),
                (doc! {"a": [1, 2]}, true),
                (doc! {"a": [[1], 2]}, false),
                (doc! {}, false),
            ],
        ),
        (doc! {}, vec![(doc! {}, true), (doc! {"x": 1}, true)]),
        (
            doc! {"a": 1, "b": 2},
            vec![
                (doc! {"a": 1, "b": 2}, true),
                (doc! {"a": 1, "b": 3}, false),
            ],
        ),
        (
            doc! {"a": {"b": 1, "c": 2}},
            vec![
                (doc! {"a": {"b": 1, "c": 2}}, true),
                (doc! {"a": {"c": 2, "b": 1}}, false),
                (doc! {"a": {"b": 1}}, false),
                (doc! {"a": [{"b": 1, "c": 2}]}, true),
            ],
        ),
        (
            doc! {"a": [1, 2]},
            vec![
                (doc! {"a": [1, 2]}, true),
                (doc! {"a": [2, 1]}, false),
                (doc! {"a": [[1, 2], 3]}, true),
                (doc! {"a": 1}, false),
                (doc! {"a": [1, 2, 3]}, false),
            ],
        ),
        (
            doc! {"a": []},
            vec![
                (doc! {"a": []}, true),
                (doc! {"a": [[]]}, true),
                (doc! {"a": [1]}, false),
            ],
        ),
    ]);
}

#[test]
fn null_and_missing() {
    check(vec![
        (
            doc! {"a": null},
            vec![
                (doc! {"a": null}, true),
                (doc! {}, true),
                (doc! {"a": Bson::Undefined}, true),
                (doc! {"a": 0}, false),
                (doc! {"a": [1, null]}, true),
                (doc! {"a": [1]}, false),
                (doc! {"a": false}, false),
            ],
        ),
        (
            doc! {"a.b": null},
            vec![
                (doc! {"a": {"c": 1}}, true),
                (doc! {"a": 5}, true),
                (doc! {"a": {"b": 1}}, false),
                (doc! {"a": [{"b": 1}, {"c": 1}]}, true),
                (doc! {"a": [{"b": 1}]}, false),
                // An array of scalars offers no candidate for "a.b".
                (doc! {"a": [1, 2]}, false),
                (doc! {}, true),
            ],
        ),
        (
            doc! {"a": {"$ne": null}},
            vec![
                (doc! {"a": 1}, true),
                (doc! {}, false),
                (doc! {"a": null}, false),
                (doc! {"a": [1, null]}, false),
            ],
        ),
        (
            doc! {"a": {"$gte": null}},
            vec![
                (doc! {}, true),
                (doc! {"a": null}, true),
                (doc! {"a": 1}, false),
            ],
        ),
        (
            doc! {"a": {"$lt": null}},
            vec![(doc! {}, false), (doc! {"a": null}, false)],
        ),
    ]);
}

#[test]
fn comparisons_stay_in_type_bracket() {
    check(vec![
        (
            doc! {"a": {"$gt": 5}},
            vec![
                (doc! {"a": 6}, true),
                (doc! {"a": 5.5}, true),
                (doc! {"a": 5}, false),
                (doc! {"a": "6"}, false),
                (doc! {"a": "abc"}, false),
                (doc! {"a": true}, false),
                (doc! {"a": [1, 7]}, true),
                (doc! {"a": [1, 2]}, false),
                (doc! {"a": null}, false),
                (doc! {}, false),
                (doc! {"a": f64::INFINITY}, true),
                (doc! {"a": f64::NAN}, false),
            ],
        ),
        (
            doc! {"a": {"$lte": "m"}},
            vec![
                (doc! {"a": "a"}, true),
                (doc! {"a": "m"}, true),
                (doc! {"a": "z"}, false),
                (doc! {"a": 1}, false),
            ],
        ),
        (
            doc! {"a": {"$gt": 1, "$lt": 3}},
            vec![
                (doc! {"a": 2}, true),
                (doc! {"a": 3}, false),
                // Each bound may be satisfied by a different element.
                (doc! {"a": [0, 5]}, true),
            ],
        ),
        (
            doc! {"a": {"$lt": Bson::MaxKey}},
            vec![
                (doc! {"a": 1}, true),
                (doc! {"a": "x"}, true),
                (doc! {}, true),
            ],
        ),
        (
            doc! {"a": {"$gt": Bson::MinKey}},
            vec![(doc! {"a": null}, true), (doc! {"a": Bson::MinKey}, false)],
        ),
        (
            doc! {"a": {"$gte": Bson::MinKey}},
            vec![(doc! {"a": Bson::MinKey}, true)],
        ),
        (
            doc! {"a": {"$gte": f64::NAN}},
            vec![(doc! {"a": f64::NAN}, true), (doc! {"a": 1}, false)],
        ),
        (
            doc! {"a": f64::NAN},
            vec![(doc! {"a": f64::NAN}, true), (doc! {"a": 0}, false)],
        ),
        (
            doc! {"a": {"$gt": [1]}},
            vec![
                (doc! {"a": [2]}, true),
                (doc! {"a": [[2]]}, true),
                (doc! {"a": 2}, false),
            ],
        ),
        (
            doc! {"d": {"$gt": bson::DateTime::from_millis(10)}},
            vec![
                (doc! {"d": bson::DateTime::from_millis(11)}, true),
                (doc! {"d": 11}, false),
            ],
        ),
        (
            doc! {"a": {"$eq": {"b": 1}}},
            vec![(doc! {"a": {"b": 1}}, true), (doc! {"a": {"b": 1.0}}, true)],
        ),
    ]);
}

#[test]
fn dotted_paths_through_arrays() {
    check(vec![
        (
            doc! {"a.b": 1},
            vec![
                (doc! {"a": {"b": 1}}, true),
                (doc! {"a": [{"b": 2}, {"b": 1}]}, true),
                (doc! {"a": [{"b": [0, 1]}]}, true),
                (doc! {"a": [[{"b": 1}]]}, false),
                (doc! {"a": {"b": [1]}}, true),
                (doc! {"a": 1}, false),
            ],
        ),
        (
            doc! {"a.1": 5},
            vec![
                (doc! {"a": [4, 5]}, true),
                (doc! {"a": [5, 4]}, false),
                (doc! {"a": {"1": 5}}, true),
                (doc! {"a": [{"1": 5}]}, true),
            ],
        ),
        (
            doc! {"a.0.b": 1},
            vec![
                (doc! {"a": [{"b": 1}]}, true),
                (doc! {"a": [{"b": 2}, {"b": 1}]}, false),
                (doc! {"a": [[{"b": 1}]]}, true),
            ],
        ),
        (
            doc! {"a.b.c": {"$gt": 2}},
            vec![
                (doc! {"a": [{"b": [{"c": 1}, {"c": 3}]}]}, true),
                (doc! {"a": [{"b": [{"c": 1}]}]}, false),
            ],
        ),
        (
            doc! {"a.0": [1]},
            vec![(doc! {"a": [[1]]}, true), (doc! {"a": [1]}, false)],
        ),
    ]);
}

#[test]
fn ne_and_nin_match_missing() {
    check(vec![
        (
            doc! {"a": {"$ne": 1}},
            vec![
                (doc! {"a": 2}, true),
                (doc! {}, true),
                (doc! {"a": 1}, false),
                (doc! {"a": [1, 2]}, false),
                (doc! {"a": [2, 3]}, true),
            ],
        ),
        (
            doc! {"a": {"$nin": [1, 2]}},
            vec![
                (doc! {"a": 3}, true),
                (doc! {}, true),
                (doc! {"a": 2}, false),
                (doc! {"a": [3, 2]}, false),
            ],
        ),
        (
            doc! {"a": {"$nin": []}},
            vec![(doc! {"a": 1}, true), (doc! {}, true)],
        ),
    ]);
}

#[test]
fn in_operator() {
    check(vec![
        (
            doc! {"a": {"$in": [1, "x", null]}},
            vec![
                (doc! {"a": 1.0}, true),
                (doc! {"a": "x"}, true),
                (doc! {}, true),
                (doc! {"a": Bson::Undefined}, true),
                (doc! {"a": [5, "x"]}, true),
                (doc! {"a": 2}, false),
            ],
        ),
        (
            doc! {"a": {"$in": [Bson::RegularExpression(bson::Regex { pattern: "^ab".into(), options: "".into() }), 3]}},
            vec![
                (doc! {"a": "abc"}, true),
                (doc! {"a": "cab"}, false),
                (doc! {"a": 3}, true),
                (doc! {"a": ["zz", "abz"]}, true),
            ],
        ),
        (
            doc! {"a": {"$in": []}},
            vec![(doc! {"a": 1}, false), (doc! {}, false)],
        ),
        (
            doc! {"a": {"$in": [[1, 2]]}},
            vec![
                (doc! {"a": [1, 2]}, true),
                (doc! {"a": [[1, 2]]}, true),
                (doc! {"a": 1}, false),
            ],
        ),
    ]);
}

#[test]
fn logical_operators() {
    check(vec![
        (
            doc! {"$or": [{"a": 1}, {"b": 2}]},
            vec![
                (doc! {"a": 1}, true),
                (doc! {"b": 2}, true),
                (doc! {"a": 2, "b": 1}, false),
            ],
        ),
        (
            doc! {"$and": [{"a": {"$gt": 1}}, {"a": {"$lt": 5}}]},
            vec![(doc! {"a": 3}, true), (doc! {"a": 6}, false)],
        ),
        (
            doc! {"$nor": [{"a": 1}, {"b": 2}]},
            vec![
                (doc! {"a": 1}, false),
                (doc! {"a": 3}, true),
                (doc! {}, true),
            ],
        ),
        (
            doc! {"a": {"$not": {"$gt": 5}}},
            vec![
                (doc! {"a": 3}, true),
                (doc! {"a": 7}, false),
                (doc! {}, true),
                (doc! {"a": "x"}, true),
                (doc! {"a": [1, 9]}, false),
            ],
        ),
        (
            doc! {"a": {"$not": Bson::RegularExpression(bson::Regex { pattern: "^x".into(), options: "".into() })}},
            vec![
                (doc! {"a": "xy"}, false),
                (doc! {"a": "yx"}, true),
                (doc! {}, true),
            ],
        ),
        (
            doc! {"a": {"$not": {"$regex": "^X", "$options": "i"}}},
            vec![(doc! {"a": "xy"}, false), (doc! {"a": "y"}, true)],
        ),
        (
            doc! {"$comment": "ignored", "a": 1},
            vec![(doc! {"a": 1}, true)],
        ),
        (doc! {"$alwaysFalse": 1}, vec![(doc! {}, false)]),
        (doc! {"$alwaysTrue": 1}, vec![(doc! {}, true)]),
    ]);
}

#[test]
fn exists() {
    check(vec![
        (
            doc! {"a": {"$exists": true}},
            vec![
                (doc! {"a": null}, true),
                (doc! {"a": 0}, true),
                (doc! {}, false),
            ],
        ),
        (
            doc! {"a": {"$exists": false}},
            vec![(doc! {"a": null}, false), (doc! {}, true)],
        ),
        (
            doc! {"a.b": {"$exists": true}},
            vec![
                (doc! {"a": [{"c": 1}, {"b": null}]}, true),
                (doc! {"a": [{"c": 1}]}, false),
                (doc! {"a": [1, 2]}, false),
                (doc! {"a": {"b": 1}}, true),
            ],
        ),
        (
            doc! {"a.b": {"$exists": 0}},
            vec![(doc! {"a": [1]}, true), (doc! {"a": {"b": 2}}, false)],
        ),
    ]);
}

#[test]
fn type_operator() {
    let oid = ObjectId::from_bytes([1; 12]);
    check(vec![
        (
            doc! {"a": {"$type": "string"}},
            vec![
                (doc! {"a": "x"}, true),
                (doc! {"a": 1}, false),
                (doc! {"a": ["x"]}, true),
                (doc! {}, false),
            ],
        ),
        (
            doc! {"a": {"$type": 2}},
            vec![(doc! {"a": "x"}, true), (doc! {"a": 2}, false)],
        ),
        (
            doc! {"a": {"$type": "number"}},
            vec![
                (doc! {"a": 1}, true),
                (doc! {"a": Bson::Int64(1)}, true),
                (doc! {"a": 1.5}, true),
                (doc! {"a": "1"}, false),
            ],
        ),
        (
            doc! {"a": {"$type": ["int", "long"]}},
            vec![
                (doc! {"a": 1}, true),
                (doc! {"a": Bson::Int64(1)}, true),
                (doc! {"a": 1.0}, false),
            ],
        ),
        (
            doc! {"a": {"$type": "array"}},
            vec![
                (doc! {"a": []}, true),
                (doc! {"a": [1]}, true),
                (doc! {"a": 1}, false),
            ],
        ),
        (
            doc! {"a": {"$type": "null"}},
            vec![(doc! {"a": null}, true), (doc! {}, false)],
        ),
        (
            doc! {"a": {"$type": "objectId"}},
            vec![(doc! {"a": oid}, true)],
        ),
        (
            doc! {"a": {"$type": -1}},
            vec![
                (doc! {"a": Bson::MinKey}, true),
                (doc! {"a": Bson::MaxKey}, false),
            ],
        ),
        (
            doc! {"a": {"$type": "maxKey"}},
            vec![(doc! {"a": Bson::MaxKey}, true)],
        ),
    ]);
}

#[test]
fn regex() {
    let re = |p: &str, o: &str| {
        Bson::RegularExpression(bson::Regex {
            pattern: p.into(),
            options: o.into(),
        })
    };
    check(vec![
        (
            doc! {"a": re("^ab", "")},
            vec![
                (doc! {"a": "abc"}, true),
                (doc! {"a": "xab"}, false),
                (doc! {"a": ["x", "abd"]}, true),
                (doc! {"a": 1}, false),
                (doc! {"a": Bson::Symbol("abz".into())}, true),
                (doc! {"a": re("^ab", "")}, true),
                (doc! {"a": re("^ab", "i")}, false),
            ],
        ),
        (
            doc! {"a": {"$regex": "^AB", "$options": "i"}},
            vec![(doc! {"a": "abc"}, true)],
        ),
        (
            doc! {"a": {"$options": "i", "$regex": "^AB"}},
            vec![(doc! {"a": "abc"}, true)],
        ),
        (
            doc! {"a": {"$regex": re("b$", "m")}},
            vec![(doc! {"a": "ab\ncd"}, true), (doc! {"a": "ab cd"}, false)],
        ),
        (
            doc! {"a": {"$regex": "a.c", "$options": "s"}},
            vec![(doc! {"a": "a\nc"}, true)],
        ),
        (
            doc! {"a": {"$regex": "c$"}},
            vec![
                (doc! {"a": "abc\n"}, true),
                (doc! {"a": "abc"}, true),
                (doc! {"a": "c\nd"}, false),
                (doc! {"a": "c$"}, false),
            ],
        ),
        (
            doc! {"a": {"$regex": r"c\$"}},
            vec![(doc! {"a": "c$"}, true), (doc! {"a": "c"}, false)],
        ),
        (
            doc! {"a": {"$regex": "a.c"}},
            vec![(doc! {"a": "a\nc"}, false), (doc! {"a": "abc"}, true)],
        ),
        (
            doc! {"a": {"$regex": " a  # comment\n b", "$options": "x"}},
            vec![(doc! {"a": "ab"}, true)],
        ),
        (
            doc! {"a": {"$regex": r"\Qa.b\E$"}},
            vec![(doc! {"a": "xa.b"}, true), (doc! {"a": "axb"}, false)],
        ),
        (
            doc! {"a": {"$regex": r"c\Z"}},
            vec![(doc! {"a": "abc\n"}, true), (doc! {"a": "abcd"}, false)],
        ),
        (
            doc! {"a": {"$regex": r"[[]x"}},
            vec![(doc! {"a": "[x"}, true)],
        ),
        (
            doc! {"a": {"$eq": re("^a", "")}},
            vec![(doc! {"a": "abc"}, false), (doc! {"a": re("^a", "")}, true)],
        ),
    ]);
}

#[test]
fn regex_literal_prefix() {
    let r = RegexMatch::new("^abc.*", "").unwrap();
    assert_eq!(r.literal_prefix().as_deref(), Some("abc"));
    assert_eq!(RegexMatch::new("abc", "").unwrap().literal_prefix(), None);
    assert_eq!(RegexMatch::new("^abc", "i").unwrap().literal_prefix(), None);
}

#[test]
fn mod_operator() {
    check(vec![
        (
            doc! {"a": {"$mod": [4, 1]}},
            vec![
                (doc! {"a": 5}, true),
                (doc! {"a": 5.9}, true),
                (doc! {"a": -3}, false),
                (doc! {"a": 4}, false),
                (doc! {"a": [2, 9]}, true),
                (doc! {"a": "5"}, false),
                (doc! {"a": f64::NAN}, false),
            ],
        ),
        (
            doc! {"a": {"$mod": [-1, 0]}},
            vec![(doc! {"a": i64::MIN}, true)],
        ),
        (
            doc! {"a": {"$mod": [4, -3]}},
            vec![(doc! {"a": -3}, true), (doc! {"a": -7}, true)],
        ),
    ]);
}

#[test]
fn size_operator() {
    check(vec![
        (
            doc! {"a": {"$size": 2}},
            vec![
                (doc! {"a": [1, 2]}, true),
                (doc! {"a": [[1, 2]]}, false),
                (doc! {"a": [1]}, false),
                (doc! {"a": 2}, false),
                (doc! {}, false),
            ],
        ),
        (
            doc! {"a": {"$size": 0}},
            vec![(doc! {"a": []}, true), (doc! {}, false)],
        ),
        (
            doc! {"a.b": {"$size": 1}},
            vec![
                (doc! {"a": [{"b": [1]}, {"b": [1, 2]}]}, true),
                (doc! {"a": [{"b": [1, 2]}]}, false),
            ],
        ),
        (doc! {"a": {"$size": 1.0}}, vec![(doc! {"a": [1]}, true)]),
    ]);
}

#[test]
fn all_operator() {
    check(vec![
        (
            doc! {"a": {"$all": [1, 2]}},
            vec![
                (doc! {"a": [2, 3, 1]}, true),
                (doc! {"a": [1, 3]}, false),
                (doc! {"a": 1}, false),
            ],
        ),
        (doc! {"a": {"$all": [1]}}, vec![(doc! {"a": 1}, true)]),
        (
            doc! {"a": {"$all": []}},
            vec![(doc! {"a": []}, false), (doc! {"a": [1]}, false)],
        ),
        (
            doc! {"a": {"$all": [[1, 2]]}},
            vec![(doc! {"a": [1, 2]}, true), (doc! {"a": [[1, 2], 3]}, true)],
        ),
        (
            doc! {"a": {"$all": [
                {"$elemMatch": {"b": 1}},
                {"$elemMatch": {"c": {"$gt": 2}}}
            ]}},
            vec![
                (doc! {"a": [{"b": 1}, {"c": 3}]}, true),
                (doc! {"a": [{"b": 1, "c": 1}]}, false),
            ],
        ),
        (
            doc! {"tags": {"$all": [Bson::RegularExpression(bson::Regex { pattern: "^a".into(), options: "".into() }), "b"]}},
            vec![
                (doc! {"tags": ["ax", "b"]}, true),
                (doc! {"tags": ["b"]}, false),
            ],
        ),
    ]);
}

#[test]
fn elem_match() {
    check(vec![
        (
            doc! {"a": {"$elemMatch": {"$gte": 80, "$lt": 85}}},
            vec![
                (doc! {"a": [82, 90]}, true),
                (doc! {"a": [79, 90]}, false),
                (doc! {"a": 82}, false),
                (doc! {"a": [[82]]}, false),
            ],
        ),
        (
            doc! {"a": {"$elemMatch": {"b": 1, "c": {"$gt": 1}}}},
            vec![
                (doc! {"a": [{"b": 1, "c": 2}]}, true),
                (doc! {"a": [{"b": 1, "c": 1}, {"b": 2, "c": 2}]}, false),
                (doc! {"a": {"b": 1, "c": 2}}, false),
            ],
        ),
        (
            doc! {"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": 1}]}}},
            vec![
                (doc! {"a": [{"c": 1}]}, true),
                (doc! {"a": [{"d": 1}]}, false),
            ],
        ),
        (
            doc! {"a": {"$elemMatch": {"$ne": 1}}},
            vec![
                (doc! {"a": [1, 2]}, true),
                (doc! {"a": [1, 1]}, false),
                (doc! {"a": []}, false),
            ],
        ),
        (
            doc! {"a": {"$elemMatch": {"$elemMatch": {"$gt": 1}}}},
            vec![
                (doc! {"a": [[0], [2]]}, true),
                (doc! {"a": [[0], 5]}, false),
            ],
        ),
        (
            doc! {"a": {"$elemMatch": {"0": 1}}},
            vec![(doc! {"a": [[1, 2]]}, true)],
        ),
        (
            doc! {"a.b": {"$elemMatch": {"c": 1}}},
            vec![
                (doc! {"a": [{"b": [{"c": 1}]}]}, true),
                (doc! {"a": {"b": {"c": 1}}}, false),
            ],
        ),
        (
            doc! {"a": {"$elemMatch": {"$type": "string"}}},
            vec![(doc! {"a": [1, "x"]}, true), (doc! {"a": [1]}, false)],
        ),
        (
            doc! {"a": {"$elemMatch": {"$in": [null]}}},
            vec![(doc! {"a": [null]}, true), (doc! {"a": [1]}, false)],
        ),
    ]);
}

#[test]
fn bit_operators() {
    check(vec![
        (
            doc! {"a": {"$bitsAllSet": [0, 2]}},
            vec![
                (doc! {"a": 5}, true),
                (doc! {"a": 4}, false),
                (doc! {"a": 5.5}, false),
            ],
        ),
        (
            doc! {"a": {"$bitsAnySet": 6}},
            vec![(doc! {"a": 4}, true), (doc! {"a": 1}, false)],
        ),
        (
            doc! {"a": {"$bitsAllClear": 6}},
            vec![(doc! {"a": 1}, true), (doc! {"a": 2}, false)],
        ),
        (
            doc! {"a": {"$bitsAnyClear": [0, 100]}},
            vec![(doc! {"a": -1}, false), (doc! {"a": 1}, true)],
        ),
        (
            doc! {"a": {"$bitsAllSet": Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0b11] }}},
            vec![
                (doc! {"a": 3}, true),
                (
                    doc! {"a": Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0b111] }},
                    true,
                ),
                (doc! {"a": 1}, false),
            ],
        ),
    ]);
}

#[test]
fn dbref_documents_are_values() {
    check(vec![(
        doc! {"r": {"$ref": "c", "$id": 1}},
        vec![
            (doc! {"r": {"$ref": "c", "$id": 1}}, true),
            (doc! {"r": {"$ref": "c", "$id": 2}}, false),
        ],
    )]);
}

fn toy_eval(e: &Bson, doc: &Document) -> QResult<Bson> {
    // Supports {$eq: ["$x", "$y"]} and literals, enough to exercise the hook.
    let field = |v: &Bson| match v {
        Bson::String(s) if s.starts_with('$') => doc.get(&s[1..]).cloned().unwrap_or(Bson::Null),
        other => other.clone(),
    };
    match e {
        Bson::Document(d) => match d.get("$eq") {
            Some(Bson::Array(a)) if a.len() == 2 => Ok(Bson::Boolean(
                cmp_values(&field(&a[0]), &field(&a[1])) == Ordering::Equal,
            )),
            _ => Err(QueryError::bad_value("toy evaluator: unsupported")),
        },
        other => Ok(field(other)),
    }
}

#[test]
fn expr_hook() {
    let f = doc! {"$expr": {"$eq": ["$a", "$b"]}};
    let e = err(f.clone());
    assert_eq!(e.code, 238);
    let matcher = Matcher::new_with_expr(&f, toy_eval).unwrap();
    assert!(matcher.matches(&doc! {"a": 1, "b": 1.0}));
    assert!(!matcher.matches(&doc! {"a": 1, "b": 2}));
    let truthy = Matcher::new_with_expr(&doc! {"$expr": "$a"}, toy_eval).unwrap();
    assert!(truthy.matches(&doc! {"a": 5}));
    assert!(!truthy.matches(&doc! {"a": 0}));
    assert!(!truthy.matches(&doc! {}));
    assert!(truthy.matches(&doc! {"a": "x"}));
    let failing = Matcher::new_with_expr(&doc! {"$expr": {"$bad": 1}}, toy_eval).unwrap();
    assert_eq!(failing.try_matches(&doc! {}).unwrap_err().code, 2);
    assert!(!failing.matches(&doc! {}));
    assert!(matches!(matcher.expr(), MatchExpr::Expr(_)));
    // $expr is not allowed inside $elemMatch.
    let e = Matcher::new_with_expr(&doc! {"a": {"$elemMatch": {"$expr": 1}}}, toy_eval);
    assert_eq!(e.unwrap_err().code, 2);
}

#[test]
fn elem_match_key() {
    let key = |f: Document, d: Document| m(f).matches_with_key(&d).unwrap();
    assert_eq!(key(doc! {"a": 3}, doc! {"a": [1, 3, 3]}), (true, Some(1)));
    assert_eq!(
        key(
            doc! {"a.b": {"$gt": 1}},
            doc! {"a": [{"b": 0}, {"b": [0, 5]}]}
        ),
        (true, Some(1))
    );
    assert_eq!(
        key(
            doc! {"a": {"$elemMatch": {"b": 2}}},
            doc! {"a": [{"b": 1}, {"b": 2}]}
        ),
        (true, Some(1))
    );
    assert_eq!(key(doc! {"x": 1}, doc! {"x": 1}), (true, None));
    assert_eq!(key(doc! {"a": 9}, doc! {"a": [1]}), (false, None));
    // Positional indexing sets no key.
    assert_eq!(key(doc! {"a.1": 3}, doc! {"a": [1, 3]}), (true, None));
}

#[test]
fn parse_errors() {
    let cases: Vec<(Document, i32, &str)> = vec![
        (doc! {"a": {"$foo": 1}}, 2, "unknown operator: $foo"),
        (doc! {"$foo": 1}, 2, "unknown top level operator: $foo"),
        (doc! {"a": {"$in": 1}}, 2, "$in needs an array"),
        (doc! {"a": {"$nin": "x"}}, 2, "$nin needs an array"),
        (
            doc! {"a": {"$in": [{"$gt": 1}]}},
            2,
            "cannot nest $ under $in",
        ),
        (
            doc! {"$and": []},
            2,
            "$and/$or/$nor must be a nonempty array",
        ),
        (doc! {"$or": {}}, 2, "$or must be an array"),
        (
            doc! {"$nor": [1]},
            2,
            "$or/$and/$nor entries need to be full objects",
        ),
        (doc! {"a": {"$size": "x"}}, 2, "$size needs a number"),
        (doc! {"a": {"$size": -1}}, 2, "$size may not be negative"),
        (
            doc! {"a": {"$size": 1.5}},
            2,
            "$size must be a whole number",
        ),
        (doc! {"a": {"$regex": 1}}, 2, "$regex has to be a string"),
        (
            doc! {"a": {"$regex": "("}},
            51091,
            "Regular expression is invalid",
        ),
        (
            doc! {"a": {"$regex": "a", "$options": "q"}},
            51108,
            "invalid flag",
        ),
        (doc! {"a": {"$options": "i"}}, 2, "$options needs a $regex"),
        (
            doc! {"a": {"$not": 5}},
            2,
            "$not needs a regex or a document",
        ),
        (doc! {"a": {"$not": {}}}, 2, "$not cannot be empty"),
        (doc! {"a": {"$not": {"b": 1}}}, 2, "unknown operator: b"),
        (doc! {"a": {"$mod": [0, 1]}}, 2, "divisor cannot be 0"),
        (doc! {"a": {"$mod": [1]}}, 2, "not enough elements"),
        (doc! {"a": {"$mod": [1, 2, 3]}}, 2, "too many elements"),
        (doc! {"a": {"$mod": "x"}}, 2, "needs to be an array"),
        (
            doc! {"a": {"$type": "foo"}},
            2,
            "Unknown type name alias: foo",
        ),
        (
            doc! {"a": {"$type": 99}},
            2,
            "Invalid numerical type code: 99",
        ),
        (doc! {"a": {"$type": true}}, 14, "type must be represented"),
        (doc! {"a": {"$type": []}}, 9, "at least one type"),
        (doc! {"a": {"$all": 1}}, 2, "$all needs an array"),
        (
            doc! {"a": {"$all": [{"$gt": 1}]}},
            2,
            "no $ expressions in $all",
        ),
        (
            doc! {"a": {"$all": [{"$elemMatch": {}}, 1]}},
            2,
            "has to be consistent",
        ),
        (
            doc! {"a": {"$elemMatch": 1}},
            2,
            "$elemMatch needs an Object",
        ),
        (
            doc! {"a": {"$gt": Bson::RegularExpression(bson::Regex { pattern: "x".into(), options: "".into() })}},
            2,
            "Can't have RegEx",
        ),
        (
            doc! {"a": {"$ne": Bson::RegularExpression(bson::Regex { pattern: "x".into(), options: "".into() })}},
            2,
            "Can't have regex as arg to $ne",
        ),
        (
            doc! {"a": Bson::Undefined},
            2,
            "cannot compare to undefined",
        ),
        (doc! {"a": {"$bitsAllSet": "x"}}, 2, "takes an Array"),
        (
            doc! {"a": {"$bitsAllSet": [-1]}},
            2,
            "Expected a non-negative number in: 0: -1",
        ),
        (doc! {"$alwaysTrue": 2}, 9, "must be an integer value of 1"),
        (doc! {"$where": "1"}, 238, "not supported"),
    ];
    for (filter, code, msg) in cases {
        let e = err(filter.clone());
        assert_eq!(e.code, code, "{filter}: {e}");
        assert!(e.msg.contains(msg), "{filter}: {e}");
    }
}

#[test]
fn tree_is_exposed() {
    let matcher = m(doc! {"a": {"$gt": 1, "$lt": 5}, "b": {"$in": [2, 1, 2]}});
    let MatchExpr::And(kids) = matcher.expr() else {
        panic!("expected And: {:?}", matcher.expr());
    };
    assert_eq!(kids.len(), 3);
    match &kids[0] {
        MatchExpr::Leaf {
            path,
            op: LeafOp::Cmp(CmpOp::Gt, v),
        } => {
            assert_eq!(path.as_str(), "a");
            assert_eq!(v, &bson!(1));
        }
        other => panic!("unexpected {other:?}"),
    }
    match &kids[2] {
        MatchExpr::Leaf {
            op: LeafOp::In(list),
            ..
        } => assert_eq!(list.values, vec![bson!(1), bson!(2)]),
        other => panic!("unexpected {other:?}"),
    }
    assert!(matches!(m(doc! {"a": 1}).expr(), MatchExpr::Leaf { .. }));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn scalar() -> impl Strategy<Value = Bson> {
        prop_oneof![
            (-3i32..3).prop_map(Bson::Int32),
            (-3i64..3).prop_map(Bson::Int64),
            (-6i32..6).prop_map(|i| Bson::Double(f64::from(i) / 2.0)),
            "[ab]{0,2}".prop_map(Bson::String),
            Just(Bson::Null),
            any::<bool>().prop_map(Bson::Boolean),
        ]
    }

    fn value() -> impl Strategy<Value = Bson> {
        scalar().prop_recursive(2, 12, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Bson::Array),
                inner.prop_map(|v| Bson::Document(doc! {"b": v})),
            ]
        })
    }

    fn document() -> impl Strategy<Value = Document> {
        prop::option::of(value()).prop_map(|v| match v {
            Some(v) => doc! {"a": v},
            None => doc! {},
        })
    }

    fn mt(f: Document, d: &Document) -> bool {
        Matcher::new(&f).unwrap().matches(d)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn negations_and_equivalences(d in document(), x in scalar(), y in scalar(),
                                      path in prop::sample::select(vec!["a", "a.b", "a.0"])) {
            let eq = mt(doc! {path: x.clone()}, &d);
            prop_assert_eq!(mt(doc! {path: {"$eq": x.clone()}}, &d), eq);
            prop_assert_eq!(mt(doc! {path: {"$ne": x.clone()}}, &d), !eq);
            let inn = mt(doc! {path: {"$in": [x.clone(), y.clone()]}}, &d);
            prop_assert_eq!(inn, mt(doc! {"$or": [{path: x.clone()}, {path: y.clone()}]}, &d));
            prop_assert_eq!(mt(doc! {path: {"$nin": [x.clone(), y.clone()]}}, &d), !inn);
            let all = mt(doc! {path: {"$all": [x.clone(), y.clone()]}}, &d);
            prop_assert_eq!(all, mt(doc! {"$and": [{path: x.clone()}, {path: y.clone()}]}, &d));
            for op in ["$gt", "$gte", "$lt", "$lte"] {
                let m = mt(doc! {path: {op: x.clone()}}, &d);
                prop_assert_eq!(mt(doc! {path: {"$not": {op: x.clone()}}}, &d), !m);
                prop_assert_eq!(mt(doc! {"$nor": [{path: {op: x.clone()}}]}, &d), !m);
            }
            let ex = mt(doc! {path: {"$exists": true}}, &d);
            prop_assert_eq!(mt(doc! {path: {"$exists": false}}, &d), !ex);
        }

        #[test]
        fn scalar_ranges_follow_cmp_values(v in scalar(), x in scalar()) {
            let d = doc! {"a": v.clone()};
            let same_type = type_rank(&v) == type_rank(&x);
            let o = cmp_values(&v, &x);
            prop_assert_eq!(mt(doc! {"a": {"$lt": x.clone()}}, &d), same_type && o == Ordering::Less);
            prop_assert_eq!(mt(doc! {"a": {"$gte": x.clone()}}, &d), same_type && o != Ordering::Less);
            prop_assert_eq!(mt(doc! {"a": x.clone()}, &d), o == Ordering::Equal);
        }
    }
}

mod raw {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Bson> {
        prop_oneof![
            (-3i32..3).prop_map(Bson::Int32),
            (-3i64..3).prop_map(Bson::Int64),
            prop_oneof![Just(f64::NAN), (-3i32..3).prop_map(|v| f64::from(v) / 2.0)]
                .prop_map(Bson::Double),
            "[ab]{0,2}".prop_map(Bson::String),
            Just(Bson::Null),
            Just(Bson::Boolean(true)),
            Just(Bson::MinKey),
            Just(Bson::MaxKey),
        ]
    }

    fn field_value() -> impl Strategy<Value = Bson> {
        prop_oneof![
            4 => value(),
            1 => prop::collection::vec(value(), 0..3).prop_map(Bson::Array),
            1 => value().prop_map(|v| Bson::Document(doc! {"k": v})),
        ]
    }

    fn predicate() -> impl Strategy<Value = Bson> {
        prop_oneof![
            value(),
            (
                prop::sample::select(vec!["$eq", "$ne", "$lt", "$lte", "$gt", "$gte"]),
                value()
            )
                .prop_map(|(op, v)| Bson::Document(doc! {op: v})),
            prop::collection::vec(value(), 0..3).prop_map(|v| Bson::Document(doc! {"$in": v})),
            any::<bool>().prop_map(|b| Bson::Document(doc! {"$exists": b})),
            prop::sample::select(vec!["number", "string", "null", "array", "int"])
                .prop_map(|t| Bson::Document(doc! {"$type": t})),
        ]
    }

    proptest! {
        /// Over random documents and conjunctions of top-level
        /// predicates, the raw path decides as decoding does whenever it decides.
        #[test]
        fn raw_path_agrees_with_decoding(
            fields in prop::collection::vec((prop::sample::select(vec!["a", "b", "c"]), field_value()), 0..5),
            preds in prop::collection::vec((prop::sample::select(vec!["a", "b", "d"]), predicate()), 1..4),
        ) {
            // As stored: no field repeated.
            let d: Document = fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            let raw = bson::RawDocumentBuf::from_document(&d).expect("encodes");
            let filter = Document::from_iter(vec![(
                "$and".to_string(),
                Bson::Array(preds.iter().map(|(k, p)| Bson::Document(doc! {*k: p.clone()})).collect()),
            )]);
            let matcher = m(filter);
            if let Some(hit) = matcher.matches_raw(&raw) {
                prop_assert_eq!(hit, matcher.matches(&d));
            }
        }
    }

    #[test]
    fn the_raw_path_takes_top_level_comparisons_and_leaves_the_rest() {
        let bytes = bson::to_vec(&doc! {"a": 5, "x": 7, "arr": [1, 2]}).expect("encodes");
        let raw = bson::RawDocument::from_bytes(&bytes).expect("valid");
        assert_eq!(
            m(doc! {"a": {"$gte": 1, "$lt": 9}, "x": 7}).matches_raw(raw),
            Some(true)
        );
        assert_eq!(
            m(doc! {"a": {"$gte": 1}, "x": 8}).matches_raw(raw),
            Some(false)
        );
        assert_eq!(m(doc! {"missing": null}).matches_raw(raw), Some(true));
        // An array needs the decoded path's traversal; so do dotted paths and `$or`.
        assert_eq!(m(doc! {"arr": 2}).matches_raw(raw), None);
        assert_eq!(m(doc! {"a.b": 2}).matches_raw(raw), None);
        assert_eq!(m(doc! {"$or": [{"a": 5}]}).matches_raw(raw), None);
    }
}
