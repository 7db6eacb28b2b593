"""A pytest plugin: under `pytest -n N` a test module that defines a module-scoped fixture runs on one worker.

Such fixtures train or export a model once for their module (30-70 s each on 2 cores). xdist's default `load`
scheduling hands a module's tests to every worker, and each worker then builds the fixture again. Here `load`
(the default of `-n N`) becomes xdist's scope scheduling with such a module as one unit and every other test a
unit of its own.
(`--dist loadgroup` with `xdist_group` marks would say the same, but it groups nothing on pytest 9.2 with
pytest-xdist 3.8: pytest-dev/pytest-xdist#1386.)
"""

import functools
import os

import pytest

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # Without xdist nothing calls the hook below; the class only needs a base.
    LoadScopeScheduling = object

MARK = 'scope="module"'
# The tests of a unit of their own that take 15-45 s of a core each, longest first (CPU seconds of a `make test`
# on 2026-12-03; the multi-worker run also sleeps 20 s): under `pytest -n N` they start first, so that the run ends
# on short tests and no core waits alone for one of them at the end. (xdist runs the modules of module-scoped
# fixtures first, the more tests the sooner, then the other tests in their order of collection: this moves these
# to the front of that order.) A name no longer collected is passed over.
LONG_FIRST = (
    "tests/test_training.py::test_multi_worker_mirrored_with_two_processes",
    "tests/test_training.py::test_stopped_and_killed_runs_resume_where_they_stopped",
    "tests/test_babi.py::test_tiny_babi_run_through_the_clis",
    "tests/test_training.py::test_tiny_relative_transformer_learns_to_reverse",
    "tests/test_faults_workers.py::test_a_worker_silent_past_the_heartbeat_timeout_ends_the_run_at_once",
    "tests/test_benchmarks_smoke.py::test_decoding_measure_tiny_length_cached_equals_uncached",
    "tests/test_translate_cli.py::test_train_decode_with_bleu_and_export",
    "tests/test_universal.py::test_adaptive_tiny_learns_to_copy",
    "tests/test_language_model.py::test_a_tiny_language_model_learns_a_repeated_text_and_continues_it",
    "tests/test_training.py::test_the_step_compiled_with_xla_and_in_mixed_precision_matches_the_graph",
    "tests/test_faults_workers.py::test_a_lost_worker_ends_the_survivor_with_one_line",
    "tests/test_universal.py::test_training_step_under_mirrored_strategy_and_xla",
    "tests/test_docs.py::test_the_site_builds_without_warnings_and_documents_every_public_name",
    "tests/test_profile_step_benchmark.py::test_profile_step_times_the_trainers_step_and_profiles_it",
    "tests/test_training.py::test_a_seeded_run_resumed_draws_what_the_uninterrupted_run_draws_and_old_checkpoints_resume",
    "tests/test_faults_workers.py::test_concurrent_datagen_on_one_data_dir",
    "tests/test_training.py::test_a_stop_signal_ends_the_trainer_while_its_input_is_still_being_generated",
)


@functools.lru_cache(maxsize=None)
def defines_a_module_fixture(path):
    """Whether the test module at `path` defines a module-scoped fixture: a search of its text, so a mention in a
    string counts too (which costs only parallelism)."""
    try:
        with open(path, encoding="utf-8") as f:
            return MARK in f.read()
    except OSError:
        return False


class ModuleFixtureScheduling(LoadScopeScheduling):
    """`load` scheduling, except that a module defining a module-scoped fixture is one work unit."""

    def _split_scope(self, nodeid):
        path = nodeid.split("::", 1)[0]
        return path if defines_a_module_fixture(os.path.join(self.config.rootpath, path)) else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    # Called by xdist only, so LoadScopeScheduling is xdist's here.
    if config.getvalue("dist") == "load":
        return ModuleFixtureScheduling(config, log)
    return None


def pytest_collection_modifyitems(config, items):
    """On an xdist worker (each collects, in the same order), the tests of `LONG_FIRST` go first."""
    if not hasattr(config, "workerinput"):
        return
    rank = {nodeid: i for i, nodeid in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid, len(rank)))  # Stable: the others keep their order.
