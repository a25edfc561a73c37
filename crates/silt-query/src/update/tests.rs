//! Table-driven tests of update parsing and application.
#![expect(clippy::cast_possible_truncation, reason = "test sizes are small")]

use bson::{bson, doc, oid::ObjectId, Bson, DateTime, Document, Timestamp};

use super::apply::identical_docs;
use super::*;

const NOW: i64 = 1_700_000_000_123;

fn ctx() -> UpdateCtx {
    UpdateCtx::new(DateTime::from_millis(NOW))
}

fn parse(update: &Document, filters: &[Document]) -> QResult<UpdateSpec> {
    UpdateSpec::parse(update, (!filters.is_empty()).then_some(filters))
}

fn run_with(
    doc: &Document,
    update: &Document,
    filters: &[Document],
    ctx: &UpdateCtx,
) -> QResult<(Document, bool)> {
    parse(update, filters)?.apply(doc, ctx)
}

#[track_caller]
fn same(actual: &Document, expected: &Document) {
    assert!(
        identical_docs(actual, expected),
        "\n  actual:   {actual:?}\n  expected: {expected:?}"
    );
}

/// (document, update, expected document)
#[track_caller]
fn table(cases: Vec<(Document, Document, Document)>) {
    for (doc, update, expected) in cases {
        let (got, changed) = run_with(&doc, &update, &[], &ctx())
            .unwrap_or_else(|e| panic!("{update:?} on {doc:?}: {e}"));
        same(&got, &expected);
        assert_eq!(
            changed,
            !identical_docs(&doc, &expected),
            "changed for {update:?}"
        );
    }
}

/// (document, update, code, message)
#[track_caller]
fn errors(cases: Vec<(Document, Document, i32, &str)>) {
    for (doc, update, code, msg) in cases {
        let e = run_with(&doc, &update, &[], &ctx()).expect_err(&format!("{update:?}"));
        assert_eq!(
            (e.code, e.msg.as_str()),
            (code, msg),
            "{update:?} on {doc:?}"
        );
    }
}

#[test]
fn set_and_unset() {
    table(vec![
        (
            doc! {"_id": 1, "a": 1},
            doc! {"$set": {"a": 2}},
            doc! {"_id": 1, "a": 2},
        ),
        (
            doc! {"_id": 1},
            doc! {"$set": {"b": 1, "a": 2}},
            doc! {"_id": 1, "a": 2, "b": 1},
        ),
        (
            doc! {"_id": 1},
            doc! {"$set": {"x.b": 1, "x.a": 2}},
            doc! {"_id": 1, "x": {"a": 2, "b": 1}},
        ),
        (
            doc! {"a": {"b": 1}},
            doc! {"$set": {"a.c.d": 1}},
            doc! {"a": {"b": 1, "c": {"d": 1}}},
        ),
        (
            doc! {"a": [1, 2]},
            doc! {"$set": {"a.1": 5}},
            doc! {"a": [1, 5]},
        ),
        (
            doc! {"a": [1]},
            doc! {"$set": {"a.3": 5}},
            doc! {"a": [1, null, null, 5]},
        ),
        (
            doc! {"a": []},
            doc! {"$set": {"a.10": 1, "a.9": 2}},
            doc! {"a": [null, null, null, null, null, null, null, null, null, 2, 1]},
        ),
        (
            doc! {"a": [{"b": 1}, {"b": 2}]},
            doc! {"$set": {"a.1.b": 3, "a.0.c": 4}},
            doc! {"a": [{"b": 1, "c": 4}, {"b": 3}]},
        ),
        (
            doc! {"a": [[1], [2]]},
            doc! {"$set": {"a.1.0": 9}},
            doc! {"a": [[1], [9]]},
        ),
        (
            doc! {},
            doc! {"$set": {"a.0.b": 1}},
            doc! {"a": {"0": {"b": 1}}},
        ),
        (
            doc! {"a": 1},
            doc! {"$set": {"a": {"x": [1, {"y": 2}]}}},
            doc! {"a": {"x": [1, {"y": 2}]}},
        ),
        (
            doc! {"a": 1, "b": 2},
            doc! {"$set": {}},
            doc! {"a": 1, "b": 2},
        ),
        (
            doc! {"a": 1, "b": 2},
            doc! {"$unset": {"a": ""}},
            doc! {"b": 2},
        ),
        (
            doc! {"a": {"b": 1, "c": 2}},
            doc! {"$unset": {"a.b": 1}},
            doc! {"a": {"c": 2}},
        ),
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$unset": {"a.1": 1}},
            doc! {"a": [1, null, 3]},
        ),
        (
            doc! {"a": 1},
            doc! {"$unset": {"b": 1, "a.b": 1, "c.d": 1}},
            doc! {"a": 1},
        ),
        (
            doc! {"a": {"$x": 1}},
            doc! {"$set": {"a.$y": 2}},
            doc! {"a": {"$x": 1, "$y": 2}},
        ),
    ]);
}

#[test]
fn no_op_updates_are_unchanged() {
    let doc = doc! {"_id": 1, "a": 1, "b": {"c": [1, 2]}, "d": 1.5};
    for update in [
        doc! {"$set": {"a": 1}},
        doc! {"$set": {"b": {"c": [1, 2]}, "d": 1.5}},
        doc! {"$unset": {"zz": 1}},
        doc! {"$inc": {"a": 0}},
        doc! {"$mul": {"a": 1}},
        doc! {"$min": {"a": 5}},
        doc! {"$max": {"a": 1.0}},
        doc! {"$addToSet": {"b.c": 2}},
        doc! {"$pull": {"b.c": 7}},
        doc! {"$pullAll": {"b.c": [8, 9]}},
        doc! {"$pop": {"zz": 1}},
        doc! {"$push": {"b.c": {"$each": []}}},
        doc! {"$rename": {"nope": "other"}},
        doc! {"$setOnInsert": {"a": 2}},
    ] {
        let (got, changed) = run_with(&doc, &update, &[], &ctx()).unwrap();
        assert!(!changed, "{update:?} changed the document");
        same(&got, &doc);
    }
    // Same value, different type: MongoDB stores the new type.
    let (got, changed) = run_with(&doc, &doc! {"$set": {"a": 1.0}}, &[], &ctx()).unwrap();
    assert!(changed);
    same(
        &got,
        &doc! {"_id": 1, "a": 1.0, "b": {"c": [1, 2]}, "d": 1.5},
    );
}

