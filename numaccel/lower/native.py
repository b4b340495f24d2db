"""Native kernel cache: generated kernels run in a new process without importing Numba.

Numba's own disk cache still costs a new process Numba's import and the first dispatch's
set-up of its typing and target contexts (~0.6 s here) before the first cached kernel
runs. So after Numba compiles a kernel for some argument types, its machine code (the
object file Numba caches) is stored next to the kernel source together with a small
*trampoline*: a C-ABI function, in LLVM IR, that takes the ndarrays as ``PyObject*``,
reads their data pointer, shape and strides (NumPy's ``PyArrayObject`` layout) and calls
the kernel with Numba's calling convention. A later process loads both into an llvmlite
MCJIT engine (llvmlite imports in ~30 ms) and calls the trampoline through ctypes, which
releases the GIL like the kernels' ``nogil=True``.

What a kernel needs besides itself is provided here (``_RUNTIME_IR``): the NRT
allocation the kernels' scratch buffers use (malloc/free), and inert stand-ins for
Numba's error and boxing helpers, which only the exception paths and the unused CPython
wrapper in the same object file name. A kernel naming any other external symbol, taking
an argument of another type or returning a value is not stored: it keeps running through
its Numba dispatcher. An entry is keyed by the kernel source's hash, the argument types
(dtype, ndim, layout, writeable and aligned flags, as Numba's ``typeof`` sees them), the
CPU target Numba compiled for and the versions; it holds a SHA-256 of its contents, so a
corrupted or stale entry is rebuilt, never run. ``numaccel.config.native_kernels = False``
(``NUMACCEL_NATIVE_KERNELS=0``) switches the whole path off.

Example::

    run = NativeKernel(module, "kernel")   # module: cpu_codegen.KernelModule
    run(x, out, 0, n)                      # native when cached, else Numba (then cached)
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import threading

import numpy as np

from ..config import config

FORMAT = 2
_lock = threading.RLock()
_engine = None            # (ExecutionEngine, llvmlite.binding) once created
_loaded: dict = {}        # entry path and content hash -> ctypes function
_DEFINED = ("NRT_MemInfo_alloc_aligned", "NRT_MemInfo_call_dtor", "NRT_Free",
            "NRT_adapt_ndarray_from_python", "numba_gil_ensure", "numba_gil_release",
            "numba_do_raise", "numba_unpickle", "numba_runtime_build_excinfo_struct")

# NRT MemInfo (numba/core/runtime/nrt.c): refct, dtor, dtor_info, data, size, allocator.
# Scratch buffers are one malloc'd block: the header, then the data aligned as asked.
# The other functions are reached only on error paths (a kernel that raises returns a
# non-zero status, and the caller re-runs it through Numba to raise the real error) or
# from the CPython wrapper Numba puts in every object file, which nothing here calls.
_RUNTIME_IR = r"""
declare ptr @malloc(i64)
declare void @free(ptr)
define ptr @NRT_MemInfo_alloc_aligned(i64 %size, i32 %align) {
entry:
  %a = zext i32 %align to i64
  %a1 = call i64 @llvm.umax.i64(i64 %a, i64 1)
  %t0 = add i64 %size, 48
  %t = add i64 %t0, %a1
  %blk = call ptr @malloc(i64 %t)
  %null = icmp eq ptr %blk, null
  br i1 %null, label %fail, label %ok
fail:
  ret ptr null
ok:
  %b = ptrtoint ptr %blk to i64
  %d0 = add i64 %b, 48
  %am = sub i64 %a1, 1
  %d1 = add i64 %d0, %am
  %mask = xor i64 %am, -1
  %d2 = and i64 %d1, %mask
  %data = inttoptr i64 %d2 to ptr
  store i64 1, ptr %blk
  %p1 = getelementptr i8, ptr %blk, i64 8
  store ptr null, ptr %p1
  %p2 = getelementptr i8, ptr %blk, i64 16
  store ptr null, ptr %p2
  %p3 = getelementptr i8, ptr %blk, i64 24
  store ptr %data, ptr %p3
  %p4 = getelementptr i8, ptr %blk, i64 32
  store i64 %size, ptr %p4
  %p5 = getelementptr i8, ptr %blk, i64 40
  store ptr null, ptr %p5
  ret ptr %blk
}
declare i64 @llvm.umax.i64(i64, i64)
define void @NRT_MemInfo_call_dtor(ptr %mi) {
  call void @free(ptr %mi)
  ret void
}
define void @NRT_Free(ptr %p) {
  call void @free(ptr %p)
  ret void
}
define i32 @NRT_adapt_ndarray_from_python(ptr %o, ptr %a) {
  ret i32 -1
}
define i32 @numba_gil_ensure() {
  ret i32 0
}
define void @numba_gil_release(ptr %s) {
  ret void
}
define ptr @numba_do_raise(ptr %e) {
  ret ptr null
}
define ptr @numba_unpickle(ptr %a, i32 %n, ptr %h) {
  ret ptr null
}
define ptr @numba_runtime_build_excinfo_struct(ptr %a, i32 %n) {
  ret ptr null
}
"""

_SCALARS = {"double": ctypes.c_double, "float": ctypes.c_float, "i64": ctypes.c_int64,
            "i32": ctypes.c_int32, "i16": ctypes.c_int16, "i8": ctypes.c_int8}
_UNSIGNED = {"i64": ctypes.c_uint64, "i32": ctypes.c_uint32, "i16": ctypes.c_uint16,
             "i8": ctypes.c_uint8}


def enabled() -> bool:
    """Whether kernels may run from the native cache (see the module docstring)."""
    return config.native_kernels and _layout_ok()


_layout_checked: bool | None = None


def _layout_ok() -> bool:
    """The trampolines read ``data``/``nd``/``dimensions``/``strides`` at offsets 16, 24,
    32 and 40 of a ``PyArrayObject``, and the value of a NumPy scalar or a Python float
    at offset 16 (a default CPython build): check it once."""
    global _layout_checked
    if _layout_checked is None:
        a = np.zeros((3, 5), np.float32)[:, ::2]
        base = id(a)
        rd = ctypes.c_int64.from_address
        try:
            dims, strides = rd(base + 32).value, rd(base + 40).value
            scalars = [(np.float64(1.5), ctypes.c_double), (2.5, ctypes.c_double),
                       (np.float32(-0.75), ctypes.c_float), (np.uint64(2**63 + 5),
                                                             ctypes.c_uint64),
                       (np.int16(-3), ctypes.c_int16), (np.bool_(True), ctypes.c_bool)]
            _layout_checked = (rd(base + 16).value == a.ctypes.data
                               and ctypes.c_int32.from_address(base + 24).value == 2
                               and (rd(dims).value, rd(dims + 8).value) == a.shape
                               and (rd(strides).value, rd(strides + 8).value) == a.strides
                               and all(ct.from_address(id(v) + 16).value == v
                                       for v, ct in scalars))
        except Exception:  # noqa: BLE001 - any surprise: the native path stays off
            _layout_checked = False
    return _layout_checked


_SCALAR_TYPES = frozenset((float, bool, np.bool_, np.int8, np.int16, np.int32, np.int64,
                           np.uint8, np.uint16, np.uint32, np.uint64, np.float32,
                           np.float64))        # and int, within int64 (arg_key)
# ndarray.flags.num bits Numba's typeof looks at: C_CONTIGUOUS, F_CONTIGUOUS (the
# layout), ALIGNED, WRITEABLE
_FLAG_BITS = 0x1 | 0x2 | 0x100 | 0x400
_I64 = 1 << 63


def arg_key(args) -> tuple | None:
    """The argument types as Numba's ``typeof`` distinguishes them (dtype, ndim, layout
    and flag bits of arrays; the type of scalars), or None when an argument is of a kind
    the native path does not take. On every launch: kept cheap."""
    key = []
    for a in args:
        t = type(a)
        if t is np.ndarray:
            key.append((a.dtype, a.ndim, a.flags.num & _FLAG_BITS))
        elif t is int:
            if not -_I64 <= a < _I64:       # Numba types these otherwise; ctypes wraps
                return None
            key.append(int)
        elif t in _SCALAR_TYPES:
            key.append(t)
        else:
            return None
    return tuple(key)


def _key_text(key) -> str:
    return repr(tuple((k[0].str, *k[1:]) if isinstance(k, tuple) else
                      f"{k.__module__}.{k.__name__}" for k in key))


def _cpu() -> str:
    """The target Numba compiles for: its CPU name and feature overrides, else the host's."""
    import llvmlite.binding as llvm
    name = os.environ.get("NUMBA_CPU_NAME") or llvm.get_host_cpu_name()
    feats = os.environ.get("NUMBA_CPU_FEATURES")
    if feats is None:
        feats = llvm.get_host_cpu_features().flatten()
    return f"{name} {feats}"


