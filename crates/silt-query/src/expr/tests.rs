use bson::{bson, doc, oid::ObjectId, Bson, Document};

use super::*;

fn sample() -> Document {
    doc! {
        "_id": 1,
        "a": 5,
        "b": 2,
        "f": 2.5,
        "l": 10_i64,
        "s": "Hello World",
        "t": true,
        "n": null,
        "arr": [1, 2, 3],
        "docs": [{"x": 1, "y": "a"}, {"x": 2}, 7, {"x": [3, 4]}, [{"x": 9}]],
        "sub": {"c": 3, "d": {"e": "deep"}},
        "date": bson::DateTime::from_millis(1_700_000_123_456), // 2023-11-14T22:15:23.456Z
        "words": ["b", "a", "c", "a"],
    }
}

fn ev_on(doc: &Document, e: Bson) -> QResult<Option<Bson>> {
    Expr::parse(&e)?.evaluate(doc, &Vars::new())
}

fn ev(e: Bson) -> QResult<Option<Bson>> {
    ev_on(&sample(), e)
}

#[track_caller]
fn check(cases: Vec<(Bson, Bson)>) {
    for (e, want) in cases {
        let got = ev(e.clone()).unwrap_or_else(|err| panic!("{e}: {err}"));
        assert_eq!(got, Some(want.clone()), "{e}");
        // Exact types, not just equal values.
        if let Some(g) = &got {
            assert_eq!(g.element_type(), want.element_type(), "{e}: type of {g}");
        }
    }
}

#[track_caller]
fn check_missing(cases: Vec<Bson>) {
    for e in cases {
        assert_eq!(ev(e.clone()).unwrap(), None, "{e}");
    }
}

#[track_caller]
fn check_err(cases: Vec<(Bson, i32)>) {
    for (e, code) in cases {
        match ev(e.clone()) {
            Ok(v) => panic!("{e}: expected error {code}, got {v:?}"),
            Err(err) => assert_eq!(err.code, code, "{e}: {err}"),
        }
    }
}

#[test]
fn literals_paths_and_variables() {
    check(vec![
        (bson!("$a"), bson!(5)),
        (bson!("plain"), bson!("plain")),
        (bson!(7), bson!(7)),
        (bson!({"$literal": "$a"}), bson!("$a")),
        (bson!({"$literal": {"$add": 1}}), bson!({"$add": 1})),
        (bson!("$sub.d.e"), bson!("deep")),
        (bson!("$docs.x"), bson!([1, 2, [3, 4], [9]])),
        (bson!("$docs.y"), bson!(["a", []])),
        (bson!("$arr.x"), bson!([])),
        (bson!("$$ROOT.a"), bson!(5)),
        (bson!("$$CURRENT.sub.c"), bson!(3)),
        (
            bson!({"x": "$a", "y": ["$b", "$missing"]}),
            bson!({"x": 5, "y": [2, null]}),
        ),
        (bson!({"x": "$missing", "y": 1}), bson!({"y": 1})),
        (bson!({"k": {"$add": ["$a", 1]}}), bson!({"k": 6})),
        (bson!({}), bson!({})),
        (bson!([]), bson!([])),
    ]);
    check_missing(vec![
        bson!("$missing"),
        bson!("$a.b"),
        bson!("$$REMOVE"),
        bson!("$sub.zz"),
    ]);
    let root = ev(bson!("$$ROOT")).unwrap().unwrap();
    assert_eq!(root, Bson::Document(sample()));
    assert!(matches!(
        ev(bson!("$$NOW")).unwrap(),
        Some(Bson::DateTime(_))
    ));
}

#[test]
fn parse_errors() {
    check_err(vec![
        (bson!({"$foo": 1}), 168),
        (bson!({"$add": [1], "x": 2}), 15983),
        (bson!({"a": 1, "$add": [1]}), 16410),
        (bson!({"a.b": 1}), 16412),
        (bson!("$"), 16872),
        (bson!("$a..b"), 15998),
        (bson!("$$undefinedVar"), 17276),
        (bson!("$$"), 9),
        (bson!({"$abs": [1, 2]}), 16020),
        (bson!({"$eq": [1]}), 16020),
        (bson!({"$round": [1, 2, 3]}), 28667),
        (bson!({"$ifNull": ["$a"]}), 28667),
        (bson!({"$cond": [1, 2]}), 16020),
        (bson!({"$cond": {"if": true, "then": 1}}), 17082),
        (
            bson!({"$cond": {"if": true, "then": 1, "else": 2, "x": 1}}),
            17083,
        ),
        (bson!({"$let": {"vars": {"Bad": 1}, "in": 1}}), 9),
        (bson!({"$let": {"vars": {"a-b": 1}, "in": 1}}), 9),
        (bson!({"$let": {"vars": {}}}), 16877),
        (bson!({"$map": {"input": [1], "as": "x"}}), 16882),
        (bson!({"$map": {"input": [1], "in": "$$x"}}), 17276),
        (
            bson!({"$filter": {"input": [1], "cond": 1, "bogus": 1}}),
            28647,
        ),
        (bson!({"$reduce": {"input": [1], "in": 1}}), 40078),
        (bson!({"$switch": {"branches": []}}), 40068),
        (bson!({"$switch": {"branches": [{"case": true}]}}), 40065),
        (
            bson!({"$switch": {"branches": [{"case": true, "then": 1}], "x": 1}}),
            40067,
        ),
        (bson!({"$trim": {"chars": "x"}}), 50695),
        (bson!({"$regexMatch": {"input": "x"}}), 31023),
        (bson!({"$convert": {"input": 1}}), 9),
        (bson!({"$year": {"date": "$date", "bogus": 1}}), 40535),
        (
            bson!({"$dateToString": {"date": "$date", "format": "%Q"}}),
            18536,
        ),
        (
            bson!({"$function": {"body": "x", "args": [], "lang": "js"}}),
            238,
        ),
    ]);
}

