"""Change streams on `siltd --replSet rs0` through pymongo's `watch()`: every event type of a
collection, database and cluster stream, resume tokens (the leading cluster time in
MongoDB's layout), resumeAfter / startAfter / startAtOperationTime, postBatchResumeToken,
the pipeline after the stage, transactions, invalidation, fast updates, and resuming across
a restart."""
import time

import pymongo
import pytest
from bson import Timestamp

from conftest import Siltd, rs_client


def drain(stream, n, timeout=20):
    out = []
    deadline = time.time() + timeout
    while len(out) < n and time.time() < deadline:
        e = stream.try_next()
        if e is not None:
            out.append(e)
        elif not stream.alive:
            break
    return out


def token_time(tok):
    data = tok["_data"]
    assert data[:2] == "82"
    v = int(data[2:18], 16)
    return Timestamp(v >> 32, v & 0xFFFFFFFF)


def test_collection_stream_event_types(rc):
    db = rc.cs_types
    db.c.insert_one({"_id": 0})
    with db.c.watch() as st:
        db.c.insert_one({"_id": 1, "a": 1, "arr": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]})
        db.c.update_one({"_id": 1}, {"$set": {"a": 2, "n.x": 1}})
        db.c.update_one({"_id": 1}, {"$unset": {"a": 1}, "$pop": {"arr": 1}})
        db.c.replace_one({"_id": 1}, {"b": 1})
        db.c.delete_one({"_id": 1})
        db.other.insert_one({"_id": 9})  # another collection: not in this stream
        db.c.drop()
        ev = drain(st, 7)
        assert not st.alive
    kinds = [e["operationType"] for e in ev]
    assert kinds == ["insert", "update", "update", "replace", "delete", "drop", "invalidate"]
    ins = ev[0]
    assert list(ins) == ["_id", "operationType", "clusterTime", "wallTime", "fullDocument", "ns",
                         "documentKey"]
    assert ins["ns"] == {"db": "cs_types", "coll": "c"} and ins["documentKey"] == {"_id": 1}
    assert ins["fullDocument"]["a"] == 1
    assert ev[1]["updateDescription"] == {"updatedFields": {"a": 2, "n": {"x": 1}},
                                          "removedFields": [], "truncatedArrays": []}
    assert ev[2]["updateDescription"]["removedFields"] == ["a"]
    assert ev[2]["updateDescription"]["truncatedArrays"] == [{"field": "arr", "newSize": 9}]
    assert ev[3]["fullDocument"] == {"_id": 1, "b": 1}
    assert ev[4]["documentKey"] == {"_id": 1} and "fullDocument" not in ev[4]
    # Tokens carry the event's cluster time in MongoDB's leading encoding.
    for e in ev:
        assert token_time(e["_id"]) == e["clusterTime"]
    tokens = [e["_id"]["_data"] for e in ev]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


def test_database_and_cluster_streams_rename_and_drop_database(rc):
    with rc.cs_db.watch() as dbst, rc.watch() as cl:
        rc.cs_db.a.insert_one({"_id": 1})
        rc.cs_db2.b.insert_one({"_id": 2})
        rc.admin.command("renameCollection", "cs_db.a", to="cs_db.a2")
        rc.drop_database("cs_db")
        ev = drain(dbst, 5)
        assert [e["operationType"] for e in ev] == ["insert", "rename", "drop", "dropDatabase",
                                                    "invalidate"]
        assert ev[1]["to"] == {"db": "cs_db", "coll": "a2"}
        assert ev[3]["ns"] == {"db": "cs_db"}
        cev = drain(cl, 5)
        assert [(e["operationType"], e["ns"].get("db")) for e in cev] == [
            ("insert", "cs_db"), ("insert", "cs_db2"), ("rename", "cs_db"), ("drop", "cs_db"),
            ("dropDatabase", "cs_db")]
        assert cl.alive