_cpu_text: str | None = None


def entry_path(kernel_path: str, name: str, key) -> str:
    """Where the native entry of function ``name`` in kernel file ``kernel_path`` for
    argument types ``key`` lives (``.o`` beside it: the object code)."""
    global _cpu_text
    if _cpu_text is None:
        _cpu_text = _cpu()
    from .cpu_codegen import package_version
    h = hashlib.sha256(f"{FORMAT} {name} {_key_text(key)} {_cpu_text} "
                       f"llvmlite {package_version('llvmlite')}".encode()).hexdigest()[:16]
    return f"{kernel_path[:-3]}.{name}.{h}.json"


def _get_engine():
    global _engine
    if _engine is None:
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        tm = llvm.Target.from_default_triple().create_target_machine()
        ee = llvm.create_mcjit_compiler(llvm.parse_assembly(_RUNTIME_IR), tm)
        ee.finalize_object()
        _engine = (ee, llvm)
    return _engine


def _resolvable(names, llvm) -> bool:
    """Every external symbol the object names can be bound: defined in the runtime
    module, already known to LLVM, or found in the process (CPython's API, libm)."""
    proc = ctypes.CDLL(None)
    for n in names:
        if n in _DEFINED or n.startswith("llvm.") or llvm.address_of_symbol(n):
            continue
        try:
            addr = ctypes.cast(getattr(proc, n), ctypes.c_void_p).value
        except AttributeError:
            return False
        if not addr:
            return False
        llvm.add_symbol(n, addr)
    return True