#[test]
fn arithmetic() {
    table(vec![
        (doc! {"a": 1}, doc! {"$inc": {"a": 2}}, doc! {"a": 3}),
        (doc! {"a": 1}, doc! {"$inc": {"a": -2.5}}, doc! {"a": -1.5}),
        (doc! {"a": 1.5}, doc! {"$inc": {"a": 1}}, doc! {"a": 2.5}),
        (
            doc! {"a": i32::MAX},
            doc! {"$inc": {"a": 1}},
            doc! {"a": i64::from(i32::MAX) + 1},
        ),
        (
            doc! {"a": 1},
            doc! {"$inc": {"a": 1_i64}},
            doc! {"a": 2_i64},
        ),
        (
            doc! {"a": 5_i64},
            doc! {"$inc": {"a": 1}},
            doc! {"a": 6_i64},
        ),
        (
            doc! {},
            doc! {"$inc": {"a.b": 5_i64}},
            doc! {"a": {"b": 5_i64}},
        ),
        (
            doc! {"a": [1, 2]},
            doc! {"$inc": {"a.1": 10}},
            doc! {"a": [1, 12]},
        ),
        (doc! {"a": 3}, doc! {"$mul": {"a": 4}}, doc! {"a": 12}),
        (
            doc! {"a": i32::MAX},
            doc! {"$mul": {"a": 2}},
            doc! {"a": i64::from(i32::MAX) * 2},
        ),
        (doc! {"a": 3}, doc! {"$mul": {"a": 0.5}}, doc! {"a": 1.5}),
        (
            doc! {},
            doc! {"$mul": {"a": 5, "b": 5_i64, "c": 2.5}},
            doc! {"a": 0, "b": 0_i64, "c": 0.0},
        ),
        (
            doc! {"a": Bson::Decimal128("1.5".parse().unwrap())},
            doc! {"$inc": {"a": 1}},
            doc! {"a": Bson::Decimal128("2.5".parse().unwrap())},
        ),
        (doc! {"a": 5}, doc! {"$min": {"a": 3}}, doc! {"a": 3}),
        (doc! {"a": 5}, doc! {"$min": {"a": 7}}, doc! {"a": 5}),
        (doc! {"a": 5}, doc! {"$max": {"a": 7.5}}, doc! {"a": 7.5}),
        (
            doc! {"a": 5},
            doc! {"$max": {"a": "str"}},
            doc! {"a": "str"},
        ),
        (doc! {"a": 5}, doc! {"$min": {"a": null}}, doc! {"a": null}),
        (
            doc! {},
            doc! {"$min": {"a": 1}, "$max": {"b": 2}},
            doc! {"a": 1, "b": 2},
        ),
        (
            doc! {"a": 6},
            doc! {"$bit": {"a": {"and": 3}}},
            doc! {"a": 2},
        ),
        (
            doc! {"a": 6},
            doc! {"$bit": {"a": {"or": 1_i64, "xor": 2}}},
            doc! {"a": 5_i64},
        ),
        (doc! {}, doc! {"$bit": {"a": {"or": 4}}}, doc! {"a": 4}),
    ]);
    errors(vec![
        (doc! {"_id": 1}, doc! {"$inc": {"a": "x"}}, 14, "Cannot increment with non-numeric argument: {a: \"x\"}"),
        (doc! {"_id": 1}, doc! {"$mul": {"a": null}}, 14, "Cannot multiply with non-numeric argument: {a: null}"),
        (
            doc! {"_id": 1, "a": "s"},
            doc! {"$inc": {"a": 1}},
            14,
            "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of non-numeric type string",
        ),
        (
            doc! {"_id": "x", "a": {"b": [true]}},
            doc! {"$mul": {"a.b.0": 2}},
            14,
            "Cannot apply $mul to a value of non-numeric type. {_id: \"x\"} has the field '0' of non-numeric type bool",
        ),
        (
            doc! {"_id": "int64-max", "v": i64::MAX},
            doc! {"$inc": {"v": i64::MAX}},
            2,
            "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) for document {_id: \"int64-max\"}",
        ),
        (
            doc! {"_id": 1, "v": 42},
            doc! {"$mul": {"v": i64::MAX}},
            2,
            "Failed to apply $mul operations to current value ((NumberInt)42) for document {_id: 1}",
        ),
        (doc! {"_id": 1, "a": 1}, doc! {"$inc": {"a.b": 1}}, 28, "Cannot create field 'b' in element {a: 1}"),
        (
            doc! {"_id": 1, "a": 1.5},
            doc! {"$bit": {"a": {"and": 1}}},
            2,
            "Cannot apply $bit to a value of non-integral type._id: 1 has the field a of non-integer type double",
        ),
        (
            doc! {},
            doc! {"$bit": {"a": {"nand": 1}}},
            2,
            "The $bit modifier only supports 'and', 'or', and 'xor', not 'nand' which is an unknown operator: {nand: 1}",
        ),
    ]);
}

