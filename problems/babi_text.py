"""bAbI question answering (Weston et al. 2015, v1.2): reading the task files and encoding stories.

A task file holds stories; each line is `<id> <text>`, the ids restarting at 1 where a new story begins. A
line is a fact, or a question `<id> <question>\\t<answer>\\t<supporting fact ids>`; several questions may
follow one another in a story, each seeing every fact before it. Supporting facts are not used (the weakly
supervised setting of the Universal Transformer paper). Answers of the list and path tasks (qa8 "apple,milk",
qa19 "n,w") are single class labels, as in tensor2tensor.

Two input layouts, both one id sequence ending in EOS:
  - "concat" (tensor2tensor's `babi_qa_concat_*`): question tokens, SEPARATOR, story tokens.
  - "facts" (the paper's §3.1, after Henaff et al. 2016): the story's facts, then the question, each padded
    to `FACT_WIDTH` tokens, so that `FactEmbedding` can sum each sentence's word embeddings under a learned
    positional mask and the model runs over sentences rather than words. As in the paper's code (and the
    memory networks before it: Sukhbaatar et al. 2015, Henaff et al. 2016), only the last `STORY_FACTS` facts
    of a story are kept; every supporting fact of bAbI v1.2 is within the last 40 (qa3), so nothing needed is
    dropped, only old facts that no question asks about (qa3's stories run to 224 facts).

A story and its question travel as one line of text: the sentences each ending in "." and the question last,
ending in "?" (`example_text`).
"""

import collections
import os
import re

from t2t_relpos import errors
from t2t_relpos.data import parallel_text
from t2t_relpos.problems.problem import EOS_ID, PAD_ID, SymbolEncoder, TextEncoder

# The 20 tasks of bAbI v1.2 and their file-name stems (`qa<N>_<stem>_<split>.txt`).
TASKS = {
    1: "single-supporting-fact", 2: "two-supporting-facts", 3: "three-supporting-facts",
    4: "two-arg-relations", 5: "three-arg-relations", 6: "yes-no-questions", 7: "counting",
    8: "lists-sets", 9: "simple-negation", 10: "indefinite-knowledge", 11: "basic-coreference",
    12: "conjunction", 13: "compound-coreference", 14: "time-reasoning", 15: "basic-deduction",
    16: "basic-induction", 17: "positional-reasoning", 18: "size-reasoning", 19: "path-finding",
    20: "agents-motivations",
}
SUBSETS = {"1k": "en", "10k": "en-10k"}
# The longest bAbI v1.2 sentence has 12 tokens (qa17, punctuation included).
FACT_WIDTH = 12
# How many of a story's facts the facts layout keeps, the most recent: the paper's joint-training setting
# (its code kept 70 for every task; single-task memory networks kept 130 for qa3).
STORY_FACTS = 70
# The same when training on qa3 alone (the memory networks' single-task setting and the paper's code).
STORY_FACTS_QA3_ALONE = 130


def story_facts(layout, task, joint):
    """How many of a story's last facts a problem keeps (None: all): the facts layout keeps `STORY_FACTS`, or
    `STORY_FACTS_QA3_ALONE` when training on qa3 alone; the concat layout keeps whole stories."""
    if layout != "facts":
        return None
    return STORY_FACTS_QA3_ALONE if task == 3 and not joint else STORY_FACTS
SEPARATOR = "|"
LAYOUTS = ("concat", "facts")

Example = collections.namedtuple("Example", ["story", "question", "answer", "task", "story_index"])
Example.__doc__ = """One question: `story` a tuple of sentences (token tuples) before it, `question` tokens, `answer`
a string, `task` 1-20, `story_index` the story's position in its file (0-based)."""

_TOKEN = re.compile(r"[^\W_]+(?:['-][^\W_]+)*|[^\w\s]")


def tokenize(text):
    """Words and punctuation marks: "Where is Mary?" -> ["Where", "is", "Mary", "?"]."""
    return _TOKEN.findall(text)


def parse(lines, task, source="<lines>"):
    """Parses the lines of one task file into examples (`Example`), in file order.

    Args:
        lines: Iterable of text lines.
        task: The task number recorded in each example.
        source: The file name, for error messages.

    Raises:
        errors.DataError: a line that is not `<id> <text>`, ids that do not count up within a story, or an answer
            that is not one class label (it has a space).
    """
    examples = []
    story, story_index, expected = [], -1, None
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        head, _, text = line.partition(" ")
        if not head.isdigit() or not text:
            raise errors.DataError(f"{source}: line {number} is not '<id> <text>': {line[:60]!r}")
        line_id = int(head)
        if line_id == 1:
            story, story_index = [], story_index + 1
        elif line_id != expected:
            raise errors.DataError(f"{source}: line {number} has id {line_id}, expected 1 or {expected}")
        expected = line_id + 1
        if "\t" in text:
            fields = text.split("\t")
            if len(fields) < 2 or not fields[1].strip():
                raise errors.DataError(f"{source}: line {number} is a question without an answer")
            if len(fields[1].split()) > 1:
                raise errors.DataError(f"{source}: line {number} has the answer {fields[1].strip()!r}, with a space; "
                                       "a bAbI answer is one word or a comma-separated list (e.g. 'apple,milk')")
            examples.append(Example(tuple(story), tuple(tokenize(fields[0])), fields[1].strip(), task,
                                    story_index))
        else:
            story.append(tuple(tokenize(text)))
    return examples


