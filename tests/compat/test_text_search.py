"""Text search: text indexes (fields, weights, default_language, language_override, `$**`),
`$text` with terms, phrases, negations and `$language`, `{$meta: "textScore"}` in find and
aggregate projections and sorts, counts, updates and deletes, and MongoDB's errors."""
import pytest
from pymongo.errors import OperationFailure

ARTICLES = [
    {"_id": 1, "title": "Coffee shop opens", "body": "The best dark roast coffee in town", "views": 10},
    {"_id": 2, "title": "Tea time", "body": "Green tea and black tea, no coffee", "views": 5},
    {"_id": 3, "title": "Baking", "body": "Cakes and cookies with coffee frosting", "views": 7},
    {"_id": 4, "title": "Café culture", "body": "Espresso drinkers love cafés", "views": 3},
    {"_id": 5, "title": "Running", "body": "The runners were running fast", "views": 1},
    {"_id": 6, "title": "El café", "body": "Los corredores corren", "language": "spanish", "views": 2},
]


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def seed(db):
    db.a.insert_many(ARTICLES)
    db.a.create_index([("title", "text"), ("body", "text")], weights={"title": 5}, name="search")


def ids(cur):
    return sorted(d["_id"] for d in cur)


def test_terms_phrases_negations(db):
    seed(db)
    spec = [i for i in db.a.list_indexes() if i["name"] == "search"][0]
    assert spec["key"] == {"_fts": "text", "_ftsx": 1}
    assert spec["weights"] == {"body": 1, "title": 5}
    assert spec["default_language"] == "english" and spec["language_override"] == "language"
    assert spec["textIndexVersion"] == 3
    assert ids(db.a.find({"$text": {"$search": "coffee"}})) == [1, 2, 3]
    # Any term matches; stems match other forms; case and diacritics fold.
    assert ids(db.a.find({"$text": {"$search": "tea cookie"}})) == [2, 3]
    assert ids(db.a.find({"$text": {"$search": "RUN"}})) == [5]
    assert ids(db.a.find({"$text": {"$search": "cafe"}})) == [4]
    # Stop words alone find nothing.
    assert ids(db.a.find({"$text": {"$search": "the and"}})) == []
    # Phrases must all appear; negations exclude.
    assert ids(db.a.find({"$text": {"$search": "coffee \"dark roast\""}})) == [1]
    assert ids(db.a.find({"$text": {"$search": "coffee -tea"}})) == [1, 3]
    assert ids(db.a.find({"$text": {"$search": "coffee -\"coffee frosting\""}})) == [1, 2]
    # With other predicates, counted, updated, deleted.
    assert ids(db.a.find({"$text": {"$search": "coffee"}, "views": {"$gte": 7}})) == [1, 3]
    assert db.a.count_documents({"$text": {"$search": "coffee"}}) == 3
    assert db.a.update_many({"$text": {"$search": "tea"}}, {"$set": {"tagged": True}}).modified_count == 1
    # The language override: document 6 is Spanish ("corren" stems like "corredores").
    assert ids(db.a.find({"$text": {"$search": "corredor", "$language": "es"}})) == [6]
    # Unstemmed query words ("none") miss the stems the index holds.
    assert ids(db.a.find({"$text": {"$search": "runners", "$language": "none"}})) == []
    assert ids(db.a.find({"$text": {"$search": "runners"}})) == [5]
    assert db.a.delete_many({"$text": {"$search": "running"}}).deleted_count == 1


def test_scores_and_meta(db):
    seed(db)
    out = list(db.a.find({"$text": {"$search": "coffee"}}, {"score": {"$meta": "textScore"}, "title": 1})
               .sort([("score", {"$meta": "textScore"})]))
    assert [d["_id"] for d in out][0] == 1  # in the title (weight 5) and the body
    scores = [d["score"] for d in out]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert set(out[0]) == {"_id", "title", "score"}
    # A projection with only the score keeps every field.
    d = db.a.find_one({"$text": {"$search": "tea"}}, {"s": {"$meta": "textScore"}})
    assert d["title"] == "Tea time" and d["s"] > 1
    # Aggregation: $match first, then the score in $project, $addFields and $sort.
    out = list(db.a.aggregate([
        {"$match": {"$text": {"$search": "coffee"}}},
        {"$sort": {"score": {"$meta": "textScore"}}},
        {"$project": {"title": 1, "score": {"$meta": "textScore"}}},
    ]))
    assert [o["_id"] for o in out][0] == 1 and "score" in out[0]
    out = list(db.a.aggregate([{"$match": {"$text": {"$search": "coffee"}}}, {"$addFields": {"s": {"$meta": "textScore"}}},
                               {"$match": {"s": {"$gt": 0}}}, {"$count": "n"}]))
    assert out == [{"n": 3}]