def _argtypes(params):
    return [ctypes.py_object if p[0] in "ap" else
            ctypes.c_bool if p[1] == "bool" else
            (_UNSIGNED if p[1] == "unsigned" else _SCALARS)[p[2]] for p in params]


def load(path: str):
    """The ctypes function of the native entry at ``path``, or None when there is none
    (or it does not verify: it is then removed, and rebuilt by the caller)."""
    with _lock:
        fn = _loaded.get(path)
        if fn is not None:
            return fn
        try:
            with open(path, "rb") as f:
                meta_bytes = f.read()
            with open(path[:-5] + ".o", "rb") as f:
                obj = f.read()
            meta = json.loads(meta_bytes)
            body = json.dumps(meta["entry"], sort_keys=True).encode()
            ok = (meta.get("format") == FORMAT
                  and meta.get("sha256") == hashlib.sha256(body + obj).hexdigest())
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not ok:
            _remove(path)
            return None
        fn = _loaded.get(meta["sha256"])
        if fn is not None:        # the same code from another cache directory: loaded
            _loaded[path] = fn
            return fn
        e = meta["entry"]
        ee, llvm = _get_engine()
        if not _resolvable(e["externals"], llvm):
            return None
        ee.add_object_file(llvm.ObjectFileRef.from_data(obj))
        ee.add_module(llvm.parse_assembly(e["tramp_ir"]))
        ee.finalize_object()
        addr = ee.get_function_address(e["tramp"])
        if not addr:
            return None
        fn = ctypes.CFUNCTYPE(ctypes.c_int, *_argtypes(e["params"]))(addr)
        # an engine must not get the same symbols twice: memo by content too
        _loaded[path] = _loaded[meta["sha256"]] = fn
        return fn


