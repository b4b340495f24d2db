"""``numaccel.explain(fn, *args)``: what numaccel does with a call, in words."""
from __future__ import annotations

from dataclasses import dataclass, field

from .api import Accelerated, accelerate, describe_guards


@dataclass
class Explanation:
    name: str
    graphs: list = field(default_factory=list)
    graph_breaks: list = field(default_factory=list)   # (reason, source line)
    guards: str = ""
    op_count: int = 0
    cache: object = None
    entry_kind: str = ""
    fallback_reason: str = ""
    plan: str = ""          # how the backend runs the graph (kernels, wrapper)
    loops: list = field(default_factory=list)   # per rewritten loop: one line

    def __str__(self):
        lines = [f"numaccel.explain({self.name}): {self.entry_kind or 'not compiled'}",
                 f"  graphs: {len(self.graphs)}, ops: {self.op_count}, "
                 f"graph breaks: {len(self.graph_breaks)}"]
        if self.fallback_reason:
            lines.append(f"  runs eagerly because: {self.fallback_reason}")
        for i, (why, where) in enumerate(self.graph_breaks):
            lines.append(f"  break {i}: {why}\n      at {where}")
        if self.guards:
            lines.append(f"  guards: {self.guards}")
        for i, g in enumerate(self.graphs):
            lines.append(f"  graph {i}:")
            lines.extend("    " + ln for ln in str(g).splitlines())
        if self.plan:
            lines.append("  plan:")
            lines.extend("    " + ln for ln in self.plan.splitlines())
        for ln in self.loops:
            lines.append(f"  {ln}")
        lines.append(f"  cache: {self.cache}")
        return "\n".join(lines)


def explain(fn, *args, **kwargs) -> Explanation:
    """Trace ``fn(*args, **kwargs)`` (a plain or accelerated function) and report graphs,
    graph breaks with reasons and source lines, guards, op counts and the cache state.
    The report is printed and returned. The arguments are not modified.

    >>> numaccel.explain(f, x, y)
    """
    import copy
    acc = fn if isinstance(fn, Accelerated) else accelerate(fn)
    probe = Accelerated(acc.fn, acc.backend_name, acc.dynamic, False)
    probe._dyn = set(acc._dyn)
    probe(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    st = probe.last_trace
    entry = probe.entries[-1] if probe.entries else None
    if entry is not None and entry.pending is not None:
        probe._settle(entry)     # waits: report the plan the background compile makes
    ex = Explanation(name=getattr(acc.fn, "__qualname__", str(acc.fn)))
    if entry is not None:
        ex.entry_kind = {"graph": "one full graph", "segmented": "graph breaks: compiled "
                         "pieces between them", "eager": "eager fallback"}[entry.kind]
        if entry.kind == "graph":
            ex.graphs = [entry.graph]
            ex.guards = describe_guards(entry)
            describe = getattr(entry.run, "describe", None)
            ex.plan = describe() if describe is not None else ""
        elif entry.kind == "eager":
            ex.fallback_reason = entry.reason
    if st is not None and entry is not None and entry.kind == "segmented":
        ex.graphs = [g.prune() for g in st.segments]
        ex.graph_breaks = list(st.breaks)
    ex.op_count = sum(g.op_count() for g in ex.graphs)
    for site in probe.loop_sites:
        kind = "while" if site.target is None else "for"
        state = f"captured, one compiled step per iteration ({site.captured} runs)" \
            if site.captured else "runs as written"
        if site.reason:
            state += f"; last refusal: {site.reason}"
        ex.loops.append(f"{kind} loop at {site.where}: {state}")
    ex.cache = acc.cache_info()
    print(ex)
    return ex