def test_resume_options_and_post_batch_resume_token(rc):
    db = rc.cs_resume
    db.c.insert_one({"_id": "seed"})
    with db.c.watch() as st:
        for i in range(5):
            db.c.insert_one({"_id": i})
        ev = drain(st, 5)
    assert [e["fullDocument"]["_id"] for e in ev] == list(range(5))
    with db.c.watch(resume_after=ev[1]["_id"]) as st:
        assert [e["fullDocument"]["_id"] for e in drain(st, 3)] == [2, 3, 4]
    with db.c.watch(start_after=ev[3]["_id"]) as st:
        assert [e["fullDocument"]["_id"] for e in drain(st, 1)] == [4]
    with db.c.watch(start_at_operation_time=ev[2]["clusterTime"]) as st:
        assert [e["fullDocument"]["_id"] for e in drain(st, 3)] == [2, 3, 4]
    # postBatchResumeToken on every batch, moving while nothing happens.
    r = db.command("aggregate", "c", pipeline=[{"$changeStream": {}}], cursor={})
    first = r["cursor"]["postBatchResumeToken"]
    cid = r["cursor"]["id"]
    assert cid != 0 and r["cursor"]["firstBatch"] == []
    db.other.insert_one({"x": 1})
    r = db.command("getMore", cid, collection="c", maxTimeMS=300)
    assert r["cursor"]["nextBatch"] == []
    assert r["cursor"]["postBatchResumeToken"]["_data"] > first["_data"]
    db.command("killCursors", "c", cursors=[cid])


def test_pipeline_after_the_stage_and_full_document(rc):
    db = rc.cs_pipe
    db.c.insert_one({"_id": 1, "v": 0})
    pipeline = [{"$match": {"operationType": {"$in": ["insert", "update"]}}},
                {"$project": {"operationType": 1, "fullDocument": 1}},
                {"$addFields": {"tag": "x"}}]
    with db.c.watch(pipeline, full_document="updateLookup") as st:
        db.c.insert_one({"_id": 2, "v": 1})
        db.c.delete_one({"_id": 2})
        db.c.update_one({"_id": 1}, {"$set": {"v": 5}})
        ev = drain(st, 2)
    assert [e["operationType"] for e in ev] == ["insert", "update"]
    assert ev[1]["fullDocument"] == {"_id": 1, "v": 5} and ev[1]["tag"] == "x"
    assert "ns" not in ev[0]
    with pytest.raises(pymongo.errors.OperationFailure):
        db.c.watch([{"$group": {"_id": 1}}])


def test_transaction_events_in_commit_order_with_session(rc):
    db = rc.cs_txn
    db.c.insert_one({"_id": 0})
    with db.c.watch() as st:
        with rc.start_session() as s:
            lsid = s.session_id
            with s.start_transaction():
                db.c.insert_one({"_id": 1}, session=s)
                db.c.insert_one({"_id": 2}, session=s)
                db.c.delete_one({"_id": 0}, session=s)
        with rc.start_session() as s:
            s.start_transaction()
            db.c.insert_one({"_id": 3}, session=s)
            s.abort_transaction()
        db.c.insert_one({"_id": 4})
        ev = drain(st, 4)
    assert [(e["operationType"], e["documentKey"]["_id"]) for e in ev] == [
        ("insert", 1), ("insert", 2), ("delete", 0), ("insert", 4)]
    for e in ev[:3]:
        assert e["lsid"]["id"] == lsid["id"] and "txnNumber" in e
        assert e["clusterTime"] == ev[0]["clusterTime"]
    assert "lsid" not in ev[3]


def test_fast_update_events_never_carry_a_read_value(rc):
    db = rc.cs_fast
    db.c.insert_one({"_id": 1, "n": 1})
    with db.c.watch() as st:
        r = db.command("update", "c", updates=[{"q": {"_id": 1}, "u": {"$inc": {"n": 1},
                                                                     "$set": {"s": "x"}}}],
                       fastUpdate=True)
        assert "fastUpdates" in r
        (e,) = drain(st, 1)
    d = e["updateDescription"]
    assert d["updatedFields"] == {"s": "x"}
    assert d["siltOperators"] == {"$inc": {"n": 1}}
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "n": 2, "s": "x"}


def test_errors(rc, standalone_client):
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        standalone_client.cs_err.c.watch()
    assert e.value.code == 40573
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        rc.cs_err.c.watch(resume_after={"_data": "zz"})
    assert e.value.code == 260
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        rc.cs_err.c.watch(resume_after={"_data": "82" + "0" * 15 + "1" + "0" * 10})
    assert e.value.code == 286
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        rc.cs_err.c.aggregate([{"$match": {}}, {"$changeStream": {}}])
    assert e.value.code == 40602