def _remove(path):
    for p in (path, path[:-5] + ".o"):
        try:
            os.remove(p)
        except OSError:
            pass


# ------------------------------------------------------------------------------ export

def _params(disp, args):
    """Per argument, what the trampoline passes, from the Numba types of ``args``."""
    from numba.core import types
    tys = tuple(disp.typeof_pyval(a) for a in args)
    cres = disp.overloads.get(tys)
    if cres is None or cres.signature.return_type != types.none:
        return None, None
    ctx = cres.target_context
    params = []
    for ty, a in zip(tys, args):
        if isinstance(ty, types.Array) and type(a) is np.ndarray and not a.dtype.hasobject:
            params.append(["a", ty.ndim, a.dtype.itemsize])
        elif type(a) is int and ty != types.int64:
            return None, None
        elif isinstance(ty, (types.Integer, types.Float, types.Boolean)):
            llty = str(ctx.get_argument_type(ty))
            if llty not in _SCALARS:
                return None, None
            kind = ("bool" if isinstance(ty, types.Boolean) else "unsigned"
                    if isinstance(ty, types.Integer) and not ty.signed else "")
            # NumPy scalars and Python floats go as the object (the trampoline loads
            # the value): ctypes' own conversion of them costs ~0.3 us each
            by_ref = isinstance(a, np.generic) or type(a) is float
            params.append(["p" if by_ref else "s", kind, llty])
        else:
            return None, None
    return cres, params


def _trampoline(fn: str, tname: str, params) -> str:
    """LLVM IR of ``i32 tname(args)``: arrays as ``PyArrayObject*`` flattened into Numba's
    array model (meminfo, parent, nitems, itemsize, data, shape..., strides...)."""
    decl, sig, body, call = ["ptr", "ptr"], [], [], ["ptr %ret", "ptr %exc"]
    for i, p in enumerate(params):
        if p[0] == "s":
            sig.append(f"{p[2]} %a{i}")
            decl.append(p[2])
            call.append(f"{p[2]} %a{i}")
            continue
        if p[0] == "p":       # a scalar object: its value at offset 16
            sig.append(f"ptr %a{i}")
            body += [f"  %a{i}.vp = getelementptr i8, ptr %a{i}, i64 16",
                     f"  %a{i}.v = load {p[2]}, ptr %a{i}.vp"]
            decl.append(p[2])
            call.append(f"{p[2]} %a{i}.v")
            continue
        nd, isz = p[1], p[2]
        sig.append(f"ptr %a{i}")
        for fld, off in (("data", 16), ("dims", 32), ("strd", 40)):
            body += [f"  %a{i}.{fld}.p = getelementptr i8, ptr %a{i}, i64 {off}",
                     f"  %a{i}.{fld} = load ptr, ptr %a{i}.{fld}.p"]
        n = "1"
        for d in range(nd):
            for fld, pre in (("dims", "s"), ("strd", "t")):
                body += [f"  %a{i}.{pre}{d}.p = getelementptr i64, ptr %a{i}.{fld}, i64 {d}",
                         f"  %a{i}.{pre}{d} = load i64, ptr %a{i}.{pre}{d}.p"]
            body.append(f"  %a{i}.n{d} = mul i64 {n}, %a{i}.s{d}")
            n = f"%a{i}.n{d}"
        decl += ["ptr", "ptr", "i64", "i64", "ptr"] + ["i64"] * (2 * nd)
        call += ["ptr null", "ptr null", f"i64 {n}", f"i64 {isz}", f"ptr %a{i}.data"]
        call += [f"i64 %a{i}.s{d}" for d in range(nd)]
        call += [f"i64 %a{i}.t{d}" for d in range(nd)]
    return (f'declare i32 @"{fn}"({", ".join(decl)})\n'
            f'define i32 @"{tname}"({", ".join(sig)}) {{\nentry:\n'
            "  %ret = alloca ptr\n  %exc = alloca ptr\n"
            "  store ptr null, ptr %ret\n  store ptr null, ptr %exc\n"
            + "\n".join(body) + "\n"
            f'  %r = call i32 @"{fn}"({", ".join(call)})\n  ret i32 %r\n}}\n')


