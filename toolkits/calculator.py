"""A safe calculator tool: an arithmetic parser, not `eval`.

Expressions are parsed with Python's `ast` and only numbers, arithmetic operators, parentheses,
a few math functions and constants are evaluated. The tool runs on the event loop, so every
operation's cost is bounded *before* it is computed: `**` and `*` are refused when their
operands' bit lengths show the result would pass `_MAX_BITS`, and `round`'s `ndigits` (which
makes Python compute `10**-ndigits`) is bounded too. So `9**9**9`, `(2**3000+1)**9999` and
`round(7, -10**9)` are errors at once instead of a stalled event loop.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Any

from .function import FunctionTool, function_tool

__all__ = ["CalculatorError", "calculator", "evaluate"]

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: lambda a: +a,
    ast.USub: lambda a: -a,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
}
_CONSTANTS: dict[str, Number] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_MAX_EXPONENT = 10_000
_MAX_DIGITS = 1_000
_MAX_BITS = 3_322  # about _MAX_DIGITS decimal digits
_MAX_LENGTH = 1_000


class CalculatorError(ValueError):
    """The expression is not arithmetic we evaluate."""


def evaluate(expression: str) -> Number:
    if len(expression) > _MAX_LENGTH:
        raise CalculatorError(f"expression longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression.replace("^", "**").replace("\u00d7", "*"), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression: {expression!r}") from exc
    except UnicodeEncodeError as exc:  # a lone surrogate (JSON's "\ud800"): no character
        raise CalculatorError(
            f"not an arithmetic expression: {expression!r} holds a lone surrogate, "
            "which is no character"
        ) from exc
    try:
        return _eval(tree.body)
    except RecursionError as exc:  # e.g. 999 unary minuses: fits the length bound, not the stack
        raise CalculatorError("expression is nested too deeply") from exc


def _eval(node: ast.expr) -> Number:
    match node:
        case ast.Constant(value=bool()):
            raise CalculatorError("booleans are not numbers here")
        case ast.Constant(value=int() as value) if value.bit_length() > _MAX_BITS:
            raise CalculatorError("number is too large")  # 0xfff...: keeps every int in bounds
        case ast.Constant(value=int() | float() as value):
            return value
        case ast.Name(id=name) if name in _CONSTANTS:
            return _CONSTANTS[name]
        case ast.UnaryOp(op=op, operand=operand) if type(op) in _UNARY:
            return _real(_UNARY[type(op)](_eval(operand)))
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
            return _binary(op, _eval(left), _eval(right))
        case ast.Call(func=ast.Name(id=name), args=args, keywords=[]) if name in _FUNCTIONS:
            values = [_eval(arg) for arg in args]
            if name == "round" and len(values) == 2:
                _check_ndigits(values[1])
            try:
                return _real(_FUNCTIONS[name](*values))
            except (TypeError, ValueError, OverflowError) as exc:
                raise CalculatorError(f"{name}: {exc}") from exc
        case _:
            raise CalculatorError(f"unsupported in arithmetic: {ast.unparse(node)!r}")


def _binary(op: ast.operator, a: Number, b: Number) -> Number:
    if isinstance(op, ast.Pow) and abs(b) > _MAX_EXPONENT:
        raise CalculatorError(f"exponent {b} is too large")
    if isinstance(a, int) and isinstance(b, int):
        _check_cost(op, a, b)
    try:
        value = _real(_BINARY[type(op)](a, b))
    except ZeroDivisionError as exc:
        raise CalculatorError("division by zero") from exc
    except OverflowError as exc:
        raise CalculatorError("result is too large") from exc
    if isinstance(value, int) and value.bit_length() > _MAX_BITS:
        raise CalculatorError("result is too large")
    return value


def _check_cost(op: ast.operator, a: int, b: int) -> None:
    """Refuse `a op b` whose result would pass `_MAX_BITS`, without computing it.

    Every int here has at most `_MAX_BITS` bits, so + - // % cost little; `*` and `**` are what
    can grow. The estimate is a lower bound of the result's bit length, so it refuses nothing
    the check after the operation would let through; what passes costs at most about
    `2 * _MAX_BITS` bits of work, and the check after the operation settles the last bit.
    """
    if isinstance(op, ast.Mult):
        least = a.bit_length() + b.bit_length() - 1
    elif isinstance(op, ast.Pow) and b > 0 and abs(a) > 1:
        least = (abs(a).bit_length() - 1) * b + 1  # |a| >= 2**(n-1), so |a|**b >= 2**((n-1)*b)
    else:
        return
    if least > _MAX_BITS:
        raise CalculatorError(
            f"result would be too large: at least {least:,} bits, over the limit of "
            f"{_MAX_BITS:,} (about {_MAX_DIGITS:,} digits)"
        )


def _check_ndigits(ndigits: Number) -> None:
    # round(n, -k) on an int computes 10**k first: round(7, -10**9) would take hours.
    if isinstance(ndigits, int) and abs(ndigits) > _MAX_DIGITS:
        raise CalculatorError(f"round: ndigits must be from {-_MAX_DIGITS:,} to {_MAX_DIGITS:,}")


def _real(value: object) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CalculatorError("result is not a real number")  # e.g. (-8) ** 0.5 is complex
    return value


def _format(value: Number) -> str:
    if isinstance(value, float):
        value = round(value, 12)  # 17 * 25 * 1.08 is 459.00000000000006 in binary floating point
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(value)
    return str(value)


_DESCRIPTION = """Evaluate an arithmetic expression, e.g. "17 * 25" or "sqrt(2) * (3 + 4)".

Supports + - * / // % ** (or ^), parentheses, abs round min max sqrt exp log log10 sin cos
tan floor ceil, and the constants pi, e, tau."""
"""What models read of the calculator: given, not its docstring, which `python -OO` strips."""


@function_tool(name="calculator", description=_DESCRIPTION, blocking=False)  # pure CPU: no thread
def _calculator(expression: str) -> str:
    return _format(evaluate(expression))


calculator: FunctionTool = _calculator
