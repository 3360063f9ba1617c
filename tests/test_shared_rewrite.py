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


def test_each_worker_starts_at_its_share_and_pytest_loads_the_shared_files(tmp_path: Path, pytestconfig: pytest.Config,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker 1 of 2 rewrites a folder's five files from its share on (the third file first, then around);
    worker 0 then finds every file cached and rewrites none. pytest's own loader takes each file from the
    cache, and the cached code fails with pytest's explanation of the assert, not a bare AssertionError.
    An edited file (here its size changes) is rewritten again."""
    from _pytest.assertion import rewrite

    state = pytestconfig.stash.get(rewrite.assertstate_key, None)
    if state is None:
        pytest.skip("asserts are not rewritten in this run (--assert=plain)")
    order: list[str] = []
    real = rewrite._rewrite_test

    def recorded(path: Path, config: pytest.Config):
        order.append(path.name)
        return real(path, config)

    monkeypatch.setattr(rewrite, "_rewrite_test", recorded)
    for i in range(5):
        (tmp_path / f"test_f{i}.py").write_text(BODY.format(name=f"f{i}", value=i))
    share_rewritten_tests(pytestconfig, 1, 2, folder=tmp_path)
    assert order == ["test_f2.py", "test_f3.py", "test_f4.py", "test_f0.py", "test_f1.py"]
    share_rewritten_tests(pytestconfig, 0, 2, folder=tmp_path)
    assert len(order) == 5  # all cached: worker 0 rewrote nothing
    for i in range(5):
        source = tmp_path / f"test_f{i}.py"
        code = rewrite._read_pyc(source, tmp_path / "__pycache__" / f"test_f{i}{rewrite.PYC_TAIL}", state.trace)
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
    source.write_text(BODY.format(name="f0", value=2) + "\n# edited\n")
    assert rewrite._read_pyc(source, tmp_path / "__pycache__" / f"test_f0{rewrite.PYC_TAIL}", state.trace) is None
    share_rewritten_tests(pytestconfig, 0, 1, folder=tmp_path)
    assert order[5:] == ["test_f0.py"]
