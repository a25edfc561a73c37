"""The `failCommand` fail point as drivers' tests drive it (`configureFailPoint` under
`--enable-test-commands`): error codes and labels, closed and blocked connections, write
concern errors, application names and modes, through pymongo's own retry logic."""
import pymongo
import pytest
from pymongo.errors import AutoReconnect, OperationFailure, WriteConcernError

from conftest import Siltd


@pytest.fixture(scope="module")
def rs():
    s = Siltd(extra=["--replSet", "rs0", "--enable-test-commands"]).start()
    yield s
    s.cleanup()


def connect(rs, **kw):
    return pymongo.MongoClient(f"mongodb://127.0.0.1:{rs.port}/?replicaSet=rs0",
                               serverSelectionTimeoutMS=10000, heartbeatFrequencyMS=500, **kw)


def fail(c, mode, **data):
    return c.admin.command("configureFailPoint", "failCommand", mode=mode, data=data)


def off(c):
    return c.admin.command("configureFailPoint", "failCommand", mode="off")


def test_an_error_code_once_then_through(rs):
    c = connect(rs, retryWrites=False)
    c.t.c.drop()
    assert fail(c, {"times": 1}, failCommands=["insert"], errorCode=2)["count"] == 0
    with pytest.raises(OperationFailure) as e:
        c.t.c.insert_one({"_id": 1})
    assert e.value.code == 2 and e.value.details["codeName"] == "BadValue"
    assert e.value.details["errmsg"] == "Failing command via 'failCommand' failpoint"
    c.t.c.insert_one({"_id": 1})
    assert c.t.c.count_documents({}) == 1
    assert off(c)["count"] == 1
    c.close()


def test_a_retryable_code_on_a_retryable_write_is_labelled_and_retried(rs):
    c = connect(rs, retryWrites=True)
    c.t.c.drop()
    fail(c, {"times": 1}, failCommands=["insert"], errorCode=91)
    # pymongo retries once on RetryableWriteError: the second attempt goes through.
    c.t.c.insert_one({"_id": "retried"})
    assert c.t.c.find_one({"_id": "retried"}) is not None
    assert off(c)["count"] == 1
    # Without a session there is no retryable write: the label is not added.
    plain = connect(rs, retryWrites=False)
    fail(plain, {"times": 1}, failCommands=["insert"], errorCode=91)
    with pytest.raises(Exception) as e:
        plain.t.c.insert_one({"_id": "not retried"})
    assert "RetryableWriteError" not in getattr(e.value, "details", {}).get("errorLabels", [])
    off(plain)
    plain.close()
    c.close()


def test_error_labels_as_given(rs):
    c = connect(rs, retryWrites=False)
    fail(c, {"times": 1}, failCommands=["find"], errorCode=112,
         errorLabels=["TransientTransactionError", "Custom"])
    with pytest.raises(OperationFailure) as e:
        c.t.c.find_one()
    assert e.value.code == 112
    assert e.value.details["errorLabels"] == ["TransientTransactionError", "Custom"]
    c.close()


def test_close_connection(rs):
    c = connect(rs, retryReads=False)
    fail(c, {"times": 1}, failCommands=["find"], closeConnection=True)
    with pytest.raises(AutoReconnect):
        c.t.closed.find_one()
    assert c.t.closed.find_one() is None   # a new connection works
    c.close()


def test_block_connection_then_run(rs):
    c = connect(rs)
    c.t.c.drop()
    c.t.c.insert_one({"_id": 1})
    fail(c, {"times": 1}, failCommands=["find"], blockConnection=True, blockTimeMS=200)
    # Held, then answered as usual.
    assert c.t.c.find_one({"_id": 1}) == {"_id": 1}
    assert off(c)["count"] == 1
    c.close()


