"""Schema validation: validator (query operators and $jsonSchema), validationLevel,
validationAction, bypassDocumentValidation, error 121 with errInfo.details; $jsonSchema in
queries; collMod of the validator."""
import pytest
from pymongo.errors import OperationFailure, WriteError

SCHEMA = {"$jsonSchema": {
    "bsonType": "object",
    "required": ["name", "age"],
    "properties": {
        "name": {"bsonType": "string", "minLength": 1},
        "age": {"bsonType": ["int", "long"], "minimum": 0, "maximum": 150},
        "tags": {"bsonType": "array", "items": {"bsonType": "string"}, "uniqueItems": True},
        "kind": {"enum": ["a", "b"]},
    },
    "additionalProperties": True,
}}


def refused(fn):
    with pytest.raises((WriteError, OperationFailure)) as e:
        fn()
    assert e.value.code == 121, e.value.details
    return e.value.details


def test_json_schema_validator(db):
    db.create_collection("p", validator=SCHEMA)
    db.p.insert_one({"_id": 1, "name": "ann", "age": 30, "tags": ["x", "y"], "kind": "a"})
    d = refused(lambda: db.p.insert_one({"_id": 2, "name": "bob"}))
    assert d["errmsg"] == "Document failed validation"
    info = d["errInfo"]
    assert info["failingDocumentId"] == 2
    assert info["details"]["operatorName"] == "$jsonSchema"
    rule = info["details"]["schemaRulesNotSatisfied"][0]
    assert rule == {"operatorName": "required", "specifiedAs": {"required": ["name", "age"]}, "missingProperties": ["age"]}
    d = refused(lambda: db.p.insert_one({"_id": 3, "name": "", "age": -1}))
    props = d["errInfo"]["details"]["schemaRulesNotSatisfied"][0]["propertiesNotSatisfied"]
    assert {p["propertyName"] for p in props} == {"name", "age"}
    age = [p for p in props if p["propertyName"] == "age"][0]["details"][0]
    assert age["operatorName"] == "minimum" and age["consideredValue"] == -1 and age["reason"] == "comparison failed"
    refused(lambda: db.p.insert_one({"name": "c", "age": 1, "tags": ["x", "x"]}))
    refused(lambda: db.p.insert_one({"name": "c", "age": 1, "tags": [1]}))
    refused(lambda: db.p.insert_one({"name": "c", "age": 1, "kind": "z"}))
    refused(lambda: db.p.insert_one({"name": "c", "age": 1.5}))
    # Updates, pipelines, replacements, upserts and findAndModify are checked too.
    refused(lambda: db.p.update_one({"_id": 1}, {"$set": {"age": 200}}))
    refused(lambda: db.p.update_one({"_id": 1}, [{"$unset": "name"}]))
    refused(lambda: db.p.replace_one({"_id": 1}, {"name": "x"}))
    refused(lambda: db.p.update_one({"_id": 9}, {"$set": {"name": "x"}}, upsert=True))
    refused(lambda: db.p.find_one_and_update({"_id": 1}, {"$set": {"name": 5}}))
    assert db.p.find_one({"_id": 1})["age"] == 30
    # A fast update (applied without reading the document) cannot be validated, so a
    # validator turns the fast path off: the same update is checked and refused.
    r = db.command("update", "p", updates=[{"q": {"_id": 1}, "u": {"$inc": {"age": 500}}}], fastUpdate=True)
    assert r["n"] == 0 and r["writeErrors"][0]["code"] == 121 and "fastUpdates" not in r
    r = db.command("update", "p", updates=[{"q": {"_id": 1}, "u": {"$inc": {"age": 1}}}], fastUpdate=True)
    assert r["n"] == 1 and "fastUpdates" not in r
    assert db.p.find_one({"_id": 1})["age"] == 31
    db.p.update_one({"_id": 1}, {"$set": {"age": 30}})
    assert db.p.count_documents({}) == 1
    # bypassDocumentValidation.
    db.p.insert_one({"_id": 10, "junk": True}, bypass_document_validation=True)
    db.p.update_one({"_id": 10}, {"$set": {"more": 1}}, bypass_document_validation=True)
    assert db.p.count_documents({}) == 2


def test_query_validator_levels_and_actions(db):
    db.create_collection("q", validator={"a": {"$gt": 1}, "b": {"$exists": True}})
    d = refused(lambda: db.q.insert_one({"_id": 1, "a": 0}))
    det = d["errInfo"]["details"]
    assert det["operatorName"] == "$and"
    assert [c["index"] for c in det["clausesNotSatisfied"]] == [0, 1]
    assert det["clausesNotSatisfied"][0]["details"]["operatorName"] == "$gt"
    db.q.insert_one({"_id": 1, "a": 0}, bypass_document_validation=True)
    db.q.insert_one({"_id": 2, "a": 5, "b": 1})
    # strict: an invalid document cannot be updated into another invalid one.
    refused(lambda: db.q.update_one({"_id": 1}, {"$set": {"c": 1}}))
    # moderate: documents already invalid may be updated; valid ones stay valid.
    db.command("collMod", "q", validationLevel="moderate")
    assert db.q.update_one({"_id": 1}, {"$set": {"c": 1}}).modified_count == 1
    refused(lambda: db.q.update_one({"_id": 2}, {"$set": {"a": 0}}))
    # warn: the write goes through.
    db.command("collMod", "q", validationAction="warn", validationLevel="strict")
    db.q.insert_one({"_id": 3})
    # off.
    db.command("collMod", "q", validationAction="error", validationLevel="off")
    db.q.insert_one({"_id": 4})
    # A new validator replaces the old one.
    db.command("collMod", "q", validator={"z": 1}, validationLevel="strict")
    refused(lambda: db.q.insert_one({"_id": 5}))
    db.q.insert_one({"_id": 6, "z": 1})
    opts = [c for c in db.list_collections() if c["name"] == "q"][0]["options"]
    assert opts == {"validator": {"z": 1}, "validationLevel": "strict", "validationAction": "error"}
    # $expr works in a validator.
    db.create_collection("e", validator={"$expr": {"$lt": ["$lo", "$hi"]}})
    db.e.insert_one({"lo": 1, "hi": 2})
    refused(lambda: db.e.insert_one({"lo": 3, "hi": 2}))


def test_validator_option_errors_and_json_schema_queries(db):
    for bad in ({"$where": "true"}, {"a": {"$near": [0, 0]}}):
        with pytest.raises(OperationFailure) as e:
            db.create_collection("x", validator=bad)
        assert e.value.code == 72
    with pytest.raises(OperationFailure) as e:
        db.create_collection("x", validator={"a": 1}, validationLevel="sometimes")
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        db.create_collection("x", validator={"$jsonSchema": {"$ref": "#/x"}})
    assert e.value.code == 9
    with pytest.raises(OperationFailure) as e:
        db.create_collection("x", validator={"$jsonSchema": {"type": "integer"}})
    assert e.value.code == 9
    db.c.insert_many([{"_id": 1, "n": 1}, {"_id": 2, "n": "s"}, {"_id": 3}])
    q = {"$jsonSchema": {"required": ["n"], "properties": {"n": {"type": "number"}}}}
    assert [d["_id"] for d in db.c.find(q)] == [1]
    assert [d["_id"] for d in db.c.find({"$nor": [q]})] == [2, 3]
    assert db.c.count_documents({"$jsonSchema": {"properties": {"n": {"bsonType": "string"}}}}) == 2
