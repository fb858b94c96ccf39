"""Where tools come from: MCP servers and local Python functions, as named nodes."""

from .base import ROUTING_KEY, ProgressCallback, Tool, Toolkit, error_result, split_routed_input
from .calculator import calculator
from .errors import ToolkitError, UnknownTool
from .function import FunctionTool, FunctionToolkit, function_tool
from .observation import result_data, result_text

__all__ = [
    "ROUTING_KEY",
    "FunctionTool",
    "FunctionToolkit",
    "ProgressCallback",
    "Tool",
    "Toolkit",
    "ToolkitError",
    "UnknownTool",
    "calculator",
    "error_result",
    "function_tool",
    "result_data",
    "result_text",
    "split_routed_input",
]
