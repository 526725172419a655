"""The `calculator` tool: arithmetic over a whitelisted slice of Python's `ast`, never `eval`."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from langchain_core.tools import ToolException, tool

Number = int | float

MAX_EXPRESSION_CHARS = 500
MAX_DEPTH = 50
MAX_INT_DIGITS = 1_000
# Checked on every int result, so each operation works on ints small enough to be instant.
MAX_INT_BITS = int(MAX_INT_DIGITS * math.log2(10))
MAX_FACTORIAL = 400
# `round(10, -n)` computes 10**n internally, so digits are bounded too.
MAX_ROUND_DIGITS = 100

_ALLOWED = (
    "Allowed: numbers, + - * / // % **, parentheses, the functions sqrt, sin, cos, tan, asin, "
    "acos, atan, log (x or x, base), log10, log2, exp, floor, ceil, abs, round (x or x, digits), "
    "factorial, hypot, degrees, radians, and the constants pi, e, tau."
)


def _power(base: Number, exponent: Number) -> Number:
    if isinstance(base, int) and isinstance(exponent, int) and exponent >= 0:
        # Estimate the size before computing: 9**9**9 would otherwise run for minutes.
        if abs(base) > 1 and (
            exponent > MAX_INT_BITS or exponent * math.log2(abs(base)) > MAX_INT_BITS + 1
        ):
            raise OverflowError
        result: int = base**exponent
        return result
    if base == 0 and exponent < 0:
        raise ZeroDivisionError
    # math.pow raises on a negative base with a fractional exponent instead of going complex.
    return math.pow(base, exponent)


def _factorial(n: Number) -> int:
    if isinstance(n, float) and n.is_integer():
        n = int(n)
    if not isinstance(n, int) or not 0 <= n <= MAX_FACTORIAL:
        raise ToolException(f"factorial() takes a whole number from 0 to {MAX_FACTORIAL}.")
    return math.factorial(n)


def _round(x: Number, digits: Number = 0) -> Number:
    if not isinstance(digits, int) or abs(digits) > MAX_ROUND_DIGITS:
        raise ToolException(
            f"round(x, digits) takes whole digits from -{MAX_ROUND_DIGITS} to {MAX_ROUND_DIGITS}."
        )
    return round(x, digits) if digits else round(x)


_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_ONE_ARGUMENT_MATH = "sqrt sin cos tan asin acos atan log10 log2 exp floor ceil degrees radians"
# name -> (function, fewest arguments, most arguments)
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {
    **{name: (getattr(math, name), 1, 1) for name in _ONE_ARGUMENT_MATH.split()},
    "log": (math.log, 1, 2),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "factorial": (_factorial, 1, 1),
    "hypot": (math.hypot, 1, 20),
}
_NAMED_SYNTAX: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access (`.`)",
    ast.Subscript: "indexing (`[]`)",
    ast.Lambda: "lambda",
    ast.Tuple: "a comma outside a function call (write 1000, not 1,000)",
    ast.Compare: "comparison",
    ast.BoolOp: "and/or",
    ast.Not: "not",
    ast.BitXor: "`^` (use ** for powers)",
    **dict.fromkeys((ast.BitAnd, ast.BitOr, ast.LShift, ast.RShift, ast.Invert), "bitwise math"),
    **dict.fromkeys((ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp), "comprehension"),
}


def _unsupported(node: ast.AST) -> ToolException:
    what = _NAMED_SYNTAX.get(type(node), f"`{type(node).__name__}`")
    return ToolException(f"Unsupported syntax: {what} is not allowed. {_ALLOWED}")


def _checked(value: Number) -> Number:
    if isinstance(value, float) and not math.isfinite(value):
        raise OverflowError
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise OverflowError
    return value


def _call(node: ast.Call) -> Number:
    name = node.func.id if isinstance(node.func, ast.Name) else None
    if name not in _FUNCTIONS or node.keywords:
        shown = name or ast.unparse(node.func)[:40]
        raise ToolException(f"Unsupported function call: {shown}(...). {_ALLOWED}")
    function, fewest, most = _FUNCTIONS[name]
    if not fewest <= len(node.args) <= most:
        count = str(fewest) if fewest == most else f"{fewest} to {most}"
        raise ToolException(f"{name}() takes {count} argument(s), got {len(node.args)}.")
    return function(*(_evaluate(arg) for arg in node.args))


def _evaluate(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return _checked(node.value)
        raise ToolException(f"Only numbers are allowed, not {node.value!r}. {_ALLOWED}")
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Name):
        raise ToolException(f"Unknown name {node.id!r}. {_ALLOWED}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        operand = _evaluate(node.operand)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        return _checked(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        raise _unsupported(node.op)
    if isinstance(node, ast.Call):
        return _checked(_call(node))
    raise _unsupported(node)


def _parse(expression: str) -> ast.expr:
    text = expression.strip()
    if not text:
        raise ToolException(f"The expression is empty. {_ALLOWED}")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ToolException(f"The expression is longer than {MAX_EXPRESSION_CHARS} characters.")
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as error:
        raise ToolException(f"Not a valid expression ({error.msg}). {_ALLOWED}") from None
    except ValueError:  # NUL bytes, on Python versions that don't report them as SyntaxError
        raise ToolException(f"Not a valid expression. {_ALLOWED}") from None
    except (RecursionError, MemoryError):
        raise ToolException("The expression is nested too deeply.") from None
    # Measured without recursion, so the evaluator's own recursion stays shallow.
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ToolException(f"The expression is nested more than {MAX_DEPTH} levels deep.")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree


def _format(value: Number) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    # 12 significant digits hide binary noise: 0.1 + 0.2 prints as 0.3.
    return format(value, ".12g") if isinstance(value, float) else str(value)


@tool(parse_docstring=True)
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression and return the result as a number.

    Use this for any arithmetic rather than computing in your head: sums, percentages, unit
    conversions, powers, roots, logarithms, trigonometry. Write Python syntax with plain numbers
    (no units, no thousands separators): + - * / // % ** and parentheses; the functions sqrt, sin,
    cos, tan, asin, acos, atan, log(x) or log(x, base), log10, log2, exp, floor, ceil, abs,
    round(x) or round(x, digits), factorial, hypot, degrees, radians; the constants pi, e, tau.
    Angles are in radians. The reply is only the result, e.g. "450".

    Args:
        expression: The expression to evaluate, e.g. "150 * 3", "(2 ** 10 - 24) / 8" or
            "sqrt(16) + sin(pi / 6)".
    """
    tree = _parse(expression)
    try:
        return _format(_evaluate(tree))
    except ZeroDivisionError:
        raise ToolException("Division by zero.") from None
    except OverflowError:
        raise ToolException(
            f"The result is too large (whole numbers are limited to {MAX_INT_DIGITS:,} digits, "
            "decimals to about 1e308)."
        ) from None
    except ValueError:
        raise ToolException(
            "Math domain error: e.g. sqrt or log of a negative number, asin/acos outside -1..1, "
            "or a fractional power of a negative number."
        ) from None
