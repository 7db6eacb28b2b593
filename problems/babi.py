"""bAbI question answering problems (Weston et al. 2015; the Universal Transformer paper's §3.1).

Registered names, for the 1k and 10k training sets of bAbI v1.2 (`<task>` is `all_tasks` or `task1` ...
`task20`):

    babi_qa_concat_<task>_{1k,10k}   tensor2tensor's names and input: question, separator, story tokens
    babi_qa_facts_<task>_{1k,10k}    the paper's input: one position per fact (the story's last 70), then the
                                     question
    babi_qa_<layout>_single_task<N>_{1k,10k}
                                     one task alone, trained and evaluated (the paper's single-task columns,
                                     its code's `babi_qa_sentence_single_task<N>`; qa3 keeps 130 facts there)

The `<task>` problems train jointly on all 20 tasks (tensor2tensor's default and the paper's "joint" columns);
`<task>` chooses what the eval and test splits hold. Splits: "train" is the training files without every
10th story, "eval" those held-out stories (validation, for choosing among seeds as the paper did), "test"
the test files. The answer is one class label (`targets` = `[label id]`, no EOS), so train these with an
encoder-only model (`transformer_encoder`, `universal_transformer_encoder`).

The files are read from `--data_dir` (`<data_dir>/en/qa1_single-supporting-fact_train.txt[.gz]`, ...); nothing
is downloaded or prepared.
"""

import numpy as np

from t2t_relpos import errors, registry
from t2t_relpos.problems import babi_text, problem