#[test]
fn paths_through_scalars_and_arrays() {
    errors(vec![
        (
            doc! {"a": 1},
            doc! {"$set": {"a.b": 1}},
            28,
            "Cannot create field 'b' in element {a: 1}",
        ),
        (
            doc! {"a": {"b": "s"}},
            doc! {"$set": {"a.b.c.d": 1}},
            28,
            "Cannot create field 'c' in element {b: \"s\"}",
        ),
        (
            doc! {"a": [1, 2]},
            doc! {"$set": {"a.x": 1}},
            28,
            "Cannot create field 'x' in element {a: [ 1, 2 ]}",
        ),
        (
            doc! {"v": [{"foo": [{"bar": "hello"}]}]},
            doc! {"$max": {"v.foo": 1}},
            28,
            "Cannot create field 'foo' in element {v: [ { foo: [ { bar: \"hello\" } ] } ]}",
        ),
        (
            doc! {"a": 1},
            doc! {"$pull": {"a.b": 1}},
            28,
            "Cannot use the part (b) of (a.b) to traverse the element ({a: 1})",
        ),
        (
            doc! {"a": [1]},
            doc! {"$pop": {"a.b.c": 1}},
            28,
            "Cannot use the part (b) of (a.b.c) to traverse the element ({a: [ 1 ]})",
        ),
        (
            doc! {"a": []},
            doc! {"$set": {"a.2000000": 1}},
            34,
            "can't backfill more than 1500000 elements",
        ),
    ]);
    // $unset tolerates a path that could not exist; $pop/$pull tolerate missing array indexes.
    table(vec![
        (doc! {"a": 1}, doc! {"$unset": {"a.b.c": 1}}, doc! {"a": 1}),
        (
            doc! {"a": [1]},
            doc! {"$pop": {"a.5": 1}, "$pull": {"a.7": 1}},
            doc! {"a": [1]},
        ),
    ]);
}

#[test]
fn rename() {
    table(vec![
        (
            doc! {"_id": 1, "a": 1, "b": 2},
            doc! {"$rename": {"a": "z"}},
            doc! {"_id": 1, "b": 2, "z": 1},
        ),
        (
            doc! {"a": 1, "b": 2, "c": 3},
            doc! {"$rename": {"c": "a"}},
            doc! {"a": 3, "b": 2},
        ),
        (
            doc! {"a": {"b": 1, "c": 2}},
            doc! {"$rename": {"a.b": "x.y"}},
            doc! {"a": {"c": 2}, "x": {"y": 1}},
        ),
        (
            doc! {"a": [1, 2]},
            doc! {"$rename": {"a": "b"}},
            doc! {"b": [1, 2]},
        ),
        (
            doc! {"a": 1},
            doc! {"$rename": {"q": "r", "p.x": "s"}},
            doc! {"a": 1},
        ),
    ]);
    errors(vec![
        (doc! {"a": 1}, doc! {"$rename": {"a": 5}}, 2, "The 'to' field for $rename must be a string: a: 5"),
        (doc! {"a": 1}, doc! {"$rename": {"a": "a"}}, 2, "The source and target field for $rename must differ: a: \"a\""),
        (doc! {"a": 1}, doc! {"$rename": {"a": "a.b"}}, 2, "The source and target field for $rename must not be on the same path: a: \"a.b\""),
        (doc! {"a": 1}, doc! {"$rename": {"a.b": "a"}}, 2, "The source and target field for $rename must not be on the same path: a.b: \"a\""),
        (doc! {"a": [1]}, doc! {"$rename": {"a.$": "b"}}, 2, "The source field for $rename may not be dynamic: a.$"),
        (doc! {"a": [1]}, doc! {"$rename": {"b": "a.$[]"}}, 2, "The destination field for $rename may not be dynamic: a.$[]"),
        (
            doc! {"_id": "test_object", "a": [{"a": 1}, {"b": 2}]},
            doc! {"$rename": {"a.0.a": "b"}},
            2,
            "The source field cannot be an array element, 'a.0.a' in doc with _id: \"test_object\" has an array field called 'a'",
        ),
        (
            doc! {"_id": 1, "a": 1, "b": [{"c": 1}]},
            doc! {"$rename": {"a": "b.0.c"}},
            2,
            "The destination field cannot be an array element, 'b.0.c' in doc with _id: 1 has an array field called 'b'",
        ),
        (
            doc! {"a": [{"a": 1}, {"b": 2}]},
            doc! {"$rename": {"a.a": "b"}},
            28,
            "cannot use the part (a of a.a) to traverse the element ({a: [ { a: 1 }, { b: 2 } ]})",
        ),
        (doc! {"a": 1}, doc! {"$rename": {"a.b": "s"}}, 28, "cannot use the part (a of a.b) to traverse the element ({a: 1})"),
        (doc! {"_id": 1, "a": 1}, doc! {"$rename": {"_id": "b"}}, 66, "Performing an update on the path '_id' would modify the immutable field '_id'"),
        (doc! {"_id": 1, "a": 2}, doc! {"$rename": {"a": "_id"}}, 66, "Performing an update on the path '_id' would modify the immutable field '_id'"),
        (doc! {"a": 1}, doc! {"$rename": {"a": "b"}, "$set": {"b": 1}}, 40, "Updating the path 'b' would create a conflict at 'b'"),
        (doc! {"a": 1}, doc! {"$rename": {"a": "b"}, "$set": {"a.c": 1}}, 40, "Updating the path 'a.c' would create a conflict at 'a'"),
    ]);
}

#[test]
fn current_date_and_set_on_insert() {
    let ts = Timestamp {
        time: (NOW / 1000) as u32,
        increment: 1,
    };
    let now = DateTime::from_millis(NOW);
    table(vec![
        (
            doc! {"a": 1},
            doc! {"$currentDate": {"a": true, "b": {"$type": "date"}, "c": {"$type": "timestamp"}, "d": false}},
            doc! {"a": now, "b": now, "c": ts, "d": now},
        ),
        (
            doc! {"a": 1},
            doc! {"$setOnInsert": {"b": 1}, "$set": {"c": 1}},
            doc! {"a": 1, "c": 1},
        ),
    ]);
    let mut c = ctx();
    c.is_insert = true;
    c.timestamp = Some(Timestamp {
        time: 7,
        increment: 9,
    });
    let spec = parse(
        &doc! {"$setOnInsert": {"b": 1}, "$currentDate": {"t": {"$type": "timestamp"}}},
        &[],
    )
    .unwrap();
    let (got, changed) = spec.apply(&doc! {"a": 1}, &c).unwrap();
    assert!(changed);
    same(
        &got,
        &doc! {"a": 1, "b": 1, "t": Timestamp { time: 7, increment: 9 }},
    );
    errors(vec![
        (
            doc! {},
            doc! {"$currentDate": {"v": 1}},
            2,
            "int is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({$type: 'timestamp/date'}).",
        ),
        (
            doc! {},
            doc! {"$currentDate": {"v": {"$type": "Timestamp"}}},
            2,
            "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}",
        ),
        (doc! {}, doc! {"$currentDate": {"v": {"array": 1}}}, 2, "Unrecognized $currentDate option: array"),
    ]);
}