def test_write_concern_error_is_retried_once(rs):
    c = connect(rs, retryWrites=True)
    c.t.c.drop()
    fail(c, {"times": 1}, failCommands=["insert"],
         writeConcernError={"code": 91, "errmsg": "Replication is being shut down"})
    # The insert happened; its writeConcernError is retryable, and the retry returns the
    # recorded result without one.
    c.t.c.insert_one({"_id": "wce"})
    assert c.t.c.count_documents({"_id": "wce"}) == 1
    plain = connect(rs, retryWrites=False)
    fail(plain, {"times": 1}, failCommands=["insert"],
         writeConcernError={"code": 64, "errmsg": "waiting for replication timed out"})
    with pytest.raises(WriteConcernError) as e:
        plain.t.c.insert_one({"_id": "wce2"})
    assert e.value.code == 64
    assert plain.t.c.count_documents({"_id": "wce2"}) == 1
    plain.close()
    c.close()


def test_app_name_and_skip(rs):
    mine = connect(rs, appname="mine", retryWrites=False)
    other = connect(rs, appname="other", retryWrites=False)
    fail(mine, {"skip": 1}, failCommands=["count"], errorCode=2, appName="mine")
    assert other.t.command("count", "c")["ok"] == 1
    assert mine.t.command("count", "c")["ok"] == 1       # skipped once
    with pytest.raises(OperationFailure):
        mine.t.command("count", "c")
    assert other.t.command("count", "c")["ok"] == 1
    off(mine)
    mine.close()
    other.close()


def test_refused_without_test_commands_and_bad_arguments(rs):
    plain = Siltd().start()
    try:
        c = plain.client()
        with pytest.raises(OperationFailure) as e:
            c.admin.command("configureFailPoint", "failCommand", mode="alwaysOn",
                            data={"failCommands": ["find"], "errorCode": 2})
        assert e.value.code == 59
    finally:
        plain.cleanup()
    c = connect(rs)
    with pytest.raises(OperationFailure):
        c.admin.command("configureFailPoint", "failCommand", mode="alwaysOn",
                        data={"errorCode": 2})
    with pytest.raises(OperationFailure):
        c.admin.command("configureFailPoint", "failCommand", mode="sometimes",
                        data={"failCommands": ["find"], "errorCode": 2})
    c.close()


def test_on_primary_transactional_write(rs):
    """A retryable write whose reply is lost after the commit is retried and answered from
    the retry record: the document is written once. One that fails before its commit with a
    retryable code is retried and written once too."""
    c = connect(rs, retryWrites=True)
    c.t.once.drop()
    c.admin.command("configureFailPoint", "onPrimaryTransactionalWrite", mode={"times": 1},
                    data={"closeConnection": True})
    c.t.once.update_one({"_id": 1}, {"$inc": {"n": 1}}, upsert=True)
    assert c.t.once.find_one({"_id": 1}) == {"_id": 1, "n": 1}
    c.admin.command("configureFailPoint", "onPrimaryTransactionalWrite", mode={"times": 1},
                    data={"closeConnection": False, "failBeforeCommitExceptionCode": 91})
    c.t.once.update_one({"_id": 1}, {"$inc": {"n": 1}})
    assert c.t.once.find_one({"_id": 1}) == {"_id": 1, "n": 2}
    assert c.admin.command("configureFailPoint", "onPrimaryTransactionalWrite",
                           mode="off")["count"] == 1
    c.close()


def test_fail_get_more_after_cursor_checkout(rs):
    c = connect(rs)
    c.t.gm.drop()
    c.t.gm.insert_many([{"_id": i} for i in range(5)])
    c.admin.command("configureFailPoint", "failGetMoreAfterCursorCheckout", mode={"times": 1},
                    data={"errorCode": 43})
    r = c.t.command("find", "gm", batchSize=2)
    cid = r["cursor"]["id"]
    with pytest.raises(OperationFailure) as e:
        c.t.command("getMore", cid, collection="gm")
    assert e.value.code == 43
    with pytest.raises(OperationFailure) as e:
        c.t.command("getMore", cid, collection="gm")
    assert e.value.code == 43 and "not found" in str(e.value)   # the cursor is gone
    # Through the driver: a cursor that fails its getMore raises; the next find works.
    assert [d["_id"] for d in c.t.gm.find(batch_size=2)] == [0, 1, 2, 3, 4]
    c.close()