def test_resume_across_a_restart():
    s = Siltd(extra=["--replSet", "rs0"]).start()
    try:
        c = rs_client(s)
        with c.cs_restart.c.watch() as st:
            c.cs_restart.c.insert_one({"_id": 1})
            (e,) = drain(st, 1)
        c.cs_restart.c.insert_one({"_id": 2})
        c.close()
        s.stop()
        s.start()
        c = rs_client(s)
        c.cs_restart.c.insert_one({"_id": 3})
        with c.cs_restart.c.watch(resume_after=e["_id"]) as st:
            assert [x["documentKey"]["_id"] for x in drain(st, 2)] == [2, 3]
        c.close()
    finally:
        s.cleanup()


def test_pre_and_post_images(rc):
    db = rc.cs_images
    db.create_collection("p", changeStreamPreAndPostImages={"enabled": True})
    db.create_collection("q")
    db.p.insert_one({"_id": 1, "a": 1, "l": [1, 2]})
    db.q.insert_one({"_id": 1, "a": 1})
    opts = dict(full_document="whenAvailable", full_document_before_change="whenAvailable")
    with db.watch(**opts) as st:
        db.p.update_one({"_id": 1}, {"$set": {"a": 2}, "$push": {"l": 3}})
        db.p.replace_one({"_id": 1}, {"b": 1})
        with rc.start_session() as s:
            with s.start_transaction():
                db.p.update_one({"_id": 1}, {"$set": {"c": 1}}, session=s)
                db.p.delete_one({"_id": 1}, session=s)
        db.q.update_one({"_id": 1}, {"$set": {"a": 2}})
        ev = drain(st, 5)
    assert [e["operationType"] for e in ev] == ["update", "replace", "update", "delete", "update"]
    assert ev[0]["fullDocumentBeforeChange"] == {"_id": 1, "a": 1, "l": [1, 2]}
    assert ev[0]["fullDocument"] == {"_id": 1, "a": 2, "l": [1, 2, 3]}
    assert ev[1]["fullDocumentBeforeChange"] == {"_id": 1, "a": 2, "l": [1, 2, 3]}
    assert ev[2]["fullDocumentBeforeChange"] == {"_id": 1, "b": 1}
    assert ev[2]["fullDocument"] == {"_id": 1, "b": 1, "c": 1}
    assert ev[3]["fullDocumentBeforeChange"] == {"_id": 1, "b": 1, "c": 1}
    # A collection without the option has no images.
    assert ev[4]["fullDocumentBeforeChange"] is None and ev[4]["fullDocument"] is None
    # `required` on a collection without them is 47.
    with db.q.watch(full_document_before_change="required") as st:
        db.q.delete_one({"_id": 1})
        with pytest.raises(pymongo.errors.OperationFailure) as e:
            drain(st, 1)
        assert e.value.code == 47
    # Fast updates are off where pre-images are kept.
    db.p.insert_one({"_id": 2, "n": 1})
    r = db.command("update", "p", updates=[{"q": {"_id": 2}, "u": {"$inc": {"n": 1}}}],
                   fastUpdate=True)
    assert "fastUpdates" not in r