#[test]
fn push_and_modifiers() {
    table(vec![
        (
            doc! {"a": [1]},
            doc! {"$push": {"a": 2}},
            doc! {"a": [1, 2]},
        ),
        (
            doc! {"a": [1]},
            doc! {"$push": {"a": [2, 3]}},
            doc! {"a": [1, [2, 3]]},
        ),
        (doc! {}, doc! {"$push": {"a.b": 1}}, doc! {"a": {"b": [1]}}),
        (
            doc! {"a": [1]},
            doc! {"$push": {"a": {"$each": [2, 3]}}},
            doc! {"a": [1, 2, 3]},
        ),
        (
            doc! {"a": [1]},
            doc! {"$push": {"a": {"x": 1, "$slice": 1}}},
            doc! {"a": [1, {"x": 1, "$slice": 1}]},
        ),
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$push": {"a": {"$each": [9], "$position": 1}}},
            doc! {"a": [1, 9, 2, 3]},
        ),
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$push": {"a": {"$each": [8, 9], "$position": 0}}},
            doc! {"a": [8, 9, 1, 2, 3]},
        ),
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$push": {"a": {"$each": [9], "$position": -1}}},
            doc! {"a": [1, 2, 9, 3]},
        ),
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$push": {"a": {"$each": [9], "$position": -5}}},
            doc! {"a": [9, 1, 2, 3]},
        ),
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$push": {"a": {"$each": [9], "$position": 10}}},
            doc! {"a": [1, 2, 3, 9]},
        ),
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$push": {"a": {"$each": [4, 5], "$slice": 4}}},
            doc! {"a": [1, 2, 3, 4]},
        ),
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$push": {"a": {"$each": [4, 5], "$slice": -2}}},
            doc! {"a": [4, 5]},
        ),
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$push": {"a": {"$each": [], "$slice": 0}}},
            doc! {"a": []},
        ),
        (
            doc! {"a": [3, 1]},
            doc! {"$push": {"a": {"$each": [2], "$sort": 1}}},
            doc! {"a": [1, 2, 3]},
        ),
        (
            doc! {"a": [3, "x", 1]},
            doc! {"$push": {"a": {"$each": [2.5], "$sort": -1}}},
            doc! {"a": ["x", 3, 2.5, 1]},
        ),
        (
            doc! {"a": [{"s": 3, "n": "c"}, {"s": 1, "n": "a"}]},
            doc! {"$push": {"a": {"$each": [{"s": 2, "n": "b"}], "$sort": {"s": -1}, "$slice": 2}}},
            doc! {"a": [{"s": 3, "n": "c"}, {"s": 2, "n": "b"}]},
        ),
        (
            doc! {"a": [{"x": {"y": 2}}, {"x": {"y": 1}}, 5, {"z": 1}]},
            doc! {"$push": {"a": {"$each": [], "$sort": {"x.y": 1}}}},
            doc! {"a": [5, {"z": 1}, {"x": {"y": 1}}, {"x": {"y": 2}}]},
        ),
        (
            doc! {},
            doc! {"$push": {"a": {"$each": [3, 1, 2], "$sort": 1, "$slice": -2}}},
            doc! {"a": [2, 3]},
        ),
    ]);
    // Pushing and slicing back to the same array still counts as a modification (as in
    // MongoDB, where the push and the slice each modify the array).
    let (got, changed) = run_with(
        &doc! {"a": [1, 2, 3]},
        &doc! {"$push": {"a": {"$each": [4, 5], "$slice": 3}}},
        &[],
        &ctx(),
    )
    .unwrap();
    assert!(changed);
    same(&got, &doc! {"a": [1, 2, 3]});
    errors(vec![
        (doc! {"_id": 1, "a": 1}, doc! {"$push": {"a": 2}}, 2, "The field 'a' must be an array but is of type int in document {_id: 1}"),
        (doc! {"a": {"b": "s"}}, doc! {"$push": {"a.b": 2}}, 2, "The field 'a.b' must be an array but is of type string in document {no id}"),
        (doc! {}, doc! {"$push": {"a": {"$each": 1}}}, 2, "The argument to $each in $push must be an array but it was of type: int"),
        (doc! {}, doc! {"$push": {"a": {"$each": [], "$foo": 1}}}, 2, "Unrecognized clause in $push: $foo"),
        (doc! {}, doc! {"$push": {"a": {"$each": [], "$slice": 1.5}}}, 2, "The value for $slice must be an integer value but was given type: double"),
        (doc! {}, doc! {"$push": {"a": {"$each": [], "$position": "x"}}}, 2, "The value for $position must be an integer value, not of type: string"),
        (doc! {}, doc! {"$push": {"a": {"$each": [], "$sort": 2}}}, 2, "The $sort element value must be either 1 or -1"),
        (doc! {}, doc! {"$push": {"a": {"$each": [], "$sort": {}}}}, 2, "The sort pattern is empty when it should be a set of fields."),
        (doc! {}, doc! {"$push": {"a": {"$each": [], "$sort": {"x": 0}}}}, 2, "The sort element value must be either 1 or -1"),
        (doc! {}, doc! {"$push": {"a": {"$each": [], "$sort": {"x..y": 1}}}}, 2, "The sort field is a dotted field but has an empty part: x..y"),
        (
            doc! {},
            doc! {"$push": {"a": {"$each": [], "$sort": "x"}}},
            2,
            "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields",
        ),
    ]);
}