class BabiQa(problem.Problem):
    """A bAbI problem: `subset` ("1k"/"10k"), `task` (0 = all) of the eval/test splits, whether training is
    `joint` (all 20 tasks) or on `task` alone, input `layout`, and `story_facts`, how many of a story's last facts
    the input holds (None: the whole story)."""

    subset = "1k"
    task = 0
    joint = True
    layout = "concat"
    story_facts = None
    has_tasks = True
    eval_metrics = ("accuracy",)
    decode_metric = "answer_accuracy"

    def __init__(self):
        self._cache = {}

    def _cached(self, key, compute):
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    # -- data ----------------------------------------------------------------------------------------------
    def _examples(self, data_dir, split):
        """Parsed `Example`s of a split."""

        def read():
            file_split = "test" if split == "test" else "train"
            tasks = list(babi_text.TASKS) if (split == "train" and self.joint) or not self.task else [self.task]
            examples = [e for t in tasks for e in babi_text.read_task(data_dir, self.subset, t, file_split)]
            if split != "test":
                held_out = split == "eval"
                examples = [e for e in examples if babi_text.validation_story(e) == held_out]
            if split == "eval":
                # The trainer evaluates its first `--eval_steps` batches only: the held-out questions take the
                # tasks in turn, so that those batches hold every task alike (in file order, 20 batches of 10k's
                # held-out questions were qa1 and qa2 only: 0.997 accuracy for a model with 10% error overall).
                # Everything reads this order (the decoder's per-task report included); test keeps the files'.
                examples = [examples[i] for i in _round_robin([e.task for e in examples])]
            return examples

        return self._cached(("examples", data_dir, split), read)

    def _vocabularies(self, data_dir):
        """Words and answers of the training and test files of all tasks (as tensor2tensor built them: a
        test answer never seen in training, like qa8's "football,apple,milk" in 1k, is a class the model
        cannot predict, rather than an error). The same for every problem of a subset."""

        def read():
            return babi_text.vocabularies(
                e for t in babi_text.TASKS for split in ("train", "test")
                for e in babi_text.read_task(data_dir, self.subset, t, split))

        return self._cached(("vocab", data_dir), read)

    def generate_data(self, data_dir, tmp_dir):
        """Nothing to write: the problem reads the v1.2 text files in `data_dir` as they are. Checks that they
        are there (a missing one is the trainer's one-line error, sooner) and says so."""
        del tmp_dir
        words, answers = self._vocabularies(data_dir)
        print(f"{self.name}: the bAbI {self.subset} files in {data_dir} are readable ({len(words)} words, "
              f"{len(answers)} answers); nothing to prepare")

    def feature_encoders(self, data_dir=None):
        words, answers = self._vocabularies(data_dir)
        return {"inputs": babi_text.BabiInputEncoder(words, self.layout, max_facts=self.story_facts),
                "targets": babi_text.answer_encoder(answers)}

    def model_arguments(self, data_dir=None):
        return {"fact_width": babi_text.FACT_WIDTH} if self.layout == "facts" else {}

    def encoded(self, split, data_dir=None):
        """(input id lists, label id lists) of a split, each input ending in EOS."""

        def encode():
            encoders = self.feature_encoders(data_dir)
            pairs = babi_text.encode_examples(self._examples(data_dir, split), encoders["inputs"],
                                              encoders["targets"])
            return [p[0] for p in pairs], [p[1] for p in pairs]

        return self._cached(("encoded", data_dir, split), encode)

    def example_groups(self, split, data_dir=None):
        """The task of each example of a split ("qa1" ...), in order: the decoder reports accuracy per task."""
        return [f"qa{e.task}" for e in self._examples(data_dir, split)]

    @property
    def max_eval_length(self):
        lengths = [len(ids) for key, value in self._cache.items() if key[0] == "encoded" and key[2] != "train"
                   for ids in value[0]]
        return max(lengths) if lengths else None

    def dataset_options(self, split, hparams):
        """Joint training reads `hparams.task_repeats` (see `task_repeats`); evaluation and test never repeat."""
        repeats = self.task_repeats(hparams.get("task_repeats") if hparams is not None else None)
        return {"repeats": repeats if split == "train" else {}}

    def check_hparams(self, hparams):
        super().check_hparams(hparams)
        self.task_repeats(hparams.get("task_repeats") if hparams is not None else None)

    def task_repeats(self, items):
        """{task: times} from `task_repeats` items ("16:4": each training pass shows every qa16 example 4 times;
        "16:0": none, the task is left out of training, and still evaluated).

        Raises:
            HParamsError: a malformed item, a task that is not 1-20, negative times, every task left out, or
                repeats for a problem that trains on one task (nothing to weigh it against).
        """
        repeats = {}
        for item in items or []:
            task, _, times = str(item).partition(":")
            if not (task.strip().isdigit() and times.strip().isdigit()) or int(task) not in babi_text.TASKS:
                raise errors.HParamsError(f"task_repeats item {item!r}: expected 'task:times' with a task from 1 "
                                          "to 20 and times >= 0, e.g. 16:4")
            repeats[int(task)] = int(times)
        if repeats and not self.joint:
            raise errors.HParamsError(f"task_repeats={list(items)}: {self.name} trains on one task alone")
        if all(repeats.get(task, 1) == 0 for task in babi_text.TASKS):
            raise errors.HParamsError(f"task_repeats={list(items)}: every task is left out of training")
        return repeats

    def _dataset(self, split, data_dir, seed, num_shards, shard_index, repeats=None):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        inputs, labels = self.encoded(split, data_dir)
        # Each pass shows every example of a repeated task that many times (in the pass's random order).
        tasks = [e.task for e in self._examples(data_dir, split)]
        pass_indices = np.array([i for i, task in enumerate(tasks) for _ in range((repeats or {}).get(task, 1))],
                                np.int64)[shard_index::num_shards]
        training = split == "train"

        def examples():
            epoch = 0
            while True:
                order = (pass_indices[np.random.default_rng([
                    seed if seed is not None else np.random.randint(2 ** 31), epoch, shard_index]).permutation(
                        len(pass_indices))] if training else pass_indices)
                for i in order:
                    yield {"inputs": np.asarray(inputs[i], np.int32), "targets": np.asarray(labels[i], np.int32)}
                if not training:
                    return
                epoch += 1

        spec = tf.TensorSpec([None], tf.int32)
        return tf.data.Dataset.from_generator(examples, output_signature={"inputs": spec, "targets": spec})


def _round_robin(groups):
    """Indices of `groups` (a group name per item), taking one item of each group in turn, each group in order."""
    members = {}
    for index, group in enumerate(groups):
        members.setdefault(group, []).append(index)
    queues = list(members.values())
    return [queue[rank] for rank in range(max(map(len, queues), default=0)) for queue in queues if rank < len(queue)]


def _register():
    tasks = {"all_tasks": (0, True), **{f"task{t}": (t, True) for t in babi_text.TASKS},
             **{f"single_task{t}": (t, False) for t in babi_text.TASKS}}
    for layout in babi_text.LAYOUTS:
        for subset in babi_text.SUBSETS:
            for task_name, (task, joint) in tasks.items():
                name = f"babi_qa_{layout}_{task_name}_{subset}"
                training = "joint training" if joint else "trained on that task alone"
                cls = type(f"BabiQa_{layout}_{task_name}_{subset}", (BabiQa,),
                           {"subset": subset, "task": task, "joint": joint, "layout": layout,
                            "__module__": __name__, "story_facts": babi_text.story_facts(layout, task, joint),
                            "__doc__": f"bAbI v1.2 {subset}, {layout} input, {training}; evaluated on "
                                       f"{'all tasks' if not task else f'task {task}'}."})
                registry.register_problem(name)(cls)


_register()