#[test]
fn comparison_and_boolean() {
    check(vec![
        (bson!({"$eq": ["$a", 5.0]}), bson!(true)),
        (bson!({"$eq": ["$a", "5"]}), bson!(false)),
        (bson!({"$ne": ["$a", 4]}), bson!(true)),
        (bson!({"$gt": ["$a", 4]}), bson!(true)),
        (bson!({"$gt": ["$s", 4]}), bson!(true)), // strings above numbers
        (bson!({"$gte": ["$a", 5_i64]}), bson!(true)),
        (bson!({"$lt": ["$n", 0]}), bson!(true)),
        (bson!({"$lte": ["$a", 4]}), bson!(false)),
        (bson!({"$cmp": ["$a", 6]}), bson!(-1)),
        (bson!({"$cmp": ["b", "a"]}), bson!(1)),
        (bson!({"$cmp": ["$arr", [1, 2, 3]]}), bson!(0)),
        // Missing is below null and not equal to it.
        (bson!({"$eq": ["$missing", null]}), bson!(false)),
        (bson!({"$lt": ["$missing", null]}), bson!(true)),
        (bson!({"$eq": ["$missing", "$alsoMissing"]}), bson!(true)),
        (bson!({"$and": [1, "$t", "x"]}), bson!(true)),
        (bson!({"$and": [1, 0]}), bson!(false)),
        (bson!({"$and": []}), bson!(true)),
        (bson!({"$or": [null, "$missing", 0]}), bson!(false)),
        (bson!({"$or": [null, [], 0]}), bson!(true)),
        (bson!({"$not": ["$n"]}), bson!(true)),
        (bson!({"$not": "$a"}), bson!(false)),
        (bson!({"$not": [[false]]}), bson!(false)),
    ]);
}

#[test]
fn arithmetic() {
    check(vec![
        (bson!({"$add": [1, 2]}), bson!(3)),
        (bson!({"$add": [1, 2_i64]}), bson!(3_i64)),
        (bson!({"$add": [1, 2.5]}), bson!(3.5)),
        (
            bson!({"$add": [2_147_483_647, 1]}),
            bson!(2_147_483_648_i64),
        ),
        (
            bson!({"$add": [i64::MAX, 1_i64]}),
            bson!(9.223_372_036_854_776e18),
        ),
        (bson!({"$add": []}), bson!(0)),
        (bson!({"$add": ["$a", null]}), Bson::Null),
        (bson!({"$add": ["$a", "$missing"]}), Bson::Null),
        (
            bson!({"$add": ["$date", 1000]}),
            Bson::DateTime(bson::DateTime::from_millis(1_700_000_124_456)),
        ),
        (
            bson!({"$add": [1.6, "$date"]}),
            Bson::DateTime(bson::DateTime::from_millis(1_700_000_123_458)),
        ),
        (bson!({"$subtract": [5, 7]}), bson!(-2)),
        (bson!({"$subtract": [5.5, 1_i64]}), bson!(4.5)),
        (bson!({"$subtract": ["$date", "$date"]}), bson!(0_i64)),
        (
            bson!({"$subtract": ["$date", 456]}),
            Bson::DateTime(bson::DateTime::from_millis(1_700_000_123_000)),
        ),
        (bson!({"$subtract": [null, 1]}), Bson::Null),
        (bson!({"$multiply": [2, 3, 4]}), bson!(24)),
        (
            bson!({"$multiply": [65536, 65536]}),
            bson!(4_294_967_296_i64),
        ),
        (bson!({"$multiply": ["$a", 0.5]}), bson!(2.5)),
        (bson!({"$multiply": []}), bson!(1)),
        (bson!({"$divide": [7, 2]}), bson!(3.5)),
        (bson!({"$divide": [6, 3]}), bson!(2.0)),
        (bson!({"$mod": [7, 3]}), bson!(1)),
        (bson!({"$mod": [-7, 3]}), bson!(-1)),
        (bson!({"$mod": [7.5, 2]}), bson!(1.5)),
        (bson!({"$mod": [7_i64, 2]}), bson!(1_i64)),
        (bson!({"$abs": -5}), bson!(5)),
        (bson!({"$abs": i32::MIN}), bson!(2_147_483_648_i64)),
        (bson!({"$abs": -2.5}), bson!(2.5)),
        (bson!({"$abs": null}), Bson::Null),
        (bson!({"$ceil": 2.1}), bson!(3.0)),
        (bson!({"$ceil": 7}), bson!(7)),
        (bson!({"$floor": -2.1}), bson!(-3.0)),
        (bson!({"$sqrt": 16}), bson!(4.0)),
        (bson!({"$pow": [2, 10]}), bson!(1024)),
        (bson!({"$pow": [2, 40]}), bson!(1_099_511_627_776_i64)),
        (bson!({"$pow": [2, -1]}), bson!(0.5)),
        (bson!({"$pow": [2.0, 3]}), bson!(8.0)),
        (bson!({"$pow": [-1, -3]}), bson!(-1)),
        (bson!({"$exp": 0}), bson!(1.0)),
        (bson!({"$ln": 1}), bson!(0.0)),
        (bson!({"$log10": 1000}), bson!(3.0)),
        (bson!({"$log": [8, 2]}), bson!(3.0)),
        (bson!({"$round": [2.5]}), bson!(2.0)),
        (bson!({"$round": [3.5]}), bson!(4.0)),
        (bson!({"$round": [-2.5]}), bson!(-2.0)),
        (bson!({"$round": [2.675, 2]}), bson!(2.68)),
        (bson!({"$round": [1234.5678, 2]}), bson!(1234.57)),
        (bson!({"$round": [1234.5678, -2]}), bson!(1200.0)),
        (bson!({"$round": [1250, -2]}), bson!(1200)),
        (bson!({"$round": [1350, -2]}), bson!(1400)),
        (bson!({"$round": [19, 1]}), bson!(19)),
        (bson!({"$round": [5_i64, -1]}), bson!(0_i64)),
        (bson!({"$trunc": [7.89, 1]}), bson!(7.8)),
        (bson!({"$trunc": [-7.89]}), bson!(-7.0)),
        (bson!({"$trunc": [1999, -3]}), bson!(1000)),
        (bson!({"$round": [null, 1]}), Bson::Null),
    ]);
    check_err(vec![
        (bson!({"$add": ["$a", "x"]}), 14),
        (bson!({"$add": ["$date", "$date"]}), 16612),
        (bson!({"$subtract": [1, "$date"]}), 14),
        (bson!({"$multiply": [1, "x"]}), 14),
        (bson!({"$divide": [1, 0]}), 2),
        (bson!({"$divide": [1, "x"]}), 14),
        (bson!({"$mod": [1, 0]}), 16610),
        (bson!({"$abs": "x"}), 28765),
        (bson!({"$abs": i64::MIN}), 28680),
        (bson!({"$sqrt": -1}), 28714),
        (bson!({"$ln": 0}), 28766),
        (bson!({"$log10": -1}), 28761),
        (bson!({"$log": [8, 1]}), 28759),
        (bson!({"$pow": [0, -1]}), 28764),
        (bson!({"$round": [1.5, 101]}), 51083),
        (bson!({"$round": [1.5, 1.5]}), 51082),
    ]);
    let err = ev(bson!({"$add": ["$a", "x"]})).unwrap_err();
    assert_eq!(
        err.msg,
        "$add only supports numeric or date types, not string"
    );
    let err = ev(bson!({"$divide": [1, 0]})).unwrap_err();
    assert_eq!(err.msg, "can't $divide by zero");
}