def task_file(data_dir, subset, task, split):
    """The path of a task's file: `<data_dir>/<en|en-10k>/qa<N>_<name>_<train|test>.txt[.gz]`.

    Returns the plain file if it exists, else the gzipped one if that exists, else None.
    """
    stem = os.path.join(data_dir, SUBSETS[subset], f"qa{task}_{TASKS[task]}_{split}.txt")
    for path in (stem, stem + ".gz"):
        if os.path.isfile(path):
            return path
    return None


def read_task(data_dir, subset, task, split):
    """The examples (`Example`) of one task file ("train" or "test" split of the bAbI files).

    Raises:
        errors.DataError: the file is missing (the message names the files expected and where), cannot be read
            (not UTF-8, a damaged .gz), or is not in bAbI's format; the message names the file and the line.
    """
    path = task_file(data_dir, subset, task, split) if data_dir else None
    if path is None:
        expected = os.path.join(data_dir or "<data_dir>", SUBSETS[subset], f"qa{task}_{TASKS[task]}_{split}.txt")
        raise errors.DataError(
            f"bAbI file {expected}[.gz] not found. Pass --data_dir=DIR where DIR holds the bAbI v1.2 tasks as "
            f"DIR/en/qaN_<name>_{{train,test}}.txt (1k) and DIR/en-10k/... (10k), plain or .gz, as in the "
            f"tasks_1-20_v1-2 archive")
    return parse(parallel_text.read_lines(path), task, path)


def example_text(example):
    """The one-line text of a story and its question: facts "... ." then the question "... ?"."""
    return " ".join(" ".join(sentence) for sentence in example.story + (example.question,))


def split_sentences(tokens):
    """Token list -> list of sentences, each ending at a "." or "?" token (a trailing rest is a sentence)."""
    sentences, current = [], []
    for token in tokens:
        current.append(token)
        if token in (".", "?"):
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return sentences


class BabiInputEncoder(TextEncoder):
    """A story and its question (see `example_text`) <-> ids in the "concat" or "facts" layout.

    Id 2 is the separator of the concat layout, words follow from id 3 in the order given. `max_facts` keeps only
    the story's last `max_facts` facts (None: all of them); the question is always kept.

    Example:

    >>> enc = BabiInputEncoder(["Mary", "Where", "garden", "is", "went", "the", "to", ".", "?"], "facts")
    >>> ids = enc.encode("Mary went to the garden . Where is Mary ?")
    >>> len(ids) == 2 * FACT_WIDTH, enc.decode(ids + [EOS_ID])
    (True, 'Mary went to the garden . Where is Mary ?')
    """

    def __init__(self, words, layout, fact_width=FACT_WIDTH, max_facts=None):
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if max_facts is not None and max_facts < 1:
            raise ValueError(f"max_facts must be None or at least 1, got {max_facts}")
        self.layout = layout
        self.fact_width = fact_width
        self.max_facts = max_facts
        self.words = tuple(words)
        self._symbols = SymbolEncoder((SEPARATOR,) + self.words)

    @property
    def vocab_size(self):
        return self._symbols.vocab_size

    def encode(self, text):
        sentences = split_sentences(tokenize(text))
        if not sentences or sentences[-1][-1] != "?":
            raise ValueError(f"a bAbI input is the story's sentences, each ending in '.', then the question, "
                             f"ending in '?': got {text[:80]!r}")
        story, question = sentences[:-1], sentences[-1]
        if self.max_facts is not None:
            story = story[-self.max_facts:]
        if self.layout == "concat":
            tokens = question + [SEPARATOR] + [t for sentence in story for t in sentence]
            return self._symbols.encode(" ".join(tokens))
        ids = []
        for sentence in story + [question]:
            if len(sentence) > self.fact_width:
                raise ValueError(f"sentence {' '.join(sentence)!r} has {len(sentence)} tokens; the facts layout "
                                 f"holds at most {self.fact_width}")
            ids += self._symbols.encode(" ".join(sentence)) + [PAD_ID] * (self.fact_width - len(sentence))
        return ids

    def decode(self, ids):
        ids = [int(i) for i in ids]
        if EOS_ID in ids:
            ids = ids[:ids.index(EOS_ID)]
        if self.layout == "facts":
            chunks = [ids[i:i + self.fact_width] for i in range(0, len(ids), self.fact_width)]
            return " ".join(text for text in (self._symbols.decode(c) for c in chunks) if text)
        text = self._symbols.decode(ids)
        question, _, story = text.partition(SEPARATOR)
        return " ".join(part.strip() for part in (story, question) if part.strip())

    def graph_tokenizer(self):
        raise errors.T2TRelposError("bAbI problems have no in-graph tokenizer: SavedModel export is for "
                                    "text-to-text problems")


def vocabularies(examples):
    """(words, answers) seen in `examples`, each sorted: the input and label vocabularies."""
    words, answers = set(), set()
    for example in examples:
        for sentence in example.story + (example.question,):
            words.update(sentence)
        answers.add(example.answer)
    return sorted(words), sorted(answers)


def answer_encoder(answers):
    """Answers as class labels: `SymbolEncoder` of whole answers ("n,w" is one label), ids from 2."""
    return SymbolEncoder(answers)


def validation_story(example, every=10):
    """Whether an example's story is held out of a training file for validation (every 10th story)."""
    return example.story_index % every == every - 1


def encode_examples(examples, input_encoder, label_encoder):
    """Examples -> list of (input ids + EOS, [label id]) pairs."""
    encoded = []
    for example in examples:
        text = example_text(example)
        try:
            inputs = input_encoder.encode(text) + [EOS_ID]
            label = label_encoder.encode(example.answer)
        except ValueError as e:
            raise errors.DataError(f"bAbI task {example.task}, story {example.story_index + 1}: {e}") from None
        encoded.append((inputs, label))
    return encoded