def test_what_the_drivers_specification_tests_check():
    """Found by the drivers' unified change-stream, transaction and retryable-write tests."""
    s = Siltd(extra=["--replSet", "rs0", "--enable-test-commands"]).start()
    try:
        c = rs_client(s)
        db = c.cs_spec
        db.c.insert_one({"_id": 0})
        assert c.admin.command("getParameter", "*")["enableTestCommands"] is True
        # A failed getMore of a change stream with a resumable code is labelled so: the
        # driver resumes and the stream goes on.
        r = db.command("aggregate", "c", pipeline=[{"$changeStream": {}}], cursor={})
        cid = r["cursor"]["id"]
        c.admin.command("configureFailPoint", "failGetMoreAfterCursorCheckout",
                        mode={"times": 1}, data={"errorCode": 262})
        with pytest.raises(pymongo.errors.OperationFailure) as e:
            db.command("getMore", cid, collection="c")
        assert e.value.code == 262
        assert e.value.details["errorLabels"] == ["ResumableChangeStreamError"]
        # Through watch(): resumed without the caller seeing it.
        with db.c.watch() as st:
            c.admin.command("configureFailPoint", "failGetMoreAfterCursorCheckout",
                            mode={"times": 1}, data={"errorCode": 6})
            db.c.insert_one({"_id": 1})
            (ev,) = drain(st, 1)
            assert ev["documentKey"] == {"_id": 1}
        # The resume token must survive the pipeline (280, not resumable).
        with db.c.watch([{"$project": {"_id": 0}}]) as st:
            db.c.insert_one({"_id": 2})
            with pytest.raises(pymongo.errors.OperationFailure) as e:
                drain(st, 1)
            assert e.value.code == 280
        # An unknown stage is 40324 as anywhere; a known one not allowed here is 20.
        with pytest.raises(pymongo.errors.OperationFailure) as e:
            db.c.watch([{"$unsupported": 1}])
        assert e.value.code == 40324
        with pytest.raises(pymongo.errors.OperationFailure) as e:
            db.c.watch([{"$group": {"_id": 1}}])
        assert e.value.code == 20
        # Only readConcern majority (or none).
        with pytest.raises(pymongo.errors.OperationFailure) as e:
            db.get_collection("c", read_concern=pymongo.read_concern.ReadConcern("local")).watch()
        assert e.value.code == 72
        # Expanded events: a view's creation, a collMod that changes nothing.
        with db.watch(show_expanded_events=True) as st:
            db.create_collection("v", viewOn="c", pipeline=[{"$match": {"x": 1}}])
            db.command("collMod", "c")
            ev = drain(st, 2)
        assert [e["operationType"] for e in ev] == ["create", "modify"]
        assert ev[0]["ns"] == {"db": "cs_spec", "coll": "v"}
        assert ev[0]["operationDescription"]["viewOn"] == "c"
        # A database-wide cursor is killed under `$cmd.aggregate`.
        r = db.command("aggregate", 1, pipeline=[{"$changeStream": {}}], cursor={})
        assert r["cursor"]["ns"] == "cs_spec.$cmd.aggregate"
        out = db.command("killCursors", "$cmd.aggregate", cursors=[r["cursor"]["id"]])
        assert out["cursorsKilled"] == [r["cursor"]["id"]]
        # commitTransaction failing with a transient code is labelled TransientTransactionError.
        for code in (112, 24, 251):
            c.admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                            data={"failCommands": ["commitTransaction"], "errorCode": code})
            with c.start_session() as sess:
                sess.start_transaction()
                db.t.insert_one({"code": code}, session=sess)
                with pytest.raises(pymongo.errors.OperationFailure) as e:
                    sess.commit_transaction()
                assert e.value.has_error_label("TransientTransactionError"), code
        # onPrimaryTransactionalWrite fails the write and closes the connection (the driver
        # retries it, and it happens once).
        c.admin.command("configureFailPoint", "onPrimaryTransactionalWrite",
                        mode={"times": 1}, data={"failBeforeCommitExceptionCode": 1})
        db.r.insert_one({"_id": "once"})
        assert db.r.count_documents({"_id": "once"}) == 1
        c.close()
    finally:
        s.cleanup()


def test_split_large_events_and_resuming_from_a_fragment(rc):
    db = rc.cs_split
    db.create_collection("c", changeStreamPreAndPostImages={"enabled": True})
    db.c.insert_one({"_id": 1, "value": "q" * (10 << 20)})
    with db.c.watch([{"$changeStreamSplitLargeEvent": {}}],
                    full_document_before_change="required") as st:
        db.c.update_one({"_id": 1}, {"$set": {"value": "z" * (10 << 20)}})
        ev = drain(st, 2)
    assert [e["splitEvent"] for e in ev] == [{"fragment": 1, "of": 2}, {"fragment": 2, "of": 2}]
    assert ev[0]["operationType"] == "update"
    assert "fullDocumentBeforeChange" in ev[1]
    assert token_time(ev[0]["_id"]) == token_time(ev[1]["_id"])
    # Resuming after the first fragment gives the second.
    with db.c.watch([{"$changeStreamSplitLargeEvent": {}}], full_document_before_change="required",
                    resume_after=ev[0]["_id"]) as st:
        (again,) = drain(st, 1)
    assert again["splitEvent"] == {"fragment": 2, "of": 2}
    assert again["_id"] == ev[1]["_id"]
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        db.c.watch([{"$changeStreamSplitLargeEvent": {}}, {"$match": {}}])
    assert e.value.code == 7182802