#[test]
fn decimals_stay_decimal() {
    let d: bson::Decimal128 = "1.5".parse().unwrap();
    let doc = doc! {"d": d};
    let out = ev_on(&doc, bson!({"$add": ["$d", 1]})).unwrap().unwrap();
    assert_eq!(out, Bson::Decimal128("2.5".parse().unwrap()));
    let out = ev_on(&doc, bson!({"$multiply": ["$d", 2.0]}))
        .unwrap()
        .unwrap();
    assert!(matches!(out, Bson::Decimal128(_)));
}

#[test]
fn strings() {
    check(vec![
        (bson!({"$concat": ["a", "-", "$s"]}), bson!("a-Hello World")),
        (bson!({"$concat": ["a", "$missing"]}), Bson::Null),
        (bson!({"$concat": []}), bson!("")),
        (bson!({"$substr": ["$s", 0, 5]}), bson!("Hello")),
        (bson!({"$substrBytes": ["$s", 6, -1]}), bson!("World")),
        (bson!({"$substrBytes": ["$s", 20, 2]}), bson!("")),
        (bson!({"$substrBytes": [12345, 1, 2]}), bson!("23")),
        (bson!({"$substrBytes": [null, 0, 2]}), bson!("")),
        (bson!({"$substrCP": ["héllo", 1, 3]}), bson!("éll")),
        (bson!({"$substrCP": ["héllo", 10, 3]}), bson!("")),
        (bson!({"$toLower": "$s"}), bson!("hello world")),
        (bson!({"$toUpper": ["$s"]}), bson!("HELLO WORLD")),
        (bson!({"$toUpper": null}), bson!("")),
        (bson!({"$toLower": 1.5}), bson!("1.5")),
        (bson!({"$strLenBytes": "héllo"}), bson!(6)),
        (bson!({"$strLenCP": "héllo"}), bson!(5)),
        (
            bson!({"$split": ["a,b,,c", ","]}),
            bson!(["a", "b", "", "c"]),
        ),
        (bson!({"$split": ["abc", "x"]}), bson!(["abc"])),
        (bson!({"$split": [null, ","]}), Bson::Null),
        (bson!({"$trim": {"input": "  hi \n"}}), bson!("hi")),
        (bson!({"$ltrim": {"input": "  hi  "}}), bson!("hi  ")),
        (bson!({"$rtrim": {"input": "  hi  "}}), bson!("  hi")),
        (
            bson!({"$trim": {"input": "xxhixx", "chars": "x"}}),
            bson!("hi"),
        ),
        (bson!({"$trim": {"input": null}}), Bson::Null),
        (bson!({"$indexOfBytes": ["$s", "o"]}), bson!(4)),
        (bson!({"$indexOfBytes": ["$s", "o", 5]}), bson!(7)),
        (bson!({"$indexOfBytes": ["$s", "o", 5, 7]}), bson!(-1)),
        (bson!({"$indexOfBytes": ["$s", "zz"]}), bson!(-1)),
        (bson!({"$indexOfBytes": [null, "zz"]}), Bson::Null),
        (bson!({"$indexOfCP": ["héllo", "l"]}), bson!(2)),
        (bson!({"$indexOfBytes": ["héllo", "l"]}), bson!(3)),
        (bson!({"$strcasecmp": ["ABC", "abc"]}), bson!(0)),
        (bson!({"$strcasecmp": ["abd", "ABC"]}), bson!(1)),
        (
            bson!({"$regexMatch": {"input": "$s", "regex": "^hello", "options": "i"}}),
            bson!(true),
        ),
        (
            bson!({"$regexMatch": {"input": "$s", "regex": Bson::RegularExpression(bson::Regex { pattern: "world$".into(), options: "i".into() })}}),
            bson!(true),
        ),
        (
            bson!({"$regexMatch": {"input": "$s", "regex": "^x"}}),
            bson!(false),
        ),
        (
            bson!({"$regexMatch": {"input": "$missing", "regex": "x"}}),
            bson!(false),
        ),
        (
            bson!({"$replaceAll": {"input": "a.b.c", "find": ".", "replacement": "/"}}),
            bson!("a/b/c"),
        ),
        (
            bson!({"$replaceOne": {"input": "a.b.c", "find": ".", "replacement": "/"}}),
            bson!("a/b.c"),
        ),
        (
            bson!({"$replaceOne": {"input": null, "find": ".", "replacement": "/"}}),
            Bson::Null,
        ),
    ]);
    check_err(vec![
        (bson!({"$concat": ["a", 1]}), 16702),
        (bson!({"$substrBytes": ["héllo", 2, 1]}), 28656),
        (bson!({"$substrBytes": ["héllo", 0, 2]}), 28657),
        (bson!({"$substrBytes": ["abc", -1, 1]}), 50752),
        (bson!({"$substrBytes": ["abc", "x", 1]}), 16034),
        (bson!({"$substrCP": ["abc", 0.5, 1]}), 34451),
        (bson!({"$substrCP": ["abc", 0, -1]}), 34454),
        (bson!({"$toLower": [[1]]}), 16007),
        (bson!({"$strLenBytes": 1}), 34473),
        (bson!({"$strLenCP": "$missing"}), 34471),
        (bson!({"$split": [1, ","]}), 40085),
        (bson!({"$split": ["a", 1]}), 40086),
        (bson!({"$split": ["a", ""]}), 40087),
        (bson!({"$trim": {"input": 1}}), 50699),
        (bson!({"$regexMatch": {"input": 1, "regex": "x"}}), 51104),
        (bson!({"$regexMatch": {"input": "a", "regex": "("}}), 51091),
        (bson!({"$indexOfBytes": ["abc", 1]}), 40092),
        (bson!({"$indexOfBytes": ["abc", "a", -1]}), 40097),
        (
            bson!({"$replaceAll": {"input": 1, "find": "a", "replacement": "b"}}),
            51746,
        ),
    ]);
}