#[test]
fn add_to_set_and_pop() {
    table(vec![
        (
            doc! {"a": [1, 2]},
            doc! {"$addToSet": {"a": 3}},
            doc! {"a": [1, 2, 3]},
        ),
        (
            doc! {"a": [1, 2]},
            doc! {"$addToSet": {"a": 2.0}},
            doc! {"a": [1, 2]},
        ),
        (
            doc! {"a": [1]},
            doc! {"$addToSet": {"a": {"$each": [2, 1, 2, 3]}}},
            doc! {"a": [1, 2, 3]},
        ),
        (
            doc! {"a": [{"x": 1}]},
            doc! {"$addToSet": {"a": {"x": 1}}},
            doc! {"a": [{"x": 1}]},
        ),
        (
            doc! {"a": [[1]]},
            doc! {"$addToSet": {"a": [1, 2]}},
            doc! {"a": [[1], [1, 2]]},
        ),
        (
            doc! {},
            doc! {"$addToSet": {"a": {"$each": [1, 1, 2]}}},
            doc! {"a": [1, 2]},
        ),
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$pop": {"a": 1}},
            doc! {"a": [1, 2]},
        ),
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$pop": {"a": -1}},
            doc! {"a": [2, 3]},
        ),
        (
            doc! {"a": {"b": [1]}},
            doc! {"$pop": {"a.b": 1.0}},
            doc! {"a": {"b": []}},
        ),
        (doc! {"a": []}, doc! {"$pop": {"a": 1}}, doc! {"a": []}),
    ]);
    errors(vec![
        (
            doc! {"a": 1},
            doc! {"$addToSet": {"a": 1}},
            2,
            "Cannot apply $addToSet to non-array field. Field named 'a' has non-array type int",
        ),
        (
            doc! {},
            doc! {"$addToSet": {"a": {"$each": 1}}},
            14,
            "The argument to $each in $addToSet must be an array but it was of type int",
        ),
        (
            doc! {},
            doc! {"$addToSet": {"a": {"$each": [], "b": 1}}},
            2,
            "Found unexpected fields after $each in $addToSet: { $each: [], b: 1 }",
        ),
        (
            doc! {"a": {"b": 1}},
            doc! {"$pop": {"a.b": 1}},
            14,
            "Path 'a.b' contains an element of non-array type 'int'",
        ),
        (
            doc! {},
            doc! {"$pop": {"a": 2}},
            9,
            "$pop expects 1 or -1, found: 2",
        ),
        (
            doc! {},
            doc! {"$pop": {"a": "x"}},
            9,
            "Expected a number in: a: \"x\"",
        ),
        (
            doc! {},
            doc! {"$pop": {"a": 1.5}},
            9,
            "Expected an integer: a: 1.5",
        ),
    ]);
}

#[test]
fn pull_and_pull_all() {
    table(vec![
        (
            doc! {"a": [1, 2, 1, 3]},
            doc! {"$pull": {"a": 1}},
            doc! {"a": [2, 3]},
        ),
        (
            doc! {"a": [1, 2.0, 3]},
            doc! {"$pull": {"a": 2}},
            doc! {"a": [1, 3]},
        ),
        (
            doc! {"a": [1, 5, 7, 9]},
            doc! {"$pull": {"a": {"$gte": 6}}},
            doc! {"a": [1, 5]},
        ),
        (
            doc! {"a": [1, 5, 7, 9]},
            doc! {"$pull": {"a": {"$in": [1, 9]}}},
            doc! {"a": [5, 7]},
        ),
        (
            doc! {"a": ["x", 5, 7]},
            doc! {"$pull": {"a": {"$gt": 6, "$lt": 100}}},
            doc! {"a": ["x", 5]},
        ),
        (
            doc! {"r": [{"s": 8, "i": "A"}, {"s": 7, "i": "B"}, {"s": 6, "i": "A"}, 4]},
            doc! {"$pull": {"r": {"i": "A", "s": {"$gt": 7}}}},
            doc! {"r": [{"s": 7, "i": "B"}, {"s": 6, "i": "A"}, 4]},
        ),
        (
            doc! {"a": [{"x": 1}, {"x": 1, "y": 2}]},
            doc! {"$pull": {"a": {"x": 1}}},
            doc! {"a": []},
        ),
        (
            doc! {"a": [[1, 2], [1]]},
            doc! {"$pull": {"a": [1, 2]}},
            doc! {"a": [[1]]},
        ),
        (
            doc! {"a": [{}, 1, {"b": 1}]},
            doc! {"$pull": {"a": {}}},
            doc! {"a": [1]},
        ),
        (
            doc! {"x": {"a": [1, 2]}},
            doc! {"$pull": {"x.a": 2}},
            doc! {"x": {"a": [1]}},
        ),
        (
            doc! {"a": [1, 2, 3, 1]},
            doc! {"$pullAll": {"a": [1, 3.0]}},
            doc! {"a": [2]},
        ),
    ]);
    errors(vec![
        (
            doc! {"a": 1},
            doc! {"$pull": {"a": 1}},
            2,
            "Cannot apply $pull to a non-array value",
        ),
        (
            doc! {"a": 1},
            doc! {"$pullAll": {"a": [1]}},
            2,
            "Cannot apply $pull to a non-array value",
        ),
        (
            doc! {},
            doc! {"$pullAll": {"a": 1}},
            2,
            "$pullAll requires an array argument but was given a int",
        ),
    ]);
}

#[test]
fn positional_operator() {
    let mut c = ctx();
    c.positional = Some(1);
    let cases = vec![
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$set": {"a.$": 9}},
            doc! {"a": [1, 9, 3]},
        ),
        (
            doc! {"a": [{"b": 1}, {"b": 2}]},
            doc! {"$inc": {"a.$.b": 10}},
            doc! {"a": [{"b": 1}, {"b": 12}]},
        ),
        (
            doc! {"a": [{"b": [0, 0]}, {"b": [0, 0]}]},
            doc! {"$set": {"a.$.b.0": 1, "a.0.b.1": 2}},
            doc! {"a": [{"b": [0, 2]}, {"b": [1, 0]}]},
        ),
        (
            doc! {"a": [1, 2]},
            doc! {"$unset": {"a.$": 1}},
            doc! {"a": [1, null]},
        ),
        (
            doc! {"a": [{"x": [1, 2]}, {"x": [3]}]},
            doc! {"$push": {"a.$.x": 4}},
            doc! {"a": [{"x": [1, 2]}, {"x": [3, 4]}]},
        ),
    ];
    for (doc, update, expected) in cases {
        let (got, _) = run_with(&doc, &update, &[], &c).unwrap();
        same(&got, &expected);
    }
    let e = run_with(
        &doc! {"a": [1, 2]},
        &doc! {"$set": {"a.$": 1, "a.1": 2}},
        &[],
        &c,
    )
    .unwrap_err();
    assert_eq!(
        (e.code, e.msg.as_str()),
        (40, "Update created a conflict at 'a.1'")
    );
    errors(vec![
        (
            doc! {"a": [1]},
            doc! {"$set": {"a.$": 1}},
            2,
            "The positional operator did not find the match needed from the query.",
        ),
        (
            doc! {},
            doc! {"$set": {"a.$.b.$": 1}},
            2,
            "Too many positional (i.e. '$') elements found in path 'a.$.b.$'",
        ),
        (
            doc! {},
            doc! {"$set": {"$.a": 1}},
            2,
            "Cannot have positional (i.e. '$') element in the first position in path '$.a'",
        ),
    ]);
    assert!(parse(&doc! {"$set": {"a.$": 1}}, &[])
        .unwrap()
        .uses_positional());
    assert!(!parse(&doc! {"$set": {"a.0": 1}}, &[])
        .unwrap()
        .uses_positional());
}