def test_wildcard_and_errors(db):
    db.a.insert_many(ARTICLES)
    # No text index: 27.
    assert code_of(lambda: list(db.a.find({"$text": {"$search": "coffee"}}))) == 27
    db.a.create_index([("$**", "text")])
    assert ids(db.a.find({"$text": {"$search": "espresso"}})) == [4]
    # One text index per collection.
    assert code_of(lambda: db.a.create_index([("title", "text")])) == 85
    assert code_of(lambda: list(db.a.find({"$or": [{"$text": {"$search": "x"}}, {"views": 1}]}))) == 291
    assert code_of(lambda: list(db.a.find({"$text": {"$search": "x"}, "$and": [{"$text": {"$search": "y"}}]}))) == 2
    assert code_of(lambda: list(db.a.find({"$text": {"$search": "x", "$language": "klingon"}}))) == 2
    assert code_of(lambda: list(db.a.find({"$text": {"$search": "x", "$caseSensitive": True}}))) == 238
    assert code_of(lambda: list(db.a.find({}, {"s": {"$meta": "textScore"}}))) == 40218
    assert code_of(lambda: list(db.a.aggregate([{"$match": {"views": 1}}, {"$match": {"$text": {"$search": "x"}}}]))) == 17313
    # A document in an unknown language is refused by the index.
    assert code_of(lambda: db.a.insert_one({"title": "x", "language": "klingon"})) == 17262
    assert code_of(lambda: db.b.create_index([("t", "text")], default_language="klingon")) == 67


def test_text_index_survives_restart():
    from conftest import Siltd
    s = Siltd().start()
    try:
        c = s.client()
        db = c.t_text_restart
        db.a.insert_many(ARTICLES)
        db.a.create_index([("title", "text"), ("body", "text")], weights={"title": 5}, default_language="english")
        before = [(d["_id"], d["s"]) for d in db.a.find({"$text": {"$search": "coffee"}}, {"s": {"$meta": "textScore"}})
                  .sort([("s", {"$meta": "textScore"})])]
        c.close()
        s.kill9()
        s.start()
        c = s.client()
        db = c.t_text_restart
        after = [(d["_id"], d["s"]) for d in db.a.find({"$text": {"$search": "coffee"}}, {"s": {"$meta": "textScore"}})
                 .sort([("s", {"$meta": "textScore"})])]
        assert after == before and len(after) == 3
        db.a.insert_one({"_id": 9, "title": "coffee", "body": ""})
        assert db.a.count_documents({"$text": {"$search": "coffee"}}) == 4
        c.close()
    finally:
        s.stop()


def test_index_follows_writes(db):
    seed(db)
    db.a.update_one({"_id": 5}, {"$set": {"body": "espresso beans"}})
    assert ids(db.a.find({"$text": {"$search": "fast"}})) == []
    assert ids(db.a.find({"$text": {"$search": "running"}})) == [5]  # still in the title
    assert ids(db.a.find({"$text": {"$search": "espresso"}})) == [4, 5]
    db.a.replace_one({"_id": 4}, {"title": "Gone"})
    assert ids(db.a.find({"$text": {"$search": "espresso"}})) == [5]
    db.a.delete_one({"_id": 5})
    assert ids(db.a.find({"$text": {"$search": "espresso"}})) == []
    # Arrays of strings and nested fields are read; other types are not.
    db.t.create_index([("tags", "text"), ("meta.note", "text")])
    db.t.insert_many([{"_id": 1, "tags": ["red apple", "green"]}, {"_id": 2, "meta": {"note": "apples"}}, {"_id": 3, "tags": 5}])
    assert ids(db.t.find({"$text": {"$search": "apple"}})) == [1, 2]