#[test]
fn arrays() {
    check(vec![
        (bson!({"$size": "$arr"}), bson!(3)),
        (bson!({"$size": [[1, 2]]}), bson!(2)),
        (bson!({"$arrayElemAt": ["$arr", 0]}), bson!(1)),
        (bson!({"$arrayElemAt": ["$arr", -1]}), bson!(3)),
        (bson!({"$arrayElemAt": ["$arr", 1.0]}), bson!(2)),
        (bson!({"$arrayElemAt": [null, 1]}), Bson::Null),
        (bson!({"$first": "$arr"}), bson!(1)),
        (bson!({"$last": "$arr"}), bson!(3)),
        (bson!({"$first": "$missing"}), Bson::Null),
        (
            bson!({"$concatArrays": ["$arr", [4], []]}),
            bson!([1, 2, 3, 4]),
        ),
        (bson!({"$concatArrays": ["$arr", null]}), Bson::Null),
        (bson!({"$in": [2, "$arr"]}), bson!(true)),
        (bson!({"$in": [2.0, "$arr"]}), bson!(true)),
        (bson!({"$in": [9, "$arr"]}), bson!(false)),
        (bson!({"$in": ["$missing", [null]]}), bson!(false)),
        (bson!({"$isArray": "$arr"}), bson!(true)),
        (bson!({"$isArray": ["$a"]}), bson!(false)),
        (bson!({"$isArray": [[1]]}), bson!(true)),
        (bson!({"$slice": ["$arr", 2]}), bson!([1, 2])),
        (bson!({"$slice": ["$arr", -2]}), bson!([2, 3])),
        (bson!({"$slice": ["$arr", 10]}), bson!([1, 2, 3])),
        (bson!({"$slice": ["$arr", 1, 1]}), bson!([2])),
        (bson!({"$slice": ["$arr", -2, 5]}), bson!([2, 3])),
        (bson!({"$slice": ["$arr", -10, 1]}), bson!([1])),
        (bson!({"$slice": ["$arr", 5, 1]}), bson!([])),
        (bson!({"$slice": [null, 1]}), Bson::Null),
        (bson!({"$reverseArray": "$arr"}), bson!([3, 2, 1])),
        (bson!({"$reverseArray": null}), Bson::Null),
        (bson!({"$range": [0, 5]}), bson!([0, 1, 2, 3, 4])),
        (bson!({"$range": [0, 10, 3]}), bson!([0, 3, 6, 9])),
        (bson!({"$range": [5, 0, -2]}), bson!([5, 3, 1])),
        (bson!({"$range": [5, 0]}), bson!([])),
        (bson!({"$indexOfArray": ["$words", "a"]}), bson!(1)),
        (bson!({"$indexOfArray": ["$words", "a", 2]}), bson!(3)),
        (bson!({"$indexOfArray": ["$words", "a", 2, 3]}), bson!(-1)),
        (bson!({"$indexOfArray": [null, "a"]}), Bson::Null),
        (
            bson!({"$filter": {"input": "$arr", "as": "x", "cond": {"$gte": ["$$x", 2]}}}),
            bson!([2, 3]),
        ),
        (
            bson!({"$filter": {"input": "$arr", "cond": {"$gte": ["$$this", 2]}, "limit": 1}}),
            bson!([2]),
        ),
        (
            bson!({"$filter": {"input": null, "cond": true}}),
            Bson::Null,
        ),
        (
            bson!({"$map": {"input": "$arr", "as": "x", "in": {"$multiply": ["$$x", "$a"]}}}),
            bson!([5, 10, 15]),
        ),
        (
            bson!({"$map": {"input": "$arr", "in": {"$add": ["$$this", 1]}}}),
            bson!([2, 3, 4]),
        ),
        (
            bson!({"$map": {"input": [1], "in": "$$this.missing"}}),
            bson!([null]),
        ),
        (
            bson!({"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}),
            bson!(6),
        ),
        (
            bson!({"$reduce": {"input": ["a", "b", "c"], "initialValue": "", "in": {"$concat": ["$$value", "$$this"]}}}),
            bson!("abc"),
        ),
        (
            bson!({"$reduce": {"input": [[1, 2], [3]], "initialValue": [], "in": {"$concatArrays": ["$$value", "$$this"]}}}),
            bson!([1, 2, 3]),
        ),
        // Nested scopes see outer variables.
        (
            bson!({"$map": {"input": [1, 2], "as": "o", "in": {"$map": {"input": [10], "as": "i", "in": {"$add": ["$$o", "$$i"]}}}}}),
            bson!([[11], [12]]),
        ),
        (
            bson!({"$setUnion": ["$words", ["d"]]}),
            bson!(["b", "a", "c", "d"]),
        ),
        (
            bson!({"$setIntersection": ["$words", ["a", "z", "c"]]}),
            bson!(["a", "c"]),
        ),
        (
            bson!({"$setDifference": ["$words", ["a"]]}),
            bson!(["b", "c"]),
        ),
        (bson!({"$setEquals": [[1, 2, 2], [2, 1.0]]}), bson!(true)),
        (bson!({"$setIsSubset": [["a"], "$words"]}), bson!(true)),
        (bson!({"$allElementsTrue": [[1, true, "x"]]}), bson!(true)),
        (bson!({"$anyElementTrue": [[0, null, false]]}), bson!(false)),
    ]);
    check_missing(vec![
        bson!({"$arrayElemAt": ["$arr", 3]}),
        bson!({"$arrayElemAt": ["$arr", -4]}),
        bson!({"$first": [[]]}),
    ]);
    check_err(vec![
        (bson!({"$size": "$a"}), 17124),
        (bson!({"$size": "$missing"}), 17124),
        (bson!({"$arrayElemAt": ["$a", 0]}), 28689),
        (bson!({"$arrayElemAt": ["$arr", "x"]}), 28690),
        (bson!({"$arrayElemAt": ["$arr", 1.5]}), 28691),
        (bson!({"$first": "$a"}), 28689),
        (bson!({"$concatArrays": ["$arr", 1]}), 28664),
        (bson!({"$in": [1, "$missing"]}), 40081),
        (bson!({"$slice": ["$a", 1]}), 28724),
        (bson!({"$slice": ["$arr", 1, 0]}), 28729),
        (bson!({"$reverseArray": 1}), 34435),
        (bson!({"$range": [0, "x"]}), 34445),
        (bson!({"$range": [0, 5, 0]}), 34449),
        (bson!({"$range": [0.5, 5]}), 34444),
        (bson!({"$indexOfArray": [1, 1]}), 40090),
        (bson!({"$filter": {"input": 1, "cond": true}}), 28651),
        (bson!({"$map": {"input": "x", "in": 1}}), 16883),
        (
            bson!({"$reduce": {"input": 1, "initialValue": 0, "in": 1}}),
            40080,
        ),
        (bson!({"$setUnion": [[1], 1]}), 17043),
        (bson!({"$setEquals": [[1], null]}), 17044),
        (bson!({"$setDifference": [1, [1]]}), 17048),
        (bson!({"$allElementsTrue": 1}), 17040),
        (
            bson!({"$filter": {"input": [1], "cond": true, "limit": 0}}),
            327392,
        ),
    ]);
}

#[test]
fn conditionals_and_let() {
    check(vec![
        (
            bson!({"$cond": [{"$gt": ["$a", 3]}, "big", "small"]}),
            bson!("big"),
        ),
        (
            bson!({"$cond": {"if": "$n", "then": 1, "else": 2}}),
            bson!(2),
        ),
        (
            bson!({"$ifNull": ["$missing", "$n", "dflt"]}),
            bson!("dflt"),
        ),
        (bson!({"$ifNull": ["$a", "dflt"]}), bson!(5)),
        (bson!({"$ifNull": ["$missing", null]}), Bson::Null),
        (
            bson!({"$switch": {"branches": [
                {"case": {"$lt": ["$a", 0]}, "then": "neg"},
                {"case": {"$lt": ["$a", 10]}, "then": "small"},
            ], "default": "big"}}),
            bson!("small"),
        ),
        (
            bson!({"$switch": {"branches": [{"case": false, "then": 1}], "default": "d"}}),
            bson!("d"),
        ),
        (
            bson!({"$let": {"vars": {"x": "$a", "y": 2}, "in": {"$multiply": ["$$x", "$$y"]}}}),
            bson!(10),
        ),
        (
            bson!({"$let": {"vars": {"x": 1}, "in": {"$let": {"vars": {"x": 2, "y": "$$x"}, "in": ["$$x", "$$y"]}}}}),
            bson!([2, 1]),
        ),
        (
            bson!({"$let": {"vars": {"CURRENT": "$sub"}, "in": "$c"}}),
            bson!(3),
        ),
        (
            bson!({"$let": {"vars": {"o": {"p": 1}}, "in": "$$o.p"}}),
            bson!(1),
        ),
    ]);
    check_missing(vec![bson!({"$ifNull": ["$missing", "$alsoMissing"]})]);
    check_err(vec![(
        bson!({"$switch": {"branches": [{"case": false, "then": 1}]}}),
        40066,
    )]);
}

#[test]
fn types_and_conversion() {
    let oid = ObjectId::parse_str("5ab9cbfa31c2ab715d42129e").unwrap();
    let doc = doc! {"o": oid, "d": bson::DateTime::from_millis(0)};
    let one = |e: Bson| ev_on(&doc, e).unwrap().unwrap();
    assert_eq!(
        one(bson!({"$toString": "$o"})),
        bson!("5ab9cbfa31c2ab715d42129e")
    );
    assert_eq!(
        one(bson!({"$toString": "$d"})),
        bson!("1970-01-01T00:00:00.000Z")
    );
    assert_eq!(
        one(bson!({"$toDate": "$o"})),
        Bson::DateTime(bson::DateTime::from_millis(1_522_125_818_000))
    );
    check(vec![
        (bson!({"$type": "$a"}), bson!("int")),
        (bson!({"$type": "$l"}), bson!("long")),
        (bson!({"$type": "$f"}), bson!("double")),
        (bson!({"$type": "$missing"}), bson!("missing")),
        (bson!({"$type": "$n"}), bson!("null")),
        (bson!({"$type": "$sub"}), bson!("object")),
        (bson!({"$type": [[1]]}), bson!("array")),
        (bson!({"$type": "$date"}), bson!("date")),
        (bson!({"$isNumber": "$f"}), bson!(true)),
        (bson!({"$isNumber": "$s"}), bson!(false)),
        (bson!({"$toString": 1.5}), bson!("1.5")),
        (bson!({"$toString": 1.0}), bson!("1")),
        (bson!({"$toString": 1e20}), bson!("1e+20")),
        (bson!({"$toString": 0.00001}), bson!("1e-05")),
        (bson!({"$toString": 42_i64}), bson!("42")),
        (bson!({"$toString": true}), bson!("true")),
        (
            bson!({"$toString": "$date"}),
            bson!("2023-11-14T22:15:23.456Z"),
        ),
        (bson!({"$toString": null}), Bson::Null),
        (bson!({"$toInt": "42"}), bson!(42)),
        (bson!({"$toInt": -7.9}), bson!(-7)),
        (bson!({"$toInt": true}), bson!(1)),
        (bson!({"$toInt": 5_i64}), bson!(5)),
        (bson!({"$toLong": "$date"}), bson!(1_700_000_123_456_i64)),
        (bson!({"$toLong": "-12"}), bson!(-12_i64)),
        (bson!({"$toDouble": "2.5"}), bson!(2.5)),
        (bson!({"$toDouble": "1e3"}), bson!(1000.0)),
        (bson!({"$toDouble": false}), bson!(0.0)),
        (bson!({"$toDouble": 3}), bson!(3.0)),
        (bson!({"$toBool": 0}), bson!(false)),
        (bson!({"$toBool": "false"}), bson!(true)),
        (bson!({"$toBool": ""}), bson!(true)),
        (bson!({"$toBool": [[]]}), bson!(true)),
        (
            bson!({"$toDate": "2023-11-14T22:15:23.456Z"}),
            Bson::DateTime(bson::DateTime::from_millis(1_700_000_123_456)),
        ),
        (
            bson!({"$toDate": "2023-11-14"}),
            Bson::DateTime(bson::DateTime::from_millis(1_699_920_000_000)),
        ),
        (
            bson!({"$toDate": "2023-11-14T23:15:23.456+01:00"}),
            Bson::DateTime(bson::DateTime::from_millis(1_700_000_123_456)),
        ),
        (
            bson!({"$toDate": 1_700_000_123_456_i64}),
            Bson::DateTime(bson::DateTime::from_millis(1_700_000_123_456)),
        ),
        (
            bson!({"$toObjectId": "5ab9cbfa31c2ab715d42129e"}),
            Bson::ObjectId(oid),
        ),
        (
            bson!({"$convert": {"input": "abc", "to": "int", "onError": -1}}),
            bson!(-1),
        ),
        (
            bson!({"$convert": {"input": null, "to": "int", "onNull": 0}}),
            bson!(0),
        ),
        (
            bson!({"$convert": {"input": "$missing", "to": "int", "onNull": 0}}),
            bson!(0),
        ),
        (bson!({"$convert": {"input": "7", "to": 16}}), bson!(7)),
        (
            bson!({"$convert": {"input": 7, "to": "string"}}),
            bson!("7"),
        ),
        (bson!({"$convert": {"input": 7, "to": null}}), Bson::Null),
    ]);
    check_err(vec![
        (bson!({"$toInt": "abc"}), 241),
        (bson!({"$toInt": "1.5"}), 241),
        (bson!({"$toInt": 1e10}), 241),
        (bson!({"$toInt": 3_000_000_000_i64}), 241),
        (bson!({"$toInt": "$date"}), 241),
        (bson!({"$toDate": 5}), 241),
        (bson!({"$toObjectId": "abc"}), 241),
        (bson!({"$toString": [[1]]}), 241),
        (bson!({"$convert": {"input": 1, "to": "bogus"}}), 2),
        (
            bson!({"$convert": {"input": 1, "to": "bogus", "onError": 0}}),
            2,
        ),
    ]);
}

#[test]
fn dates() {
    check(vec![
        (bson!({"$year": "$date"}), bson!(2023)),
        (bson!({"$month": "$date"}), bson!(11)),
        (bson!({"$dayOfMonth": "$date"}), bson!(14)),
        (bson!({"$hour": "$date"}), bson!(22)),
        (bson!({"$minute": "$date"}), bson!(15)),
        (bson!({"$second": "$date"}), bson!(23)),
        (bson!({"$millisecond": "$date"}), bson!(456)),
        (bson!({"$dayOfWeek": "$date"}), bson!(3)), // Tuesday
        (bson!({"$dayOfYear": "$date"}), bson!(318)),
        (bson!({"$isoDayOfWeek": "$date"}), bson!(2)),
        (bson!({"$isoWeek": "$date"}), bson!(46)),
        (bson!({"$isoWeekYear": "$date"}), bson!(2023_i64)),
        (bson!({"$week": "$date"}), bson!(46)),
        (bson!({"$year": ["$date"]}), bson!(2023)),
        (
            bson!({"$hour": {"date": "$date", "timezone": "+05:30"}}),
            bson!(3),
        ),
        (
            bson!({"$dayOfMonth": {"date": "$date", "timezone": "+0530"}}),
            bson!(15),
        ),
        (
            bson!({"$hour": {"date": "$date", "timezone": "UTC"}}),
            bson!(22),
        ),
        (bson!({"$year": null}), Bson::Null),
        (bson!({"$year": "$missing"}), Bson::Null),
        (
            bson!({"$dateToString": {"date": "$date", "format": "%Y/%m/%d %H:%M:%S.%L %j %w %u %%"}}),
            bson!("2023/11/14 22:15:23.456 318 3 2 %"),
        ),
        (
            bson!({"$dateToString": {"date": "$date"}}),
            bson!("2023-11-14T22:15:23.456Z"),
        ),
        (
            bson!({"$dateToString": {"date": "$date", "format": "%H:%M %z", "timezone": "-02:00"}}),
            bson!("20:15 -0200"),
        ),
        (
            bson!({"$dateToString": {"date": "$missing", "onNull": "none"}}),
            bson!("none"),
        ),
    ]);
    // Dates before the epoch and around leap days.
    let d = doc! {"d": bson::DateTime::from_millis(-1)};
    assert_eq!(
        ev_on(&d, bson!({"$year": "$d"})).unwrap(),
        Some(bson!(1969))
    );
    assert_eq!(
        ev_on(&d, bson!({"$millisecond": "$d"})).unwrap(),
        Some(bson!(999))
    );
    let leap = doc! {"d": bson::DateTime::from_millis(951_782_400_000)}; // 2000-02-29
    assert_eq!(
        ev_on(&leap, bson!({"$dayOfMonth": "$d"})).unwrap(),
        Some(bson!(29))
    );
    assert_eq!(
        ev_on(&leap, bson!({"$dayOfYear": "$d"})).unwrap(),
        Some(bson!(60))
    );
    // 2021-01-01 is in ISO week 53 of 2020.
    let jan1 = doc! {"d": bson::DateTime::from_millis(1_609_459_200_000)};
    assert_eq!(
        ev_on(&jan1, bson!({"$isoWeek": "$d"})).unwrap(),
        Some(bson!(53))
    );
    assert_eq!(
        ev_on(&jan1, bson!({"$isoWeekYear": "$d"})).unwrap(),
        Some(bson!(2020_i64))
    );
    assert_eq!(
        ev_on(&jan1, bson!({"$week": "$d"})).unwrap(),
        Some(bson!(0))
    );
    check_err(vec![
        (bson!({"$year": "$s"}), 16006),
        (
            bson!({"$year": {"date": "$date", "timezone": "Mars/Olympus_Mons"}}),
            40485,
        ),
    ]);
}

#[test]
fn olson_time_zones_follow_daylight_saving() {
    // 2026-07-01T12:00Z is 08:00 in New York (EDT, -4); 2026-01-01T12:00Z is 07:00 (EST, -5).
    let summer = doc! {"d": bson::DateTime::from_millis(1_782_907_200_000)};
    let winter = doc! {"d": bson::DateTime::from_millis(1_767_268_800_000)};
    let hour = bson!({"$hour": {"date": "$d", "timezone": "America/New_York"}});
    assert_eq!(ev_on(&summer, hour.clone()).unwrap(), Some(bson!(8)));
    assert_eq!(ev_on(&winter, hour).unwrap(), Some(bson!(7)));
    // A day added across the March change is 23 hours: same wall-clock time.
    let before = doc! {"d": bson::DateTime::from_millis(1_772_899_200_000)}; // 2026-03-07T16:00Z = 11:00 EST
    let next = ev_on(
        &before,
        bson!({"$dateAdd": {"startDate": "$d", "unit": "day", "amount": 1, "timezone": "America/New_York"}}),
    )
    .unwrap();
    assert_eq!(
        next,
        Some(Bson::DateTime(bson::DateTime::from_millis(
            1_772_899_200_000 + 23 * 3_600_000
        )))
    );
    // Local midnight in Paris for $dateFromParts.
    let p = ev_on(
        &doc! {},
        bson!({"$dateFromParts": {"year": 2026, "month": 7, "day": 1, "timezone": "Europe/Paris"}}),
    )
    .unwrap();
    assert_eq!(
        p,
        Some(Bson::DateTime(bson::DateTime::from_millis(
            1_782_864_000_000 - 2 * 3_600_000
        )))
    );
    // ISO week dates both ways: 2026-W01-1 is Monday 29 December 2025.
    let iso = ev_on(
        &doc! {},
        bson!({"$dateFromParts": {"isoWeekYear": 2026, "isoWeek": 1, "isoDayOfWeek": 1}}),
    )
    .unwrap();
    assert_eq!(
        iso,
        Some(Bson::DateTime(bson::DateTime::from_millis(
            1_766_966_400_000
        )))
    );
    let parts = ev_on(
        &doc! {"d": bson::DateTime::from_millis(1_766_966_400_000)},
        bson!({"$dateToParts": {"date": "$d", "iso8601": true}}),
    )
    .unwrap();
    assert_eq!(
        parts,
        Some(
            bson!({"isoWeekYear": 2026, "isoWeek": 1, "isoDayOfWeek": 1, "hour": 0, "minute": 0, "second": 0, "millisecond": 0})
        )
    );
}

#[test]
fn objects() {
    check(vec![
        (
            bson!({"$mergeObjects": [{"a": 1, "b": 1}, "$sub", null, {"a": 2}]}),
            bson!({"a": 2, "b": 1, "c": 3, "d": {"e": "deep"}}),
        ),
        (bson!({"$mergeObjects": []}), bson!({})),
        (
            bson!({"$objectToArray": "$sub"}),
            bson!([{"k": "c", "v": 3}, {"k": "d", "v": {"e": "deep"}}]),
        ),
        (
            bson!({"$arrayToObject": [[["a", 1], ["b", 2], ["a", 3]]]}),
            bson!({"a": 3, "b": 2}),
        ),
        (
            bson!({"$arrayToObject": [[{"k": "x", "v": 1}]]}),
            bson!({"x": 1}),
        ),
        (bson!({"$arrayToObject": null}), Bson::Null),
        (bson!({"$getField": "a"}), bson!(5)),
        (
            bson!({"$getField": {"field": "c", "input": "$sub"}}),
            bson!(3),
        ),
        (
            bson!({"$getField": {"field": "a.b", "input": {"$literal": {"a.b": 1}}}}),
            bson!(1),
        ),
        (
            bson!({"$getField": {"field": "x", "input": null}}),
            Bson::Null,
        ),
        (
            bson!({"$setField": {"field": "z", "input": "$sub", "value": 1}}),
            bson!({"c": 3, "d": {"e": "deep"}, "z": 1}),
        ),
        (
            bson!({"$setField": {"field": "c", "input": "$sub", "value": "$$REMOVE"}}),
            bson!({"d": {"e": "deep"}}),
        ),
        (
            bson!({"$unsetField": {"field": "d", "input": "$sub"}}),
            bson!({"c": 3}),
        ),
    ]);
    check_missing(vec![bson!({"$getField": "nope"})]);
    check_err(vec![
        (bson!({"$mergeObjects": [1]}), 40400),
        (bson!({"$objectToArray": 1}), 40390),
        (bson!({"$arrayToObject": [[["a"]]]}), 40397),
        (bson!({"$arrayToObject": [[[1, 2]]]}), 40395),
        (bson!({"$arrayToObject": [[{"k": "a"}]]}), 40392),
        (
            bson!({"$arrayToObject": [[["a", 1], {"k": "b", "v": 2}]]}),
            40396,
        ),
        (bson!({"$arrayToObject": 1}), 40386),
        (bson!({"$getField": "$a"}), 5654601),
        (bson!({"$getField": {"field": "a", "input": 1}}), 3041705),
    ]);
}

#[test]
fn accumulator_expressions() {
    check(vec![
        (bson!({"$sum": "$arr"}), bson!(6)),
        (bson!({"$sum": ["$a", "$b", "x"]}), bson!(7)),
        (bson!({"$sum": "$a"}), bson!(5)),
        (bson!({"$sum": "$s"}), bson!(0)),
        (bson!({"$sum": [1, 2.5]}), bson!(3.5)),
        (bson!({"$sum": [1, 2_i64]}), bson!(3_i64)),
        (bson!({"$avg": "$arr"}), bson!(2.0)),
        (bson!({"$avg": ["$a", "$b"]}), bson!(3.5)),
        (bson!({"$avg": "$s"}), Bson::Null),
        (bson!({"$min": "$arr"}), bson!(1)),
        (bson!({"$max": [1, "a", null]}), bson!("a")),
        (bson!({"$min": [null, "$missing"]}), Bson::Null),
        (bson!({"$max": "$words"}), bson!("c")),
        (
            bson!({"$stdDevPop": [[1, 2, 3, 4]]}),
            bson!(1.118_033_988_749_895),
        ),
        (
            bson!({"$stdDevSamp": [[2, 4, 4, 4, 5, 5, 7, 9]]}),
            bson!(2.138_089_935_299_395),
        ),
        (bson!({"$stdDevSamp": [[1]]}), Bson::Null),
    ]);
    let r = ev(bson!({"$rand": {}})).unwrap().unwrap();
    assert!(matches!(r, Bson::Double(x) if (0.0..1.0).contains(&x)));
    assert_eq!(
        ev(bson!({"$bsonSize": {"$literal": {"a": 1}}})).unwrap(),
        Some(bson!(12))
    );
}

#[test]
fn eval_expr_hook_and_matcher() {
    let d = doc! {"a": 5, "b": 3};
    assert_eq!(
        eval_expr(&bson!({"$gt": ["$a", "$b"]}), &d).unwrap(),
        bson!(true)
    );
    assert_eq!(eval_expr(&bson!("$missing"), &d).unwrap(), Bson::Null);
    let m =
        crate::matcher::Matcher::new_with_expr(&doc! {"$expr": {"$lt": ["$b", "$a"]}}, eval_expr)
            .unwrap();
    assert!(m.matches(&d));
    assert!(!m.matches(&doc! {"a": 1, "b": 3}));
}

#[test]
fn vars_scope() {
    let mut outer = Vars::new();
    outer.bind("x", bson!(1));
    let mut inner = outer.child();
    inner.bind("y", bson!(2));
    assert_eq!(inner.get("x"), Some(&bson!(1)));
    assert_eq!(inner.get("y"), Some(&bson!(2)));
    inner.bind("x", bson!(3));
    assert_eq!(inner.get("x"), Some(&bson!(3)));
    assert_eq!(outer.get("x"), Some(&bson!(1)));
    let e = Expr::parse_with_vars(&bson!({"$add": ["$$x", "$a"]}), &["x"]).unwrap();
    assert_eq!(e.eval(&doc! {"a": 1}, &outer).unwrap(), bson!(2));
}

#[test]
fn rounding_helper() {
    use super::arith::round_f64;
    assert_eq!(round_f64(0.125, 2, true), 0.12);
    assert_eq!(round_f64(0.135, 2, true), 0.14);
    assert_eq!(round_f64(-1.25, 1, true), -1.2);
    assert_eq!(round_f64(9.99, 1, true), 10.0);
    assert_eq!(round_f64(0.004, 2, true), 0.0);
    assert_eq!(round_f64(123.456, -1, false), 120.0);
    assert_eq!(round_f64(1e300, 2, true), 1e300);
}