#[test]
fn all_positional_and_array_filters() {
    let grades =
        doc! {"_id": 1, "g": [{"grade": 80, "m": 1}, {"grade": 85, "m": 2}, {"grade": 90, "m": 3}]};
    let cases: Vec<(Document, Document, Vec<Document>, Document)> = vec![
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$inc": {"a.$[]": 10}},
            vec![],
            doc! {"a": [11, 12, 13]},
        ),
        (
            doc! {"a": [{"b": 1}, {"c": 1}]},
            doc! {"$set": {"a.$[].b": 5}},
            vec![],
            doc! {"a": [{"b": 5}, {"c": 1, "b": 5}]},
        ),
        (
            doc! {"a": [1, 90, 100, 3]},
            doc! {"$set": {"a.$[e]": 0}},
            vec![doc! {"e": {"$gte": 85}}],
            doc! {"a": [1, 0, 0, 3]},
        ),
        (
            grades.clone(),
            doc! {"$set": {"g.$[e].m": 0}},
            vec![doc! {"e.grade": {"$gte": 85}}],
            doc! {"_id": 1, "g": [{"grade": 80, "m": 1}, {"grade": 85, "m": 0}, {"grade": 90, "m": 0}]},
        ),
        (
            grades.clone(),
            doc! {"$inc": {"g.$[hi].m": 10, "g.$[lo].m": -1}},
            vec![
                doc! {"hi.grade": {"$gt": 85}},
                doc! {"lo.grade": {"$lt": 85}},
            ],
            doc! {"_id": 1, "g": [{"grade": 80, "m": 0}, {"grade": 85, "m": 2}, {"grade": 90, "m": 13}]},
        ),
        (
            doc! {"a": [{"x": 0, "b": [{"y": 0, "c": 0}, {"y": 1, "c": 0}]}, {"x": 1, "b": [{"y": 0, "c": 0}]}]},
            doc! {"$set": {"a.$[i].b.$[k].c": 1}},
            vec![doc! {"i.x": 0}, doc! {"k.y": 0}],
            doc! {"a": [{"x": 0, "b": [{"y": 0, "c": 1}, {"y": 1, "c": 0}]}, {"x": 1, "b": [{"y": 0, "c": 0}]}]},
        ),
        (
            doc! {"a": [{"b": [1, 2]}, {"b": [3]}]},
            doc! {"$push": {"a.$[].b": 9}},
            vec![],
            doc! {"a": [{"b": [1, 2, 9]}, {"b": [3, 9]}]},
        ),
        (
            doc! {"a": [1, 2, 3]},
            doc! {"$set": {"a.$[e]": 0}},
            vec![doc! {"$or": [{"e": 1}, {"e": 3}]}],
            doc! {"a": [0, 2, 0]},
        ),
        (
            doc! {"a": []},
            doc! {"$set": {"a.$[]": 1}},
            vec![],
            doc! {"a": []},
        ),
    ];
    for (doc, update, filters, expected) in cases {
        let (got, _) =
            run_with(&doc, &update, &filters, &ctx()).unwrap_or_else(|e| panic!("{update:?}: {e}"));
        same(&got, &expected);
    }
    let fail = |doc: Document, update: Document, filters: Vec<Document>| {
        let e = run_with(&doc, &update, &filters, &ctx()).unwrap_err();
        (e.code, e.msg)
    };
    let check = |got: (i32, String), code: i32, msg: &str| assert_eq!(got, (code, msg.to_owned()));
    check(
        fail(
            doc! {"a": [0]},
            doc! {"$set": {"a.$[i]": 2, "a.$[j]": 3}},
            vec![doc! {"i": 0}, doc! {"j": 0}],
        ),
        40,
        "Update created a conflict at 'a.0'",
    );
    check(
        fail(
            doc! {"a": [{"x": 0, "b": [{"y": 0, "c": 0}]}]},
            doc! {"$set": {"a.$[i].b.$[k].c": 1, "a.$[j].b.$[k].c": 2}},
            vec![doc! {"i.x": 0}, doc! {"j.x": 0}, doc! {"k.y": 0}],
        ),
        40,
        "Update created a conflict at 'a.0.b.$[k].c'",
    );
    check(
        fail(doc! {}, doc! {"$set": {"a.$[]": 1}}, vec![]),
        2,
        "The path 'a' must exist in the document in order to apply array updates.",
    );
    check(
        fail(doc! {"a": 1}, doc! {"$set": {"a.$[].b": 1}}, vec![]),
        2,
        "Cannot apply array updates to non-array element a: 1",
    );
    check(
        fail(doc! {"a": [1]}, doc! {"$set": {"a.$[i]": 1}}, vec![]),
        2,
        "No array filter found for identifier 'i' in path 'a.$[i]'",
    );
    check(
        fail(
            doc! {"a": [1]},
            doc! {"$set": {"a.$[i]": 5}},
            vec![doc! {"i": 0}, doc! {"j": 0}],
        ),
        9,
        "The array filter for identifier 'j' was not used in the update { $set: { a.$[i]: 5 } }",
    );
    check(
        fail(
            doc! {"a": [1]},
            doc! {"$set": {"a.$[e]": 1}},
            vec![doc! {"e": {"$gte": 100}}, doc! {"e": {"$lt": 100}}],
        ),
        9,
        "Found multiple array filters with the same top-level field name e",
    );
    check(
        fail(doc! {"a": [1]}, doc! {"$set": {"a.$[e]": 1}}, vec![doc! {"a": 1, "b": 1}]),
        9,
        "Error parsing array filter :: caused by :: Expected a single top-level field name, found 'a' and 'b'",
    );
    check(
        fail(doc! {"a": [1]}, doc! {"$set": {"a.$[e]": 1}}, vec![doc! {}]),
        9,
        "Cannot use an expression without a top-level field name in arrayFilters",
    );
    check(
        fail(doc! {"a": [1]}, doc! {"$set": {"a.$[E]": 1}}, vec![doc! {"E": 1}]),
        2,
        "Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found 'E'",
    );
    check(
        fail(doc! {}, doc! {"$set": {"$[]": 1}}, vec![]),
        2,
        "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in path '$[]'",
    );
    check(
        fail(doc! {"a": [1]}, doc! {"a": 2}, vec![doc! {"e": 1}]),
        9,
        "arrayFilters may not be specified for replacement updates",
    );
}

