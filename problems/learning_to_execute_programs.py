"""The generators of Learning to Execute (Zaremba & Sutskever 2014): short Python programs, additions and digit
strings, at a given difficulty (the length of numbers, the nesting of operations).

A program is a chain of `nesting` operations: each one draws its operands as fresh numbers, except that the
previous operation's expression becomes one of them (in a random place). The operations are the original's:

- ``pair``: ``(x+y)`` or ``(x-y)``;
- ``smallmul``: ``(x*k)`` or ``(k*x)``, k in [1, 4 * length];
- ``equality``: ``x`` itself (adds no operation to the text);
- ``vars``: assigns x to a fresh variable v (``v=x;``), then ``(v+y)`` or ``(v-y)``;
- ``small_loop``: ``v=x`` then ``for x in range(k):v+=y`` (or ``-=``), k in [1, 4 * length]; the expression is v;
- ``ifstat``: ``(y if w>x else z)`` or with ``<``.

The program ends with ``print(expression)``; its target is what Python prints. There is no division or modulo in
the grammar, so no difference between the original's Lua arithmetic and Python's; values are Python ints, exact.

A number of length L is uniform in [1, 10**L - 1] (the original's reached 10**L, one digit more). Each draw of a
length (for a number, or for the bound of k) and of a nesting picks from the difficulty's range: `mix(L, N)`,
the original's "mix" strategy, draws lengths uniform in [1, L] per number and the nesting uniform in [1, N] per
program; `fixed(L, N)` (the original's test setting) always L and N.

Randomness comes only from `Draws`: numpy's PCG64 raw 64-bit words (frozen by numpy's compatibility policy), so
the data is the same on every machine.
"""

import collections

import numpy as np

VARIABLES = "abcdefghij"  # The original's: at most ten fresh variables, so at most ten operations.
OPERATIONS = ("pair", "smallmul", "equality", "vars", "small_loop", "ifstat")
# This package's reading of the UT paper's "control" task (the original's code has no such task): the programs
# built from the control-flow operations alone.
CONTROL_OPERATIONS = ("ifstat", "small_loop")
MAX_NESTING = len(VARIABLES)

Difficulty = collections.namedtuple("Difficulty", ["lengths", "nestings"])
Difficulty.__doc__ = """Ranges (low, high), both inclusive, of the length of numbers and of the nesting."""


def mix(length, nesting=1):
    """The original's "mix" strategy: every length uniform in [1, length], every nesting in [1, nesting]."""
    return Difficulty((1, length), (1, nesting))


def fixed(length, nesting=1):
    """Every length `length` and every nesting `nesting` (the original's test setting, `target_hardness`)."""
    return Difficulty((length, length), (nesting, nesting))


class Draws:
    """Uniform integers from a PCG64 stream seeded with `entropy` (a list of non-negative ints; None: random).

    The modulo's bias is below n / 2**64, far beneath anything measurable.
    """

    def __init__(self, entropy):
        self._bits = np.random.PCG64(np.random.SeedSequence(entropy))
        self._words = []

    def below(self, n):
        """An int uniform in [0, n)."""
        if not self._words:
            self._words = self._bits.random_raw(512).tolist()[::-1]  # Python ints; popped from the end.
        return self._words.pop() % n

    def between(self, low, high):
        """An int uniform in [low, high]."""
        return low + self.below(high - low + 1)

    def permutation(self, n):
        """A uniform permutation of range(n) (Fisher-Yates)."""
        order = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.below(i + 1)
            order[i], order[j] = order[j], order[i]
        return order


class _Program:
    """A program being written: its lines so far and the previous operation's (expression, value)."""

    def __init__(self, draws, difficulty):
        self.draws = draws
        self.difficulty = difficulty
        self.lines = []
        self.previous = None
        self.variables = [VARIABLES[i] for i in draws.permutation(len(VARIABLES))]

    def coin(self):
        return self.draws.below(2) == 1

    def length(self):
        return self.draws.between(*self.difficulty.lengths)

    def small(self):
        """A loop count or a multiplier."""
        return self.draws.between(1, 4 * self.length())

    def operand(self):
        if self.previous is not None:
            operand, self.previous = self.previous, None
            return operand
        number = self.draws.between(1, 10 ** self.length() - 1)
        return str(number), number

    def operands(self, count):
        """`count` operands; the previous operation's expression, if any, lands in a random one of them."""
        drawn = [self.operand() for _ in range(count)]
        placed = [None] * count
        for slot, operand in zip(self.draws.permutation(count), drawn):
            placed[slot] = operand
        return placed


def _pair(p):
    (x, a), (y, b) = p.operands(2)
    return (f"({x}+{y})", a + b) if p.coin() else (f"({x}-{y})", a - b)


def _smallmul(p):
    (x, a), k = p.operand(), p.small()
    return (f"({x}*{k})" if p.coin() else f"({k}*{x})"), a * k


def _equality(p):
    return p.operand()


def _vars(p):
    v = p.variables.pop()
    (x, a), (y, b) = p.operands(2)
    p.lines.append(f"{v}={x};")
    return (f"({v}+{y})", a + b) if p.coin() else (f"({v}-{y})", a - b)


def _small_loop(p):
    v = p.variables.pop()
    (x, a), (y, b) = p.operands(2)
    k = p.small()
    sign = "+" if p.coin() else "-"
    p.lines += [f"{v}={x}", f"for x in range({k}):{v}{sign}={y}"]
    return v, (a + k * b if sign == "+" else a - k * b)


def _ifstat(p):
    (w, a), (x, b), (y, c), (z, d) = p.operands(4)
    if p.coin():
        return f"({y} if {w}>{x} else {z})", (c if a > b else d)
    return f"({y} if {w}<{x} else {z})", (c if a < b else d)


_BUILDERS = {"pair": _pair, "smallmul": _smallmul, "equality": _equality, "vars": _vars,
             "small_loop": _small_loop, "ifstat": _ifstat}


def program(draws, difficulty, operations=OPERATIONS):
    """A random program and what it prints.

    Args:
        draws: A `Draws` (the only source of randomness).
        difficulty: A `Difficulty`; its nestings at most `MAX_NESTING`.
        operations: The names (from `OPERATIONS`) that each step picks from, uniformly.

    Returns:
        (source, output): the program's text, lines joined with "\\n", ending in ``print(...)``; the text it
        prints, without the newline.
    """
    if difficulty.nestings[1] > MAX_NESTING:
        raise ValueError(f"nesting {difficulty.nestings[1]} needs more than the {MAX_NESTING} variables a-j")
    p = _Program(draws, difficulty)
    for _ in range(draws.between(*difficulty.nestings)):
        p.previous = _BUILDERS[operations[draws.below(len(operations))]](p)
    expression, value = p.previous
    return "\n".join(p.lines + [f"print({expression})"]), str(value)


def addition(draws, difficulty):
    """``print(a+b)`` with a and b of the same number of digits (a length, exactly): (source, output)."""
    length = draws.between(*difficulty.lengths)
    a, b = (draws.between(10 ** (length - 1), 10 ** length - 1) for _ in range(2))
    return f"print({a}+{b})", str(a + b)


def digits(draws, difficulty):
    """A string of random decimal digits, as many as a length drawn from the difficulty."""
    return "".join(str(draws.below(10)) for _ in range(draws.between(*difficulty.lengths)))
