"""The exactness corpus (`tests/corpus/`): every case against siltd."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus"))
import corpus  # noqa: E402

CASES = corpus.load()


@pytest.mark.parametrize("case", [c for _, c in CASES],
                         ids=[f"{stem}:{c['name']}" for stem, c in CASES])
def test_case(client, case):
    why = corpus.run_case(client, case)
    assert why is None, why
