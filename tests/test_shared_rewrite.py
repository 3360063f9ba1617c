"""The test run's own plumbing: xdist workers share the assert-rewritten test files (``conftest.share_rewritten_tests``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import share_rewritten_tests

BODY = '''
def test_{name}():
    value = {value}
    assert value == 2, "kept"
'''


def test_workers_split_the_rewriting_and_pytest_loads_the_shared_files(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    """Two workers rewrite a folder's five files between them; pytest's own loader then takes each from the
    cache, and the cached code fails with pytest's explanation of the assert, not a bare AssertionError."""
    from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, assertstate_key

    for i in range(5):
        (tmp_path / f"test_f{i}.py").write_text(BODY.format(name=f"f{i}", value=i))
    share_rewritten_tests(pytestconfig, 0, 2, folder=tmp_path)
    share_rewritten_tests(pytestconfig, 1, 2, folder=tmp_path)
    state = pytestconfig.stash[assertstate_key]
    for i in range(5):
        source = tmp_path / f"test_f{i}.py"
        code = _read_pyc(source, tmp_path / "__pycache__" / f"test_f{i}{PYC_TAIL}", state.trace)
        assert code is not None, source
        namespace: dict = {}
        exec(code, namespace)
        if i == 2:
            namespace["test_f2"]()
            continue
        with pytest.raises(AssertionError) as failure:
            namespace[f"test_f{i}"]()
        assert f"assert {i} == 2" in str(failure.value), str(failure.value)  # rewritten: the values are explained
    source = tmp_path / "test_f0.py"
    source.write_text(BODY.format(name="f0", value=2) + "\n# edited\n")  # an edited file is rewritten again, never stale
    assert _read_pyc(source, tmp_path / "__pycache__" / f"test_f0{PYC_TAIL}", state.trace) is None
    share_rewritten_tests(pytestconfig, 0, 1, folder=tmp_path)
    assert _read_pyc(source, tmp_path / "__pycache__" / f"test_f0{PYC_TAIL}", state.trace) is not None
