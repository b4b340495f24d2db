"""The op table: every primitive and composite op, declared once (see table.py)."""
from .table import OpDef, get_op, register_op, all_ops  # noqa: F401