#[test]
fn conflicts_and_parse_errors() {
    errors(vec![
        (doc! {}, doc! {"$set": {"a": 1}, "$inc": {"a": 1}}, 40, "Updating the path 'a' would create a conflict at 'a'"),
        (doc! {}, doc! {"$set": {"a": 1, "a.b": 1}}, 40, "Updating the path 'a.b' would create a conflict at 'a'"),
        (doc! {}, doc! {"$set": {"a.b": 1}, "$unset": {"a": 1}}, 40, "Updating the path 'a' would create a conflict at 'a'"),
        (doc! {}, doc! {"$set": {"a.b.c": 1}, "$push": {"a.b": 1}}, 40, "Updating the path 'a.b' would create a conflict at 'a.b'"),
        (doc! {}, doc! {"$setOnInsert": {"x.y": 1}, "$set": {"x.y.z": 1}}, 40, "Updating the path 'x.y.z' would create a conflict at 'x.y'"),
        (doc! {"a": [1]}, doc! {"$set": {"a.0": 1, "a.$[]": 1}}, 40, "Updating the path 'a.$[]' would create a conflict at 'a'"),
        (
            doc! {},
            doc! {"$foo": {"a": 1}},
            9,
            "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update specified as an array",
        ),
        (
            doc! {},
            doc! {"$set": {"a": 1}, "b": 2},
            9,
            "Unknown modifier: b. Expected a valid update modifier or pipeline-style update specified as an array",
        ),
        (
            doc! {},
            doc! {"$set": 1},
            9,
            "Modifiers operate on fields but we found type int instead. For example: {$mod: {<field>: ...}} not {$set: 1}",
        ),
        (
            doc! {},
            doc! {"$currentDate": []},
            9,
            "Modifiers operate on fields but we found type array instead. For example: {$mod: {<field>: ...}} not {$currentDate: []}",
        ),
        (doc! {}, doc! {"$set": {"": 1}}, 56, "An empty update path is not valid."),
        (doc! {}, doc! {"$mul": {"v.": 1}}, 56, "The update path 'v.' contains an empty field name, which is not allowed."),
        (
            doc! {},
            doc! {"$set": {"$x": 1}},
            52,
            "The dollar ($) prefixed field '$x' in '$x' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.",
        ),
        (
            doc! {},
            doc! {"a": 1, "$set": {"b": 1}},
            52,
            "The dollar ($) prefixed field '$set' in '$set' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.",
        ),
    ]);
}

#[test]
fn id_is_immutable() {
    let oid = ObjectId::from_bytes([1; 12]);
    errors(vec![
        (doc! {"_id": 1}, doc! {"$set": {"_id": 2}}, 66, "Performing an update on the path '_id' would modify the immutable field '_id'"),
        (doc! {"_id": 1}, doc! {"$inc": {"_id": 1}}, 66, "Performing an update on the path '_id' would modify the immutable field '_id'"),
        (doc! {"_id": 1}, doc! {"$unset": {"_id": 1}}, 66, "Performing an update on the path '_id' would modify the immutable field '_id'"),
        (doc! {"_id": {"a": 1}}, doc! {"$set": {"_id.b": 1}}, 66, "Performing an update on the path '_id.b' would modify the immutable field '_id'"),
        (doc! {"_id": 1}, doc! {"_id": 2}, 66, "After applying the update, the (immutable) field '_id' was found to have been altered to _id: 2"),
        (
            doc! {"_id": oid},
            doc! {"_id": "x"},
            66,
            "After applying the update, the (immutable) field '_id' was found to have been altered to _id: \"x\"",
        ),
    ]);
    table(vec![
        (
            doc! {"_id": 1, "a": 1},
            doc! {"$set": {"_id": 1, "a": 2}},
            doc! {"_id": 1, "a": 2},
        ),
        (
            doc! {"_id": {"x": 1}},
            doc! {"$set": {"_id": {"x": 1}}},
            doc! {"_id": {"x": 1}},
        ),
    ]);
}

#[test]
fn replacement() {
    let spec = parse(&doc! {"b": 2, "c": 3}, &[]).unwrap();
    assert!(spec.is_replacement());
    let (got, changed) = spec.apply(&doc! {"_id": 7, "a": 1}, &ctx()).unwrap();
    assert!(changed);
    same(&got, &doc! {"_id": 7, "b": 2, "c": 3});
    // An _id in the replacement moves first.
    let spec = parse(&doc! {"b": 2, "_id": 7}, &[]).unwrap();
    let (got, changed) = spec.apply(&doc! {"_id": 7, "b": 2}, &ctx()).unwrap();
    assert!(!changed);
    same(&got, &doc! {"_id": 7, "b": 2});
    let (got, changed) = parse(&doc! {}, &[])
        .unwrap()
        .apply(&doc! {"_id": 1, "a": 1}, &ctx())
        .unwrap();
    assert!(changed);
    same(&got, &doc! {"_id": 1});
    assert_eq!(
        parse(&doc! {"b": 2, "a": 1}, &[]).unwrap().touched_paths(),
        vec!["b".to_owned(), "a".to_owned()]
    );
}

