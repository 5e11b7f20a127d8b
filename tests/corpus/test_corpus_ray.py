"""`--engine ray` on a local Ray instance gives the same numbers as the in-process engine.

Skipped only when Ray cannot be imported (it is pinned in requirements.txt)."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'ray==2.60.0'")

from normviz.corpus import CorpusJob, run_corpus  # noqa: E402

from ..helpers.corpus import assert_tables_equal, sample_lines  # noqa: E402


@pytest.fixture(scope="module")
def ray_local():
    from normviz.corpus.ray_engine import ensure_ray

    ensure_ray(num_cpus=2)
    yield
    ray.shutdown()


def test_ray_engine_is_identical_to_local(tiny_bert_dir, tmp_path, ray_local):
    src = tmp_path / "c.txt"
    src.write_text("\n".join(sample_lines(8)) + "\n\n", encoding="utf-8")  # the last line is empty: logged
    job = dict(model=str(tiny_bert_dir), input=str(src), chunk_size=3, batch_size=2, dtype="float64")
    local = run_corpus(CorpusJob(out=str(tmp_path / "local"), **job), show_bar=False)
    remote = run_corpus(CorpusJob(out=str(tmp_path / "ray"), engine="ray", workers=2, **job), show_bar=False)
    assert remote.summary["engine"] == "ray" and remote.summary["sequences"] == 8
    assert remote.bad_lines == local.bad_lines == [[9, "empty line"]]
    assert len(list((tmp_path / "ray" / "checkpoint").glob("chunk_*.npz"))) == 3
    # Not bit for bit: torch's BLAS here is MKL, whose GEMM is reproducible across processes only in its CNR
    # mode (MKL_CBWR, fixed before MKL loads; the driver's MKL loaded long before this test): with dynamic
    # threading and buffer alignment it may sum a float64 dot product in another order in the Ray worker, and
    # under load the tables differed by 1 ulp (8.7e-19 absolute). Every statistic is float64, so 1e-12 relative
    # (column-scaled absolute) is ~4,500 ulps: far below any difference a wrong chunk, merge or batch would make.
    assert_tables_equal(local.tables, remote.tables, exact=False, rtol=1e-12, scaled_atol=1e-12)