_DECLARE = re.compile(r'^declare [^@]*@"?([\w.$]+)"?\(', re.M)
_EXTERNAL = re.compile(r'^@"?([\w.$]+)"? = external', re.M)


def export(disp, args, path: str) -> bool:
    """Store the native entry of Numba dispatcher ``disp``'s overload for ``args`` at
    ``path`` (for later processes: this one keeps ``disp``); False when the kernel is
    not one the native path takes."""
    cres, params = _params(disp, args)
    if cres is None:
        return False
    lib = cres.library
    try:
        obj = lib._get_compiled_object()
    except Exception:  # noqa: BLE001 - Numba without object caching: stay on Numba
        return False
    ir = lib.get_llvm_str()
    externals = sorted(set(_DECLARE.findall(ir)) | set(_EXTERNAL.findall(ir)))
    fn = cres.fndesc.llvm_func_name
    # named by the code it calls: identical entries (another cache directory) are one
    tname = "numaccel_tramp_" + hashlib.sha256(
        obj + repr((fn, params)).encode()).hexdigest()[:20]
    entry = {"fn": fn, "tramp": tname, "params": params, "externals": externals,
             "tramp_ir": _trampoline(fn, tname, params)}
    body = json.dumps(entry, sort_keys=True).encode()
    meta = {"format": FORMAT, "entry": entry,
            "sha256": hashlib.sha256(body + obj).hexdigest()}
    tmp = f".{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(path[:-5] + ".o" + tmp, "wb") as f:
            f.write(obj)
        os.replace(path[:-5] + ".o" + tmp, path[:-5] + ".o")
        with open(path + tmp, "w") as f:
            json.dump(meta, f)
        os.replace(path + tmp, path)
    except OSError:
        return False
    return True


class NativeKernel:
    """Function ``name`` of a generated kernel module, called like the Numba dispatcher:
    from the native cache when an entry for the argument types exists, else through
    Numba (which compiles or loads its own cache), storing the entry for the next
    process; a process that compiled a kernel keeps calling it through Numba."""

    def __init__(self, module, name: str):
        self.module, self.name, self.__name__ = module, name, name
        self.calls: dict = {}     # arg key -> ctypes function, or the Numba dispatcher

    def dispatcher(self):
        """The Numba dispatcher of this kernel (imports Numba and the kernel module)."""
        return getattr(self.module.module, self.name)

    def __getattr__(self, attr):
        # the dispatcher's own API (signatures, inspect_asm, py_func, ...)
        if attr.startswith("__") or attr in ("module", "name", "calls"):
            raise AttributeError(attr)
        return getattr(self.dispatcher(), attr)

    def __call__(self, *args):
        if not config.native_kernels:
            return self.dispatcher()(*args)
        key = arg_key(args)
        fn = self.calls.get(key)
        if fn is None:
            fn = self._resolve(key, args)
            if fn is None:
                return None        # ran through Numba
        if fn(*args):
            # the kernel raised (status != 0): Numba's dispatcher raises the real error
            self.dispatcher()(*args)
        return None

    def _resolve(self, key, args):
        path = None
        if key is not None and enabled():
            path = entry_path(self.module.path, self.name, key)
            fn = load(path)
            if fn is not None:
                self.calls[key] = fn
                return fn
        disp = self.dispatcher()
        disp(*args)
        with _lock:
            if key not in self.calls:
                if path is not None:
                    export(disp, args, path)        # for the next process
                # this process has Numba and the compiled overload now: its dispatch
                # (~3 us a launch) is cheaper than the ctypes call (~8 us)
                self.calls[key] = disp
        return None


def loaded_entries() -> int:
    """How many native entries this process has loaded (for tests and ``explain``)."""
    return len(set(map(id, _loaded.values())))


__all__ = ["NativeKernel", "arg_key", "enabled", "entry_path", "export", "load",
           "loaded_entries"]