#[test]
fn upserts() {
    let c = ctx();
    let spec = parse(
        &doc! {"$set": {"b": 1}, "$setOnInsert": {"c": 1}, "$inc": {"n": 1}},
        &[],
    )
    .unwrap();
    let got = spec.apply_to_new(doc! {"a": 5, "_id": 3}, &c).unwrap();
    same(&got, &doc! {"_id": 3, "a": 5, "b": 1, "c": 1, "n": 1});
    // Without an _id in the seed the update may set one.
    let spec = parse(&doc! {"$set": {"_id": 9, "x": 1}}, &[]).unwrap();
    same(
        &spec.apply_to_new(doc! {"a": 1}, &c).unwrap(),
        &doc! {"_id": 9, "a": 1, "x": 1},
    );
    let e = spec.apply_to_new(doc! {"_id": 1}, &c).unwrap_err();
    assert_eq!(e.code, 66);
    // A replacement keeps only the seed's _id.
    let spec = parse(&doc! {"z": 1}, &[]).unwrap();
    same(
        &spec.apply_to_new(doc! {"_id": 4, "a": 1}, &c).unwrap(),
        &doc! {"_id": 4, "z": 1},
    );
    same(
        &spec.apply_to_new(doc! {"a": 1}, &c).unwrap(),
        &doc! {"z": 1},
    );
    let e = parse(&doc! {"_id": [1]}, &[])
        .unwrap()
        .apply_to_new(doc! {}, &c)
        .unwrap_err();
    assert_eq!(
        (e.code, e.msg.as_str()),
        (53, "The '_id' value cannot be of type array")
    );
    // Array updates need an existing array, positional needs a match.
    let e = parse(&doc! {"$set": {"a.$[]": 1}}, &[])
        .unwrap()
        .apply_to_new(doc! {}, &c)
        .unwrap_err();
    assert_eq!(e.code, 2);
}

#[test]
fn field_order_follows_paths() {
    table(vec![
        (
            doc! {"_id": 1, "m": 1},
            doc! {"$set": {"z": 1, "b.y": 1}, "$inc": {"a": 1}, "$push": {"b.x": 1}, "$min": {"c": 1}},
            doc! {"_id": 1, "m": 1, "a": 1, "b": {"x": [1], "y": 1}, "c": 1, "z": 1},
        ),
        (
            doc! {"a": {}},
            doc! {"$set": {"a.10": 1, "a.9": 2, "a.b": 3}},
            doc! {"a": {"9": 2, "10": 1, "b": 3}},
        ),
    ]);
}

#[test]
fn touched_paths() {
    let spec = parse(
        &doc! {
            "$set": {"a.b": 1, "c.$.d": 1, "e.0.f": 1, "g.$[].h": 1},
            "$rename": {"x.y": "z"},
            "$inc": {"a.b2": 1},
        },
        &[],
    )
    .unwrap();
    assert_eq!(
        spec.touched_paths(),
        ["a.b", "a.b2", "c", "e", "g", "x.y", "z"]
    );
    assert!(!spec.is_replacement());
}

#[test]
fn values_are_rendered_like_mongodb() {
    let d = doc! {
        "a": 1.0, "b": 0.1, "c": 1e20, "d": -2.5, "e": [], "f": {}, "g": [1, "s"],
        "h": ObjectId::from_bytes([0xab; 12]), "i": DateTime::from_millis(5), "j": null, "k": true,
        "l": Timestamp { time: 1, increment: 2 }, "m": 7_i64,
    };
    assert_eq!(
        fmt::doc(&d),
        "{ a: 1.0, b: 0.1, c: 1e+20, d: -2.5, e: [], f: {}, g: [ 1, \"s\" ], \
         h: ObjectId('abababababababababababab'), i: new Date(5), j: null, k: true, \
         l: Timestamp(1, 2), m: 7 }"
    );
    assert_eq!(fmt::value(&bson!(3.3000000000000003)), "3.3");
}

#[test]
fn pipeline_updates_replace_and_keep_id() {
    let stages = vec![
        Bson::Document(doc! { "$set": { "b": { "$add": ["$a", 1] } } }),
        Bson::Document(doc! { "$unset": "a" }),
    ];
    let spec = UpdateSpec::parse_pipeline(&stages, None).unwrap();
    let (new, changed) = spec
        .apply(&doc! { "_id": 1, "a": 2 }, &UpdateCtx::default())
        .unwrap();
    assert!(changed);
    assert_eq!(new, doc! { "_id": 1, "b": 3 });
    let spec =
        UpdateSpec::parse_pipeline(&[Bson::Document(doc! { "$replaceWith": { "z": 1 } })], None)
            .unwrap();
    let (new, _) = spec
        .apply(&doc! { "_id": 7 }, &UpdateCtx::default())
        .unwrap();
    assert_eq!(new, doc! { "_id": 7, "z": 1 });
    let bad = UpdateSpec::parse_pipeline(&[Bson::Document(doc! { "$sort": { "a": 1 } })], None);
    assert_eq!(bad.unwrap_err().code, 72);
    let moved = UpdateSpec::parse_pipeline(&[Bson::Document(doc! { "$set": { "_id": 2 } })], None)
        .unwrap()
        .apply(&doc! { "_id": 1 }, &UpdateCtx::default());
    assert_eq!(moved.unwrap_err().code, 66);
}

#[test]
fn let_variables_are_bound_as_literals() {
    let lets = crate::agg::LetVars::parse(
        Some(&Bson::Document(
            doc! { "a": 2, "b": { "$add": ["$$a", 1] } },
        )),
        "find",
        bson::DateTime::now(),
    )
    .unwrap();
    let f = lets.filter(&doc! { "$expr": { "$eq": ["$x", "$$b"] }, "y": "$$a" });
    assert_eq!(
        f,
        doc! { "$expr": { "$eq": ["$x", { "$literal": 3 }] }, "y": "$$a" }
    );
}
